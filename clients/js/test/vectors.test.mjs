// Every conformance vector (vectors/device/), computed by this client from its inputs alone.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decode, encode } from '../src/proto.mjs';
import { secureQueryInfo, sealDraw } from '../src/secure.mjs';
import { queryInfo } from '../src/query.mjs';
import { locate, OUTSIDE, schemeFromText } from '../src/geo.mjs';
import { draw, unpack } from '../src/mechanisms.mjs';
import { ScriptedRandom } from '../src/random.mjs';
import { reportOf, encodeSubmit } from '../src/report.mjs';
import { Refused } from '../src/errors.mjs';
import { challenge, finalizeToken, keyFromDirectory, requestToken, secureContext, trustedContext } from '../src/tokens.mjs';
import { bitText, hex, refusals, vectors } from './helpers.mjs';

for (const vector of vectors('trusted-')) {
  test(`trusted vector ${vector.name}`, () => {
    const { inputs, expected } = vector;
    const info = queryInfo(decode('Query', Buffer.from(inputs.query, 'hex')));
    assert.equal(info.scheme.text, expected.scheme);
    assert.deepEqual({ name: info.mechanism.name, ...info.mechanism.params }, expected.mechanism);
    const cell = locate(info.scheme, inputs.location.lat, inputs.location.lon);
    assert.equal(cell.toString(), expected.cell);
    assert.equal(cell === OUTSIDE, expected.outside);
    if (expected.cell_hex) assert.equal(cell.toString(16), expected.cell_hex);
    assert.equal(info.targets.indexOf(cell), expected.target_index);
    const source = new ScriptedRandom(Buffer.from(inputs.random.draw, 'hex'));
    const answers = draw(info.mechanism, cell, info.targets, source);
    assert.equal(source.used, expected.draw_bytes_used);
    assert.deepEqual(answers.map(hex), expected.answers);
    assert.deepEqual(answers.map((a) => bitText(unpack(a, info.targets.length))), expected.answer_bits);
    if (expected.selected !== undefined) assert.equal(!answers[0].equals(answers[1]), expected.selected);
    const record = {
      queryId: info.queryId,
      pseudonym: inputs.random.pseudonym,
      reportIds: inputs.random.report_ids,
      answers: answers.map(hex),
      tokens: (expected.tokens ?? []).map((t) => t.token),
    };
    expected.reports.forEach((want, i) => {
      assert.equal(hex(encodeSubmit(reportOf(record, i + 1))), want);
    });
  });
}

test('every trusted refusal is refused, before anything is drawn', () => {
  const cases = refusals().filter((c) => c.mode === 'trusted');
  assert.ok(cases.length >= 10);
  for (const c of cases) {
    assert.throws(() => queryInfo(decode('Query', Buffer.from(c.query, 'hex'))), Refused, c.name);
  }
});

for (const vector of vectors('secure-')) {
  test(`secure vector ${vector.name}`, async () => {
    const { inputs, expected } = vector;
    const query = decode('SecureQuery', Buffer.from(inputs.query, 'hex'));
    const info = secureQueryInfo(query, Buffer.from(inputs.helper_hpke_config, 'hex'));
    assert.equal(info.vdaf.chunk, expected.vdaf.chunk_length);
    assert.equal(info.vdaf.proofLen, expected.vdaf.proof_len);
    const cell = locate(schemeFromText(inputs.scheme), inputs.location.lat, inputs.location.lon);
    assert.equal(cell.toString(), expected.cell);
    const source = new ScriptedRandom(Buffer.from(inputs.random.draw, 'hex'));
    const answers = draw(info.mechanism, cell, info.targets, source);
    assert.equal(source.used, expected.draw_bytes_used);
    assert.deepEqual(answers.map(hex), expected.answers);
    const sealed = await sealDraw(info, answers, Buffer.from(inputs.random.report_id, 'hex'), {
      rand: Buffer.from(inputs.random.vdaf_rand, 'hex'),
      ikm: {
        leader: Buffer.from(inputs.random.hpke_ikm_e.leader, 'hex'),
        helper: Buffer.from(inputs.random.hpke_ikm_e.helper, 'hex'),
      },
    });
    assert.equal(sealed.measurement.join(''), expected.measurement);
    assert.equal(hex(sealed.shares.publicShare), expected.public_share);
    assert.equal(hex(sealed.shares.leaderShare), expected.leader_input_share);
    assert.equal(hex(sealed.shares.helperShare), expected.helper_input_share);
    assert.equal(hex(sealed.leaderInfo), expected.leader_info);
    assert.equal(hex(sealed.helperInfo), expected.helper_info);
    assert.equal(hex(sealed.leaderCt), expected.leader_ciphertext);
    assert.equal(hex(sealed.helperCt), expected.helper_ciphertext);
    assert.equal(hex(sealed.report), expected.report);
    const tokens = (expected.tokens ?? []).map((t) => Buffer.from(t.token, 'hex'));
    const upload = encode('UploadSecureReportsRequest', { reports: [sealed.report], tokens });
    assert.equal(hex(upload), expected.upload_request);
  });
}

test('every secure refusal is refused', () => {
  const cases = refusals().filter((c) => c.mode === 'secure');
  assert.ok(cases.length >= 6);
  for (const c of cases) {
    const query = decode('SecureQuery', Buffer.from(c.query, 'hex'));
    assert.throws(() => secureQueryInfo(query, Buffer.from(c.helper_hpke_config, 'hex')), Refused, c.name);
  }
});

for (const vector of vectors().filter((v) => v.expected.tokens)) {
  test(`tokens of ${vector.name}: challenge, blinding and finalizing byte for byte`, () => {
    const { inputs, expected } = vector;
    const key = keyFromDirectory(inputs.issuer.directory_json);
    const givens = inputs.tokens ?? [inputs.token];
    let query;
    if (vector.mode === 'secure') query = decode('SecureQuery', Buffer.from(inputs.query, 'hex'));
    else query = decode('Query', Buffer.from(inputs.query, 'hex'));
    assert.equal(query.token_issuer, inputs.issuer.issuer_name);
    givens.forEach((given, i) => {
      const want = expected.tokens[i];
      const context =
        vector.mode === 'secure'
          ? secureContext(query.query_id, expected.vdaf.kind, Number(query.upload_round))
          : trustedContext(query.query_id, i + 1);
      const bytes = challenge(inputs.issuer.issuer_name, context, vector.mode === 'secure' ? query.token_origins : []);
      assert.equal(hex(bytes), want.challenge);
      const { request, pending } = requestToken(key, bytes, {
        nonce: Buffer.from(given.nonce, 'hex'),
        salt: Buffer.from(given.salt, 'hex'),
        r: BigInt('0x' + given.blind_r),
      });
      assert.equal(hex(key.keyId), want.token_key_id);
      assert.equal(hex(pending.tokenInput), want.token_input);
      assert.equal(hex(request), want.token_request);
      assert.equal(hex(finalizeToken(pending, Buffer.from(want.token_response, 'hex'))), want.token);
      const forged = Buffer.from(want.token_response, 'hex');
      forged[100] ^= 1;
      assert.throws(() => finalizeToken(pending, forged), Refused);
    });
  });
}
