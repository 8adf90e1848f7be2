// The mechanisms: validating their parameters and the device's draw (docs/device-protocol.md,
// sections 2 and 4).
import { Refused } from './errors.mjs';
import { ONE, add, mul, probability, sub, text } from './rational.mjs';
import { bernoulli } from './random.mjs';

const MAX_TARGETS = 65536;
const LIMIT = 1n << 64n;

/** The mechanism of a MechanismSpec object (proto-loader / protobufjs with oneofs). */
export function mechanismFromSpec(spec) {
  const which = spec?.mechanism;
  if (which === 'randomized_response') {
    const rr = spec.randomized_response;
    const p = probability('flip1', rr.flip1, { zeroAllowed: false });
    const q = probability('flip2', rr.flip2, { zeroAllowed: true });
    return { name: 'rr', rounds: 1, flip1: p, flip2: q, params: { flip1: text(p), flip2: text(q) } };
  }
  if (which === 'sampling_privacy') {
    const s = probability('sampling_rate', spec.sampling_privacy.sampling_rate, { zeroAllowed: false });
    return { name: 'sp', rounds: 2, rate: s, params: { sampling_rate: text(s) } };
  }
  throw new Refused('the query has no mechanism this device knows (randomized_response or sampling_privacy)');
}

/** Targets as BigInts: 1 to 65,536, each in [0, 2^64), none twice. */
export function validateTargets(raw) {
  const targets = (raw ?? []).map((t) => BigInt(t));
  if (targets.length < 1 || targets.length > MAX_TARGETS) {
    throw new Refused(`a query has 1 to 65,536 targets, got ${targets.length}`);
  }
  const seen = new Set();
  for (const t of targets) {
    if (t < 0n || t >= LIMIT) throw new Refused(`target ${t} is not in [0, 2^64)`);
    const key = t.toString();
    if (seen.has(key)) throw new Refused(`target ${t} appears twice`);
    seen.add(key);
  }
  return targets;
}

export const packedLength = (n) => Math.ceil(n / 8);

export function pack(bitList) {
  const out = Buffer.alloc(packedLength(bitList.length));
  bitList.forEach((bit, i) => {
    if (bit) out[i >> 3] |= 0x80 >> (i & 7);
  });
  return out;
}

export function unpack(data, n) {
  return Array.from({ length: n }, (_, i) => (data[i >> 3] >> (7 - (i & 7))) & 1);
}

/** Every round's packed answers, drawn once: [round 1, (round 2)]. */
export function draw(mechanism, cell, targets, source) {
  if (mechanism.name === 'rr') {
    const a0 = mul(sub(ONE, mechanism.flip1), mechanism.flip2);
    const a1 = add(mechanism.flip1, a0);
    return [pack(targets.map((t) => bernoulli(t === cell ? a1 : a0, source)))];
  }
  const n = targets.length;
  const round1 = Buffer.from(source.bytes(packedLength(n)));
  if (n % 8) round1[round1.length - 1] &= (0xff << (8 - (n % 8))) & 0xff;
  const round2 = Buffer.from(round1);
  const i = targets.indexOf(cell);
  if (i >= 0 && bernoulli(mechanism.rate, source)) {
    round1[i >> 3] &= ~(0x80 >> (i & 7)) & 0xff;
    round2[i >> 3] |= 0x80 >> (i & 7);
  }
  return [round1, round2];
}
