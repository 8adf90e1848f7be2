// XofTurboShake128 (draft section 6.2.1) with @noble/hashes' TurboSHAKE128.
import { turboshake128 } from '@noble/hashes/sha3-addons';
import { P, decodeLittleEndian } from './field.mjs';

const VERSION = 18;
export const SEED_SIZE = 32;

/** dst(usage) = u8(18) || u8(0) || u32(vdaf id) || u16(usage) || ctx. */
export function dst(vdafId, usage, ctx) {
  const head = Buffer.alloc(8);
  head[0] = VERSION;
  head[1] = 0;
  head.writeUInt32BE(vdafId, 2);
  head.writeUInt16BE(usage, 6);
  return Buffer.concat([head, ctx]);
}

export class Xof {
  constructor(seed, dstBytes, binder) {
    this.hash = turboshake128.create({ D: 1 });
    const length = Buffer.alloc(2);
    length.writeUInt16LE(dstBytes.length);
    this.hash.update(Buffer.concat([length, dstBytes, Buffer.from([seed.length]), seed, binder]));
  }
  next(n) {
    return Buffer.from(this.hash.xof(n));
  }
  nextVec(length) {
    const out = [];
    while (out.length < length) {
      // The whole remaining count at once; a rejected element (rare) is topped up in order.
      const bytes = this.next(16 * (length - out.length));
      for (let i = 0; i < bytes.length; i += 16) {
        const x = decodeLittleEndian(bytes.subarray(i, i + 16));
        if (x < P) out.push(x);
      }
    }
    return out;
  }
}

export const deriveSeed = (seed, d, binder) => new Xof(seed, d, binder).next(SEED_SIZE);
export const expand = (seed, d, binder, length) => new Xof(seed, d, binder).nextVec(length);
