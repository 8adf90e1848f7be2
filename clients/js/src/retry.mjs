// What each gRPC status means for a device, and retrying with the server's pushback hint
// (docs/device-protocol.md, section 6).
import grpc from '@grpc/grpc-js';

const { status } = grpc;
export const TRANSIENT = new Set([status.UNAVAILABLE, status.DEADLINE_EXCEEDED, status.RESOURCE_EXHAUSTED]);
const CLIENT_CORE_FAILURE = 'Internal error from Core';
export const NO_RETRY = -1;

export const DEFAULT_POLICY = Object.freeze({
  maxAttempts: 8,
  initialBackoff: 0.05,
  maxBackoff: 2.0,
  multiplier: 2.0,
  jitter: 0.2,
  rpcTimeout: 10.0,
});

export function isRetryable(err) {
  if (TRANSIENT.has(err.code)) return true;
  return err.code === status.INTERNAL && String(err.details ?? '').startsWith(CLIENT_CORE_FAILURE);
}

/** The server's hint in seconds; null without one; NO_RETRY when it forbids retrying. */
export function pushbackSeconds(err) {
  const values = err.metadata?.get?.('grpc-retry-pushback-ms') ?? [];
  if (values.length === 0) return null;
  const text = String(values[0]).trim();
  if (!/^-?\d+$/.test(text)) return NO_RETRY;
  const millis = Number.parseInt(text, 10);
  return millis < 0 ? NO_RETRY : millis / 1000;
}

/** The wait before retry `k` (1-based), or null: no retry. */
export function nextDelay(policy, k, err, random = Math.random) {
  if (!isRetryable(err) || k >= policy.maxAttempts) return null;
  const base = Math.min(policy.maxBackoff, policy.initialBackoff * policy.multiplier ** (k - 1));
  const backoff = Math.max(0, base * (1 + policy.jitter * (2 * random() - 1)));
  const hint = pushbackSeconds(err);
  if (hint === null) return backoff;
  if (hint === NO_RETRY) return null;
  return Math.max(backoff, hint * (1 + policy.jitter * random()));
}

export const sleep = (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));

/** Run `call()` (a promise), retrying what may be retried; the last error is thrown with
 * `attempts` set. */
export async function withRetry(call, { policy = DEFAULT_POLICY, wait = sleep, onRetry } = {}) {
  for (let attempt = 1; ; attempt++) {
    try {
      return { value: await call(), attempts: attempt };
    } catch (err) {
      const delay = err.code === undefined ? null : nextDelay(policy, attempt, err);
      if (delay === null) {
        err.attempts = attempt;
        throw err;
      }
      onRetry?.(attempt, err, delay);
      await wait(delay);
    }
  }
}

/** A unary call on a grpc-js client as a promise. */
export function unary(client, method, request, { timeout = 10, metadata } = {}) {
  return new Promise((resolve, reject) => {
    const deadline = new Date(Date.now() + timeout * 1000);
    const args = metadata ? [request, metadata, { deadline }] : [request, { deadline }];
    client[method](...args, (err, response) => (err ? reject(err) : resolve(response)));
  });
}

export const statusName = (code) => Object.keys(status).find((k) => status[k] === code) ?? `CODE_${code}`;
