/**
 * What a new user runs into: a profiler's output folder, an unwritable --html path, two recordings of one run,
 * a device the trace does not hold, a served monitor told to stop. Each is answered plainly, before the work.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runCli } from '../testing/harness.js';

const fixture = (p: string): string => fileURLToPath(new URL(`../../fixtures/${p}`, import.meta.url));
const cli = fileURLToPath(new URL('../cli.js', import.meta.url));

test('analyze DIR reads the trace files a profiler wrote into a folder (rocprofv3 -d DIR), as the files given one by one', async () => {
  const dir = fixture('traces/rocprofv3-naive');
  const byDir = await runCli(['analyze', dir, '--json']);
  assert.equal(byDir.code, 0, byDir.err);
  const files = readdirSync(dir).map((f) => join(dir, f));
  const byFiles = await runCli(['analyze', ...files, '--json']);
  assert.equal(byFiles.code, 0, byFiles.err);
  const a = JSON.parse(byDir.out) as { findings: Array<{ rule: string; count: number }>; summary: { copies: unknown } };
  const b = JSON.parse(byFiles.out) as typeof a;
  assert.deepEqual(
    a.findings.map((f) => [f.rule, f.count]),
    b.findings.map((f) => [f.rule, f.count]),
  );
  assert.ok(a.findings.length > 0);
});

test('two profilers’ recordings of one run are refused (they would double every count and mix clocks)', async () => {
  const r = await runCli(['analyze', fixture('traces/pytorch-cuda-naive.pt.trace.json.gz'), fixture('traces/rocprofv3-naive.json.gz')]);
  assert.equal(r.code, 2, r.err);
  assert.match(r.err, /profiler traces in 2 formats \(kineto: .*; rocprofv3-json: .*\).*analyze one format at a time/);
});

test('--html to a path that cannot be written fails at once with exit code 2, before any work', async () => {
  for (const args of [
    ['analyze', fixture('traces/pytorch-cuda-naive.pt.trace.json.gz')],
    ['bench', '--backend', 'host', '--quick'],
    ['report', '--backend', 'host'],
    ['plan', '--model', 'llama-2-7b'],
  ]) {
    const r = await runCli([...args, '--html', '/nonexistent-folder/out.html']);
    assert.equal(r.code, 2, `${args[0]}: ${r.err}`);
    assert.match(r.err, /--html \/nonexistent-folder\/out\.html: cannot write there \(no such file or folder\)/);
    assert.doesNotMatch(r.err, /copies:|reading /, `${args[0]} did no work first`);
  }
  const folder = await runCli(['plan', '--model', 'llama-2-7b', '--html', fixture('traces')]);
  assert.equal(folder.code, 2);
  assert.match(folder.err, /is a folder; give a file name/);
  // a file used as a folder is named as such, not as a permission problem
  const underFile = await runCli(['plan', '--model', 'llama-2-7b', '--html', join(fixture('plan/measured-peaks.json'), 'out.html')]);
  assert.equal(underFile.code, 2);
  assert.match(underFile.err, /cannot write there \(a part of the path is a file, not a folder\)/);
});

test('pool replay --device N on a trace without that device is refused, naming the devices it has', async () => {
  for (const trace of ['snapshots/gpt2-train.snapshot.json.gz', 'pool/rmm-log.csv']) {
    const r = await runCli(['pool', 'replay', fixture(trace), '--device', '5']);
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, /device 5.*(it has: 0|of device 0 only)/);
  }
});

test('monitor --serve --count N stops by itself after N samples', () => {
  const r = spawnSync(process.execPath, [cli, 'monitor', '--backend', 'host', '--serve', '--port', '0', '--count', '2', '--interval', '0.2'], {
    encoding: 'utf8',
    timeout: 20_000,
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /dashboard http:\/\/127\.0\.0\.1:\d+\/ .*stops after 2 sample\(s\)/);
});

test('a path the file system refuses exits 2 whichever command meets it, before or after the work', async () => {
  const { exitCodeFor } = await import('./errors.js');
  const errno = (code: string): NodeJS.ErrnoException => Object.assign(new Error(`${code}: x`), { code, path: '/x' });
  for (const code of ['EACCES', 'EPERM', 'ENOENT', 'ENOTDIR', 'EISDIR', 'EROFS']) assert.equal(exitCodeFor(errno(code)), 2, code);
  assert.equal(exitCodeFor(errno('EIO')), 1, 'a device error is a failure, not bad input');
  assert.equal(exitCodeFor(new Error('boom')), 1);
  // the same unreadable path read by two commands: the same code and the same words
  const missing = '/nonexistent-folder/trace.json';
  const a = await runCli(['analyze', missing]);
  const b = await runCli(['pool', 'replay', missing]);
  assert.equal(a.code, 2);
  assert.equal(b.code, 2);
});
