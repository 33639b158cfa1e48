/**
 * The facade's own behaviour on the host backend: what a wrong kind of argument is told (a JS buffer handed to
 * rt.copy or copyBatch), that the facade is the core with transfers on top (lower layers type against the core),
 * and what it decides from the backend's capabilities (never from its name).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, GpuError } from '../errors.js';
import type { Backend, HostCopier } from '../backend/backend.js';
import { createHostBackend } from '../backend/host/host-backend.js';
import { MemoryRuntime } from '../memory/runtime.js';
import { openRuntime, Runtime } from './runtime.js';

const MiB = 2 ** 20;

test('a JS typed array given to rt.copy or copyBatch is described briefly and the message points to rt.upload / rt.download', () => {
  using rt = openRuntime({ backend: 'host', host: { devices: 1, deviceBytes: 256 * MiB } });
  const gpu = rt.device(0);
  using dst = gpu.alloc(64 * MiB);
  using s = gpu.createStream();
  const big = new Float32Array(16 * MiB);
  const checks: Array<[() => unknown, string]> = [
    [() => rt.copy(dst, big as unknown as number), 'copy source'],
    [() => rt.copy(big as unknown as number, dst), 'copy destination'],
    [() => rt.copyBatch([{ dst, src: big as unknown as number }], { stream: s }), 'copyBatch: copy 0'],
    [() => rt.prepareCopy(dst, new DataView(new ArrayBuffer(64)) as unknown as number), 'copy source'],
  ];
  for (const [call, where] of checks) {
    assert.throws(call, (e: unknown) => {
      assert.ok(e instanceof GpuError, String(e));
      assert.equal(e.code, ErrorCode.INVALID_ARGUMENT, 'not an address at all: not FOREIGN_ADDRESS');
      assert.ok(e.message.length < 300, `a short message (${e.message.length} characters)`);
      assert.ok(e.message.includes(where), e.message);
      assert.match(e.message, /rt\.upload \/ rt\.download/);
      return true;
    });
  }
  assert.throws(
    () => rt.copy(dst, big as unknown as number),
    (e: unknown) => e instanceof GpuError && e.message.includes(`a Float32Array of ${16 * MiB} elements (${64 * MiB} bytes)`),
  );
  // Something that is neither a buffer nor an address: described, with no advice about uploads.
  assert.throws(
    () => rt.copy(dst, 'x'.repeat(10_000) as unknown as number),
    (e: unknown) => e instanceof GpuError && e.message.includes('a string of 10000 characters') && !e.message.includes('rt.upload'),
  );
  // A number that is not an address keeps its code.
  assert.throws(
    () => rt.copy(dst, -4096),
    (e: unknown) => e instanceof GpuError && e.code === ErrorCode.FOREIGN_ADDRESS,
  );
});

test('the facade is the core runtime with the transfer engine on top', () => {
  using rt = openRuntime({ backend: 'host' });
  assert.ok(rt instanceof Runtime);
  assert.ok(rt instanceof MemoryRuntime);
  assert.equal(typeof rt.upload, 'function');
  assert.equal('upload' in MemoryRuntime.prototype, false, 'the core knows nothing of transfers');
});

test("the first transfer pins only the ring slots it uses; warm() pins the whole ring in the background, not counted as the program's memory", async () => {
  const KiB = 1024;
  using rt = openRuntime({ backend: 'host', host: { devices: 1, deviceBytes: 256 * MiB } });
  using dst = rt.device(0).alloc(64 * KiB);
  const st = rt.defaultStager(0);
  assert.equal(st.ring.size, 0, 'nothing pinned by an allocation');
  await rt.upload(dst, new Uint8Array(16 * KiB), { path: 'staged' });
  assert.equal(st.ring.size, 1, 'one slot pinned for a one-chunk transfer, not the ring');
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(st.ring.size, 1, 'nor later, without warming');
  st.warm();
  for (let i = 0; i < 100 && st.ring.size < st.depth; i++) await new Promise((r) => setImmediate(r));
  assert.equal(st.ring.size, st.depth, 'the whole ring pinned on idle turns');
  assert.equal(rt.liveMemory().pinned.count, 0, "the engine's ring is not the program's memory");
});

test('with warmTransfers the first device allocation on a device pins its ring in the background; other devices and pinned memory start nothing', async () => {
  const KiB = 1024;
  using rt = openRuntime({ backend: 'host', warmTransfers: true, host: { devices: 2, deviceBytes: 256 * MiB } });
  const idle = async (): Promise<void> => {
    for (let i = 0; i < 100; i++) await new Promise((r) => setImmediate(r));
  };
  using pinned = rt.allocPinned(64 * KiB);
  await idle();
  assert.equal(rt.defaultStager(0).ring.size, 0, 'pinned memory is no upload destination: nothing warmed');
  using dst = rt.device(1).alloc(64 * KiB);
  const st = rt.defaultStager(1);
  await idle();
  assert.equal(st.ring.size, st.depth, "device 1's whole ring pinned after its first allocation");
  assert.equal(rt.defaultStager(0).ring.size, 0, 'device 0 had no allocation: its ring stays empty');
  assert.equal(rt.liveMemory().pinned.count, 1, "the ring is not the program's memory; the program's own pinned block is");
  const r = await rt.upload(dst, new Uint8Array(16 * KiB).fill(7));
  assert.equal(r.bytes, 16 * KiB);
  assert.equal(pinned.bytes, 64 * KiB);
});

test('with warmTransfers and one device the ring pins as the runtime opens, before any allocation', async () => {
  using rt = openRuntime({ backend: 'host', warmTransfers: true, host: { devices: 1, deviceBytes: 256 * MiB } });
  const st = rt.defaultStager(0);
  for (let i = 0; i < 100 && st.ring.size < st.depth; i++) await new Promise((r) => setImmediate(r));
  assert.equal(st.ring.size, st.depth, 'the whole ring pinned with no allocation made');
  assert.equal(rt.liveMemory().pinned.count, 0, "the ring is not the program's memory");
});

test("without warmTransfers (the host backend's default) an allocation pins nothing", async () => {
  using rt = openRuntime({ backend: 'host', host: { devices: 1, deviceBytes: 256 * MiB } });
  using _dst = rt.device(0).alloc(1024);
  for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
  assert.equal(rt.defaultStager(0).ring.size, 0);
});

/** A host backend that says it has (or not) copier threads of its own, counting the copiers made. */
function backendWithThreads(threads: boolean): { backend: Backend; made: HostCopier[] } {
  const host = createHostBackend({ devices: 2, deviceBytes: 256 * MiB });
  const made: HostCopier[] = [];
  const backend: Backend = Object.create(host, {
    capabilities: { value: Object.freeze({ ...host.capabilities, hostCopierThreads: threads }) },
    createHostCopier: {
      value: (n: number) => {
        const c = host.createHostCopier(n);
        made.push(c);
        return c;
      },
    },
  });
  return { backend, made };
}

