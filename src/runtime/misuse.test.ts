/**
 * The library misused as a careless or hostile program would: forged and copied allocation objects, methods called
 * on other objects, a batch copy onto its own source, a buffer detached under a transfer. Each is refused with a
 * typed GpuError before any address reaches the backend.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, GpuError } from '../errors.js';
import { Allocation, DeviceAllocation, PinnedAllocation } from '../memory/allocation.js';
import { CachingPool } from '../pool/caching-pool.js';
import { DeviceResource } from '../pool/sources.js';
import { openRuntime } from './runtime.js';
import { spiedRuntime } from '../testing/spied-runtime.js';

const code = (c: string) => (e: unknown) => e instanceof GpuError && e.code === c;

const spied = (): ReturnType<typeof spiedRuntime> => spiedRuntime(1);

test('a forged or copied allocation object never passes the range checks', () => {
  const { rt, calls } = spied();
  try {
    const real = rt.device(0).alloc(4096);
    const pinned = rt.allocPinned(1 << 20);
    // Built from the prototype, with the real one's fields copied and a larger size.
    const copied = Object.assign(Object.create(DeviceAllocation.prototype) as DeviceAllocation, real, { bytes: 1 << 24 });
    // Constructed through the public class with the real owner and address, claiming more bytes.
    const constructed = new DeviceAllocation(real.owner, real.address, 1 << 24, 0);
    const bare = Object.create(DeviceAllocation.prototype) as DeviceAllocation;
    const pinnedCopy = new PinnedAllocation(pinned.owner, 'pinned', pinned.address, 1 << 24, undefined, {});
    const before = calls.length;
    for (const forged of [copied, constructed, bare]) {
      assert.throws(() => rt.copy(forged, pinned, { bytes: 1 << 20 }), code(ErrorCode.FOREIGN_ADDRESS));
      assert.throws(() => rt.copy(pinned, forged, { bytes: 1 << 20 }), code(ErrorCode.FOREIGN_ADDRESS));
      assert.throws(() => rt.fill(forged, 7), code(ErrorCode.FOREIGN_ADDRESS));
      assert.throws(() => forged.free(), code(ErrorCode.FOREIGN_ADDRESS));
    }
    using s = rt.device(0).createStream();
    assert.throws(() => rt.copyBatch([{ dst: constructed, src: pinned, bytes: 1 << 20 }], { stream: s }), code(ErrorCode.FOREIGN_ADDRESS));
    assert.throws(() => pinnedCopy.view(), code(ErrorCode.FOREIGN_ADDRESS));
    assert.deepEqual(calls.slice(before), ['createStream'], 'nothing but the stream reached the backend');
    real.free();
    assert.equal(rt.liveMemory().device.count, 0, 'the real allocation is unaffected and frees once');
  } finally {
    rt[Symbol.dispose]();
  }
});

test('free and dispose called on something that is not an allocation say so', async () => {
  using rt = openRuntime({ backend: 'host' });
  for (const that of [{}, null, undefined, 42, Object.create(Allocation.prototype) as object]) {
    for (const call of [
      () => Allocation.prototype.free.call(that as Allocation),
      () => Allocation.prototype[Symbol.dispose].call(that as Allocation),
      ...(that instanceof Allocation ? [() => that.view()] : []),
    ]) {
      assert.throws(call, (e: unknown) => {
        assert.ok(e instanceof GpuError, `a GpuError, not ${String(e)}`);
        assert.equal(e.code, ErrorCode.FOREIGN_ADDRESS);
        assert.doesNotMatch(e.message, /undefined-byte|DOUBLE|double free/i);
        assert.match(e.message, /did not allocate/);
        return true;
      });
    }
  }
  // A pool's typed allocations are genuine: they pass.
  using pool = new CachingPool(new DeviceResource(rt.device(0)));
  using a = pool.alloc(4096);
  using b = rt.allocPinned(4096);
  rt.copy(a, b);
});

test('copyBatch refuses a copy whose destination overlaps its own source, before anything is enqueued', async () => {
  const { rt, calls } = spied();
  try {
    const dev = rt.device(0).alloc(8192);
    rt.fill(dev, 3);
    using s = rt.device(0).createStream();
    const before = calls.length;
    for (const [dstOffset, srcOffset] of [
      [0, 0],
      [100, 0],
      [0, 4000],
    ] as const) {
      assert.throws(
        () => rt.copyBatch([{ dst: dev, src: dev, dstOffset, srcOffset, bytes: 4096 }], { stream: s }),
        (e: unknown) => code(ErrorCode.OUT_OF_BOUNDS)(e) && /copy 0: its destination overlaps its own source/.test((e as Error).message),
        `${dstOffset} <- ${srcOffset}`,
      );
    }
    assert.deepEqual(calls.slice(before), [], 'nothing reached the backend');
    // Disjoint halves of one allocation are a valid copy.
    rt.copyBatch([{ dst: dev, src: dev, dstOffset: 4096, srcOffset: 0, bytes: 4096 }], { stream: s });
    await s.synchronize();
  } finally {
    rt[Symbol.dispose]();
  }
});

test('a JS buffer detached while its upload or download is in flight rejects with a typed GpuError', async () => {
  using rt = openRuntime({ backend: 'host' });
  using dev = rt.device(0).alloc(32 << 20);
  const detach = (b: ArrayBuffer) => structuredClone(b, { transfer: [b] });
  for (const when of ['at once', 'on a later turn'] as const) {
    for (const direction of ['upload', 'download'] as const) {
      const buffer = new ArrayBuffer(32 << 20);
      const p = direction === 'upload' ? rt.upload(dev, buffer) : rt.download(buffer, dev);
      if (when === 'at once') detach(buffer);
      else setImmediate(() => detach(buffer));
      await assert.rejects(p, (e: unknown) => {
        assert.ok(e instanceof GpuError, `${direction} ${when}: a GpuError, not ${String(e)}`);
        assert.equal(e.code, ErrorCode.INVALID_STATE);
        assert.match(e.message, /detached/);
        return true;
      });
    }
  }
  // The runtime still works afterwards.
  const back = new Uint8Array(16);
  await rt.upload(dev, new Uint8Array(16).fill(5));
  await rt.download(back, dev, { bytes: 16 });
  assert.deepEqual([...back], Array(16).fill(5));
});
