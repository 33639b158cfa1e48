/** Runs the resource conformance suite over every source and adaptor, and tests the caching pool's behaviour. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCode, GpuError, OutOfMemoryError } from '../errors.js';
import { openRuntime, type Runtime } from '../runtime/runtime.js';
import { LimitingAdaptor, LoggingAdaptor, StatisticsAdaptor, TrackingAdaptor } from './adaptors.js';
import { CachingPool } from './caching-pool.js';
import { SimulatedGrowableSource, VmmSource } from './growable.js';
import { resourceConformance, type ResourceUnderTest } from './resource.case.js';
import { AsyncPoolResource, DeviceResource, ManagedResource, PinnedResource, SimulatedResource } from './sources.js';

const MiB = 1 << 20;
const host = (): Runtime => openRuntime({ backend: 'host', host: { devices: 1, deviceBytes: 1 << 30 } });

function withRuntime(make: (rt: Runtime) => Omit<ResourceUnderTest, 'cleanup'>): () => ResourceUnderTest {
  return () => {
    const rt = host();
    return { ...make(rt), closeRuntime: () => rt[Symbol.dispose](), cleanup: () => rt[Symbol.dispose]() };
  };
}

const poolObserve = (p: CachingPool) => () => ({ stats: p.stats(), snapshot: p.snapshot().segments });

resourceConformance(
  'DeviceResource',
  withRuntime((rt) => {
    const r = new DeviceResource(rt.device(0));
    return { resource: r, observe: () => ({ live: r.liveBytes, mem: rt.liveMemory() }) };
  }),
);
resourceConformance(
  'PinnedResource',
  withRuntime((rt) => {
    const r = new PinnedResource(rt);
    return { resource: r, observe: () => ({ live: r.liveBytes, mem: rt.liveMemory() }) };
  }),
);
resourceConformance(
  'ManagedResource',
  withRuntime((rt) => {
    const r = new ManagedResource(rt.device(0));
    return { resource: r, observe: () => ({ live: r.liveBytes, mem: rt.liveMemory() }) };
  }),
);
resourceConformance(
  'AsyncPoolResource',
  withRuntime((rt) => {
    const r = new AsyncPoolResource(rt.device(0), { releaseThresholdBytes: 0 });
    return { resource: r, observe: () => rt.device(0).memGetInfo() };
  }),
);
resourceConformance('SimulatedResource', () => {
  const r = new SimulatedResource(1 << 30);
  return { resource: r, observe: () => ({ used: r.usedBytes, n: r.allocations }) };
});
resourceConformance(
  'CachingPool(DeviceResource)',
  withRuntime((rt) => {
    const p = new CachingPool(new DeviceResource(rt.device(0)));
    return { resource: p, observe: poolObserve(p) };
  }),
);
resourceConformance(
  'CachingPool(PinnedResource)',
  withRuntime((rt) => {
    const p = new CachingPool(new PinnedResource(rt));
    return { resource: p, observe: poolObserve(p) };
  }),
);
resourceConformance('CachingPool(SimulatedResource)', () => {
  const p = new CachingPool(new SimulatedResource(1 << 30));
  return { resource: p, observe: poolObserve(p) };
});
resourceConformance('CachingPool(growable, simulated)', () => {
  const p = new CachingPool(undefined, { growable: new SimulatedGrowableSource(1 << 30) });
  return { resource: p, observe: poolObserve(p) };
});
resourceConformance(
  'StatisticsAdaptor(CachingPool)',
  withRuntime((rt) => {
    const s = new StatisticsAdaptor(new CachingPool(new DeviceResource(rt.device(0))));
    return { resource: s, observe: () => ({ c: s.counters(), p: s.upstream.stats() }) };
  }),
);
resourceConformance(
  'LimitingAdaptor(DeviceResource)',
  withRuntime((rt) => {
    const l = new LimitingAdaptor(new DeviceResource(rt.device(0)), 64 * MiB);
    return { resource: l, observe: () => ({ used: l.usedBytes, live: l.upstream.liveBytes }) };
  }),
);
resourceConformance('LoggingAdaptor(SimulatedResource)', () => {
  const lines: string[] = [];
  const l = new LoggingAdaptor(new SimulatedResource(1 << 30), (s) => lines.push(s));
  return { resource: l, observe: () => ({ used: l.upstream.usedBytes, lines: lines.filter((x) => !x.includes('allocate_failed')).length }) };
});
resourceConformance(
  'LoggingAdaptor(TrackingAdaptor(CachingPool(ManagedResource)))',
  withRuntime((rt) => {
    const lines: string[] = [];
    const l = new LoggingAdaptor(new TrackingAdaptor(new CachingPool(new ManagedResource(rt.device(0)))), (s) => lines.push(s));
    return { resource: l, observe: () => ({ p: l.upstream.upstream.stats(), lines: lines.filter((x) => !x.includes('allocate_failed')).length }) };
  }),
);
resourceConformance('TrackingAdaptor(CachingPool)', () => {
  const t = new TrackingAdaptor(new CachingPool(new SimulatedResource(1 << 30)), { stacks: true });
  return { resource: t, observe: () => ({ live: t.liveAllocations().map((a) => [a.address, a.bytes]), p: t.upstream.stats() }) };
});

test("a pool whose runtime was disposed hands out none of its cached blocks: nothing overlaps the next runtime's memory", () => {
  const first = host();
  const pool = new CachingPool(new DeviceResource(first.device(0)));
  const cached = pool.allocate(MiB);
  pool.deallocate(cached, MiB);
  first[Symbol.dispose]();
  using second = host();
  const fresh = second.device(0).alloc(2 * MiB);
  assert.throws(
    () => pool.allocate(MiB),
    (e: unknown) => e instanceof GpuError && e.code === ErrorCode.DISPOSED && /runtime was disposed/.test(e.message),
  );
  assert.doesNotThrow(() => pool[Symbol.dispose](), 'no DOUBLE_FREE of the segments the runtime freed');
  fresh.free();
});

test('a pool whose upstream was disposed under it refuses, and so does every adaptor above it', () => {
  using rt = host();
  const source = new DeviceResource(rt.device(0));
  const pool = new CachingPool(source);
  const stats = new StatisticsAdaptor(pool);
  stats.deallocate(stats.allocate(4096), 4096);
  source[Symbol.dispose]();
  for (const r of [pool, stats]) {
    assert.throws(
      () => r.allocate(4096),
      (e: unknown) => e instanceof GpuError && e.code === ErrorCode.DISPOSED && /upstream DeviceResource was disposed/.test(e.message),
      r.constructor.name,
    );
  }
  assert.doesNotThrow(() => stats[Symbol.dispose]());
  assert.equal(rt.liveMemory().device.count, 0, 'the source freed its segments once');
});

test('a cache hit reuses the block and calls the upstream no more', () => {
  const up = new SimulatedResource(1 << 30);
  using p = new CachingPool(up);
  const a = p.allocate(1000);
  p.deallocate(a, 1000);
  const n = up.allocations;
  for (let i = 0; i < 100; i++) p.deallocate(p.allocate(1000), 1000);
  assert.equal(up.allocations, n);
  assert.equal(p.allocate(1000), a, 'the same block comes back');
  const s = p.stats();
  assert.equal(s.cacheMisses, 1);
  assert.equal(s.cacheHits, 101);
  assert.equal(s.allocatedBytes.current, 1024);
  assert.equal(s.requestedBytes.current, 1000);
  assert.equal(s.reservedBytes.current, 2 * MiB);
});

test("small and large requests get PyTorch's segment sizes; splitting and coalescing keep bytes whole", () => {
  const up = new SimulatedResource(2 ** 34);
  using p = new CachingPool(up);
  const small = p.allocate(100);
  const mid = p.allocate(3 * MiB);
  const big = p.allocate(50 * MiB + 1);
  const segs = p
    .snapshot()
    .segments.map((s) => [s.segment_type, s.total_size])
    .sort();
  assert.deepEqual(segs, [
    ['large', 20 * MiB],
    ['large', 52 * MiB],
    ['small', 2 * MiB],
  ]);
  const parts = [p.allocate(5 * MiB), p.allocate(5 * MiB), p.allocate(5 * MiB)];
  assert.equal(p.snapshot().segments.find((s) => s.total_size === 20 * MiB)!.blocks.length, 5, '3 + 3 x 5 MiB and the 2 MiB rest');
  for (const x of parts) p.deallocate(x, 5 * MiB);
  p.deallocate(mid, 3 * MiB);
  const seg = p.snapshot().segments.find((s) => s.total_size === 20 * MiB)!;
  assert.equal(seg.blocks.length, 1, 'all blocks of the segment coalesced');
  assert.equal(seg.blocks[0]!.state, 'inactive');
  p.deallocate(small, 100);
  p.deallocate(big, 50 * MiB + 1);
  assert.equal(p.trim(), 74 * MiB);
  assert.equal(p.stats().reservedBytes.current, 0);
  assert.equal(up.usedBytes, 0);
});

test('fragmentation is 1 - largest free block / free bytes', () => {
  using p = new CachingPool(new SimulatedResource(1 << 30));
  const xs = Array.from({ length: 10 }, () => p.allocate(2 * MiB));
  for (let i = 0; i < 10; i += 2) p.deallocate(xs[i]!, 2 * MiB);
  const s = p.stats();
  assert.equal(s.freeBytes, 20 * MiB - 10 * MiB);
  assert.equal(s.largestFreeBlockBytes, 2 * MiB);
  assert.ok(Math.abs(s.fragmentation - (1 - 2 / 10)) < 1e-12);
});

test('out of memory: cached segments are freed and the allocation retried, then OutOfMemoryError carries the stats', () => {
  const up = new LimitingAdaptor(new SimulatedResource(2 ** 34), 60 * MiB);
  using p = new CachingPool(up);
  const a = p.allocate(30 * MiB);
  p.deallocate(a, 30 * MiB);
  // 30 MiB cached: a 50 MiB request fits only once the pool gives them back.
  const b = p.allocate(50 * MiB);
  assert.equal(p.stats().segmentFrees, 1);
  const before = JSON.stringify(p.stats());
  assert.throws(
    () => p.allocate(20 * MiB),
    (e: unknown) =>
      e instanceof OutOfMemoryError &&
      e.requestedBytes === 20 * MiB &&
      (e.poolStats as { reservedBytes: { current: number } }).reservedBytes.current === 50 * MiB &&
      e.largestFreeBlockBytes === 0,
  );
  const after = p.stats();
  assert.equal(after.ooms, 1);
  assert.equal(after.allocatedBytes.current, JSON.parse(before).allocatedBytes.current);
  p.deallocate(b, 50 * MiB);
});

test("alignment above the pool's is honoured", () => {
  using p = new CachingPool(new SimulatedResource(1 << 30));
  for (const al of [512, 4096, 65536]) {
    const a = p.allocate(1000, { alignment: al });
    assert.equal(a % al, 0);
    p.deallocate(a, 1000);
  }
  assert.throws(
    () => new CachingPool(new SimulatedResource(), { alignment: 64 }),
    (e: unknown) => e instanceof GpuError && e.code === ErrorCode.INVALID_ARGUMENT,
  );
});

test('release threshold hands whole free segments back at once', () => {
  const up = new SimulatedResource(2 ** 34);
  using p = new CachingPool(up, { releaseThresholdBytes: 25 * MiB });
  const xs = [p.allocate(30 * MiB), p.allocate(30 * MiB)];
  p.deallocate(xs[0]!, 30 * MiB);
  assert.equal(up.usedBytes, 30 * MiB, 'the cached 30 MiB exceeded the threshold and went back');
  p.deallocate(xs[1]!, 30 * MiB);
  assert.equal(up.usedBytes, 0);
});

test('growable segments grow in place instead of adding segments, and shrink on trim', () => {
  const g = new SimulatedGrowableSource(2 ** 34);
  using p = new CachingPool(undefined, { growable: g });
  const xs = Array.from({ length: 20 }, (_, i) => p.allocate((i + 2) * MiB));
  const s = p.stats();
  assert.equal(s.segmentAllocs, 1, 'one large growable segment');
  // 2 + 3 + ... + 21 MiB = 230 MiB of blocks laid end to end from the segment's start: the 2 MiB granules under them
  // are exactly those 230 MiB (an even number), mapped under allocated blocks only
  assert.equal(s.reservedBytes.current, 230 * MiB);
  for (let i = 0; i < 20; i++) p.deallocate(xs[i]!, (i + 2) * MiB);
  p.trim();
  assert.equal(p.stats().reservedBytes.current, 0);
  assert.equal(g.mappedBytes, 0);
});

test('a growable segment that runs out while mapping puts the block back joined with its free neighbours', () => {
  // found by the property test: the block cut for the request went back unmerged, leaving two free blocks side by side
  using p = new CachingPool(undefined, { growable: new SimulatedGrowableSource(24 * MiB) });
  const a = p.allocate(MiB + 1, { stream: 0 });
  const b = p.allocate(MiB + 1, { stream: 1 });
  p.deallocate(b, MiB + 1, { stream: 1 });
  assert.throws(() => p.allocate(22 * MiB + 1, { stream: 0, alignment: 1024 }), OutOfMemoryError);
  const blocks = p.snapshot().segments.flatMap((s) => s.blocks);
  for (let i = 1; i < blocks.length; i++)
    assert.ok(!(blocks[i - 1]!.state === 'inactive' && blocks[i]!.state === 'inactive'), 'no two free blocks side by side');
  p.deallocate(a, MiB + 1, { stream: 0 });
  assert.equal(p.snapshot().segments.flatMap((s) => s.blocks).length, 1, 'all of it one free block again');
});

test("cross-stream reuse waits for the other stream's work (host backend, deferred streams)", async () => {
  using rt = host();
  const d = rt.device(0);
  using p = new CachingPool(new DeviceResource(d));
  using s1 = d.createStream();
  using s2 = d.createStream();
  using src1 = rt.allocPinned(MiB);
  using src2 = rt.allocPinned(MiB);
  using out = rt.allocPinned(MiB);
  src1.view().fill(1);
  src2.view().fill(2);
  // Block used on s1, freed on s1 while its copies are still queued; s2 then takes it.
  const a = p.allocate(MiB, { stream: s1 });
  rt.copy(a, src1, { stream: s1, bytes: MiB });
  rt.copy(out, a, { stream: s1, bytes: MiB });
  p.deallocate(a, MiB, { stream: s1 });
  const b = p.allocate(MiB, { stream: s2 });
  assert.equal(b, a, 'the block was reused across streams');
  assert.equal(p.stats().crossStreamReuses, 1);
  rt.copy(b, src2, { stream: s2, bytes: MiB });
  await Promise.all([s1.synchronize(), s2.synchronize()]);
  assert.equal(out.view()[0], 1, 's1 read its data before s2 overwrote the block');
  p.deallocate(b, MiB, { stream: s2 });
});

test("recordStream: a block used on another stream is reused only after that stream's work", async () => {
  using rt = host();
  const d = rt.device(0);
  using p = new CachingPool(new DeviceResource(d));
  using s1 = d.createStream();
  using s2 = d.createStream();
  const a = p.allocate(4096, { stream: s1 });
  p.recordStream(a, s2);
  using sink = rt.allocPinned(4096);
  rt.copy(sink, a, { stream: s2, bytes: 4096 });
  p.deallocate(a, 4096, { stream: s1 });
  assert.equal(p.snapshot().segments[0]!.blocks[0]!.state, 'active_pending_free');
  await s2.synchronize();
  const b = p.allocate(4096, { stream: s1 });
  assert.equal(b, a);
  p.deallocate(b, 4096, { stream: s1 });
  assert.throws(
    () => p.recordStream(123, s2),
    (e: unknown) => e instanceof GpuError && e.code === ErrorCode.FOREIGN_ADDRESS,
  );
});

test("snapshot has PyTorch's shape and the trace ring its actions", () => {
  using p = new CachingPool(new SimulatedResource(1 << 30), { traceEntries: 16 });
  const a = p.allocate(1000);
  p.deallocate(a, 1000);
  p.trim();
  const snap = p.snapshot();
  const actions = snap.device_traces[0]!.map((e) => e.action);
  assert.deepEqual(actions, ['segment_alloc', 'alloc', 'free_requested', 'free_completed', 'segment_free']);
  for (const e of snap.device_traces[0]!) assert.deepEqual(Object.keys(e).sort(), ['action', 'addr', 'size', 'stream', 'time_us']);
  const b = p.allocate(10);
  const seg = p.snapshot().segments[0]!;
  assert.deepEqual(Object.keys(seg).sort(), [
    'active_size',
    'address',
    'allocated_size',
    'blocks',
    'device',
    'is_expandable',
    'mapped_size',
    'requested_size',
    'segment_type',
    'stream',
    'total_size',
  ]);
  assert.equal(seg.blocks[0]!.state, 'active_allocated');
  assert.equal(seg.blocks[0]!.requested_size, 10);
  p.deallocate(b, 10);
});

test('the logging adaptor writes one NDJSON line per event to a file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-log-'));
  try {
    const file = join(dir, 'trace.ndjson');
    {
      using l = new LoggingAdaptor(new SimulatedResource(1 << 20), file);
      const a = l.allocate(100);
      l.deallocate(a, 100);
      assert.throws(() => l.allocate(2 << 20));
    }
    const lines = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((x) => JSON.parse(x) as { action: string });
    assert.deepEqual(
      lines.map((x) => x.action),
      ['allocate', 'deallocate', 'allocate_failed'],
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('pool allocations are typed objects that copy like any other', () => {
  using rt = host();
  using p = new CachingPool(new DeviceResource(rt.device(0)));
  using a = p.alloc(4096);
  using src = rt.allocPinned(4096);
  src.view().fill(7);
  rt.copy(a, src);
  using back = rt.allocPageable(4096);
  rt.copy(back, a);
  assert.equal(back.view()[4095], 7);
  assert.equal(a.kind, 'device');
  assert.equal(p.stats().allocationCount.current, 1);
});

test('a cache hit makes no native call', () => {
  const calls: string[] = [];
  const rt = host();
  const spy = new Proxy(rt.backend, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (...args: unknown[]) => (calls.push(String(prop)), (v as (...a: unknown[]) => unknown).apply(target, args)) : v;
    },
  });
  (rt as unknown as { backend: unknown }).backend = spy;
  const p = new CachingPool(new DeviceResource(rt.device(0)));
  using s = rt.device(0).createStream();
  p.deallocate(p.allocate(1000, { stream: s }), 1000, { stream: s });
  p.deallocate(p.allocate(5 << 20), 5 << 20);
  calls.length = 0;
  for (let i = 0; i < 1000; i++) {
    p.deallocate(p.allocate(1000, { stream: s }), 1000, { stream: s });
    p.deallocate(p.allocate(5 << 20), 5 << 20);
  }
  assert.deepEqual(calls, []);
  p[Symbol.dispose]();
  rt[Symbol.dispose]();
});

// The pool on the real device backends present here: fixed segments from cudaMalloc / hipMalloc, and growable segments
// through the virtual memory API, with data written into blocks and read back.
for (const name of ['cuda', 'hip'] as const) {
  let devices = 0;
  let vmm = false;
  let why = '';
  try {
    using rt = openRuntime({ backend: name });
    devices = rt.devices.length;
    vmm = rt.backend.capabilities.virtualMemory;
    why = rt.backend.noDeviceReason() ?? '';
  } catch (e) {
    why = (e as Error).message.split('\n')[0]!;
  }
  const onDevice =
    (make: (rt: Runtime) => Omit<ResourceUnderTest, 'cleanup'>): (() => ResourceUnderTest) =>
    () => {
      const rt = openRuntime({ backend: name });
      return { ...make(rt), closeRuntime: () => rt[Symbol.dispose](), cleanup: () => rt[Symbol.dispose]() };
    };
  if (devices === 0) {
    test(`${name}: the pool on a device`, { skip: `no ${name} device here (${why})` }, () => {});
    continue;
  }
  resourceConformance(
    `${name}: CachingPool(DeviceResource)`,
    onDevice((rt) => {
      const p = new CachingPool(new DeviceResource(rt.device(0)));
      return { resource: p, observe: poolObserve(p) };
    }),
  );
  if (!vmm) {
    test(`${name}: growable segments`, { skip: `the ${name} backend has no virtual memory API here` }, () => {});
    continue;
  }
  resourceConformance(
    `${name}: CachingPool(growable, VmmSource)`,
    onDevice((rt) => {
      const p = new CachingPool(undefined, { growable: new VmmSource(rt.device(0), { reserveBytes: 4 * 2 ** 30 }) });
      return { resource: p, observe: poolObserve(p) };
    }),
  );
  test(`${name}: growable segments hold data across growth, and give their memory back`, async () => {
    using rt = openRuntime({ backend: name });
    const d = rt.device(0);
    const g = new VmmSource(d, { reserveBytes: 4 * 2 ** 30 });
    using p = new CachingPool(undefined, { growable: g });
    using s = d.createStream();
    const sizes = [1 * MiB, 5 * MiB, 40 * MiB, 3 * MiB];
    const blocks = sizes.map((n) => p.allocate(n, { stream: s }));
    assert.ok(g.mapCalls >= 2, 'the segment grew');
    using src = rt.allocPinned(40 * MiB);
    using back = rt.allocPinned(40 * MiB);
    for (const [i, a] of blocks.entries()) {
      src.view(0, sizes[i]!).fill(i + 1);
      rt.copy(a, src, { stream: s, bytes: sizes[i]! });
      rt.copy(back, a, { stream: s, bytes: sizes[i]! });
      await s.synchronize();
      const v = back.view(0, sizes[i]!);
      assert.ok(v[0] === i + 1 && v[sizes[i]! - 1] === i + 1, `block ${i} read back what was written`);
    }
    assert.throws(
      () => rt.copy(blocks[0]! + 8 * 1024 ** 3, src, { bytes: 16 }),
      (e: unknown) => e instanceof GpuError && e.code === ErrorCode.FOREIGN_ADDRESS,
    );
    for (const [i, a] of blocks.entries()) p.deallocate(a, sizes[i]!, { stream: s });
    await s.synchronize();
    p.trim();
    assert.equal(g.mappedBytes, 0, 'every chunk unmapped');
    assert.equal(p.stats().reservedBytes.current, 0);
  });
}

test('VmmSource refuses a bad reservation size before any native call, and a backend without the virtual memory API', () => {
  using rt = host();
  const d = rt.device(0);
  for (const bad of [0, -1, 2.5, 4 << 30, Number.NaN]) {
    assert.throws(
      () => new VmmSource(d, { reserveBytes: bad }),
      (e: unknown) => e instanceof GpuError && e.code === ErrorCode.INVALID_SIZE,
      String(bad),
    );
  }
  assert.throws(
    () => new VmmSource(d),
    (e: unknown) => e instanceof GpuError && e.code === ErrorCode.UNSUPPORTED,
  );
});
