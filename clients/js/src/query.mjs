// A query's public parameters, validated before anything is drawn (docs/device-protocol.md,
// section 2). Queries are plain objects as @grpc/proto-loader (keepCase, longs as strings,
// enums as strings, oneofs) decodes them.
import { createHash } from 'node:crypto';
import { Refused } from './errors.mjs';
import { mechanismFromSpec, validateTargets } from './mechanisms.mjs';

export function schemeFromMessage(message) {
  if (message?.scheme === 'grid') return { kind: 'grid', text: 'grid' };
  if (message?.scheme === 'h3') {
    const resolution = Number(message.h3.resolution);
    if (!(resolution >= 0 && resolution <= 15)) {
      throw new Refused(`H3 resolution ${resolution} is not in 0..15`);
    }
    return { kind: 'h3', resolution, text: `h3:${resolution}` };
  }
  throw new Refused('the query has no location scheme (grid or h3)');
}

/** A digest of the public parameters: a device never reuses a draw for other ones. */
export function fingerprint(mechanism, schemeText, targets) {
  const canonical = JSON.stringify([mechanism.name, mechanism.params, schemeText, targets.map(String)]);
  return createHash('sha256').update(canonical).digest('hex');
}

/** Everything the device needs from a trusted-mode Query; Refused when it must not answer. */
export function queryInfo(query) {
  const mechanism = mechanismFromSpec(query.mechanism);
  const scheme = schemeFromMessage(query.location_scheme);
  const targets = validateTargets(query.targets);
  return {
    queryId: query.query_id,
    mechanism,
    scheme,
    targets,
    currentRound: Number(query.current_round),
    open: query.state === 'QUERY_STATE_OPEN',
    requireTokens: Boolean(query.require_tokens),
    tokenIssuer: query.token_issuer ?? '',
    fingerprint: fingerprint(mechanism, scheme.text, targets),
  };
}
