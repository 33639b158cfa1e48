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
import { pattern, transferConformance } from './transfer.case.js';

const KiB = 1024;

transferConformance('host', () => openRuntime({ backend: 'host', host: { devices: 1, deviceBytes: 1 << 30 } }));

await forEachGpuBackend('transfer conformance', (name, open) => transferConformance(name, open));

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
