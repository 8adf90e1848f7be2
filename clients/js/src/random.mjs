// Random bytes and the one rule that turns them into decisions (docs/device-protocol.md,
// section 4, "Drawing").
import { randomBytes } from 'node:crypto';

export const OS_RANDOM = { bytes: (n) => randomBytes(n) };

/** Replays given bytes (conformance vectors, seeded fleets in tests). */
export class ScriptedRandom {
  constructor(data) {
    this.data = Buffer.from(data);
    this.used = 0;
  }
  bytes(n) {
    if (this.used + n > this.data.length) {
      throw new Error(`asked for ${n} more random bytes after ${this.used} of ${this.data.length}`);
    }
    const out = this.data.subarray(this.used, this.used + n);
    this.used += n;
    return Buffer.from(out);
  }
}

const bitLength = (x) => x.toString(2).length;

/** A uniform integer in [0, bound): top k bits of ceil(k/8) big-endian bytes, rejecting. */
export function uniformBelow(bound, source) {
  const k = bitLength(bound);
  const n = Math.ceil(k / 8);
  for (;;) {
    const bytes = source.bytes(n);
    const value = BigInt('0x' + (bytes.toString('hex') || '0')) >> BigInt(8 * n - k);
    if (value < bound) return value;
  }
}

/** True with probability exactly x = {n, d} (lowest terms); 0 and 1 read nothing. */
export function bernoulli(x, source) {
  if (x.n <= 0n) return false;
  if (x.n >= x.d) return true;
  return uniformBelow(x.d, source) < x.n;
}
