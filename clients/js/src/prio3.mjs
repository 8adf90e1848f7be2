// Prio3 sharding for two aggregators and one proof (docs/device-protocol.md, section 8.3):
// Prio3SumVec with one-bit entries (a randomized response round) and our Sampling Privacy
// pair circuit (0xFFFF0001). Only the client's half: shard and prove.
import * as F from './field.mjs';
import { SEED_SIZE, deriveSeed, dst, expand } from './xof.mjs';

export const ROUND = { kind: 'round', vdafId: 0x00000003 };
export const PAIR = { kind: 'sampling_pair', vdafId: 0xffff0001 };
const USAGE = { measShare: 1, proofShare: 2, jointRand: 3, proveRand: 4, jointRandSeed: 6, jointRandPart: 7 };

const isqrt = (n) => {
  let x = Math.floor(Math.sqrt(n));
  while (x * x > n) x--;
  while ((x + 1) * (x + 1) <= n) x++;
  return x;
};
const nextPow2 = (x) => {
  let n = 1;
  while (n < x) n *= 2;
  return n;
};

/** The VDAF's sizes for T targets. */
export function params(vdaf, targets) {
  const checked = vdaf === PAIR ? 3 * targets + 1 : targets;
  const chunk = Math.max(1, isqrt(checked));
  const calls = Math.ceil(checked / chunk);
  const wireLen = nextPow2(1 + calls);
  return {
    ...vdaf,
    targets,
    measLen: vdaf === PAIR ? 2 * targets + 1 : targets,
    chunk,
    calls,
    wireLen,
    proofLen: 2 * chunk + 2 * wireLen - 1,
    randSize: 4 * SEED_SIZE,
  };
}

/** The encoded measurement from each round's bits (0/1 arrays). */
export function encodeMeasurement(vdaf, rounds) {
  if (vdaf === PAIR) {
    const [r1, r2] = rounds;
    const w = r2.reduce((s, b, i) => s + b - r1[i], 0);
    return [...r1, ...r2, w].map(BigInt);
  }
  return rounds[0].map(BigInt);
}

/** The entries the range check covers: x, or r1 || r2 || (r2 - r1) || w for the pair. */
function checked(p, x) {
  if (p.kind !== PAIR.kind) return x;
  const t = p.targets;
  const r1 = x.slice(0, t);
  const r2 = x.slice(t, 2 * t);
  return [...r1, ...r2, ...r2.map((b, i) => F.sub(b, r1[i])), x[2 * t]];
}

const ODD_MATRICES = new Map();

/** The n x n matrix taking a polynomial's values at the n-th roots of unity (degree < n) to
 * its values at the odd 2n-th roots x_i = w_2n^(2i+1): by the geometric sum, entry (i, k) is
 * -2 / (n (x_i w_n^-k - 1)), since (x_i w_n^-k)^n = -1. Cached per n. */
function oddMatrix(n) {
  let matrix = ODD_MATRICES.get(n);
  if (!matrix) {
    const wInv = F.inv(F.root(n));
    const w2 = F.root(2 * n);
    const scale = F.mod(-2n * F.inv(BigInt(n)));
    matrix = [];
    let x = w2;
    const w2Squared = F.mul(w2, w2);
    for (let i = 0; i < n; i++) {
      const row = [];
      let y = x;
      for (let k = 0; k < n; k++) {
        row.push(F.mul(scale, F.inv(F.sub(y, 1n))));
        y = F.mul(y, wInv);
      }
      matrix.push(row);
      x = F.mul(x, w2Squared);
    }
    ODD_MATRICES.set(n, matrix);
  }
  return matrix;
}

/** Values at the n-th roots -> values at the 2n-th roots, in order (even: the given ones). */
function doubled(values) {
  const matrix = oddMatrix(values.length);
  const out = [];
  matrix.forEach((row, i) => {
    let sum = 0n;
    for (let k = 0; k < row.length; k++) sum += row[k] * values[k];
    out.push(values[i], sum % F.P);
  });
  return out;
}

/** The FLP proof over x (draft section 7.3, Lagrange basis). */
export function prove(p, x, proveRand, jointRand) {
  const c = checked(p, x);
  const padded = [...c, ...new Array(p.calls * p.chunk - c.length).fill(0n)];
  const wires = Array.from({ length: 2 * p.chunk }, (_, m) => [proveRand[m]]);
  for (let k = 0; k < p.calls; k++) {
    let power = jointRand[k];
    for (let j = 0; j < p.chunk; j++) {
      const v = padded[k * p.chunk + j];
      wires[2 * j].push(F.mul(power, v));
      wires[2 * j + 1].push(F.sub(v, 1n));
      power = F.mul(power, jointRand[k]);
    }
  }
  for (const wire of wires) while (wire.length < p.wireLen) wire.push(0n);
  const big = wires.map(doubled);
  const gadget = [];
  for (let i = 0; i < 2 * p.wireLen - 1; i++) {
    let sum = 0n;
    for (let j = 0; j < p.chunk; j++) sum += big[2 * j][i] * big[2 * j + 1][i];
    gadget.push(sum % F.P);
  }
  return [...proveRand, ...gadget];
}

/** Shard(measurement, nonce, rand): {publicShare, leaderShare, helperShare} as bytes. */
export function shard(p, ctx, x, nonce, rand) {
  if (rand.length !== p.randSize) throw new Error(`sharding randomness is ${p.randSize} bytes`);
  const [kHelperShare, kHelperBlind, kLeaderBlind, kProve] = [0, 1, 2, 3].map((i) =>
    rand.subarray(i * SEED_SIZE, (i + 1) * SEED_SIZE),
  );
  const d = (usage) => dst(p.vdafId, usage, ctx);
  const helperMeas = expand(kHelperShare, d(USAGE.measShare), Buffer.from([1]), p.measLen);
  const leaderMeas = F.vecSub(x, helperMeas);
  const part = (aggId, blind, meas) =>
    deriveSeed(blind, d(USAGE.jointRandPart), Buffer.concat([Buffer.from([aggId]), nonce, F.encodeVec(meas)]));
  const helperPart = part(1, kHelperBlind, helperMeas);
  const leaderPart = part(0, kLeaderBlind, leaderMeas);
  const publicShare = Buffer.concat([leaderPart, helperPart]);
  const seed = deriveSeed(Buffer.alloc(SEED_SIZE), d(USAGE.jointRandSeed), publicShare);
  const jointRand = expand(seed, d(USAGE.jointRand), Buffer.from([1]), p.calls);
  const proveRand = expand(kProve, d(USAGE.proveRand), Buffer.from([1]), 2 * p.chunk);
  const proof = prove(p, x, proveRand, jointRand);
  const helperProof = expand(kHelperShare, d(USAGE.proofShare), Buffer.from([1, 1]), p.proofLen);
  const leaderProof = F.vecSub(proof, helperProof);
  return {
    publicShare,
    leaderShare: Buffer.concat([F.encodeVec([...leaderMeas, ...leaderProof]), kLeaderBlind]),
    helperShare: Buffer.concat([kHelperShare, kHelperBlind]),
  };
}
