// Privacy Pass admission tokens (docs/device-protocol.md, section 7): the challenge a query's
// report answers, blinding (RFC 9474 RSABSSA-SHA384-PSS-Deterministic), finalizing, and the
// issuer's gRPC service.
import { constants, createHash, createPublicKey, verify } from 'node:crypto';
import grpc from '@grpc/grpc-js';
import { Refused } from './errors.mjs';
import { modPow } from './field.mjs';
import { unary } from './retry.mjs';

const TOKEN_TYPE = 2;
const SALT_LENGTH = 48;
const HASH_LENGTH = 48;
const MODULUS_BYTES = 256;
const sha256 = (b) => createHash('sha256').update(b).digest();
const sha384 = (b) => createHash('sha384').update(b).digest();
const u16 = (n) => Buffer.from([n >> 8, n & 0xff]);
const u32 = (n) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
const short = (s) => {
  const b = Buffer.from(s, 'utf8');
  if (b.length < 1 || b.length > 255) throw new Refused(`${JSON.stringify(s)} must be 1 to 255 bytes`);
  return Buffer.concat([Buffer.from([b.length]), b]);
};

/** The trusted mode's redemption context: one per (query, round). */
export const trustedContext = (queryId, round) =>
  sha256(Buffer.concat([Buffer.from('ldpcollect report token v1'), short(queryId), u32(round)]));

/** The secure mode's: (query, report kind "round" or "sampling_pair", upload round). */
export const secureContext = (queryId, kind, round) =>
  sha256(Buffer.concat([Buffer.from('ldpcollect secure report token v1'), short(queryId), short(kind), u32(round)]));

/** RFC 9577 TokenChallenge bytes. */
export function challenge(issuerName, context, origins = []) {
  const issuer = Buffer.from(issuerName, 'ascii');
  const origin = Buffer.from(origins.join(','), 'ascii');
  return Buffer.concat([u16(TOKEN_TYPE), u16(issuer.length), issuer, Buffer.from([context.length]), context, u16(origin.length), origin]);
}

/** The issuer key a device uses: from the directory only (the first type-2 key in force). */
export function keyFromDirectory(directoryJson, now = Date.now() / 1000) {
  const entries = JSON.parse(directoryJson)['token-keys'] ?? [];
  const entry = entries.find((e) => e['token-type'] === TOKEN_TYPE && (e['not-before'] ?? 0) <= now);
  if (!entry) throw new Refused('the issuer directory lists no token key in force');
  const spki = Buffer.from(entry['token-key'], 'base64url');
  return { spki, keyId: sha256(spki), ...rsaPublicNumbers(spki) };
}

/** One DER element at `at`: {tag, body, end}. */
function der(bytes, at) {
  const tag = bytes[at];
  let length = bytes[at + 1];
  let start = at + 2;
  if (length & 0x80) {
    const count = length & 0x7f;
    length = 0;
    for (let i = 0; i < count; i++) length = length * 256 + bytes[start + i];
    start += count;
  }
  return { tag, body: bytes.subarray(start, start + length), end: start + length };
}

/** n and e of an RSA SubjectPublicKeyInfo (rsaEncryption or RSASSA-PSS algorithm). */
export function rsaPublicNumbers(spki) {
  const outer = der(spki, 0).body;
  const algorithm = der(outer, 0);
  const bits = der(outer, algorithm.end);
  if (bits.tag !== 0x03 || bits.body[0] !== 0) throw new Refused('the token key is not an RSA SPKI');
  const rsaKey = der(bits.body, 1).body;
  const n = der(rsaKey, 0);
  const e = der(rsaKey, n.end);
  return { n: toInt(n.body), e: toInt(e.body) };
}

function modInverse(a, m) {
  let [oldR, r, oldS, s] = [a % m, m, 1n, 0n];
  while (r !== 0n) {
    const q = oldR / r;
    [oldR, r] = [r, oldR - q * r];
    [oldS, s] = [s, oldS - q * s];
  }
  if (oldR !== 1n) throw new Refused('the blinding factor is not invertible');
  return ((oldS % m) + m) % m;
}

