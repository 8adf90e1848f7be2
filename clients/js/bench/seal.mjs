// Time to shard and seal one report (T = 100) in this client: `node bench/seal.mjs`.
import { randomBytes } from 'node:crypto';
import { params, ROUND, PAIR } from '../src/prio3.mjs';
import { sealDraw } from '../src/secure.mjs';
const cfg = (id) => Buffer.concat([Buffer.from([id]), randomBytes(32)]);
for (const [vdaf, rounds] of [[ROUND, 1], [PAIR, 2]]) {
  const T = 100;
  const info = { queryId: 'bench', targets: Array(T).fill(0n), vdaf: params(vdaf, T), uploadRound: rounds, leader: cfg(1), helper: cfg(2) };
  const answers = Array.from({ length: rounds }, () => Buffer.alloc(13));
  const n = 200;
  for (let i = 0; i < 5; i++) await sealDraw(info, answers, randomBytes(16));
  const t = performance.now();
  for (let i = 0; i < n; i++) await sealDraw(info, answers, randomBytes(16));
  const ms = (performance.now() - t) / n;
  console.log(`${vdaf.kind} T=${T}: ${ms.toFixed(1)} ms per sealed report (${(1000 / ms).toFixed(0)}/s)`);
}
