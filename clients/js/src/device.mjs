// A device: fetch the query, validate it, decide once (draw, ids; saved first), answer each
// round with retries, in the trusted mode or the two-aggregator mode (docs/device-protocol.md).
import grpc from '@grpc/grpc-js';
import { Refused } from './errors.mjs';
import { checkPoint, locate } from './geo.mjs';
import { draw } from './mechanisms.mjs';
import { queryInfo, fingerprint } from './query.mjs';
import { OS_RANDOM } from './random.mjs';
import { reportOf } from './report.mjs';
import { DEFAULT_POLICY, sleep, statusName, unary, withRetry } from './retry.mjs';
import { sealDraw, secureQueryInfo } from './secure.mjs';
import { DeviceState } from './state.mjs';

const { status } = grpc;
const hex = (b) => Buffer.from(b).toString('hex');
const ID_BYTES = 16;

export class Device {
  /**
   * statePath: the device's JSON state file; lat, lon: its position (degrees).
   * random: {bytes(n)} (the OS CSPRNG by default); retry: the backoff policy; wait: how to
   * sleep (seconds); tokens: async (query info, round) => token bytes, for queries that
   * require them (an issuer client).
   */
  constructor({ statePath, lat, lon, random = OS_RANDOM, retry = DEFAULT_POLICY, wait = sleep, tokens }) {
    checkPoint(lat, lon);
    Object.assign(this, { lat, lon, random, retry, wait, tokens });
    this.state = DeviceState.open(statePath);
  }

  /** Trusted mode: answer the current round of every open query (or those in `only`). */
  async participate(collector, only) {
    const { value } = await this.#call(() => unary(collector, 'ListOpenQueries', {}));
    const wanted = only ? new Set(only) : null;
    const outcomes = [];
    for (const query of value.queries) {
      if (!wanted || wanted.has(query.query_id)) outcomes.push(await this.answer(collector, query));
    }
    return outcomes;
  }

  /** Answer one trusted query's current round; an outcome {queryId, round, status, ...}. */
  async answer(collector, query) {
    const queryId = query.query_id;
    const round = Number(query.current_round);
    const outcome = (s, extra = {}) => ({ queryId, round, status: s, ...extra });
    let info;
    try {
      info = queryInfo(query);
    } catch (err) {
      if (err instanceof Refused) return outcome('refused', { message: err.message });
      throw err;
    }
    if (!info.open) return outcome('refused', { message: 'the query is not open' });
    let record = this.state.queries[queryId];
    if (!record) {
      if (round > 1) return outcome('missed', { message: 'joined after round 1' });
      record = this.#decide(info);
    }
    if (record.fingerprint !== info.fingerprint) {
      return outcome('refused', { message: 'the query changed its public parameters since the draw' });
    }
    if (round < 1 || round > record.answers.length) return outcome('refused', { message: `no round ${round}` });
    if (record.acked[round - 1]) return outcome('already_acknowledged');
    if (info.requireTokens && !record.tokens[round - 1]) {
      if (!this.tokens) return outcome('failed', { code: 'UNAUTHENTICATED', message: 'no issuer for a query that requires tokens' });
      record.tokens[round - 1] = hex(await this.tokens(info, round));
      this.state.save();
    }
    const request = { report: reportOf(record, round) };
    try {
      const { value, attempts } = await this.#call(() => unary(collector, 'SubmitReport', request, { timeout: this.retry.rpcTimeout }));
      record.acked[round - 1] = true;
      this.state.save();
      return outcome(value.ack.duplicate ? 'duplicate' : 'accepted', { attempts });
    } catch (err) {
      return outcome('failed', { code: statusName(err.code), message: err.details, attempts: err.attempts });
    }
  }

  #decide(info) {
    const cell = locate(info.scheme, this.lat, this.lon);
    const answers = draw(info.mechanism, cell, info.targets, this.random);
    const record = {
      mode: 'trusted',
      fingerprint: info.fingerprint,
      queryId: info.queryId,
      cell: cell.toString(),
      pseudonym: hex(this.random.bytes(ID_BYTES)),
      reportIds: answers.map(() => hex(this.random.bytes(ID_BYTES))),
      answers: answers.map(hex),
      acked: answers.map(() => false),
      tokens: answers.map(() => ''),
    };
    this.state.queries[info.queryId] = record;
    this.state.save();
    return record;
  }

  /**
   * Two-aggregator mode: upload this device's report for a secure query once, to the leader.
   * helperConfig: the helper's own HPKE config (from the helper, or pinned); scheme: the
   * collection's location scheme ({kind: 'grid'} or {kind: 'h3', resolution}).
   */
  async uploadSecure(leader, queryId, { helperConfig, scheme }) {
    const outcome = (s, extra = {}) => ({ queryId, status: s, ...extra });
    let query;
    try {
      ({ value: query } = await this.#call(() => unary(leader, 'GetSecureQuery', { query_id: queryId })));
    } catch (err) {
      return outcome('failed', { code: statusName(err.code), message: err.details });
    }
    let info;
    try {
      info = secureQueryInfo(query, helperConfig);
    } catch (err) {
      if (err instanceof Refused) return outcome('refused', { message: err.message });
      throw err;
    }
    if (!info.open) return outcome('refused', { message: 'the query is not open' });
    const print = fingerprint(info.mechanism, `${scheme.kind}:${scheme.resolution ?? ''}`, info.targets);
    const keys = hex(info.leader) + hex(info.helper);
    let record = this.state.queries[queryId];
    if (record && record.fingerprint !== print) {
      return outcome('refused', { message: 'the query changed its public parameters since the draw' });
    }
    if (!record) {
      const cell = locate(scheme, this.lat, this.lon);
      const answers = draw(info.mechanism, cell, info.targets, this.random);
      record = { mode: 'secure', fingerprint: print, cell: cell.toString(), answers: answers.map(hex), reportId: hex(this.random.bytes(ID_BYTES)), sealedFor: '', report: '', token: '', acked: false };
    }
    if (record.acked) return outcome('already_acknowledged');
    if (record.sealedFor !== keys) {
      // First sealing, or the aggregators' keys changed before any upload was stored
      // (WRONG_CONFIG_ID): the same draw and report id, sealed to the keys in force.
      const answers = record.answers.map((a) => Buffer.from(a, 'hex'));
      record.report = hex((await sealDraw(info, answers, Buffer.from(record.reportId, 'hex'))).report);
      record.sealedFor = keys;
    }
    this.state.queries[queryId] = record;
    this.state.save();
    if (info.requireTokens && !record.token) {
      if (!this.tokens) return outcome('failed', { code: 'UNAUTHENTICATED', message: 'no issuer for a query that requires tokens' });
      record.token = hex(await this.tokens(info, info.uploadRound));
      this.state.save();
    }
    const request = { reports: [Buffer.from(record.report, 'hex')], tokens: record.token ? [Buffer.from(record.token, 'hex')] : [] };
    try {
      const { value, attempts } = await this.#call(() => unary(leader, 'UploadSecureReports', request, { timeout: this.retry.rpcTimeout }));
      if (value.rejected.length) {
        const [rejection] = value.rejected;
        return outcome('failed', { code: statusName(rejection.code), message: rejection.message, attempts });
      }
      record.acked = true;
      this.state.save();
      return outcome(Number(value.duplicates) ? 'duplicate' : 'accepted', { attempts });
    } catch (err) {
      return outcome('failed', { code: statusName(err.code), message: err.details, attempts: err.attempts });
    }
  }

  async #call(fn) {
    return withRetry(fn, { policy: this.retry, wait: this.wait });
  }
}

export { status };