const toBytes = (x, length) => Buffer.from(x.toString(16).padStart(2 * length, '0'), 'hex');
const toInt = (b) => BigInt('0x' + Buffer.from(b).toString('hex'));

function mgf1(seed, length) {
  const blocks = [];
  for (let counter = 0; blocks.length * HASH_LENGTH < length; counter++) blocks.push(sha384(Buffer.concat([seed, u32(counter)])));
  return Buffer.concat(blocks).subarray(0, length);
}

/** EMSA-PSS-ENCODE (RFC 8017 9.1.1) with SHA-384, MGF1-SHA-384 and the given salt. */
export function emsaPssEncode(message, emBits, salt) {
  const emLen = Math.ceil(emBits / 8);
  const h = sha384(Buffer.concat([Buffer.alloc(8), sha384(message), salt]));
  const db = Buffer.concat([Buffer.alloc(emLen - salt.length - HASH_LENGTH - 2), Buffer.from([1]), salt]);
  const mask = mgf1(h, db.length);
  const masked = Buffer.from(db.map((b, i) => b ^ mask[i]));
  masked[0] &= 0xff >> (8 * emLen - emBits);
  return Buffer.concat([masked, h, Buffer.from([0xbc])]);
}

/** Blind a fresh token for `challengeBytes`: {request (bytes to send), pending (keep)}. */
export function requestToken(key, challengeBytes, { nonce, salt, r }) {
  const digest = sha256(challengeBytes);
  const tokenInput = Buffer.concat([u16(TOKEN_TYPE), nonce, digest, key.keyId]);
  const em = emsaPssEncode(tokenInput, key.n.toString(2).length - 1, salt);
  const blinded = (toInt(em) * modPow(r, key.e, key.n)) % key.n;
  const request = Buffer.concat([u16(TOKEN_TYPE), Buffer.from([key.keyId[31]]), toBytes(blinded, MODULUS_BYTES)]);
  return { request, pending: { key, tokenInput, inv: modInverse(r, key.n) } };
}

/** Unblind the issuer's answer and verify it: the 354-byte token. */
export function finalizeToken({ key, tokenInput, inv }, blindSig) {
  const signature = toBytes((toInt(blindSig) * inv) % key.n, MODULUS_BYTES);
  const publicKey = createPublicKey({ key: key.spki, format: 'der', type: 'spki' });
  const ok = verify('sha384', tokenInput, { key: publicKey, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: SALT_LENGTH }, signature);
  if (!ok) throw new Refused('the issuer returned a signature that does not verify');
  return Buffer.concat([tokenInput, signature]);
}

const randomBelow = (n, random) => {
  for (;;) {
    const r = toInt(random.bytes(MODULUS_BYTES)) % n;
    if (r > 1n) return r;
  }
};

/** The issuer's gRPC service for one enrolled device. `tokens(info, round)` suits Device. */
export class IssuerClient {
  constructor(stub, { deviceId, secret, random }) {
    Object.assign(this, { stub, deviceId, secret, random });
  }

  async key() {
    const response = await unary(this.stub, 'GetDirectory', {});
    return { name: response.issuer_name, ...keyFromDirectory(response.directory_json) };
  }

  async tokens(info, round) {
    const key = await this.key();
    if (info.tokenIssuer !== key.name) {
      throw new Refused(`the query takes tokens of ${info.tokenIssuer}, this device's issuer is ${key.name}`);
    }
    const context = info.vdaf ? secureContext(info.queryId, info.vdaf.kind, round) : trustedContext(info.queryId, round);
    const bytes = challenge(key.name, context, info.vdaf ? info.tokenOrigins : []);
    const { request, pending } = requestToken(key, bytes, {
      nonce: this.random.bytes(32),
      salt: this.random.bytes(SALT_LENGTH),
      r: randomBelow(key.n, this.random),
    });
    const metadata = new grpc.Metadata();
    metadata.set('ldpcollect-device', this.deviceId);
    metadata.set('authorization', `Bearer ${this.secret}`);
    const response = await unary(this.stub, 'IssueTokens', { token_requests: [request] }, { metadata });
    return finalizeToken(pending, response.token_responses[0]);
  }
}
