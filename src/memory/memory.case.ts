/**
 * The memory conformance suite: one set of cases run against every backend (host always; cuda and hip where a
 * device is present). Each case checks behaviour through the public API only.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { ErrorCode, GpuError, OutOfMemoryError } from '../errors.js';
import { BENCH_KERNELS, patternWord } from '../kernels/bench-kernels.js';
import type { Allocation, MemoryKind } from './allocation.js';
import type { MemoryRuntime as Runtime } from './runtime.js';

/** Allocates one allocation of each kind the backend supports on device 0. */
export function allocEveryKind(rt: Runtime, bytes: number): Record<MemoryKind | 'registered', Allocation> {
  const d = rt.device(0);
  return {
    device: d.alloc(bytes),
    pinned: rt.allocPinned(bytes),
    mapped: rt.allocMapped(bytes),
    managed: d.allocManaged(bytes),
    pageable: rt.allocPageable(bytes),
    registered: rt.allocPageable(bytes, { register: true }),
  };
}

/** Writes `data` into any allocation through a pageable staging buffer. */
export function write(rt: Runtime, dst: Allocation, data: Uint8Array, offset = 0): void {
  if (dst.kind === 'pageable') {
    dst.view(offset, data.length).set(data);
    return;
  }
  using stage = rt.allocPageable(data.length);
  stage.view().set(data);
  rt.copy(dst, stage, { dstOffset: offset });
}

/** Reads `bytes` from any allocation through a pageable staging buffer. */
export function read(rt: Runtime, src: Allocation, offset = 0, bytes = src.bytes - offset): Uint8Array {
  using stage = rt.allocPageable(bytes);
  rt.copy(stage, src, { srcOffset: offset, bytes });
  return stage.view().slice();
}

function pattern(n: number, seed: number): Uint8Array {
  const a = new Uint8Array(n);
  for (let i = 0; i < n; i++) a[i] = (i * 31 + seed * 7 + (i >> 8)) & 0xff;
  return a;
}

