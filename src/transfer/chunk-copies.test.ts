/**
 * What a chunk costs the runtime, seen from a real host backend whose copy calls are counted: the pieces of a chunk
 * that continue each other on both sides land with one copy, the rest with one batched copy per chunk (never one
 * copy per piece where the batch call may carry them), managed memory one copy per run (never batched), and the host
 * threads get one request per chunk whatever the number of pieces in it. Nothing here is timed.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Backend, CopyKind, HostCopier, NativeCopyBatch } from '../backend/backend.js';
import { createHostBackend } from '../backend/host/host-backend.js';
import { Runtime } from '../runtime/runtime.js';
import { pattern } from './transfer.case.js';

const KiB = 1024;

/** A host backend that counts its device copies, batched copies and host-copier requests. */
function countingRuntime(): { rt: Runtime; seen: { copies: Array<[number, CopyKind]>; batches: number[]; requests: number[] }; reset(): void } {
  const host = createHostBackend();
  const seen = { copies: [] as Array<[number, CopyKind]>, batches: [] as number[], requests: [] as number[] };
  const backend: Backend = Object.create(host, {
    memcpyAsync: {
      value: (...a: Parameters<Backend['memcpyAsync']>) => {
        seen.copies.push([a[2], a[3]]);
        return host.memcpyAsync(...a);
      },
    },
    memcpyBatchAsync: {
      value: (batch: NativeCopyBatch, stream: number) => {
        seen.batches.push(batch.count);
        return host.memcpyBatchAsync(batch, stream);
      },
    },
    createHostCopier: {
      value: (threads: number): HostCopier => {
        const c = host.createHostCopier(threads);
        return {
          threads: c.threads,
          copy: (d, s, n) => {
            seen.requests.push(1);
            return c.copy(d, s, n);
          },
          copyMany: (d, s, n) => {
            seen.requests.push(n.length);
            return c.copyMany!(d, s, n);
          },
          dispose: () => c.dispose(),
        };
      },
    },
  });
  const rt = new Runtime({ backend, how: 'requested', attempts: [] });
  return {
    rt,
    seen,
    reset: () => {
      seen.copies.length = 0;
      seen.batches.length = 0;
      seen.requests.length = 0;
    },
  };
}

/** A counting runtime, a stager of 64 KiB chunks, `n` arrays of `each` bytes and device (or managed) memory for them. */
function setup(n: number, each: number, seed: number, memory: { managed?: boolean; room?: number; depth?: number } = {}) {
  const c = countingRuntime();
  const st = c.rt.createStager({ chunkBytes: 64 * KiB, depth: memory.depth ?? 3, threads: 2, directBelow: 0 });
  const bytes = (memory.room ?? 1) * n * each;
  const dst = memory.managed ? c.rt.device(0).allocManaged(bytes) : c.rt.device(0).alloc(bytes);
  const srcs = Array.from({ length: n }, (_, i) => pattern(each, seed + i));
  c.reset();
  return {
    ...c,
    st,
    dst,
    srcs,
    [Symbol.dispose]: () => {
      st[Symbol.dispose]();
      dst.free();
      c.rt[Symbol.dispose]();
    },
  };
}

const HTOD = 1 as CopyKind;
const DTOH = 2 as CopyKind;
const DEFAULT = 4 as CopyKind;

test('a list bound for consecutive places lands with one copy per chunk and one host request per chunk, up and down', async () => {
  const n = 40;
  const each = 4 * KiB;
  using t = setup(n, each, 0);
  const { st, dst, srcs, seen, reset } = t;
  const up = await st.uploadMany(srcs.map((src, i) => ({ dst, src, dstOffset: i * each })));
  assert.equal(up.chunks, 3, '160 KiB in 64 KiB chunks');
  assert.deepEqual(seen.copies, [
    [64 * KiB, HTOD],
    [64 * KiB, HTOD],
    [32 * KiB, HTOD],
  ]);
  assert.deepEqual(seen.batches, [], 'no batched copy: each chunk is one run');
  assert.deepEqual(seen.requests, [16, 16, 8], 'one gather per chunk, of its 16 (then 8) arrays');
  const outs = srcs.map(() => new Uint8Array(each));
  reset();
  await st.downloadMany(outs.map((o, i) => ({ dst: o, src: dst, srcOffset: i * each })));
  assert.deepEqual(
    seen.copies.map(([n]) => n),
    [64 * KiB, 64 * KiB, 32 * KiB],
  );
  assert.ok(seen.copies.every(([, k]) => k === DTOH));
  assert.deepEqual(seen.requests, [16, 16, 8], 'one scatter per chunk');
  outs.forEach((o, i) => assert.deepEqual(o, srcs[i], `array ${i}`));
});

