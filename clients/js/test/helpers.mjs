import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const VECTORS = path.join(REPO, 'vectors', 'device');

export function vectors(prefix = '') {
  return fs
    .readdirSync(VECTORS)
    .filter((f) => f.endsWith('.json') && f !== 'refusals.json' && f.startsWith(prefix))
    .sort()
    .map((f) => JSON.parse(fs.readFileSync(path.join(VECTORS, f), 'utf8')));
}

export const refusals = () => JSON.parse(fs.readFileSync(path.join(VECTORS, 'refusals.json'), 'utf8')).cases;
export const hex = (b) => Buffer.from(b).toString('hex');
export const bitText = (bits) => bits.join('');

import { createHash } from 'node:crypto';

/** A fixed byte stream per seed (SHA-256 in counter mode): seeded fleets in tests. */
export class SeededRandom {
  constructor(seed) {
    this.seed = String(seed);
    this.counter = 0;
    this.buffer = Buffer.alloc(0);
  }
  bytes(n) {
    while (this.buffer.length < n) {
      const block = createHash('sha256').update(`${this.seed}/${this.counter++}`).digest();
      this.buffer = Buffer.concat([this.buffer, block]);
    }
    const out = this.buffer.subarray(0, n);
    this.buffer = this.buffer.subarray(n);
    return Buffer.from(out);
  }
}
