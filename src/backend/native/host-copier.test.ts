/**
 * The threaded host copier on real memory: ArrayBuffers addressed through koffi, copied by worker threads calling
 * libc memcpy. Byte-exact over random sizes and offsets, more copies in flight than the mailboxes hold, disposal.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { propertyParams } from '../../testing/property.js';
import { DisposedError } from '../../errors.js';
import { addressOf } from './ffi.js';
import { ThreadedHostCopier } from './host-copier.js';
import { MAX_GROUPS } from './host-copier-layout.js';

function pattern(n: number, seed: number): Uint8Array {
  const u = new Uint8Array(n);
  for (let i = 0; i < n; i++) u[i] = (i * 31 + seed) & 0xff;
  return u;
}

test('copies land byte-exact at any size and offset, split over the threads, nothing written outside', async () => {
  const copier = new ThreadedHostCopier(3);
  try {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 3 << 20 }), fc.integer({ min: 0, max: 5000 }), fc.integer({ min: 0, max: 5000 }), async (n, so, dO) => {
        const src = pattern(n + so, n & 0xff);
        const dst = new Uint8Array(n + dO + 64).fill(0xee);
        await copier.copy(addressOf(dst.buffer as ArrayBuffer) + dO, addressOf(src.buffer as ArrayBuffer) + so, n);
        assert.deepEqual(dst.subarray(dO, dO + n), src.subarray(so, so + n));
        assert.ok(
          dst.subarray(0, dO).every((b) => b === 0xee),
          'nothing before',
        );
        assert.ok(
          dst.subarray(dO + n).every((b) => b === 0xee),
          'nothing after',
        );
      }),
      propertyParams(60),
    );
  } finally {
    copier.dispose();
  }
});

test('more copies in flight than the mailboxes hold are queued and all settle, in any order of completion', async () => {
  const copier = new ThreadedHostCopier(2);
  try {
    const n = 3 * MAX_GROUPS + 5;
    const srcs = Array.from({ length: n }, (_, i) => pattern(8192 + i * 13, i));
    const dsts = srcs.map((s) => new Uint8Array(s.length));
    await Promise.all(srcs.map((s, i) => copier.copy(addressOf(dsts[i]!.buffer as ArrayBuffer), addressOf(s.buffer as ArrayBuffer), s.length)));
    for (let i = 0; i < n; i++) assert.deepEqual(dsts[i], srcs[i], `copy ${i}`);
  } finally {
    copier.dispose();
  }
});

test('dispose waits for copies already started and refuses new ones; disposing twice is harmless', async () => {
  const copier = new ThreadedHostCopier(2);
  const src = pattern(32 << 20, 7);
  const dst = new Uint8Array(src.length);
  const running = copier.copy(addressOf(dst.buffer as ArrayBuffer), addressOf(src.buffer as ArrayBuffer), src.length);
  copier.dispose();
  await running;
  assert.deepEqual(dst, src, 'the copy in flight finished before dispose returned');
  await assert.rejects(copier.copy(addressOf(dst.buffer as ArrayBuffer), addressOf(src.buffer as ArrayBuffer), 16), DisposedError);
  copier.dispose();
});