test('a backend whose copier has threads of its own: the runtime starts one copier as it opens and every device shares it', () => {
  const { backend, made } = backendWithThreads(true);
  using rt = new Runtime({ backend, how: 'requested', attempts: [] });
  assert.equal(made.length, 1, 'started with the runtime (warmTransfers defaults on)');
  assert.equal(rt.defaultStager(0).copier(), made[0]);
  assert.equal(rt.defaultStager(1).copier(), made[0], 'shared by the stagers of both devices');
  assert.equal(made.length, 1);
});

test('a backend whose copier copies on the JS thread: nothing starts with the runtime, each stager makes its own', () => {
  const { backend, made } = backendWithThreads(false);
  using rt = new Runtime({ backend, how: 'requested', attempts: [] });
  assert.equal(made.length, 0, 'warmTransfers defaults off');
  const a = rt.defaultStager(0).copier();
  const b = rt.defaultStager(1).copier();
  assert.notEqual(a, b);
  assert.equal(made.length, 2);
});

test('loadSafetensors reads through rt.uploadFile: a checkpoint cut during the read is refused as truncated, nothing left behind', async () => {
  const { mkdtempSync, rmSync, truncateSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { serializeSafetensors } = await import('../formats/safetensors.js');
  const { loadSafetensors } = await import('./safetensors.js');
  const { holdDeviceCopy } = await import('../transfer/hold.js');
  const { SafetensorsError } = await import('../formats/safetensors.js');
  const { openFds } = await import('../testing/harness.js');
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-st-'));
  try {
    using rt = openRuntime({ backend: 'host', host: { devices: 1, deviceBytes: 256 * MiB } });
    const tensors = Array.from({ length: 8 }, (_, i) => ({ name: `t${i}`, dtype: 'U8' as const, shape: [3 << 20], data: new Uint8Array(3 << 20).fill(i + 1) }));
    const p = join(dir, 'model.safetensors');
    writeFileSync(p, serializeSafetensors(tensors));
    {
      using whole = await loadSafetensors(p, rt.device(0));
      assert.equal(whole.tensors.size, 8, 'read whole through the default mover');
    }
    // The engine's first device copy waits while the file is cut: the reads after it find the end early.
    const fds = openFds();
    const hold = holdDeviceCopy(rt.defaultStager(0), 1);
    const loading = loadSafetensors(p, rt.device(0));
    await hold.reached;
    truncateSync(p, 5 << 20);
    hold.release();
    await assert.rejects(loading, (e: unknown) => {
      assert.ok(e instanceof SafetensorsError, String(e));
      assert.equal(e.problem, 'truncated');
      assert.match(e.message, /ended at byte 5242880\b/);
      return true;
    });
    assert.equal(rt.liveMemory().device.count, 0, 'the loader freed its allocation');
    assert.equal(openFds(), fds, 'no descriptor left open');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
