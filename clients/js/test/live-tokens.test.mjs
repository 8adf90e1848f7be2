// JS devices with admission tokens against a live issuer and a token-requiring query on a
// live `ldpcollect serve --token-directory` (and a leader and a helper): each round's token
// fetched, saved and spent once.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import grpc from '@grpc/grpc-js';
import { Device } from '../src/device.mjs';
import { fetchHelperConfig } from '../src/secure.mjs';
import { v1 } from '../src/proto.mjs';
import { OS_RANDOM } from '../src/random.mjs';
import { unary } from '../src/retry.mjs';
import { IssuerClient } from '../src/tokens.mjs';
import { gridBlock } from './fleet.mjs';
import { adminMetadata, cli, makeCollectorKey, noBudget, serve, stop, tmpdir } from './servers.mjs';

let dir;
let issuer;
let server;
let stubs;
let directory;

before(async () => {
  dir = tmpdir('tokens');
  const state = path.join(dir, 'issuer');
  directory = path.join(dir, 'directory.json');
  issuer = await serve(['--state-dir', state, '--listen', '127.0.0.1:0', '-k', '3', '--directory-out', directory], 'ldpcollect issuer serving on ', ['issuer']);
  server = await serve(['--db', path.join(dir, 'agg.db'), '--listen', '127.0.0.1:0', '--token-directory', directory, ...(await noBudget())]);
  const credentials = grpc.credentials.createInsecure();
  stubs = { collector: new v1.Collector(server.address, credentials), issuer: new v1.Issuer(issuer.address, credentials) };
});

after(async () => {
  for (const stub of Object.values(stubs ?? {})) stub.close();
  if (server) assert.equal(await stop(server.proc), 0);
  if (issuer) assert.equal(await stop(issuer.proc), 0);
});

test('SP with tokens: one token a round, and a device without an issuer is refused', async () => {
  const targets = gridBlock().join(',');
  await cli('query', 'create', '--id', 'js-tok', '--mechanism', 'sp', '--sampling-rate', '1/2', '--targets', targets, '--require-tokens', '--server', server.address);
  const enrolled = (await cli('issuer', 'enroll', 'js-a', 'js-b', '--state-dir', path.join(dir, 'issuer')))
    .trim()
    .split('\n')
    .map((line) => line.trim().split(/\s+/));
  const devices = enrolled.map(
    ([deviceId, secret], i) =>
      new Device({
        statePath: path.join(dir, `tok-${i}.json`),
        lat: 48.8584,
        lon: 2.2945,
        tokens: (info, round) => new IssuerClient(stubs.issuer, { deviceId, secret, random: OS_RANDOM }).tokens(info, round),
      }),
  );
  for (const round of [1, 2]) {
    const outcomes = await Promise.all(devices.map((d) => d.participate(stubs.collector, ['js-tok'])));
    assert.deepEqual(new Set(outcomes.flat().map((o) => `${o.round}:${o.status}`)), new Set([`${round}:accepted`]), JSON.stringify(outcomes));
    if (round === 1) await cli('query', 'advance', '--query', 'js-tok', '--server', server.address);
  }
  for (const d of devices) {
    const tokens = d.state.queries['js-tok'].tokens;
    assert.equal(tokens.length, 2);
    assert.ok(tokens.every((t) => t.length === 2 * 354) && tokens[0] !== tokens[1]);
  }
  const query = await unary(stubs.collector, 'GetQuery', { query_id: 'js-tok' });
  assert.equal(query.completed_devices, '2');
  const stranger = new Device({ statePath: path.join(dir, 'stranger.json'), lat: 48.8584, lon: 2.2945 });
  await cli('query', 'create', '--id', 'js-tok2', '--mechanism', 'rr', '--flip1', '0.85', '--flip2', '0.3', '--targets', targets, '--require-tokens', '--server', server.address);
  const [refused] = await stranger.participate(stubs.collector, ['js-tok2']);
  assert.equal(refused.code, 'UNAUTHENTICATED');
});

test('two aggregators with tokens: a token bound to the query, its kind and both origins', async () => {
  const roles = [];
  try {
    const helper = await serve(['--role', 'helper', '--db', path.join(dir, 'h.db'), '--listen', '127.0.0.1:0', '--token-directory', directory], 'ldpcollect helper serving on ');
    roles.push(helper);
    const leader = await serve(
      ['--role', 'leader', '--db', path.join(dir, 'l.db'), '--listen', '127.0.0.1:0', '--helper', helper.address, '--token-directory', directory, ...(await noBudget())],
      'ldpcollect leader serving on ',
    );
    roles.push(leader);
    const credentials = grpc.credentials.createInsecure();
    const admin = new v1.SecureAdmin(leader.address, credentials);
    const collector = new v1.SecureCollector(leader.address, credentials);
    const helperConfig = await fetchHelperConfig(helper.address, credentials);
    const created = await unary(
      admin,
      'CreateSecureQuery',
      {
        query_id: 'js-secure-tok',
        mechanism: { sampling_privacy: { sampling_rate: '1/2' } },
        targets: gridBlock().map(String),
        min_reports: 100,
        collector_hpke_config: makeCollectorKey(path.join(dir, 'collector.key')),
        require_tokens: true,
      },
      { metadata: adminMetadata(), timeout: 60 },
    );
    assert.deepEqual(created.token_origins, [leader.address, helper.address]);
    const [[deviceId, secret]] = (await cli('issuer', 'enroll', 'js-s', '--state-dir', path.join(dir, 'issuer')))
      .trim()
      .split('\n')
      .map((line) => line.trim().split(/\s+/));
    const device = new Device({
      statePath: path.join(dir, 'secure-tok.json'),
      lat: 48.8584,
      lon: 2.2945,
      tokens: (info, round) => new IssuerClient(stubs.issuer, { deviceId, secret, random: OS_RANDOM }).tokens(info, round),
    });
    const outcome = await device.uploadSecure(collector, 'js-secure-tok', { helperConfig, scheme: { kind: 'grid' } });
    assert.equal(outcome.status, 'accepted', JSON.stringify(outcome));
    const stranger = new Device({ statePath: path.join(dir, 'secure-stranger.json'), lat: 48.8584, lon: 2.2945 });
    const refused = await stranger.uploadSecure(collector, 'js-secure-tok', { helperConfig, scheme: { kind: 'grid' } });
    assert.equal(refused.code, 'UNAUTHENTICATED');
    // The helper verified the token itself: the report is aggregated, not refused.
    for (let i = 0; ; i++) {
      // Progress is the operator's to read (SecureAdmin), not the devices'.
      const query = await unary(admin, 'GetSecureQuery', { query_id: 'js-secure-tok' }, { metadata: adminMetadata() });
      if (query.pending_reports === '0') {
        assert.equal(query.aggregated_reports, '1');
        assert.equal(query.refused_reports, '0');
        break;
      }
      assert.ok(i < 600, 'the leader never finished aggregating');
      await new Promise((r) => setTimeout(r, 200));
    }
    for (const stub of [admin, collector]) stub.close();
  } finally {
    for (const role of roles.reverse()) assert.equal(await stop(role.proc), 0);
  }
});
