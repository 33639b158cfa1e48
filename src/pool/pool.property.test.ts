/**
 * Property test of the caching pool: random allocate / free sequences over several streams (frees on the allocating
 * stream or another), fixed and growable segments, on devices large and small enough to run out, with and without
 * maxSplitBytes, releaseThresholdBytes and cross-stream reuse. After every step: no two live blocks overlap, alignment holds, every segment's blocks tile it exactly
 * (bytes are conserved), no two free neighbours are left unmerged, and the statistics agree with the snapshot.
 * Once everything is freed, every segment is one free block again.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { propertyParams } from '../testing/property.js';
import { OutOfMemoryError } from '../errors.js';
import { CachingPool } from './caching-pool.js';
import { SimulatedGrowableSource } from './growable.js';
import { SimulatedResource } from './sources.js';

type Op = { op: 'alloc'; size: number; stream: number; alignment: number } | { op: 'free'; i: number; otherStream: boolean };

const sizeArb = fc.oneof(fc.integer({ min: 1, max: 4096 }), fc.integer({ min: 4097, max: 1 << 20 }), fc.integer({ min: (1 << 20) + 1, max: 48 << 20 }));
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('alloc' as const),
      size: sizeArb,
      stream: fc.integer({ min: 0, max: 3 }),
      alignment: fc.constantFrom(256, 256, 256, 1024, 4096),
    }),
  },
  // a free on the allocating stream, or on another one (the block then belongs to neither until it is merged)
  { weight: 2, arbitrary: fc.record({ op: fc.constant('free' as const), i: fc.nat(1000), otherStream: fc.boolean() }) },
);

/** Pool settings the generator reaches: a device small enough to run out, splits capped, a release threshold, no cross-stream reuse. */
const settingsArb = fc.record({
  capacity: fc.oneof(
    fc.constant(2 ** 40),
    fc.integer({ min: 24, max: 160 }).map((m) => m * 2 ** 20),
  ),
  maxSplitBytes: fc.option(
    fc.integer({ min: 1, max: 64 }).map((m) => m * 2 ** 20),
    { nil: undefined },
  ),
  releaseThresholdBytes: fc.option(
    fc.integer({ min: 0, max: 64 }).map((m) => m * 2 ** 20),
    { nil: undefined },
  ),
  crossStream: fc.boolean(),
});

function checkInvariants(p: CachingPool, live: Map<number, { size: number; alignment: number }>): void {
  const snap = p.snapshot();
  const s = p.stats();
  let reserved = 0;
  let allocated = 0;
  const liveBlocks: Array<[number, number]> = [];
  for (const seg of snap.segments) {
    reserved += seg.mapped_size;
    let at = seg.address;
    let prevFree = false;
    for (const b of seg.blocks) {
      assert.equal(b.address, at, 'blocks tile their segment without gaps');
      at += b.size;
      const free = b.state === 'inactive';
      assert.ok(!(free && prevFree), 'free neighbours are merged');
      prevFree = free;
      if (b.state === 'active_allocated') {
        allocated += b.size;
        liveBlocks.push([b.address, b.address + b.size]);
        assert.ok(b.size >= b.requested_size);
      }
    }
    assert.equal(at, seg.address + seg.total_size, 'blocks add up to the segment');
  }
  liveBlocks.sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < liveBlocks.length; i++) assert.ok(liveBlocks[i - 1]![1] <= liveBlocks[i]![0], 'live blocks do not overlap');
  assert.equal(s.reservedBytes.current, reserved);
  assert.equal(s.allocatedBytes.current, allocated);
  assert.equal(s.allocationCount.current, live.size);
  for (const [address, { alignment }] of live) assert.equal(address % alignment, 0);
}

/** Segments wholly free (one free block), which the pool could hand back. */
const wholeFree = (p: CachingPool): number =>
  p.snapshot().segments.filter((x) => x.total_size > 0 && x.blocks.length === 1 && x.blocks[0]!.state === 'inactive').length;

