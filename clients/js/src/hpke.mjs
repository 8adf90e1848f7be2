// Sealing an input share to one aggregator (docs/device-protocol.md, section 8.4): HPKE base
// mode, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM; metadata bound through info.
import { createHash } from 'node:crypto';
import { Aes128Gcm, CipherSuite, HkdfSha256 } from '@hpke/core';
import { DhkemX25519HkdfSha256 } from '@hpke/dhkem-x25519';

export const ROLE_LEADER = 0x02;
export const ROLE_HELPER = 0x03;
const LABEL = Buffer.from('ldpcollect-secure-v1 input share');
const suite = new CipherSuite({ kem: new DhkemX25519HkdfSha256(), kdf: new HkdfSha256(), aead: new Aes128Gcm() });

const u32 = (n) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};

export function inputShareInfo(role, queryId, round, reportId, publicShare) {
  const h = createHash('sha256');
  for (const field of [Buffer.from(queryId, 'utf8'), u32(round), reportId, publicShare]) {
    h.update(u32(field.length));
    h.update(field);
  }
  return Buffer.concat([LABEL, Buffer.from([role]), h.digest()]);
}

/** config (33 bytes: id || X25519 key) -> u8(id) || enc || ciphertext. `ikmE` (32 bytes)
 * fixes the ephemeral key, for conformance vectors; otherwise it is fresh. */
export async function seal(config, info, plaintext, ikmE) {
  const recipientPublicKey = await suite.kem.deserializePublicKey(config.subarray(1));
  const params = { recipientPublicKey, info };
  if (ikmE) params.ekm = await suite.kem.deriveKeyPair(ikmE);
  const sender = await suite.createSenderContext(params);
  const ct = Buffer.from(await sender.seal(plaintext));
  return Buffer.concat([config.subarray(0, 1), Buffer.from(sender.enc), ct]);
}