function expectCode(fn: () => unknown, code: string): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof GpuError, `expected a GpuError, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    return true;
  });
}

/** Registers the suite for one backend. `open` returns a fresh runtime. */
export function memoryConformance(label: string, open: () => Runtime): void {
  const withRt = (name: string, fn: (rt: Runtime, t: TestContext) => Promise<void> | void): void => {
    test(`${label}: ${name}`, async (t) => {
      using rt = open();
      await fn(rt, t);
    });
  };

  withRt('allocates every kind with its address, size, kind and device', (rt) => {
    const all = allocEveryKind(rt, 4096);
    for (const [name, a] of Object.entries(all)) {
      assert.equal(a.bytes, 4096, name);
      assert.ok(Number.isSafeInteger(a.address) && a.address > 0, `${name} address`);
      assert.equal(a.disposed, false);
    }
    assert.equal(all.device.kind, 'device');
    assert.equal(all.device.device, 0);
    assert.equal(all.managed.device, 0);
    assert.equal(all.pinned.device, undefined);
    assert.ok(all.mapped.deviceAddress !== undefined, 'mapped memory has a device address');
    assert.equal(all.device.hostVisible, false);
    assert.equal(all.pinned.hostVisible, true);
    const live = rt.liveMemory();
    assert.equal(live.device.count, 1);
    assert.equal(live.pageable.count, 2);
    for (const a of Object.values(all)) a.free();
    assert.equal(rt.liveMemory().device.count, 0);
  });

  withRt('copies between every pair of kinds, synchronously and on a stream, and the bytes arrive', async (rt) => {
    const n = 64 * 1024 + 17;
    const src = allocEveryKind(rt, n);
    const dst = allocEveryKind(rt, n);
    const s = rt.device(0).createStream();
    let seed = 1;
    for (const [sk, sa] of Object.entries(src)) {
      for (const [dk, da] of Object.entries(dst)) {
        const data = pattern(n, seed++);
        write(rt, sa, data);
        rt.fill(da, 0);
        if (seed % 2 === 0) {
          rt.copy(da, sa, { stream: s });
          await s.synchronize();
        } else {
          rt.copy(da, sa);
        }
        assert.deepEqual(read(rt, da), data, `${sk} -> ${dk}`);
      }
    }
    s[Symbol.dispose]();
    for (const a of [...Object.values(src), ...Object.values(dst)]) a.free();
  });

  withRt('copies part of an allocation at offsets, and fills a range', (rt) => {
    const d = rt.device(0);
    using a = d.alloc(4096);
    using b = rt.allocPinned(4096);
    rt.fill(a, 0xab);
    rt.fill(a, 0x11, { offset: 100, bytes: 50 });
    b.view().fill(0);
    rt.copy(b, a, { srcOffset: 90, dstOffset: 1000, bytes: 100 });
    const v = b.view();
    assert.equal(v[999], 0);
    assert.equal(v[1000], 0xab);
    assert.equal(v[1009], 0xab);
    assert.equal(v[1010], 0x11);
    assert.equal(v[1059], 0x11);
    assert.equal(v[1060], 0xab);
    assert.equal(v[1099], 0xab);
    assert.equal(v[1100], 0);
    // A raw address inside an allocation is resolved to it.
    rt.copy(b.address + 8, a.address + 100, { bytes: 4 });
    assert.deepEqual([...b.view(8, 4)], [0x11, 0x11, 0x11, 0x11]);
  });

  withRt('rejects bad sizes, offsets and addresses with typed errors', (rt) => {
    const d = rt.device(0);
    for (const bad of [-1, 0, 1.5, NaN, Infinity, 2 ** 60]) expectCode(() => d.alloc(bad), ErrorCode.INVALID_SIZE);
    expectCode(() => rt.allocPinned(-4096), ErrorCode.INVALID_SIZE);
    expectCode(() => d.alloc('12' as unknown as number), ErrorCode.INVALID_SIZE);
    using a = d.alloc(1024);
    using b = d.alloc(1024);
    expectCode(() => rt.copy(a, b, { bytes: 1025 }), ErrorCode.OUT_OF_BOUNDS);
    expectCode(() => rt.copy(a, b, { dstOffset: 1000, bytes: 100 }), ErrorCode.OUT_OF_BOUNDS);
    expectCode(() => rt.copy(a, b, { srcOffset: -1 }), ErrorCode.OUT_OF_BOUNDS);
    expectCode(() => rt.copy(a, b, { srcOffset: 0.5 }), ErrorCode.OUT_OF_BOUNDS);
    expectCode(() => rt.fill(a, 256), ErrorCode.INVALID_ARGUMENT);
    expectCode(() => rt.fill(a, 1, { offset: 1024, bytes: 1 }), ErrorCode.OUT_OF_BOUNDS);
    expectCode(() => rt.copy(123, b), ErrorCode.FOREIGN_ADDRESS);
    expectCode(() => rt.copy(a, a.address + 4096 * 1024), ErrorCode.FOREIGN_ADDRESS);
    using p = rt.allocPinned(64);
    expectCode(() => p.view(60, 8), ErrorCode.OUT_OF_BOUNDS);
    expectCode(() => p.typed(Float64Array, 4, 1), ErrorCode.OUT_OF_BOUNDS);
    expectCode(() => a.view(), ErrorCode.INVALID_ARGUMENT);
    expectCode(() => d.allocManaged(d.memGetInfo().totalBytes + 1), ErrorCode.OUT_OF_MEMORY);
  });

  withRt('double free, use after free and dispose twice', (rt) => {
    const a = rt.device(0).alloc(256);
    const b = rt.allocPinned(256);
    a.free();
    expectCode(() => a.free(), ErrorCode.DOUBLE_FREE);
    expectCode(() => rt.copy(b, a), ErrorCode.DISPOSED);
    expectCode(() => rt.fill(a, 0), ErrorCode.DISPOSED);
    expectCode(() => rt.copy(b, a.address), ErrorCode.FOREIGN_ADDRESS);
    b[Symbol.dispose]();
    b[Symbol.dispose]();
    expectCode(() => b.view(), ErrorCode.DISPOSED);
    {
      using c = rt.allocPinned(128);
      assert.equal(c.disposed, false);
      assert.equal(rt.liveMemory().pinned.count, 1);
    }
    assert.equal(rt.liveMemory().pinned.count, 0);
  });

  withRt('an out-of-memory answer carries the request and the device memory', (rt) => {
    const d = rt.device(0);
    const { totalBytes } = d.memGetInfo();
    assert.throws(
      () => d.alloc(totalBytes + 4096),
      (e: unknown) => e instanceof OutOfMemoryError && e.requestedBytes === totalBytes + 4096 && e.totalBytes === totalBytes && e.device === 0,
    );
  });

  withRt('streams keep order; events time and order work across streams', async (rt) => {
    const d = rt.device(0);
    const n = 1 << 20;
    using a = rt.allocPinned(n);
    using b = d.alloc(n);
    using c = d.alloc(n);
    using out = rt.allocPinned(n);
    const data = pattern(n, 9);
    a.view().set(data);
    using s1 = d.createStream({ nonBlocking: true });
    using s2 = d.createStream({ priority: 0 });
    using start = d.createEvent();
    using done = d.createEvent();
    start.record(s1);
    rt.copy(b, a, { stream: s1 });
    done.record(s1);
    s2.waitEvent(done);
    rt.copy(c, b, { stream: s2 });
    rt.copy(out, c, { stream: s2 });
    await s2.synchronize();
    assert.deepEqual(out.view(), data);
    await done.synchronize();
    assert.equal(done.query(), true);
    assert.equal(s1.query(), true);
    const ms = done.elapsedSince(start);
    assert.ok(ms >= 0 && Number.isFinite(ms), `elapsed ${ms}`);
    using noTiming = d.createEvent({ timing: false });
    noTiming.record(s1);
    expectCode(() => noTiming.elapsedSince(start), ErrorCode.INVALID_ARGUMENT);
  });

  withRt('host callbacks run after the work before them', async (rt) => {
    const d = rt.device(0);
    using a = rt.allocPinned(4096);
    using b = d.alloc(4096);
    using back = rt.allocPinned(4096);
    a.view().fill(5);
    using s = d.createStream();
    rt.copy(b, a, { stream: s });
    rt.copy(back, b, { stream: s });
    const seen = await s.onHost(() => back.view()[4095]);
    assert.equal(seen, 5);
    if (rt.backend.capabilities.blockingHostCallbacks) {
      const order: string[] = [];
      const p = s.onHost(() => order.push('callback'), { blocking: true });
      await p;
      await s.synchronize();
      order.push('after');
      assert.deepEqual(order, ['callback', 'after']);
    }
  });

  withRt('waitSync blocks until the stream is done, and refuses to wait for a callback that needs this thread', async (rt) => {
    const d = rt.device(0);
    using a = rt.allocPinned(1 << 20);
    using b = d.alloc(1 << 20);
    using back = rt.allocPinned(1 << 20);
    a.view().fill(7);
    const s = d.createStream({ nonBlocking: true });
    rt.copy(b, a, { stream: s });
    rt.copy(back, b, { stream: s });
    s.waitSync();
    assert.equal(s.query(), true);
    assert.equal(back.view()[(1 << 20) - 1], 7);
    if (rt.backend.capabilities.blockingHostCallbacks) {
      const order: string[] = [];
      const p = s.onHost(() => order.push('callback'), { blocking: true });
      if (rt.backend.name === 'host') {
        s.waitSync(); // the host backend runs its own callbacks while it waits
        assert.deepEqual(order, ['callback']);
      } else {
        expectCode(() => s.waitSync(), ErrorCode.WOULD_DEADLOCK);
        assert.deepEqual(order, []);
      }
      await p;
      s.waitSync();
      assert.deepEqual(order, ['callback']);
    }
    s[Symbol.dispose]();
    expectCode(() => s.waitSync(), ErrorCode.DISPOSED);
  });

  withRt('managed memory: prefetch, advise, and host reads after synchronize', async (rt) => {
    const d = rt.device(0);
    using m = d.allocManaged(1 << 20);
    m.view().fill(3);
    using s = d.createStream();
    m.advise('read-mostly');
    m.advise('unset-read-mostly');
    m.advise('preferred-location', 0);
    m.advise('accessed-by', 0);
    m.prefetch(0, s);
    rt.fill(m, 7, { stream: s, offset: 10, bytes: 10 });
    m.prefetch('host', s);
    await s.synchronize();
    assert.equal(m.view()[9], 3);
    assert.equal(m.view()[10], 7);
    expectCode(() => m.prefetch(99), ErrorCode.INVALID_ARGUMENT);
  });

  withRt('memGetInfo: free memory drops by at least the allocation', (rt) => {
    const d = rt.device(0);
    const before = d.memGetInfo();
    assert.ok(before.freeBytes <= before.totalBytes);
    using a = d.alloc(64 << 20);
    const after = d.memGetInfo();
    assert.ok(before.freeBytes - after.freeBytes >= (64 << 20) - (2 << 20), `${before.freeBytes} -> ${after.freeBytes}`);
    assert.equal(a.bytes, 64 << 20);
  });

  withRt("memoryUse: the monitor's figures follow an allocation, and this process is listed where processes are", (rt) => {
    const d = rt.device(0);
    using a = d.alloc(256 << 20);
    const use = d.memoryUse();
    assert.ok(use.freeBytes <= use.totalBytes && use.usedBytes <= use.totalBytes, `used ${use.usedBytes}, free ${use.freeBytes}, total ${use.totalBytes}`);
    assert.ok(use.usedBytes >= a.bytes, `used ${use.usedBytes} holds the ${a.bytes}-byte allocation`);
    assert.ok(['nvml', 'amd-smi', 'rocm-smi', 'runtime', 'host'].includes(use.source));
    if (use.processes) {
      const me = use.processes.find((p) => p.pid === process.pid);
      // NVML inside a container may list host pids; where it lists ours, it holds at least the allocation.
      if (me?.usedBytes !== undefined) assert.ok(me.usedBytes >= a.bytes, `this process holds ${me.usedBytes}`);
      if (use.source === 'host') assert.ok(me, 'the host backend lists this process');
    }
    const after = d.memoryUse();
    assert.equal(after.totalBytes, use.totalBytes);
  });

  withRt('kernels: fill and verify a pattern; triad computes; a corrupted word is counted', async (rt, t) => {
    if (!rt.backend.capabilities.kernels) return t.skip('the backend has no kernel compiler');
    const d = rt.device(0);
    const m = d.loadModule(BENCH_KERNELS);
    const words = 1 << 18;
    using buf = d.alloc(words * 4);
    using errors = d.alloc(8);
    using host = rt.allocPinned(words * 4);
    using s = d.createStream();
    rt.fill(errors, 0);
    m.kernel('fill_pattern').launch({ grid: 64, block: 256, stream: s }, buf, words, 1234);
    m.kernel('verify_pattern').launch({ grid: 64, block: 256, stream: s }, buf, words, 1234, errors);
    rt.copy(host, buf, { stream: s });
    await s.synchronize();
    assert.equal(read(rt, errors, 0, 8)[0], 0);
    const u = host.typed(Uint32Array);
    assert.equal(u[0], patternWord(0, 1234));
    assert.equal(u[words - 1], patternWord(words - 1, 1234));
    write(rt, buf, new Uint8Array([1, 2, 3, 4]), 400);
    m.kernel('verify_pattern').launch({ grid: 64, block: 256, stream: s }, buf, words, 1234, errors);
    await s.synchronize();
    assert.equal(new DataView(read(rt, errors, 0, 8).buffer).getBigUint64(0, true), 1n);

    const n = 1000;
    using x = d.alloc(n * 8);
    using y = d.alloc(n * 8);
    using z = d.alloc(n * 8);
    const yv = new Float64Array(n).map((_, i) => i);
    const zv = new Float64Array(n).map((_, i) => 2 * i);
    write(rt, y, new Uint8Array(yv.buffer));
    write(rt, z, new Uint8Array(zv.buffer));
    m.kernel('stream_triad').launch({ grid: 4, block: 128 }, x, y, z, 3, n);
    await d.synchronize();
    const xv = new Float64Array(read(rt, x).buffer);
    assert.equal(xv[10], 10 + 3 * 20);
    assert.equal(xv[n - 1], n - 1 + 3 * 2 * (n - 1));
    // Bad launches are refused before the driver sees them.
    expectCode(() => m.kernel('stream_triad').launch({ grid: 1, block: 2048 }, x, y, z, 3, n), ErrorCode.INVALID_ARGUMENT);
    expectCode(() => m.kernel('stream_triad').launch({ grid: 1, block: 32 }, x, y, z, 3), ErrorCode.INVALID_ARGUMENT);
    expectCode(() => m.kernel('stream_triad').launch({ grid: 1, block: 32 }, x, y, 5 as never, 3, n), ErrorCode.INVALID_ARGUMENT);
    using pageable = rt.allocPageable(64);
    if (!d.info().pageableMemoryAccess) {
      expectCode(() => m.kernel('fill_pattern').launch({ grid: 1, block: 32 }, pageable, 16, 1), ErrorCode.INVALID_ARGUMENT);
    }
    const freed = d.alloc(64);
    freed.free();
    expectCode(() => m.kernel('fill_pattern').launch({ grid: 1, block: 32 }, freed, 16, 1), ErrorCode.DISPOSED);
  });

  withRt('peer access and peer copies between devices', async (rt, t) => {
    if (rt.devices.length < 2) return t.skip('needs two devices');
    const [d0, d1] = [rt.device(0), rt.device(1)];
    using a = d0.alloc(1 << 20);
    using b = d1.alloc(1 << 20);
    const data = pattern(1 << 20, 3);
    write(rt, a, data);
    if (d0.canAccessPeer(d1)) {
      d0.enablePeerAccess(d1);
      d0.enablePeerAccess(d1);
    }
    assert.equal(rt.copy(b, a), 'PtoP');
    assert.deepEqual(read(rt, b), data);
    using s1 = d1.createStream();
    using s0 = d0.createStream();
    rt.fill(b, 0);
    rt.copy(b, a, { stream: s1 });
    await s1.synchronize();
    assert.deepEqual(read(rt, b), data);
    expectCode(() => rt.copy(a, a, { stream: s1, bytes: 16 }), ErrorCode.WRONG_DEVICE);
    using e1 = d1.createEvent();
    expectCode(() => e1.record(s0), ErrorCode.WRONG_DEVICE);
  });
}
