/** The host backend's address space: regions found by any address inside them, gone once removed, in any order. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HostAddressSpace } from './address-space.js';

test('regions are found by any address inside them and not once removed, however many come and go and in what order', () => {
  const space = new HostAddressSpace();
  const live = new Map<number, number>();
  const gone: number[] = [];
  const add = (bytes: number): number => {
    const r = space.add(new ArrayBuffer(bytes), bytes, 'pageable', undefined);
    live.set(r.address, bytes);
    return r.address;
  };
  // Thousands taken and given back in the order taken (as a transfer adopts a list's buffers), others kept between.
  const kept = [add(100), add(5000)];
  const batch = Array.from({ length: 3000 }, (_, i) => add(64 + (i % 7) * 100));
  kept.push(add(1));
  for (const a of batch.slice(0, 2500)) {
    assert.equal(space.remove(a)?.address, a);
    live.delete(a);
    gone.push(a);
  }
  // Then some given back out of order.
  for (const a of batch
    .slice(2500)
    .reverse()
    .filter((_, i) => i % 2 === 0)) {
    space.remove(a);
    live.delete(a);
    gone.push(a);
  }
  for (const [a, bytes] of live) {
    assert.equal(space.at(a)?.address, a);
    assert.equal(space.containing(a + bytes - 1, 1)?.address, a, 'the last byte');
    assert.equal(space.containing(a, bytes + 1), undefined, 'one byte past the end');
  }
  for (const a of gone) {
    assert.equal(space.at(a), undefined);
    assert.equal(space.containing(a, 1), undefined);
    assert.equal(space.remove(a), undefined, 'removing twice finds nothing');
  }
  assert.ok(kept.every((a) => space.at(a) !== undefined));
});
