// JS devices against a live leader and helper (`ldpcollect serve --role leader|helper`): RR
// and SP fleets shard, seal and upload; the Python CLI releases as the collector and the
// releases hold the truth. A key substituted by the leader is refused.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import grpc from '@grpc/grpc-js';
import { Device } from '../src/device.mjs';
import { fetchHelperConfig } from '../src/secure.mjs';
import { v1 } from '../src/proto.mjs';
import { unary } from '../src/retry.mjs';
import { SeededRandom } from './helpers.mjs';
import { checkAgainstTruth, gridBlock, placements } from './fleet.mjs';
import { adminMetadata, makeCollectorKey, noBudget, releaseSecure, serve, stop, tmpdir } from './servers.mjs';

const COUNTS = [30, 25, 20, 15, 10, 10, 5, 5, 0];
const OTHERS = 30;
let dir;
let helper;
let leader;
let collectorKey;
let collectorConfig;
let helperConfig;
let stubs;

before(async () => {
  dir = tmpdir('secure');
  helper = await serve(['--role', 'helper', '--db', path.join(dir, 'helper.db'), '--listen', '127.0.0.1:0'], 'ldpcollect helper serving on ');
  leader = await serve(
    ['--role', 'leader', '--db', path.join(dir, 'leader.db'), '--listen', '127.0.0.1:0', '--helper', helper.address, ...(await noBudget())],
    'ldpcollect leader serving on ',
  );
  const credentials = grpc.credentials.createInsecure();
  stubs = {
    collector: new v1.SecureCollector(leader.address, credentials),
    admin: new v1.SecureAdmin(leader.address, credentials),
  };
  collectorKey = path.join(dir, 'collector.key');
  collectorConfig = makeCollectorKey(collectorKey);
  // Devices take the helper's key from the helper itself, never from the leader alone.
  helperConfig = await fetchHelperConfig(helper.address, credentials);
});

after(async () => {
  for (const stub of Object.values(stubs ?? {})) stub.close();
  if (leader) assert.equal(await stop(leader.proc), 0);
  if (helper) assert.equal(await stop(helper.proc), 0);
});

async function create(id, mechanism) {
  const request = { query_id: id, mechanism, targets: gridBlock().map(String), min_reports: 100, collector_hpke_config: collectorConfig };
  return unary(stubs.admin, 'CreateSecureQuery', request, { metadata: adminMetadata(), timeout: 60 });
}

async function runFleet(id, label) {
  const devices = placements(gridBlock(), COUNTS, OTHERS).map(
    ({ at }, i) =>
      new Device({ statePath: path.join(dir, `${label}-${i}.json`), lat: at[0], lon: at[1], random: new SeededRandom(`${label}/${i}`) }),
  );
  const outcomes = [];
  for (let i = 0; i < devices.length; i += 20) {
    const batch = devices.slice(i, i + 20);
    outcomes.push(...(await Promise.all(batch.map((d) => d.uploadSecure(stubs.collector, id, { helperConfig, scheme: { kind: 'grid' } })))));
  }
  return { devices, outcomes };
}

async function release(id) {
  // The Python CLI as the collector: close, collect both noised shares, open, debias.
  const { release: released, views } = await releaseSecure(id, collectorKey, leader.address);
  assert.ok(views.aggregator && views.public);
  return released;
}

test('an RR fleet through two aggregators: the collector release holds the truth', async () => {
  await create('js-secure-rr', { randomized_response: { flip1: '0.85', flip2: '0.3' } });
  const { devices, outcomes } = await runFleet('js-secure-rr', 'srr');
  assert.deepEqual(new Set(outcomes.map((o) => o.status)), new Set(['accepted']), JSON.stringify(outcomes[0]));
  // A retry (an acknowledgement lost) sends the same sealed bytes: a duplicate, counted once.
  devices[0].state.queries['js-secure-rr'].acked = false;
  assert.equal((await devices[0].uploadSecure(stubs.collector, 'js-secure-rr', { helperConfig, scheme: { kind: 'grid' } })).status, 'duplicate');
  const released = await release('js-secure-rr');
  assert.equal(released.participants, devices.length);
  checkAgainstTruth(released, gridBlock(), COUNTS);
});

test('an SP fleet uploads its round pairs: the release holds the truth', async () => {
  await create('js-secure-sp', { sampling_privacy: { sampling_rate: '1/2' } });
  const { devices, outcomes } = await runFleet('js-secure-sp', 'ssp');
  assert.deepEqual(new Set(outcomes.map((o) => o.status)), new Set(['accepted']), JSON.stringify(outcomes[0]));
  const released = await release('js-secure-sp');
  assert.equal(released.participants, devices.length);
  checkAgainstTruth(released, gridBlock(), COUNTS);
});

test("a helper key that is not the helper's own is refused before anything is drawn", async () => {
  await create('js-secure-pin', { randomized_response: { flip1: '0.85', flip2: '0.3' } });
  const impostor = Buffer.from(helperConfig);
  impostor[5] ^= 0xff;
  const device = new Device({ statePath: path.join(dir, 'pin.json'), lat: 48.8584, lon: 2.2945 });
  const outcome = await device.uploadSecure(stubs.collector, 'js-secure-pin', { helperConfig: impostor, scheme: { kind: 'grid' } });
  assert.equal(outcome.status, 'refused');
  assert.match(outcome.message, /not the helper's own/);
  assert.equal(device.state.queries['js-secure-pin'], undefined);
  // Asking the leader for "the helper's key" is refused: it says it is the leader.
  await assert.rejects(fetchHelperConfig(leader.address, grpc.credentials.createInsecure()), /says it is the leader/);
});
