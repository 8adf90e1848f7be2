// What each status means for the device's retry (docs/device-protocol.md, section 6), and
// a device's refusal of its own bad position.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import grpc from '@grpc/grpc-js';
import { Device } from '../src/device.mjs';
import { Refused } from '../src/errors.mjs';
import { DEFAULT_POLICY, NO_RETRY, nextDelay, pushbackSeconds, withRetry } from '../src/retry.mjs';

const { status } = grpc;

function failure(code, pushback, details = '') {
  const metadata = new grpc.Metadata();
  if (pushback !== undefined) metadata.set('grpc-retry-pushback-ms', pushback);
  return Object.assign(new Error(details), { code, details, metadata });
}

test('transient statuses are retried; permanent ones are not', () => {
  for (const code of [status.UNAVAILABLE, status.DEADLINE_EXCEEDED, status.RESOURCE_EXHAUSTED]) {
    assert.notEqual(nextDelay(DEFAULT_POLICY, 1, failure(code)), null);
  }
  for (const code of [status.INVALID_ARGUMENT, status.ALREADY_EXISTS, status.FAILED_PRECONDITION, status.NOT_FOUND, status.PERMISSION_DENIED, status.UNAUTHENTICATED]) {
    assert.equal(nextDelay(DEFAULT_POLICY, 1, failure(code)), null);
  }
  assert.notEqual(nextDelay(DEFAULT_POLICY, 1, failure(status.INTERNAL, undefined, 'Internal error from Core')), null);
  assert.equal(nextDelay(DEFAULT_POLICY, 1, failure(status.INTERNAL, undefined, 'unexpected')), null);
  assert.equal(nextDelay(DEFAULT_POLICY, DEFAULT_POLICY.maxAttempts, failure(status.UNAVAILABLE)), null);
});

test('the pushback hint sets the least wait; negative or malformed means no retry', () => {
  assert.equal(pushbackSeconds(failure(status.RESOURCE_EXHAUSTED, '1500')), 1.5);
  assert.equal(pushbackSeconds(failure(status.RESOURCE_EXHAUSTED, '-1')), NO_RETRY);
  assert.equal(pushbackSeconds(failure(status.RESOURCE_EXHAUSTED, 'soon')), NO_RETRY);
  assert.equal(pushbackSeconds(failure(status.RESOURCE_EXHAUSTED)), null);
  for (const r of [0, 0.5, 0.999]) {
    const wait = nextDelay(DEFAULT_POLICY, 1, failure(status.RESOURCE_EXHAUSTED, '1500'), () => r);
    assert.ok(wait >= 1.5 && wait <= 1.5 * 1.2, `${wait}`);
  }
  assert.equal(nextDelay(DEFAULT_POLICY, 1, failure(status.RESOURCE_EXHAUSTED, '-1')), null);
});

test('backoff grows to its cap, and withRetry stops at a permanent error', async () => {
  const waits = [1, 2, 3, 4, 5, 6, 7].map((k) => nextDelay(DEFAULT_POLICY, k, failure(status.UNAVAILABLE), () => 0.5));
  assert.deepEqual(waits, [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0]);
  const codes = [status.UNAVAILABLE, status.RESOURCE_EXHAUSTED, status.ALREADY_EXISTS];
  const slept = [];
  await assert.rejects(
    withRetry(async () => { throw failure(codes.shift(), '10'); }, { wait: async (s) => slept.push(s) }),
    (err) => err.code === status.ALREADY_EXISTS && err.attempts === 3,
  );
  assert.equal(slept.length, 2);
});

test('a device refuses its own position when it is not a place', () => {
  for (const [lat, lon] of [[91, 0], [0, 181], [Number.NaN, 0], ['48', 2]]) {
    assert.throws(() => new Device({ statePath: '/nonexistent/state.json', lat, lon }), Refused);
  }
});
