// A device in two-aggregator mode (docs/device-protocol.md, section 8): check the query and
// each aggregator's key, shard the draw with Prio3, seal each share, encode the report.
import { Refused } from './errors.mjs';
import { mechanismFromSpec, unpack, validateTargets } from './mechanisms.mjs';
import { PAIR, ROUND, encodeMeasurement, params, shard } from './prio3.mjs';
import { ROLE_HELPER, ROLE_LEADER, inputShareInfo, seal } from './hpke.mjs';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { v1 } from './proto.mjs';
import { unary } from './retry.mjs';

const CONFIG_SIZE = 33;
const CONTEXT = Buffer.from('ldpcollect-secure-v1 ');

/** Validate a SecureQuery against the helper's own config (fetched from the helper, or
 * pinned); Refused when the device must not upload. */
export function secureQueryInfo(query, helperConfig) {
  const configs = {};
  for (const role of ['leader', 'helper']) {
    const config = query[`${role}_hpke_config`];
    if (!config || config.length === 0) throw new Refused(`the query has no ${role} HPKE config`);
    if (config.length !== CONFIG_SIZE) {
      throw new Refused(`the ${role} HPKE config is ${config.length} bytes, not ${CONFIG_SIZE}`);
    }
    configs[role] = Buffer.from(config);
  }
  if (configs.leader.subarray(1).equals(configs.helper.subarray(1))) {
    throw new Refused('leader and helper share one key: not two aggregators');
  }
  if (!helperConfig || !configs.helper.equals(Buffer.from(helperConfig))) {
    throw new Refused("the helper HPKE config in the query is not the helper's own: refusing to upload");
  }
  const mechanism = mechanismFromSpec(query.mechanism);
  const targets = validateTargets(query.targets);
  const vdaf = mechanism.name === 'sp' ? PAIR : ROUND;
  return {
    queryId: query.query_id,
    mechanism,
    targets,
    vdaf: params(vdaf, targets.length),
    uploadRound: Number(query.upload_round),
    open: query.state === 'SECURE_QUERY_STATE_OPEN',
    leader: configs.leader,
    helper: configs.helper,
    requireTokens: Boolean(query.require_tokens),
    tokenIssuer: query.token_issuer ?? '',
    tokenOrigins: query.token_origins ?? [],
  };
}

const u32 = (n) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};

export function encodeSecureReport({ queryId, round, reportId, publicShare, leaderCt, helperCt }) {
  const qid = Buffer.from(queryId, 'utf8');
  return Buffer.concat([
    Buffer.from([qid.length]),
    qid,
    u32(round),
    reportId,
    ...[publicShare, leaderCt, helperCt].flatMap((field) => [u32(field.length), field]),
  ]);
}

/** The sealed SecureReport for a draw (packed answers per round). `rand` and `ikm` are fresh
 * unless given (vectors). */
export async function sealDraw(info, answers, reportId, { rand, ikm } = {}) {
  const p = info.vdaf;
  const rounds = answers.map((a) => unpack(a, info.targets.length));
  const x = encodeMeasurement(p.kind === PAIR.kind ? PAIR : ROUND, rounds);
  const ctx = Buffer.concat([CONTEXT, Buffer.from(info.queryId, 'utf8')]);
  const shares = shard(p, ctx, x, reportId, rand ?? randomBytes(p.randSize));
  const meta = [info.queryId, info.uploadRound, reportId, shares.publicShare];
  const leaderInfo = inputShareInfo(ROLE_LEADER, ...meta);
  const helperInfo = inputShareInfo(ROLE_HELPER, ...meta);
  const leaderCt = await seal(info.leader, leaderInfo, shares.leaderShare, ikm?.leader);
  const helperCt = await seal(info.helper, helperInfo, shares.helperShare, ikm?.helper);
  const report = encodeSecureReport({
    queryId: info.queryId,
    round: info.uploadRound,
    reportId,
    publicShare: shares.publicShare,
    leaderCt,
    helperCt,
  });
  return { report, shares, leaderInfo, helperInfo, leaderCt, helperCt, measurement: x };
}

/** The helper's HPKE config from the helper itself (AggregatorKeys/GetAggregatorConfig),
 * checked to come from a server that says it is the helper (section 8.1). */
export async function fetchHelperConfig(address, credentials) {
  const stub = new v1.AggregatorKeys(address, credentials);
  try {
    const answer = await unary(stub, 'GetAggregatorConfig', {});
    if (answer.role !== 'helper') throw new Refused(`the server at ${address} says it is the ${answer.role || '?'}, not the helper`);
    if (answer.hpke_config.length !== CONFIG_SIZE) throw new Refused(`the helper's own config is ${answer.hpke_config.length} bytes`);
    return Buffer.from(answer.hpke_config);
  } finally {
    stub.close();
  }
}

/** A pinned helper config: the file its operator publishes, one hex line (33 bytes). */
export function readPinnedConfig(path) {
  const text = fs.readFileSync(path, 'utf8').trim();
  const config = /^[0-9a-fA-F]{66}$/.test(text) ? Buffer.from(text, 'hex') : null;
  if (!config) throw new Refused(`${path} is not an HPKE config (one hex line of 33 bytes)`);
  return config;
}
