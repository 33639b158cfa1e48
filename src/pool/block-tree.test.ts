/**
 * The free-block set against a model (a plain array): random inserts (addresses in any order) and removes over few
 * and many sizes, with buckets drained and filled again; after every step lowerBound (best fit, lowest address among
 * equals), max, size, bytes and the set of values agree with the model.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { propertyParams } from '../testing/property.js';
import { BlockTree, type TreeNode } from './block-tree.js';

const node = (size: number, address: number): TreeNode => ({ size, address, heapIndex: -1 });

function modelLowerBound(model: TreeNode[], want: number): TreeNode | null {
  let best: TreeNode | null = null;
  for (const n of model) {
    if (n.size < want) continue;
    if (!best || n.size < best.size || (n.size === best.size && n.address < best.address)) best = n;
  }
  return best;
}

type Op =
  | { op: 'insert'; size: number; address: number }
  | { op: 'remove'; i: number }
  | { op: 'drain'; i: number }
  | { op: 'query'; want: number }
  | { op: 'queryUsed'; i: number; delta: number };

/**
 * The paths a tree of free blocks must get right and a rising stream of addresses never reaches: a block inserted
 * below others of its size (the heap reorders), a bucket emptied and looked up while it is kept empty, more emptied
 * buckets than are kept (the purge), and best fit for a size just above or below one in use.
 */
test('BlockTree agrees with a model under random inserts, removes, drains and best-fit queries', () => {
  const sizes = fc.oneof(
    fc.integer({ min: 1, max: 6 }).map((k) => k * 512),
    fc.integer({ min: 1, max: 40 }).map((k) => k * 256),
    fc.integer({ min: 1, max: 4000 }).map((k) => k * 256),
  );
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    { weight: 4, arbitrary: fc.record({ op: fc.constant('insert' as const), size: sizes, address: fc.nat(1 << 20) }) },
    { weight: 3, arbitrary: fc.record({ op: fc.constant('remove' as const), i: fc.nat(10_000) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('drain' as const), i: fc.nat(10_000) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('query' as const), want: fc.integer({ min: 1, max: 4000 * 256 + 1 }) }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant('queryUsed' as const), i: fc.nat(10_000), delta: fc.constantFrom(-1, 0, 1) }) },
  );
  let reordered = 0;
  let emptiedLookups = 0;
  let manyEmptied = 0;
  fc.assert(
    fc.property(fc.array(opArb, { maxLength: 400, size: 'large' }), (ops) => {
      const t = new BlockTree<TreeNode>();
      const model: TreeNode[] = [];
      const used: number[] = [];
      const taken = new Set<number>();
      let emptied = 0;
      for (const o of ops) {
        if (o.op === 'insert') {
          // addresses in any order, each once (a free block's address is unique)
          let address = (o.address + 1) * 256;
          while (taken.has(address)) address += 256;
          taken.add(address);
          const n = node(o.size, address);
          t.insert(n);
          model.push(n);
          used.push(o.size);
          if (n.heapIndex < model.filter((x) => x.size === o.size).length - 1) reordered++;
        } else if (o.op === 'remove' && model.length > 0) {
          const [n] = model.splice(o.i % model.length, 1);
          assert.equal(t.remove(n!), true);
          assert.equal(n!.heapIndex, -1);
          assert.equal(t.remove(n!), false, 'a removed block is not found again');
          if (!model.some((x) => x.size === n!.size)) emptied++;
        } else if (o.op === 'drain' && model.length > 0) {
          // every block of one size goes: its bucket empties
          const size = model[o.i % model.length]!.size;
          for (const n of model.filter((x) => x.size === size)) assert.equal(t.remove(n), true);
          model.splice(0, model.length, ...model.filter((x) => x.size !== size));
          emptied++;
        } else if (o.op === 'query') {
          assert.equal(t.lowerBound(o.want), modelLowerBound(model, o.want));
        } else if (o.op === 'queryUsed' && used.length > 0) {
          const want = Math.max(1, used[o.i % used.length]! + o.delta);
          if (!model.some((x) => x.size === want)) emptiedLookups++;
          assert.equal(t.lowerBound(want), modelLowerBound(model, want));
        }
        if (emptied > 8) manyEmptied++;
        assert.equal(t.size, model.length);
        assert.equal(
          t.bytes,
          model.reduce((a, n) => a + n.size, 0),
        );
        const maxSize = model.reduce((a, n) => Math.max(a, n.size), 0);
        assert.equal(t.max()?.size ?? 0, maxSize);
        assert.deepEqual(new Set(t.values()), new Set(model));
        const sizesSeen = [...t.values()].map((n) => n.size);
        assert.deepEqual(
          sizesSeen,
          [...sizesSeen].sort((a, b) => a - b),
          'values come in increasing size',
        );
      }
    }),
    propertyParams(200),
  );
  assert.ok(reordered > 0, 'some blocks were inserted below others of their size');
  assert.ok(emptiedLookups > 0, 'some lookups were of sizes no block has (an emptied bucket, or next to one)');
  assert.ok(manyEmptied > 0, 'some runs emptied more buckets than are kept');
});

test('BlockTree: a block of another set, or one never inserted, is not removed', () => {
  const a = new BlockTree<TreeNode>();
  const b = new BlockTree<TreeNode>();
  const x = node(512, 0x1000);
  const y = node(512, 0x2000);
  a.insert(x);
  b.insert(y);
  assert.equal(a.remove(y), false);
  assert.equal(a.remove(node(1024, 0x3000)), false);
  assert.equal(a.size, 1);
  assert.equal(a.lowerBound(1), x);
  assert.equal(b.lowerBound(513), null);
});
