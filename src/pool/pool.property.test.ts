/**
 * Property test of the caching pool: random allocate / free sequences over several streams, fixed and growable
 * segments. After every step: no two live blocks overlap, alignment holds, every segment's blocks tile it exactly
 * (bytes are conserved), no two free neighbours are left unmerged, and the statistics agree with the snapshot.
 * Once everything is freed, every segment is one free block again.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { propertyParams } from '../testing/property.js';
import { CachingPool } from './caching-pool.js';
import { SimulatedGrowableSource } from './growable.js';
import { SimulatedResource } from './sources.js';

type Op = { op: 'alloc'; size: number; stream: number; alignment: number } | { op: 'free'; i: number };

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
  { weight: 2, arbitrary: fc.record({ op: fc.constant('free' as const), i: fc.nat(1000) }) },
);

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

for (const mode of ['fixed', 'growable'] as const) {
  test(`${mode} segments: random allocate/free over four streams keep every invariant`, () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 120 }), (ops) => {
        const p =
          mode === 'fixed' ? new CachingPool(new SimulatedResource(2 ** 40)) : new CachingPool(undefined, { growable: new SimulatedGrowableSource(2 ** 40) });
        const live = new Map<number, { size: number; alignment: number; stream: number }>();
        for (const o of ops) {
          if (o.op === 'alloc') {
            const a = p.allocate(o.size, { stream: o.stream, alignment: o.alignment });
            assert.ok(!live.has(a), 'a live address is not handed out twice');
            live.set(a, { size: o.size, alignment: o.alignment, stream: o.stream });
          } else if (live.size > 0) {
            const keys = [...live.keys()];
            const k = keys[o.i % keys.length]!;
            const v = live.get(k)!;
            p.deallocate(k, v.size, { stream: v.stream });
            live.delete(k);
          }
          checkInvariants(p, live);
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
  });
}