test('a list landing in reverse or shuffled order is laid out in device order in each slot: one copy per chunk, up and down', async () => {
  const n = 32;
  const each = 4 * KiB;
  using t = setup(n, each, 100);
  const { st, dst, srcs, seen, reset } = t;
  const reversed = (i: number): number => (n - 1 - i) * each;
  await st.uploadMany(srcs.map((src, i) => ({ dst, src, dstOffset: reversed(i) })));
  assert.deepEqual(seen.batches, [], 'no batched copy: each chunk sits in its slot as in device memory');
  assert.deepEqual(seen.copies, [
    [64 * KiB, HTOD],
    [64 * KiB, HTOD],
  ]);
  assert.deepEqual(seen.requests, [16, 16], 'one gather per chunk');
  const out = new Uint8Array(n * each);
  await st.download(out, dst);
  srcs.forEach((s, i) => assert.deepEqual(out.subarray(reversed(i), reversed(i) + each), s, `array ${i} at its place`));
  // Shuffled within each chunk's 16 pieces (a fixed permutation): still one copy per chunk, each array at its place.
  const perm = [5, 12, 0, 9, 3, 15, 7, 1, 14, 10, 2, 8, 13, 4, 11, 6];
  const shuffled = (i: number): number => (16 * Math.floor(i / 16) + perm[i % 16]!) * each;
  reset();
  await st.uploadMany(srcs.map((src, i) => ({ dst, src, dstOffset: shuffled(i) })));
  assert.deepEqual(seen.batches, []);
  assert.deepEqual(
    seen.copies.map(([b]) => b),
    [64 * KiB, 64 * KiB],
  );
  const outs = srcs.map(() => new Uint8Array(each));
  reset();
  await st.downloadMany(outs.map((o, i) => ({ dst: o, src: dst, srcOffset: reversed(i) })));
  assert.deepEqual(seen.batches, []);
  assert.deepEqual(seen.copies, [
    [64 * KiB, DTOH],
    [64 * KiB, DTOH],
  ]);
  assert.deepEqual(seen.requests, [16, 16], 'one scatter per chunk');
  outs.forEach((o, i) => assert.deepEqual(o, srcs[srcs.findIndex((_, j) => shuffled(j) === reversed(i))], `array ${i} read back from its place`));
});

test('pieces that do not continue each other go in one batched copy per chunk; runs that do are merged first', async () => {
  const n = 32;
  const each = 4 * KiB;
  using t = setup(n, each, 100, { room: 2 });
  const { st, dst, srcs, seen, reset } = t;
  // Every other place, in reverse: laid out in device order, no two pieces of a chunk continue each other.
  const spread = (i: number): number => 2 * (n - 1 - i) * each;
  reset();
  await st.uploadMany(srcs.map((src, i) => ({ dst, src, dstOffset: spread(i) })));
  assert.deepEqual(seen.batches, [16, 16], 'one batch per chunk, every piece in it');
  assert.deepEqual(seen.copies, [], 'no copy of its own for any piece');
  // In pairs with a gap between pairs: a chunk's 16 pieces are 8 runs.
  const paired = (i: number): number => i * each + Math.floor(i / 2) * each;
  reset();
  await st.uploadMany(srcs.map((src, i) => ({ dst, src, dstOffset: paired(i) })));
  assert.deepEqual(seen.batches, [8, 8]);
  const out = new Uint8Array(2 * n * each);
  await st.download(out, dst);
  srcs.forEach((s, i) => assert.deepEqual(out.subarray(paired(i), paired(i) + each), s, `array ${i} at its place`));
});

test('a list whose items overlap in device memory keeps the order asked in its chunk: the later item wins, as before', async () => {
  const n = 16;
  const each = 4 * KiB;
  using t = setup(n, each, 150, { room: 2 });
  const { st, dst, srcs, seen } = t;
  // Descending places half an array apart: each item overlaps the next one's range, so nothing is laid out anew.
  const place = (i: number): number => ((n - 1 - i) * each) / 2;
  await st.uploadMany(srcs.map((src, i) => ({ dst, src, dstOffset: place(i) })));
  assert.deepEqual(seen.batches, [16], 'one batch of the pieces in the order asked');
  const out = new Uint8Array(2 * n * each);
  await st.download(out, dst);
  // The host backend runs a batch's copies in order: the later item's bytes are on top where two overlap.
  const want = new Uint8Array(2 * n * each);
  srcs.forEach((s, i) => want.set(s, place(i)));
  assert.deepEqual(out, want);
});

test('managed memory is never batched: one copy of the default kind per run of pieces', async () => {
  const n = 16;
  const each = 4 * KiB;
  using t = setup(n, each, 200, { managed: true, room: 2 });
  const { st, dst, srcs, seen, reset } = t;
  await st.uploadMany(srcs.map((src, i) => ({ dst, src, dstOffset: i * each })));
  assert.deepEqual(seen.copies, [[64 * KiB, DEFAULT]]);
  reset();
  // In reverse, laid out in device order: one copy again.
  await st.uploadMany(srcs.map((src, i) => ({ dst, src, dstOffset: (n - 1 - i) * each })));
  assert.deepEqual(seen.copies, [[64 * KiB, DEFAULT]]);
  reset();
  // Every other place: no piece continues another, one copy each.
  await st.uploadMany(srcs.map((src, i) => ({ dst, src, dstOffset: 2 * (n - 1 - i) * each })));
  assert.deepEqual(seen.batches, []);
  assert.equal(seen.copies.length, n, 'one copy per piece: none continues another');
  assert.ok(seen.copies.every(([b, k]) => b === each && k === DEFAULT));
  const out = new Uint8Array(2 * n * each);
  await st.download(out, dst);
  srcs.forEach((s, i) => assert.deepEqual(out.subarray(2 * (n - 1 - i) * each, (2 * (n - 1 - i) + 1) * each), s));
});

test('many rt.upload calls of one turn share chunks: one copy and one host request per chunk', async () => {
  const n = 64;
  const each = 2 * KiB;
  using t = setup(n, each, 300, { depth: 4 });
  const { st, dst, srcs, seen } = t;
  const results = await Promise.all(srcs.map((s, i) => st.upload(dst, s, { dstOffset: i * each })));
  assert.ok(results.every((r) => r.path === 'staged' && r.bytes === each && r.chunks === 1));
  assert.deepEqual(seen.copies, [
    [64 * KiB, HTOD],
    [64 * KiB, HTOD],
  ]);
  assert.deepEqual(seen.requests, [32, 32]);
});
