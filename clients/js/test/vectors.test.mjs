// Every conformance vector (vectors/device/), computed by this client from its inputs alone.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decode } from '../src/proto.mjs';
import { queryInfo } from '../src/query.mjs';
import { locate, OUTSIDE } from '../src/geo.mjs';
import { draw, unpack } from '../src/mechanisms.mjs';
import { ScriptedRandom } from '../src/random.mjs';
import { reportOf, encodeSubmit } from '../src/report.mjs';
import { Refused } from '../src/errors.mjs';
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
