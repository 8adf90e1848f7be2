// JS devices against a live `ldpcollect serve`: RR and SP fleets whose releases (made and
// checked by the Python CLI) hold the truth; state and retries across a lost
// acknowledgement and a server restart.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import grpc from '@grpc/grpc-js';
import { Device } from '../src/device.mjs';
import { v1 } from '../src/proto.mjs';
import { unary } from '../src/retry.mjs';
import { SeededRandom } from './helpers.mjs';
import { checkAgainstTruth, gridBlock, placements, writeTruth } from './fleet.mjs';
import { cli, noBudget, serve, stop, tmpdir } from './servers.mjs';

const COUNTS = [40, 30, 25, 20, 15, 10, 10, 5, 0];
const OTHERS = 45;
let dir;
let server;
let collector;

before(async () => {
  dir = tmpdir('trusted');
  server = await serve(['--db', path.join(dir, 'agg.db'), '--listen', '127.0.0.1:0', ...(await noBudget())]);
  collector = new v1.Collector(server.address, grpc.credentials.createInsecure());
});

after(async () => {
  collector?.close();
  if (server) assert.equal(await stop(server.proc), 0);
});

async function create(id, ...args) {
  const targets = gridBlock().join(',');
  await cli('query', 'create', '--id', id, '--targets', targets, '--min-reports', '50', '--server', server.address, ...args);
}

function fleet(label) {
  return placements(gridBlock(), COUNTS, OTHERS).map(
    ({ at }, i) =>
      new Device({ statePath: path.join(dir, `${label}-${i}.json`), lat: at[0], lon: at[1], random: new SeededRandom(`${label}/${i}`) }),
  );
}

async function release(id) {
  await cli('query', 'close', '--query', id, '--server', server.address);
  const truth = writeTruth(dir, gridBlock(), COUNTS);
  return JSON.parse(await cli('release', '--query', id, '--truth', truth, '--json', '--server', server.address));
}

test('an RR fleet of JS devices: the release holds the truth', async () => {
  await create('js-rr', '--mechanism', 'rr', '--flip1', '0.85', '--flip2', '0.3');
  const devices = fleet('rr');
  const outcomes = await Promise.all(devices.map((d) => d.participate(collector, ['js-rr'])));
  assert.deepEqual(new Set(outcomes.flat().map((o) => o.status)), new Set(['accepted']));
  const released = await release('js-rr');
  assert.equal(released.participants, devices.length);
  checkAgainstTruth(released, gridBlock(), COUNTS);
});

test('an SP fleet answers both rounds from one draw: the release holds the truth', async () => {
  await create('js-sp', '--mechanism', 'sp', '--sampling-rate', '1/2');
  const devices = fleet('sp');
  const first = await Promise.all(devices.map((d) => d.participate(collector, ['js-sp'])));
  assert.deepEqual(new Set(first.flat().map((o) => `${o.round}:${o.status}`)), new Set(['1:accepted']));
  await cli('query', 'advance', '--query', 'js-sp', '--server', server.address);
  const second = await Promise.all(devices.map((d) => d.participate(collector, ['js-sp'])));
  assert.deepEqual(new Set(second.flat().map((o) => `${o.round}:${o.status}`)), new Set(['2:accepted']));
  // Each device's two rounds came from its saved draw: round 2 differs from round 1 only at a
  // selected cell, 0 turned to 1.
  for (const d of devices) {
    const [r1, r2] = d.state.queries['js-sp'].answers.map((h) => Buffer.from(h, 'hex'));
    let diff = 0;
    r1.forEach((b, i) => (diff += (b ^ r2[i]) === 0 ? 0 : 1));
    assert.ok(diff <= 1);
  }
  const released = await release('js-sp');
  assert.equal(released.participants, devices.length);
  checkAgainstTruth(released, gridBlock(), COUNTS);
});

test('a lost acknowledgement: the retry sends the same report id and is counted once', async () => {
  await create('js-ack', '--mechanism', 'rr', '--flip1', '0.85', '--flip2', '0.3');
  const statePath = path.join(dir, 'ack.json');
  const device = new Device({ statePath, lat: 48.8584, lon: 2.2945 });
  const [first] = await device.participate(collector, ['js-ack']);
  assert.equal(first.status, 'accepted');
  const saved = JSON.parse(fs.readFileSync(statePath, 'utf8')).queries['js-ack'];
  // As if the device died before saving the acknowledgement: it restarts from its file.
  saved.acked = [false];
  fs.writeFileSync(statePath, JSON.stringify({ format: 'ldpcollect-js.device-state/1', queries: { 'js-ack': saved } }));
  const restarted = new Device({ statePath, lat: 48.8584, lon: 2.2945 });
  const [again] = await restarted.participate(collector, ['js-ack']);
  assert.equal(again.status, 'duplicate');
  assert.deepEqual(restarted.state.queries['js-ack'].reportIds, saved.reportIds);
  const query = await unary(collector, 'GetQuery', { query_id: 'js-ack' });
  assert.deepEqual(query.reports_per_round, ['1']);
  const [third] = await restarted.participate(collector, ['js-ack']);
  assert.equal(third.status, 'already_acknowledged');
});

test('a closed query: FAILED_PRECONDITION, and the device keeps its draw', async () => {
  await create('js-closed', '--mechanism', 'rr', '--flip1', '0.85', '--flip2', '0.3');
  const open = await unary(collector, 'GetQuery', { query_id: 'js-closed' });
  await cli('query', 'close', '--query', 'js-closed', '--server', server.address);
  const device = new Device({ statePath: path.join(dir, 'closed.json'), lat: 48.8584, lon: 2.2945 });
  const outcome = await device.answer(collector, open);
  assert.equal(outcome.status, 'failed');
  assert.equal(outcome.code, 'FAILED_PRECONDITION');
  assert.equal(outcome.attempts, 1);
  const record = device.state.queries['js-closed'];
  assert.ok(record && record.acked[0] === false && record.answers.length === 1);
});

test('the server restarts while a device retries: UNAVAILABLE, then accepted with the same id', async () => {
  await create('js-restart', '--mechanism', 'rr', '--flip1', '0.85', '--flip2', '0.3');
  const query = await unary(collector, 'GetQuery', { query_id: 'js-restart' });
  const address = server.address;
  assert.equal(await stop(server.proc), 0);
  const retries = [];
  const device = new Device({
    statePath: path.join(dir, 'restart.json'),
    lat: 48.8584,
    lon: 2.2945,
    retry: { maxAttempts: 40, initialBackoff: 0.2, maxBackoff: 1.0, multiplier: 2, jitter: 0.2, rpcTimeout: 5 },
    wait: async (seconds) => {
      retries.push(seconds);
      if (retries.length === 2) server = await serve(['--db', path.join(dir, 'agg.db'), '--listen', address, ...(await noBudget())]);
      await new Promise((r) => setTimeout(r, seconds * 1000));
    },
  });
  const outcome = await device.answer(collector, query);
  assert.equal(outcome.status, 'accepted', JSON.stringify(outcome));
  assert.ok(outcome.attempts >= 3);
  const after = await unary(collector, 'GetQuery', { query_id: 'js-restart' });
  assert.deepEqual(after.reports_per_round, ['1']);
});
