// `ldpcollect serve` (trusted, leader, helper) and the Python CLI as child processes, for the
// live tests. The Python comes from LDPCOLLECT_PYTHON or the repository's .venv.
import { spawn, execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import grpc from '@grpc/grpc-js';
import { REPO } from './helpers.mjs';

export const ADMIN = 'js-admin-token';
export const PEER = 'js-peer-token';
export const PYTHON = process.env.LDPCOLLECT_PYTHON ?? path.join(REPO, '.venv', 'bin', 'python');

function env() {
  const out = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('LDPCOLLECT_')) out[k] = v;
  return { ...out, LDPCOLLECT_ADMIN_TOKEN: ADMIN, LDPCOLLECT_PEER_TOKEN: PEER, COLUMNS: '200' };
}

/** Start `ldpcollect [COMMAND] serve ARGS`; resolves with {address, proc} once it prints its ready line. */
export function serve(args, readyPrefix = 'ldpcollect aggregator serving on ', command = []) {
  const words = command.length ? [...command, 'serve'] : ['serve'];
  const proc = spawn(PYTHON, ['-m', 'ldpcollect_cli.main', ...words, ...args], { cwd: REPO, env: env() });
  let stderr = '';
  proc.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve, reject) => {
    let buffered = '';
    const onData = (chunk) => {
      buffered += chunk;
      const line = buffered.split('\n').find((l) => l.startsWith(readyPrefix));
      if (line) {
        proc.stdout.off('data', onData);
        proc.stdout.resume();
        resolve({ address: line.slice(readyPrefix.length).split(' ')[0], proc });
      }
    };
    proc.stdout.on('data', onData);
    proc.on('exit', (code) => reject(new Error(`serve exited ${code}: ${buffered}${stderr}`)));
  });
}

/** SIGTERM and wait for the exit code. */
export function stop(proc) {
  return new Promise((resolve) => {
    if (proc.exitCode !== null) return resolve(proc.exitCode);
    proc.removeAllListeners('exit');
    proc.on('exit', (code) => resolve(code));
    proc.kill('SIGTERM');
  });
}

/** Run `ldpcollect ARGS`; resolves with stdout (rejects with stderr on failure). */
export async function cli(...args) {
  const { stdout } = await promisify(execFile)(PYTHON, ['-m', 'ldpcollect_cli.main', ...args], {
    cwd: REPO,
    env: env(),
    maxBuffer: 64 << 20,
    timeout: 300_000,
  });
  return stdout;
}

export const adminMetadata = (token = ADMIN) => {
  const m = new grpc.Metadata();
  m.set('authorization', `Bearer ${token}`);
  return m;
};

export const tmpdir = (label) => fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', `ldpcollect-js-${label}-`));

/** The collector's HPKE key file (config id byte || X25519 private key, 0600, as the Python
 * CLI reads it); returns its config (config id || public key). */
export function makeCollectorKey(file) {
  const { privateKey, publicKey } = generateKeyPairSync('x25519');
  const raw = (key) => Buffer.from(key.export({ format: 'jwk' })[key.type === 'private' ? 'd' : 'x'], 'base64url');
  const configId = 0x17;
  fs.writeFileSync(file, Buffer.concat([Buffer.from([configId]), raw(privateKey)]), { mode: 0o600 });
  return Buffer.concat([Buffer.from([configId]), raw(publicKey)]);
}

let budgetFlags;

/** `--no-budget` where this ldpcollect's `serve` (trusted, or leader) requires a budget
 * decision before releasing (the live tests release without one); nothing where it does not
 * know the option. */
export async function noBudget() {
  budgetFlags ??= (await cli('serve', '--help')).includes('--no-budget') ? ['--no-budget'] : [];
  return budgetFlags;
}

let secureFlag;

/** The Python CLI's release of a secure query as the collector: its estimates and views
 * (`release --secure` where the command has that flag; the one `release` tells the leader
 * apart itself otherwise). */
export async function releaseSecure(queryId, collectorKey, leaderAddress) {
  secureFlag ??= (await cli('release', '--help')).includes('--secure') ? ['--secure'] : [];
  const args = ['release', ...secureFlag, '--query', queryId, '--collector-key', collectorKey, '--server', leaderAddress, '--json'];
  const out = JSON.parse(await cli(...args));
  return { release: out.release ?? out, views: out.views };
}
