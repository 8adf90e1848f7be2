// Field128 of draft-irtf-cfrg-vdaf-20 (docs/device-protocol.md, section 8.3): elements are
// BigInts in [0, p), encoded as 16 bytes little-endian.
export const P = (1n << 66n) * 4611686018427387897n + 1n;
const GEN_ORDER = 1n << 66n;

export const add = (a, b) => (a + b) % P;
export const sub = (a, b) => (a - b + P) % P;
export const mul = (a, b) => (a * b) % P;
export const mod = (a) => ((a % P) + P) % P;

/** base^exponent mod modulus, square and multiply. */
export function modPow(base, exponent, modulus) {
  let result = 1n;
  base %= modulus;
  while (exponent > 0n) {
    if (exponent & 1n) result = (result * base) % modulus;
    base = (base * base) % modulus;
    exponent >>= 1n;
  }
  return result;
}

export const pow = (base, exponent) => modPow(base, exponent, P);

export const inv = (a) => pow(a, P - 2n);
const GENERATOR = pow(7n, 4611686018427387897n);

/** The principal n-th root of unity (n a power of two). */
export const root = (n) => pow(GENERATOR, GEN_ORDER / BigInt(n));

export function encodeVec(vec) {
  const out = Buffer.alloc(16 * vec.length);
  vec.forEach((x, i) => {
    let v = x;
    for (let j = 0; j < 16; j++) {
      out[16 * i + j] = Number(v & 0xffn);
      v >>= 8n;
    }
  });
  return out;
}

export function decodeLittleEndian(bytes) {
  let v = 0n;
  for (let j = bytes.length - 1; j >= 0; j--) v = (v << 8n) | BigInt(bytes[j]);
  return v;
}

export const vecSub = (a, b) => a.map((x, i) => sub(x, b[i]));