for (const mode of ['fixed', 'growable'] as const) {
  test(`${mode} segments: random allocate/free over four streams, on small devices and with every option, keep every invariant`, () => {
    let ooms = 0;
    let capped = 0;
    fc.assert(
      fc.property(settingsArb, fc.array(opArb, { minLength: 1, maxLength: 120, size: 'medium' }), (settings, ops) => {
        const { capacity, ...options } = settings;
        const p =
          mode === 'fixed'
            ? new CachingPool(new SimulatedResource(capacity), options)
            : new CachingPool(undefined, { ...options, growable: new SimulatedGrowableSource(capacity) });
        const live = new Map<number, { size: number; alignment: number; stream: number }>();
        for (const o of ops) {
          if (o.op === 'alloc') {
            let a: number;
            try {
              a = p.allocate(o.size, { stream: o.stream, alignment: o.alignment });
            } catch (e) {
              // only a real shortage: the device cannot hold the request beside what is live, after the cache went back
              assert.ok(e instanceof OutOfMemoryError, String(e));
              assert.equal(e.requestedBytes, o.size);
              assert.ok(e.poolStats, 'the pool says what it held');
              // the memory a request needs is at most a 20 MiB segment or its size, aligned, in 2 MiB steps: it ran out
              // only if that did not fit beside what the pool still reserves once its cache went back
              const need = Math.max(20 * 2 ** 20, o.size + o.alignment + 2 * 2 ** 20);
              assert.ok(p.stats().reservedBytes.current + need > capacity, `${p.stats().reservedBytes.current} + ${need} fits in ${capacity}`);
              if (mode === 'fixed') assert.equal(wholeFree(p), 0, 'every wholly free segment went back before giving up');
              ooms++;
              checkInvariants(p, live);
              continue;
            }
            assert.ok(!live.has(a), 'a live address is not handed out twice');
            live.set(a, { size: o.size, alignment: o.alignment, stream: o.stream });
          } else if (live.size > 0) {
            const keys = [...live.keys()];
            const k = keys[o.i % keys.length]!;
            const v = live.get(k)!;
            p.deallocate(k, v.size, { stream: o.otherStream ? (v.stream + 1) % 4 : v.stream });
            live.delete(k);
            const s = p.stats();
            if (
              mode === 'fixed' &&
              options.releaseThresholdBytes !== undefined &&
              s.reservedBytes.current - s.allocatedBytes.current > options.releaseThresholdBytes
            )
              assert.equal(wholeFree(p), 0, 'above the release threshold no wholly free segment is kept');
          }
          checkInvariants(p, live);
          assert.ok(p.stats().reservedBytes.current <= capacity, 'never more than the device holds');
          if (!options.crossStream) assert.equal(p.stats().crossStreamReuses, 0, 'no block of one stream is given to another');
          if (mode === 'fixed' && options.maxSplitBytes !== undefined)
            for (const seg of p.snapshot().segments)
              if (seg.total_size > options.maxSplitBytes) {
                assert.equal(seg.blocks.length, 1, 'a block over maxSplitBytes is never split');
                capped++;
              }
        }
        for (const [k, v] of live) p.deallocate(k, v.size, { stream: v.stream });
        live.clear();
        checkInvariants(p, live);
        for (const seg of p.snapshot().segments) {
          if (seg.total_size === 0) continue;
          assert.equal(seg.blocks.length, 1, 'everything coalesced back into whole segments');
          assert.equal(seg.blocks[0]!.state, 'inactive');
        }
        p.trim();
        assert.equal(p.stats().reservedBytes.current, 0);
        p[Symbol.dispose]();
      }),
      propertyParams(200),
    );
    // the generator reaches the hard paths: running out of memory, and segments too large to split
    assert.ok(ooms > 0, 'some runs ran out of memory');
    if (mode === 'fixed') assert.ok(capped > 0, 'some runs held segments over maxSplitBytes');
  });
}
