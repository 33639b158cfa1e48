/**
 * A chunk's layout in its slot (SegmentList.placeByDevice), checked against brute force over random chunks: the
 * segments' slot ranges stay disjoint and fill the chunk from its start; where no two device ranges overlap, the slot
 * order is the device order (so what continues in device memory continues in the slot); where two overlap, nothing
 * moves; a cleared list starts over in segment order.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { propertyParams } from '../testing/property.js';
import type { Transfer } from './flow-types.js';
import { SegmentList } from './segment-list.js';

const t = {} as Transfer;
const backend = { releaseHostBuffer: () => {} } as unknown as Parameters<SegmentList['clear']>[0];

test('a chunk is laid out in device order unless two of its device ranges overlap; its slot ranges stay disjoint and whole', () => {
  const pieces = fc.array(fc.record({ dev: fc.integer({ min: 0, max: 64 }), bytes: fc.integer({ min: 1, max: 8 }) }), { minLength: 1, maxLength: 40 });
  const s = new SegmentList();
  fc.assert(
    fc.property(pieces, (ps) => {
      s.clear(backend);
      let used = 0;
      for (const p of ps) {
        s.add(t, 0, p.dev * 8, p.bytes * 8, 4, 'k', 0, used);
        used += p.bytes * 8;
      }
      const before = Array.from(s.at.subarray(0, ps.length));
      s.placeByDevice();
      const at = Array.from(s.at.subarray(0, ps.length));
      const order = s.placed ? Array.from(s.slotOrder.subarray(0, ps.length)) : ps.map((_, i) => i);
      // The slot order lists every segment once, and the ranges follow each other from 0 in that order.
      assert.deepEqual(
        [...order].sort((a, b) => a - b),
        ps.map((_, i) => i),
      );
      let end = 0;
      for (const i of order) {
        assert.equal(at[i], end, `segment ${i} starts where the one before it in the slot ends`);
        end += ps[i]!.bytes * 8;
      }
      assert.equal(end, used);
      const ranges = ps.map((p, i) => [p.dev * 8, p.dev * 8 + p.bytes * 8, i] as const);
      const overlap = ranges.some(([a, b, i]) => ranges.some(([c, d, j]) => i !== j && a < d && c < b));
      if (overlap) assert.deepEqual(at, before, 'overlapping device ranges: the order asked is kept');
      else for (let k = 1; k < order.length; k++) assert.ok(ps[order[k - 1]!]!.dev < ps[order[k]!]!.dev, 'the slot order is the device order');
    }),
    propertyParams(300),
  );
  s.clear(backend);
  assert.equal(s.placed, false, 'a cleared list is in segment order');
});
