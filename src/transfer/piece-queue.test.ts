/** The engine's queue of pieces: rows kept in order through growth, cut from the front, dropped from the back. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Transfer } from './flow-types.js';
import { PieceQueue } from './piece-queue.js';

const transfer = (): Transfer => ({ left: 0 }) as unknown as Transfer;

test('pieces leave the queue in the order pushed, cut at the front, and a refused tail is dropped whole', () => {
  const q = new PieceQueue();
  const a = transfer();
  const b = transfer();
  const key = {};
  for (let i = 0; i < 100; i++) q.push(a, 1000 * i, 5000 * i, 10 + i, 0, key, 0);
  // Half taken from the front (one in parts), then enough pushed to grow the columns past their first size.
  for (let i = 0; i < 50; i++) {
    if (i === 7) {
      q.consume(4);
      assert.deepEqual([q.host[q.head], q.dev[q.head], q.bytes[q.head]], [7004, 35004, 13]);
    }
    q.consume(q.bytes[q.head]!);
  }
  for (let i = 100; i < 300; i++) q.push(b, 1000 * i, 5000 * i, 10 + i, 2, key, 0);
  assert.equal(q.tail - q.head, 250);
  assert.equal(q.holds(a), true);
  assert.equal(q.dropLast(200), 200 * 10 + ((100 + 299) * 200) / 2, 'the bytes of the pieces dropped (10 + i for i = 100 to 299)');
  assert.equal(q.holds(b), false);
  const seen: number[] = [];
  while (!q.empty) {
    assert.equal(q.transfer[q.head], a);
    seen.push(q.host[q.head]!);
    q.leave();
  }
  assert.deepEqual(
    seen,
    Array.from({ length: 50 }, (_, i) => 1000 * (i + 50)),
  );
  assert.equal(q.holds(a), false);
});
