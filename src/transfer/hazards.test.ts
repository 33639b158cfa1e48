/**
 * Host hazards per chunk: a chunk waits for the earlier chunks of other transfers whose host ranges it must follow
 * (a write after reads and overlapping writes, a read after overlapping writes), never for chunks of its own list,
 * and never for chunks whose host work is over, however many buffers they named.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HostHazards, type HostOp, type HostSpans } from './hazards.js';

/** Spans of one chunk: [key, start, end] rows. */
function spans(rows: Array<[object, number, number]>): () => HostSpans {
  return () => ({
    count: rows.length,
    keys: rows.map((r) => r[0]),
    starts: Float64Array.from(rows, (r) => r[1]),
    ends: Float64Array.from(rows, (r) => r[2]),
  });
}

/** Registers a chunk whose `done` is a promise named after it; answers the op and the names of what it waits for. */
function chunk(h: HostHazards, name: string, rows: Array<[object, number, number]>, write: boolean, owner: object | undefined) {
  const deps: Array<Promise<void>> = [];
  const op: HostOp = h.register(spans(rows), write, owner, deps);
  const done = Promise.resolve() as Promise<void> & { name?: string };
  done.name = name;
  op.done = done;
  return { op, waits: () => deps.map((d) => (d as { name?: string }).name).sort() };
}

test('a write waits for the reads in flight and for overlapping writes of other transfers; a read for overlapping writes', () => {
  const h = new HostHazards();
  const [a, b] = [new ArrayBuffer(64), new ArrayBuffer(64)];
  const [up, down1, down2] = [{}, {}, {}];
  const r = chunk(h, 'read', [[a, 0, 64]], false, up);
  const w1 = chunk(
    h,
    'w1',
    [
      [a, 0, 32],
      [b, 0, 64],
    ],
    true,
    down1,
  );
  assert.deepEqual(w1.waits(), ['read']);
  const w2 = chunk(h, 'w2', [[a, 16, 48]], true, down2);
  assert.deepEqual(w2.waits(), ['read', 'w1'], 'overlaps w1 on a');
  const w3 = chunk(h, 'w3', [[a, 48, 64]], true, down2);
  assert.deepEqual(w3.waits(), ['read'], 'a range of a no earlier write touches');
  h.unregister(r.op);
  h.unregister(w1.op);
  const r2 = chunk(
    h,
    'r2',
    [
      [a, 0, 20],
      [b, 0, 64],
    ],
    false,
    up,
  );
  assert.deepEqual(r2.waits(), ['w2'], 'w1 is over; w2 covers 16-48 of a');
});

test('chunks of one transfer alone are not ordered against each other; a chunk of several transfers is ordered against each', () => {
  const h = new HostHazards();
  const a = new ArrayBuffer(64);
  const list = {};
  chunk(h, 'c1', [[a, 0, 64]], true, list);
  assert.deepEqual(chunk(h, 'c2', [[a, 0, 64]], true, list).waits(), [], 'the same list');
  assert.deepEqual(chunk(h, 'mixed', [[a, 8, 16]], true, undefined).waits(), ['c1', 'c2']);
  assert.deepEqual(chunk(h, 'c3', [[a, 0, 8]], true, list).waits(), [], 'mixed wrote only 8-16');
  assert.deepEqual(chunk(h, 'c4', [[a, 12, 13]], true, list).waits(), ['mixed']);
});

test('writers that finished are forgotten however many buffers they named (the index is cleared or swept)', () => {
  const h = new HostHazards();
  const keep = new ArrayBuffer(8);
  const first = chunk(h, 'keep', [[keep, 0, 8]], true, {});
  const buffers = Array.from({ length: 12000 }, () => new ArrayBuffer(8));
  // Chunks of 500 buffers each, two in flight at a time, each checked against the writers before it (other
  // transfers: the one before is indexed then), then finished: the index gathers stale entries until it sweeps.
  let before: HostOp | undefined;
  for (let c = 0; c < buffers.length; c += 500) {
    const rows = buffers.slice(c, c + 500).map((b): [object, number, number] => [b, 0, 8]);
    const w = chunk(h, `w${c}`, rows, true, {});
    assert.deepEqual(w.waits(), []);
    if (before) h.unregister(before);
    before = w.op;
  }
  if (before) h.unregister(before);
  const probe = buffers.filter((_, i) => i % 97 === 0).map((b): [object, number, number] => [b, 0, 8]);
  assert.deepEqual(chunk(h, 'probe', [...probe, [keep, 4, 5]], false, {}).waits(), ['keep']);
  h.unregister(first.op);
  assert.deepEqual(chunk(h, 'after', [[keep, 0, 8]], false, {}).waits(), []);
});
