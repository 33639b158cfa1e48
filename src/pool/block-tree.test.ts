/**
 * The free-block set against a model (a plain array): random inserts and removes over few and many sizes, with
 * buckets emptying and filling again; after every step lowerBound (best fit, lowest address among equals), max,
 * size, bytes and the set of values agree with the model.
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

type Op = { op: 'insert'; size: number } | { op: 'remove'; i: number } | { op: 'query'; want: number };

test('BlockTree agrees with a model under random inserts, removes and best-fit queries', () => {
  const sizes = fc.oneof(
    fc.integer({ min: 1, max: 6 }).map((k) => k * 512),
    fc.integer({ min: 1, max: 4000 }).map((k) => k * 256),
  );
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    { weight: 3, arbitrary: fc.record({ op: fc.constant('insert' as const), size: sizes }) },
    { weight: 3, arbitrary: fc.record({ op: fc.constant('remove' as const), i: fc.nat(10_000) }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant('query' as const), want: fc.integer({ min: 1, max: 4000 * 256 + 1 }) }) },
  );
  fc.assert(
    fc.property(fc.array(opArb, { maxLength: 400 }), (ops) => {
      const t = new BlockTree<TreeNode>();
      const model: TreeNode[] = [];
      let next = 0x1000;
      for (const o of ops) {
        if (o.op === 'insert') {
          const n = node(o.size, next);
          next += o.size + 4096 * ((next >> 12) % 3); // addresses rise, not in step with sizes
          t.insert(n);
          model.push(n);
        } else if (o.op === 'remove' && model.length > 0) {
          const [n] = model.splice(o.i % model.length, 1);
          assert.equal(t.remove(n!), true);
          assert.equal(n!.heapIndex, -1);
          assert.equal(t.remove(n!), false, 'a removed block is not found again');
        } else if (o.op === 'query') {
          assert.equal(t.lowerBound(o.want), modelLowerBound(model, o.want));
        }
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
