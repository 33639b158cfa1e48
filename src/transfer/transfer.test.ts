/**
 * The transfer engine's conformance suite on every backend with a device, and what only the host backend can show: a
 * runtime call that fails in the middle of a staged transfer (injected into a real host backend).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, GpuError } from '../errors.js';
import type { Backend } from '../backend/backend.js';
import { createHostBackend } from '../backend/host/host-backend.js';
import { openRuntime, Runtime } from '../runtime/runtime.js';
import { forEachGpuBackend } from '../testing/harness.js';
import { fileConformance } from './file.case.js';
import { manyConformance } from './many.case.js';
import { pattern, transferConformance } from './transfer.case.js';

const KiB = 1024;

const openHost = () => openRuntime({ backend: 'host', host: { devices: 1, deviceBytes: 1 << 30 } });
transferConformance('host', openHost);
manyConformance('host', openHost);
fileConformance('host', openHost);

await forEachGpuBackend('transfer conformance', (name, open) => {
  transferConformance(name, open);
  manyConformance(name, open);
  fileConformance(name, open);
});

test('a failing step rejects with the runtime error, waits for what was in flight, and the ring serves the next transfer', async () => {
  const host = createHostBackend();
  let copies = 0;
  let failAt = -1;
  const faulty: Backend = Object.create(host, {
    memcpyAsync: {
      value: (...args: Parameters<Backend['memcpyAsync']>) => {
        if (++copies === failAt) throw new GpuError(ErrorCode.NATIVE, 'injected: hostMemcpyAsync failed', { backend: 'host' });
        return host.memcpyAsync(...args);
      },
    },
  });
  using rt = new Runtime({ backend: faulty, how: 'requested', attempts: [] });
  const gpu = rt.device(0);
  using st = rt.createStager({ chunkBytes: 8 * KiB, depth: 2, threads: 1, directBelow: 0 });
  using dst = gpu.alloc(256 * KiB);
  copies = 0;
  failAt = 5;
  await assert.rejects(st.upload(dst, pattern(256 * KiB, 1)), /injected: hostMemcpyAsync failed/);
  assert.equal(dst.busy, false, 'the destination is released');
  failAt = -1;
  const src = pattern(256 * KiB, 2);
  await st.upload(dst, src);
  const out = new Uint8Array(256 * KiB);
  await st.download(out, dst);
  assert.deepEqual(out, src);
});

test('the default stager shape follows the machine: all cores but a quarter (at most 12), 8 MiB chunks, 8 deep', async () => {
  const { transferDefaults } = await import('./defaults.js');
  const GiB = 2 ** 30;
  assert.deepEqual(
    [2, 4, 8, 16, 64].map((c) => transferDefaults(c, 128 * GiB).threads),
    [1, 3, 6, 12, 12],
  );
  const d = transferDefaults(16, 128 * GiB);
  assert.equal(d.chunkBytes, 8 * 2 ** 20);
  assert.equal(d.depth, 8);
  assert.equal(d.pinnedBudgetBytes, 4096 * 2 ** 20);
  assert.equal(transferDefaults(16, 2 * GiB).pinnedBudgetBytes, 128 * 2 ** 20, 'a sixteenth of a small machine');
});

test('Ctrl-C during file uploads stops cleanly: the transfer rejects with ABORTED, descriptors are closed, the process exits 130', async () => {
  const { spawn } = await import('node:child_process');
  const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-sigint-'));
  try {
    const file = join(dir, 'weights.bin');
    writeFileSync(file, new Uint8Array(32 << 20).fill(7));
    // A program that uploads the file in a loop and turns Ctrl-C into an abort of its transfers, as a CLI does.
    const program = `
      import { openRuntime } from ${JSON.stringify(new URL('../index.js', import.meta.url).href)};
      import { readdirSync, readlinkSync } from 'node:fs';
      // Descriptors open on the file (Node itself opens others lazily, /dev/null at the first signal).
      const fds = () => readdirSync('/proc/self/fd').filter((f) => { try { return readlinkSync('/proc/self/fd/' + f).startsWith(${JSON.stringify(file)}); } catch { return false; } }).length;
      const rt = openRuntime({ backend: 'host', host: { devices: 1, deviceBytes: 64 << 20 } });
      const dst = rt.device(0).alloc(32 << 20);
      const ac = new AbortController();
      process.on('SIGINT', () => ac.abort());
      const before = fds();
      let rounds = 0;
      try {
        for (;;) {
          await rt.uploadFile(dst, ${JSON.stringify(file)}, { signal: ac.signal });
          if (++rounds === 1) console.log('running');
        }
      } catch (e) {
        console.log(JSON.stringify({ code: e.code, leaked: fds() - before, rounds }));
        rt[Symbol.dispose]();
        process.exit(130);
      }`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', program], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('running')) resolve();
      });
      child.once('exit', () => reject(new Error(`the program ended before it ran: ${err}`)));
    });
    child.kill('SIGINT');
    const exitCode = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    assert.equal(exitCode, 130, err);
    const last = JSON.parse(out.trim().split('\n').pop() ?? '{}') as { code?: string; leaked?: number };
    assert.equal(last.code, ErrorCode.ABORTED);
    assert.equal(last.leaked, 0, 'no descriptor left open on the file');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
