/**
 * SIGINT and SIGTERM sent to the real CLI in child processes, at a point each command has reached (it said so on
 * stderr): every command ends with 130 or 143, leaves no temporary folder, and writes either no output file or one
 * marked interrupted. The waits below are deadlines against a hang, not timings.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { serializeSafetensors } from '../formats/safetensors.js';
import { writeRankTraces } from '../testing/rank-traces.js';

const CLI = fileURLToPath(new URL('../cli.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'gpumem-signals-'));
after(() => rmSync(dir, { recursive: true, force: true }));

interface Stopped {
  code: number | null;
  signal: NodeJS.Signals | null;
  out: string;
  err: string;
  /** What the child left in its own temporary folder. */
  left: string[];
}

/** Runs the CLI with its own TMPDIR; once its stderr or stdout matches `when`, sends `signal`; answers how it ended. */
function stopWhen(args: string[], when: RegExp, signal: 'SIGINT' | 'SIGTERM'): Promise<Stopped> {
  const tmp = mkdtempSync(join(dir, 'tmp-'));
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TMPDIR: tmp, GPUMEM_BACKEND: 'host' } });
  let out = '';
  let err = '';
  let sent = false;
  const check = (): void => {
    if (!sent && (when.test(err) || when.test(out))) {
      sent = true;
      child.kill(signal);
    }
  };
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    check();
  });
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
    check();
  });
  const hang = setTimeout(() => child.kill('SIGKILL'), 120_000);
  return new Promise((resolve) =>
    child.on('exit', (code, sig) => {
      clearTimeout(hang);
      assert.ok(sent, `the command ended before it reached ${when}:\n${err}`);
      resolve({ code, signal: sig, out, err, left: readdirSync(tmp) });
    }),
  );
}

test('bench --html stopped by SIGTERM while its transfer files exist: 143, no gpumem-bench folder left, the page marked interrupted', {
  timeout: 180_000,
}, async () => {
  const page = join(dir, 'bench.html');
  const r = await stopWhen(['bench', '--quick', '--only', 'transfer', '--html', page], /writing a 16 MiB file in/, 'SIGTERM');
  assert.equal(r.code, 143, r.err);
  assert.deepEqual(r.left, [], 'the temporary folders are gone');
  if (existsSync(page)) assert.match(readFileSync(page, 'utf8'), /data-interrupted="true"[^>]*><strong>INTERRUPTED:/);
  else assert.doesNotMatch(r.err, /wrote /, 'no page, and none said to be written');
});

test('report --html stopped by Ctrl-C: 130, and a page written is marked interrupted', { timeout: 180_000 }, async () => {
  const page = join(dir, 'report.html');
  const r = await stopWhen(['report', '--html', page], /\] copies: 65536 bytes/, 'SIGINT');
  assert.equal(r.code, 130, r.err);
  assert.match(r.err, /every allocation was freed/);
  if (existsSync(page)) assert.match(readFileSync(page, 'utf8'), /<strong>INTERRUPTED:<\/strong>/);
  else assert.doesNotMatch(r.err, /wrote /);
  assert.deepEqual(r.left, []);
});

test('load-weights --verify stopped by Ctrl-C: 130, nothing reported as loaded or verified', { timeout: 180_000 }, async () => {
  const file = join(dir, 'big.safetensors');
  const tensors = Array.from({ length: 32 }, (_, i) => ({ name: `t${i}`, dtype: 'F32' as const, shape: [2 ** 21], data: new Uint8Array(2 ** 23).fill(i) }));
  writeFileSync(file, serializeSafetensors(tensors));
  const r = await stopWhen(['load-weights', file, '--verify'], /verifying 256/, 'SIGINT');
  assert.equal(r.code, 130, r.err);
  assert.equal(r.out, '', 'no table of a load that was stopped');
  assert.match(r.err, /every allocation was freed/);
});

test('analyze of a folder of ranks, stopped by SIGTERM while its workers read: 143 at once', { timeout: 180_000 }, async () => {
  const ranks = join(dir, 'ranks');
  mkdirSync(ranks);
  writeRankTraces(ranks, 6);
  const r = await stopWhen(['analyze', ranks, '--progress', '--workers', '1'], /analysed 1 of 6 ranks/, 'SIGTERM');
  assert.equal(r.code, 143, r.err);
  assert.equal(r.out, '');
});

test('monitor and plan --serve stopped by a signal: 130 and 143', { timeout: 180_000 }, async () => {
  const m = await stopWhen(['monitor', '--serve', '--port', '0'], /dashboard http/, 'SIGINT');
  assert.equal(m.code, 130, m.err);
  const mj = await stopWhen(['monitor', '--json', '--interval', '0.2'], /gpumem\.monitor/, 'SIGTERM');
  assert.equal(mj.code, 143, mj.err);
  const p = await stopWhen(['plan', '--model', 'gpt-2', '--serve', '--port', '0'], /plan page is at http/, 'SIGTERM');
  assert.equal(p.code, 143, p.err);
});
