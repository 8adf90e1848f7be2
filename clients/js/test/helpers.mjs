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
