// Exact rational parameters from their wire text (docs/device-protocol.md, section 2).
import { Refused } from './errors.mjs';

const MAX_TEXT = 64;
const MAX_EXPONENT = 30;
const NUMBER = /^[+-]?(?:(\d+)\/(\d+)|(\d+\.?\d*|\.\d+)(?:[eE]([+-]?\d+))?)$/;

export function gcd(a, b) {
  a = a < 0n ? -a : a;
  b = b < 0n ? -b : b;
  while (b) [a, b] = [b, a % b];
  return a;
}

/** A fraction {n, d} in lowest terms, d > 0. */
export function frac(n, d = 1n) {
  if (d === 0n) throw new Refused('division by zero');
  if (d < 0n) [n, d] = [-n, -d];
  const g = gcd(n, d) || 1n;
  return { n: n / g, d: d / g };
}

export const add = (a, b) => frac(a.n * b.d + b.n * a.d, a.d * b.d);
export const sub = (a, b) => frac(a.n * b.d - b.n * a.d, a.d * b.d);
export const mul = (a, b) => frac(a.n * b.n, a.d * b.d);
export const ONE = frac(1n);
export const text = (f) => (f.d === 1n ? `${f.n}` : `${f.n}/${f.d}`);

/** Parse decimal or fraction text exactly; Refused names the parameter and the reason. */
export function parseRational(name, raw) {
  const cleaned = String(raw ?? '').trim();
  const refuse = (why) => new Refused(`${name}: ${JSON.stringify(raw)} ${why}`);
  if (!cleaned) throw refuse('is missing (decimal or fraction text)');
  if (cleaned.length > MAX_TEXT) throw refuse(`is longer than ${MAX_TEXT} characters`);
  const m = NUMBER.exec(cleaned);
  if (!m) throw refuse('is not a rational number such as "17/20" or "0.85"');
  const negative = cleaned.startsWith('-');
  let value;
  if (m[1] !== undefined) {
    if (BigInt(m[2]) === 0n) throw refuse('divides by zero');
    value = frac(BigInt(m[1]), BigInt(m[2]));
  } else {
    if (m[4] !== undefined && Math.abs(Number(m[4])) > MAX_EXPONENT) {
      throw refuse(`has an exponent beyond +-${MAX_EXPONENT}`);
    }
    const [whole, fraction = ''] = m[3].split('.');
    let n = BigInt((whole || '0') + fraction);
    let d = 10n ** BigInt(fraction.length);
    const exponent = m[4] === undefined ? 0 : Number(m[4]);
    if (exponent > 0) n *= 10n ** BigInt(exponent);
    if (exponent < 0) d *= 10n ** BigInt(-exponent);
    value = frac(n, d);
  }
  return negative ? frac(-value.n, value.d) : value;
}

/** A probability in its interval: (0, 1] or [0, 1]. */
export function probability(name, raw, { zeroAllowed }) {
  const x = parseRational(name, raw);
  const low = zeroAllowed ? x.n >= 0n : x.n > 0n;
  if (!low || x.n > x.d) {
    throw new Refused(`${name}: ${text(x)} is not in ${zeroAllowed ? '[0, 1]' : '(0, 1]'}`);
  }
  return x;
}
