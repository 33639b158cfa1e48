/**
 * Lists and queues of transfers, run on every backend with a device: uploadMany / downloadMany byte-exact over
 * counts, mixed sizes, offsets and chunk sizes, packed into as few chunks as the bytes need; many rt.upload calls at
 * once packed the same way; transfers to and from the same buffer kept in the order asked; a list refused whole
 * when one item is bad; each item's path in the list's result; a buffer detached before the engine reached it.
 * Nothing here is timed.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ErrorCode } from '../errors.js';
import type { Runtime } from '../runtime/runtime.js';
import { propertyParams } from '../testing/property.js';
import type { UploadItem } from './stager.js';
import { holdDeviceCopy } from './hold.js';
import { code, pattern } from './transfer.case.js';

const KiB = 1024;

export function manyConformance(label: string, open: () => Runtime): void {
  const withRt = (name: string, fn: (rt: Runtime) => Promise<void> | void): void => {
    test(`${label}: ${name}`, async () => {
      using rt = open();
      await fn(rt);
    });
  };

  withRt('uploadMany then downloadMany is byte-exact for lists of mixed sizes and offsets, packed into as few chunks as the bytes need', async (rt) => {
    const gpu = rt.device(0);
    const item = fc.record({
      bytes: fc.integer({ min: 1, max: 40 * KiB }),
      srcOffset: fc.integer({ min: 0, max: 300 }),
      gap: fc.integer({ min: 0, max: 700 }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(item, { minLength: 1, maxLength: 60 }),
        fc.constantFrom(4 * KiB, 8 * KiB + 512, 64 * KiB),
        fc.integer({ min: 2, max: 5 }),
        fc.constantFrom('device', 'managed'),
        async (items, chunkBytes, depth, kind) => {
          using st = rt.createStager({ chunkBytes, depth, threads: 2, directBelow: 0 });
          // Every item lands at its own place in one allocation, with gaps between that must stay untouched.
          const places: number[] = [];
          let end = 0;
          for (const it of items) {
            end += it.gap;
            places.push(end);
            end += it.bytes;
          }
          using dst = kind === 'device' ? gpu.alloc(end + 64) : gpu.allocManaged(end + 64);
          rt.fill(dst, 0xee);
          const srcs = items.map((it, i) => pattern(it.srcOffset + it.bytes, i));
          const list: UploadItem[] = items.map((it, i) => ({ dst, src: srcs[i]!, srcOffset: it.srcOffset, dstOffset: places[i]! }));
          const up = await st.uploadMany(list);
          const total = items.reduce((a, it) => a + it.bytes, 0);
          assert.equal(up.bytes, total);
          assert.equal(up.items, items.length);
          assert.deepEqual(up.paths, Array(items.length).fill('staged'));
          // Packed: the ring's chunks are filled back to back, whatever the items' boundaries.
          assert.equal(up.chunks, Math.ceil(total / chunkBytes), 'chunks = total bytes / chunk size, rounded up');
          const whole = new Uint8Array(end + 64);
          await st.download(whole, dst);
          const expected = new Uint8Array(end + 64).fill(0xee);
          items.forEach((it, i) => expected.set(srcs[i]!.subarray(it.srcOffset), places[i]!));
          assert.deepEqual(whole, expected, 'every item at its place, nothing between them or after the last');
          // And back, into separate buffers at offsets.
          const outs = items.map((it) => new Uint8Array(it.bytes + 3).fill(0x11));
          const down = await st.downloadMany(items.map((it, i) => ({ dst: outs[i]!, src: dst, srcOffset: places[i]!, dstOffset: 3, bytes: it.bytes })));
          assert.equal(down.direction, 'download');
          assert.equal(down.chunks, Math.ceil(total / chunkBytes));
          outs.forEach((o, i) => {
            assert.deepEqual(o.subarray(3), srcs[i]!.subarray(items[i]!.srcOffset), `item ${i}`);
            assert.deepEqual([...o.subarray(0, 3)], [0x11, 0x11, 0x11], `nothing before item ${i}`);
          });
        },
      ),
      propertyParams(25),
    );
  });

  withRt('many rt.upload calls at once are packed into shared chunks, each lands whole, each promise resolves', async (rt) => {
    const gpu = rt.device(0);
    using st = rt.createStager({ chunkBytes: 64 * KiB, depth: 4, threads: 2, directBelow: 0 });
    const n = 200;
    using dst = gpu.alloc(n * KiB);
    const srcs = Array.from({ length: n }, (_, i) => pattern(KiB, i));
    const before = st.flow.chunksStarted;
    const results = await Promise.all(srcs.map((s, i) => st.upload(dst, s, { dstOffset: i * KiB })));
    assert.ok(
      results.every((r) => r.path === 'staged' && r.bytes === KiB),
      'each call reports its own transfer',
    );
    assert.equal(st.flow.chunksStarted - before, Math.ceil((n * KiB) / (64 * KiB)), '200 KiB in 64 KiB chunks: 4 chunks, not 200');
    const out = new Uint8Array(n * KiB);
    await st.download(out, dst);
    srcs.forEach((s, i) => assert.deepEqual(out.subarray(i * KiB, (i + 1) * KiB), s, `upload ${i}`));
  });

  withRt('transfers queued together through one stager keep the order asked: the later write wins, a read sees the writes before it', async (rt) => {
    const gpu = rt.device(0);
    using st = rt.createStager({ chunkBytes: 8 * KiB, depth: 3, threads: 2, directBelow: 0 });
    using dev = gpu.alloc(64 * KiB);
    using other = gpu.alloc(64 * KiB);
    const a = pattern(64 * KiB, 1);
    const b = pattern(64 * KiB, 2);
    // Two uploads to the same place: the second lands last.
    await Promise.all([st.upload(dev, a), st.upload(dev, b)]);
    const out = new Uint8Array(64 * KiB);
    await st.download(out, dev);
    assert.deepEqual(out, b);
    // Download into a buffer, then upload from that same buffer: the upload sends what the download brought.
    await st.upload(other, a);
    const buf = new Uint8Array(64 * KiB);
    await Promise.all([st.download(buf, other), st.upload(dev, buf)]);
    await st.download(out, dev);
    assert.deepEqual(out, a, 'the upload read the buffer after the download wrote it');
    // Upload from a buffer, then download into it: the upload sends the buffer as it was.
    const c = pattern(64 * KiB, 3);
    await st.upload(other, pattern(64 * KiB, 4));
    await Promise.all([st.upload(dev, c), st.download(c, other)]);
    await st.download(out, dev);
    assert.deepEqual(out, pattern(64 * KiB, 3), 'the download waited for the upload still reading the buffer');
    assert.deepEqual(c, pattern(64 * KiB, 4));
  });

  withRt("two lists writing the same host buffers land in the order asked: the later list's bytes win", async (rt) => {
    const gpu = rt.device(0);
    using st = rt.createStager({ chunkBytes: 8 * KiB, depth: 3, threads: 2, directBelow: 0 });
    using first = gpu.alloc(64 * KiB);
    using second = gpu.alloc(64 * KiB);
    await st.upload(first, pattern(64 * KiB, 5));
    await st.upload(second, pattern(64 * KiB, 6));
    // 64 buffers, eight chunks per list: the second list's chunks find the first's writes still in flight.
    const bufs = Array.from({ length: 64 }, () => new Uint8Array(KiB));
    const list = (src: typeof first) => bufs.map((dst, i) => ({ dst, src, srcOffset: i * KiB }));
    await Promise.all([st.downloadMany(list(first)), st.downloadMany(list(second))]);
    const want = pattern(64 * KiB, 6);
    bufs.forEach((b, i) => assert.deepEqual(b, want.subarray(i * KiB, (i + 1) * KiB), `buffer ${i}`));
  });

  withRt('pinned and pageable items of one list each take their own path; a bad item refuses the whole list before anything is copied', async (rt) => {
    const gpu = rt.device(0);
    using dst = gpu.alloc(64 * KiB);
    rt.fill(dst, 0x5a);
    using pinned = rt.allocPinned(8 * KiB);
    pinned.view().set(pattern(8 * KiB, 7));
    const r = await rt.uploadMany([
      { dst, src: pattern(4 * KiB, 1) },
      { dst, src: pinned, dstOffset: 8 * KiB },
      { dst, src: pattern(2 * KiB, 2), dstOffset: 16 * KiB },
    ]);
    assert.deepEqual(r.paths.slice(0, 2), ['staged', 'pinned']);
    const out = new Uint8Array(64 * KiB);
    await rt.download(out, dst);
    assert.deepEqual(out.subarray(8 * KiB, 16 * KiB), pattern(8 * KiB, 7));
    assert.deepEqual(out.subarray(0, 4 * KiB), pattern(4 * KiB, 1));
    rt.fill(dst, 0x5a);
    const bad = [
      [
        { dst, src: pattern(KiB, 1) },
        { dst, src: pattern(KiB, 1), dstOffset: 64 * KiB },
      ],
      [
        { dst, src: pattern(KiB, 1) },
        { dst, src: new Uint8Array(0) },
      ],
      [
        { dst, src: pattern(KiB, 1) },
        { dst: 12345, src: pattern(KiB, 1) },
      ],
      [{ dst, src: pattern(KiB, 1) }, null],
    ] as unknown as UploadItem[][];
    await assert.rejects(rt.uploadMany(bad[0]!), (e: unknown) => code(ErrorCode.OUT_OF_BOUNDS)(e) && /item 1/.test((e as Error).message));
    await assert.rejects(rt.uploadMany(bad[1]!), code(ErrorCode.INVALID_SIZE));
    await assert.rejects(rt.uploadMany(bad[2]!), code(ErrorCode.FOREIGN_ADDRESS));
    await assert.rejects(rt.uploadMany(bad[3]!), /item 1 is not an object/);
    await assert.rejects(rt.uploadMany([]), code(ErrorCode.INVALID_SIZE));
    await assert.rejects(rt.uploadMany('x' as unknown as UploadItem[]), code(ErrorCode.INVALID_ARGUMENT));
    await rt.download(out, dst);
    assert.ok(
      out.every((x) => x === 0x5a),
      'nothing of a refused list was copied',
    );
    assert.equal(dst.busy, false, 'a refused list holds nothing');
  });

  withRt("a list's result names each item's path in the list's order, and reads like any other property", async (rt) => {
    const gpu = rt.device(0);
    using dst = gpu.alloc(64 * KiB);
    using pinned = rt.allocPinned(4 * KiB);
    using registered = rt.allocPageable(new ArrayBuffer(4 * KiB), { register: true });
    const r = await rt.uploadMany([
      { dst, src: pattern(4 * KiB, 1) },
      { dst, src: pinned, dstOffset: 8 * KiB },
      { dst, src: registered, dstOffset: 16 * KiB },
      { dst, src: pattern(2 * KiB, 2), dstOffset: 24 * KiB },
    ]);
    assert.deepEqual(r.paths, ['staged', 'pinned', 'registered', 'staged']);
    assert.equal(r.paths, r.paths, 'made once');
    assert.ok(Object.keys(r).includes('paths'));
    assert.deepEqual(JSON.parse(JSON.stringify(r)).paths, ['staged', 'pinned', 'registered', 'staged']);
    assert.deepEqual({ ...r }.paths, r.paths);
    const one = await rt.uploadMany([{ dst, src: pinned }]);
    assert.deepEqual(one.paths, ['pinned']);
    assert.equal(one.path, 'pinned');
  });

  withRt('a JS buffer detached before the engine reached it fails its transfer with INVALID_STATE, nothing of it copied; the rest goes on', async (rt) => {
    const gpu = rt.device(0);
    using st = rt.createStager({ chunkBytes: 8 * KiB, depth: 2, threads: 2, directBelow: 0 });
    using dst = gpu.alloc(96 * KiB);
    rt.fill(dst, 0x5a);
    const a = pattern(64 * KiB, 1);
    const b = [pattern(8 * KiB, 2), pattern(8 * KiB, 3)];
    // The first transfer fills the ring (two 8 KiB chunks of eight) and waits at its first device copy; the list
    // behind it is queued, not yet in a chunk, when its second array is detached (handed to another owner).
    const hold = holdDeviceCopy(st, 1);
    const first = st.upload(dst, a);
    const list = st.uploadMany(b.map((src, i) => ({ dst, src, dstOffset: 64 * KiB + i * 16 * KiB })));
    await hold.reached;
    structuredClone(b[1]!.buffer, { transfer: [b[1]!.buffer as ArrayBuffer] });
    assert.equal(b[1]!.byteLength, 0, 'detached');
    hold.release();
    await first;
    await assert.rejects(list, code(ErrorCode.INVALID_STATE));
    const out = new Uint8Array(96 * KiB);
    await st.download(out, dst);
    assert.deepEqual(out.subarray(0, 64 * KiB), a, 'the transfer before it landed whole');
    assert.ok(
      out.subarray(80 * KiB).every((x) => x === 0x5a),
      'nothing of the detached array was copied',
    );
    assert.equal(dst.busy, false);
    const again = pattern(8 * KiB, 4);
    await st.upload(dst, again, { dstOffset: 80 * KiB });
    await st.download(out, dst);
    assert.deepEqual(out.subarray(80 * KiB, 88 * KiB), again, 'the stager goes on');
  });

  withRt('items may be slices of the same buffers in any order, up and down, and a later upload from them sees what the download wrote', async (rt) => {
    const gpu = rt.device(0);
    using st = rt.createStager({ chunkBytes: 64 * KiB, depth: 3, threads: 2, directBelow: 0 });
    // The arrays come from the first half of one allocation and go back up into its second half.
    using mem = gpu.alloc(128 * KiB);
    const src = pattern(64 * KiB, 9);
    await st.upload(mem, src);
    // Two buffers, their slices interleaved: one chunk's pieces come back to a buffer after leaving it.
    const a = new Uint8Array(32 * KiB);
    const b = new Uint8Array(32 * KiB);
    const slices = Array.from({ length: 16 }, (_, i) => (i % 2 === 0 ? a : b).subarray((i >> 1) * 4 * KiB, ((i >> 1) + 1) * 4 * KiB));
    const down = st.downloadMany(slices.map((dst, i) => ({ dst, src: mem, srcOffset: i * 4 * KiB })));
    const up = st.uploadMany(slices.map((s, i) => ({ dst: mem, src: s, dstOffset: 64 * KiB + i * 4 * KiB })));
    await Promise.all([down, up]);
    slices.forEach((s, i) => assert.deepEqual(s, src.subarray(i * 4 * KiB, (i + 1) * 4 * KiB), `slice ${i}`));
    const out = new Uint8Array(64 * KiB);
    await st.download(out, mem, { srcOffset: 64 * KiB });
    assert.deepEqual(out, src, 'the upload read the slices after the download filled them');
  });

  withRt('lists of views of one pool, alone or mixed with arrays of their own, in any order, land byte-exact up and down across chunks', async (rt) => {
    const gpu = rt.device(0);
    // Each item is a slice of one pool buffer (the pool cut into consecutive slices) or an array of its own; the
    // items are shuffled, so runs of one buffer are broken by the others, and the chunks cut pieces at their ends.
    const item = fc.record({ bytes: fc.integer({ min: 1, max: 6 * KiB }), pooled: fc.boolean(), key: fc.nat() });
    await fc.assert(
      fc.asyncProperty(
        fc.array(item, { minLength: 2, maxLength: 80 }),
        fc.constantFrom(4 * KiB, 8 * KiB + 512, 64 * KiB),
        fc.integer({ min: 2, max: 4 }),
        async (items, chunkBytes, depth) => {
          using st = rt.createStager({ chunkBytes, depth, threads: 2, directBelow: 0 });
          const poolBytes = items.reduce((a, it) => a + (it.pooled ? it.bytes : 0), 0);
          const pool = new ArrayBuffer(Math.max(1, poolBytes) + 16);
          let at = 8;
          const srcs = items.map((it, i) => {
            const v = it.pooled ? new Uint8Array(pool, at, it.bytes) : new Uint8Array(it.bytes);
            if (it.pooled) at += it.bytes;
            v.set(pattern(it.bytes, i));
            return v;
          });
          const order = items.map((_, i) => i).sort((a, b) => items[a]!.key - items[b]!.key || a - b);
          const places: number[] = [];
          let end = 0;
          for (const it of items) {
            places.push(end);
            end += it.bytes;
          }
          using dst = gpu.alloc(end);
          rt.fill(dst, 0xee);
          const up = await st.uploadMany(order.map((i) => ({ dst, src: srcs[i]!, dstOffset: places[i]! })));
          assert.equal(up.bytes, end);
          const whole = new Uint8Array(end);
          await st.download(whole, dst);
          items.forEach((it, i) => assert.deepEqual(whole.subarray(places[i]!, places[i]! + it.bytes), pattern(it.bytes, i), `item ${i} uploaded`));
          // Back into views of another pool (the same shape), in another order, with the pool's edges left alone.
          const back = new ArrayBuffer(Math.max(1, poolBytes) + 16);
          new Uint8Array(back).fill(0x11);
          at = 8;
          const outs = items.map((it) => {
            const v = it.pooled ? new Uint8Array(back, at, it.bytes) : new Uint8Array(it.bytes);
            if (it.pooled) at += it.bytes;
            return v;
          });
          await st.downloadMany([...order].reverse().map((i) => ({ dst: outs[i]!, src: dst, srcOffset: places[i]! })));
          outs.forEach((o, i) => assert.deepEqual(o, pattern(items[i]!.bytes, i), `item ${i} downloaded`));
          const edges = new Uint8Array(back);
          assert.deepEqual([...edges.subarray(0, 8)], Array(8).fill(0x11), 'nothing before the first slice');
          assert.ok(
            edges.subarray(8 + poolBytes).every((x) => x === 0x11),
            'nothing after the last slice',
          );
        },
      ),
      propertyParams(25),
    );
  });

  withRt(
    'an array detached in the middle of a long list fails the list with INVALID_STATE, nothing of it copied; what was queued after goes on',
    async (rt) => {
      const gpu = rt.device(0);
      using st = rt.createStager({ chunkBytes: 8 * KiB, depth: 2, threads: 2, directBelow: 0 });
      using dst = gpu.alloc(512 * KiB);
      rt.fill(dst, 0x5a);
      const first = pattern(64 * KiB, 1);
      // 64 arrays of 3 KiB: pieces cut at the chunks' ends, several chunks before and after the detached one.
      const arrays = Array.from({ length: 64 }, (_, i) => pattern(3 * KiB, i + 2));
      const hold = holdDeviceCopy(st, 1);
      const a = st.upload(dst, first);
      const list = st.uploadMany(arrays.map((src, i) => ({ dst, src, dstOffset: 64 * KiB + i * 4 * KiB })));
      const after = pattern(16 * KiB, 99);
      const later = st.upload(dst, after, { dstOffset: 448 * KiB });
      await hold.reached;
      structuredClone(arrays[37]!.buffer, { transfer: [arrays[37]!.buffer as ArrayBuffer] });
      assert.equal(arrays[37]!.byteLength, 0, 'detached');
      hold.release();
      await a;
      await assert.rejects(list, code(ErrorCode.INVALID_STATE));
      await later;
      const out = new Uint8Array(512 * KiB);
      await st.download(out, dst);
      assert.deepEqual(out.subarray(0, 64 * KiB), first, 'the transfer before the list landed whole');
      assert.ok(
        out.subarray(64 * KiB + 37 * 4 * KiB, 64 * KiB + 38 * 4 * KiB).every((x) => x === 0x5a),
        'nothing of the detached array was copied',
      );
      assert.deepEqual(out.subarray(448 * KiB, 464 * KiB), after, 'the upload queued after the list landed whole');
      assert.equal(dst.busy, false, 'the failed list holds nothing');
    },
  );

  withRt('lists in any order land byte-exact, up and down: in reverse, shuffled, with gaps, and with items of one list overlapping', async (rt) => {
    const gpu = rt.device(0);
    using st = rt.createStager({ chunkBytes: 64 * KiB, depth: 3, threads: 2, directBelow: 0 });
    const n = 48;
    const each = 4 * KiB;
    using mem = gpu.alloc(3 * n * each);
    const srcs = Array.from({ length: n }, (_, i) => pattern(each, 700 + i));
    // A fixed shuffle that moves items across chunk boundaries (a chunk holds 16 of them).
    const shuffle = Array.from({ length: n }, (_, i) => (i * 29 + 7) % n);
    const orders: Array<[string, (i: number) => number]> = [
      ['reverse', (i) => (n - 1 - i) * each],
      ['shuffled', (i) => shuffle[i]! * each],
      ['reverse with gaps', (i) => 3 * (n - 1 - i) * each],
      ['shuffled with gaps of every size', (i) => shuffle[i]! * 2 * each + (i % 5) * 64],
    ];
    for (const [name, place] of orders) {
      await st.upload(mem, new Uint8Array(3 * n * each));
      await st.uploadMany(srcs.map((src, i) => ({ dst: mem, src, dstOffset: place(i) })));
      const want = new Uint8Array(3 * n * each);
      srcs.forEach((s, i) => want.set(s, place(i)));
      const all = new Uint8Array(3 * n * each);
      await st.download(all, mem);
      assert.deepEqual(all, want, `${name}: every array at its place, nothing else written`);
      const outs = srcs.map(() => new Uint8Array(each));
      await st.downloadMany(outs.map((dst, i) => ({ dst, src: mem, srcOffset: place(i) })));
      outs.forEach((o, i) => assert.deepEqual(o, srcs[i], `${name}: array ${i} read back`));
    }
    // Items of one list that overlap land in no set order among themselves: each byte holds one of the items that cover it.
    await st.upload(mem, new Uint8Array(3 * n * each));
    const half = (i: number): number => ((n - 1 - i) * each) / 2;
    const fills = Array.from({ length: n }, (_, i) => new Uint8Array(each).fill(i + 1));
    await st.uploadMany(fills.map((src, i) => ({ dst: mem, src, dstOffset: half(i) })));
    const got = new Uint8Array(3 * n * each);
    await st.download(got, mem);
    for (let at = 0; at < got.length; at++) {
      // Item i covers the half-array blocks n-1-i and n-i: a block b is covered by items n-1-b and n-b.
      const b = Math.floor(at / (each / 2));
      const covering = [n - 1 - b, n - b].filter((i) => i >= 0 && i < n).map((i) => i + 1);
      if (covering.length === 0) assert.equal(got[at], 0, `byte ${at}: no item covers it`);
      else if (!covering.includes(got[at]!)) assert.fail(`byte ${at}: ${got[at]} is not one of the items covering it (${covering})`);
    }
    // Downloads of overlapping device ranges read the same bytes wherever they sit in the slot.
    const outs = fills.map(() => new Uint8Array(each));
    await st.downloadMany(outs.map((dst, i) => ({ dst, src: mem, srcOffset: half(i) })));
    outs.forEach((o, i) => assert.deepEqual(o, got.subarray(half(i), half(i) + each), `overlapping item ${i} read back`));
  });

  withRt(
    'an item of a long list is checked as an item alone: the same error naming its index, whatever its place; good items of every host kind land',
    async (rt) => {
      const gpu = rt.device(0);
      using dst = gpu.alloc(64 * KiB);
      using other = gpu.alloc(8 * KiB);
      const detachedView = new Uint8Array(KiB);
      structuredClone(detachedView.buffer, { transfer: [detachedView.buffer] });
      const shared = typeof SharedArrayBuffer === 'undefined' ? undefined : new Uint8Array(new SharedArrayBuffer(KiB));
      const bads: Array<[string, Record<string, unknown>]> = [
        ['device offset past the end', { dst, src: pattern(KiB, 1), dstOffset: 64 * KiB }],
        ['more bytes than the source has', { dst, src: pattern(KiB, 1), bytes: 2 * KiB }],
        ['more bytes than the destination has', { dst: other, src: pattern(16 * KiB, 1) }],
        ['a fractional offset', { dst, src: pattern(KiB, 1), dstOffset: 1.5 }],
        ['a negative source offset', { dst, src: pattern(KiB, 1), srcOffset: -1 }],
        ['bytes as a string', { dst, src: pattern(KiB, 1), bytes: '8' }],
        ['zero bytes', { dst, src: pattern(KiB, 1), bytes: 0 }],
        ['an empty view', { dst, src: new Uint8Array(0) }],
        ['a detached buffer', { dst, src: detachedView }],
        ['a number as the host side', { dst, src: 7 }],
        ['a foreign device address', { dst: 12345, src: pattern(KiB, 1) }],
        ['host memory as the destination', { dst: pattern(KiB, 3), src: pattern(KiB, 1) }],
        ...(shared ? ([['a SharedArrayBuffer view', { dst, src: shared }]] as Array<[string, Record<string, unknown>]>) : []),
      ];
      const good = (i: number): UploadItem => ({ dst, src: pattern(KiB, 10 + i), dstOffset: i * KiB });
      for (const [name, bad] of bads) {
        const alone = await rt.uploadMany([bad as unknown as UploadItem]).then(
          () => assert.fail(`${name}: accepted alone`),
          (e: Error & { code?: string }) => e,
        );
        for (const at of [0, 1, 37]) {
          const list = Array.from({ length: 40 }, (_, i) => good(i));
          list[at] = bad as unknown as UploadItem;
          await assert.rejects(
            rt.uploadMany(list),
            (e: Error & { code?: string }) =>
              e.constructor === alone.constructor && e.code === alone.code && e.message === alone.message.replace('item 0', `item ${at}`),
            `${name} at ${at}: ${alone.message}`,
          );
        }
      }
      assert.equal(dst.busy, false, 'a refused list holds nothing');
      // Every kind of host side, with offsets and lengths, and two device allocations taking turns.
      const bytes = pattern(8 * KiB, 40);
      const kinds: UploadItem[] = [
        { dst, src: bytes.buffer.slice(0, KiB) as ArrayBuffer, dstOffset: 0 },
        { dst, src: new DataView(bytes.buffer, KiB, KiB), dstOffset: KiB },
        { dst: other, src: Buffer.from(bytes.buffer, 2 * KiB, KiB), dstOffset: 0 },
        { dst, src: new Uint32Array(bytes.buffer, 3 * KiB, KiB / 4), dstOffset: 3 * KiB },
        { dst: other, src: bytes, srcOffset: 4 * KiB, bytes: KiB, dstOffset: KiB },
        { dst, src: bytes.subarray(5 * KiB), bytes: KiB, dstOffset: 5 * KiB },
        { dst, src: bytes, srcOffset: 6 * KiB, dstOffset: 6 * KiB },
      ];
      const r = await rt.uploadMany(kinds);
      assert.equal(r.bytes, 8 * KiB);
      const out = new Uint8Array(64 * KiB);
      await rt.download(out, dst);
      const side = new Uint8Array(8 * KiB);
      await rt.download(side, other);
      for (const k of [0, 1, 3, 5, 6, 7]) assert.deepEqual(out.subarray(k * KiB, (k + 1) * KiB), bytes.subarray(k * KiB, (k + 1) * KiB), `KiB ${k}`);
      assert.deepEqual(side.subarray(0, KiB), bytes.subarray(2 * KiB, 3 * KiB), 'the other allocation, from a Buffer');
      assert.deepEqual(side.subarray(KiB, 2 * KiB), bytes.subarray(4 * KiB, 5 * KiB), 'the other allocation, from an offset with a length');
    },
  );

  withRt('items naming their device memory by address land where each address says: runs of one address, several addresses into one allocation', async (rt) => {
    const gpu = rt.device(0);
    using dst = gpu.alloc(64 * KiB);
    const each = KiB;
    const srcs = Array.from({ length: 24 }, (_, i) => pattern(each, 900 + i));
    // Runs of three items per reference: the allocation, then addresses inside it (8 KiB apart), then the allocation again.
    const refs = [dst, dst.address + 8 * KiB, dst.address + 16 * KiB, dst, dst.address + 40 * KiB, dst.address + 8 * KiB, dst.address + 48 * KiB, dst];
    const base = (r: number): number => (typeof refs[r] === 'number' ? (refs[r] as number) - dst.address : 0);
    const place = (i: number): number =>
      base(Math.floor(i / 3)) +
      (i % 3) * each +
      (Math.floor(i / 3) === 5 ? 4 * KiB : 0) +
      (refs[Math.floor(i / 3)] === dst ? 24 * KiB + Math.floor(i / 3) * 3 * KiB : 0);
    const items = srcs.map((src, i) => ({ dst: refs[Math.floor(i / 3)]!, src, dstOffset: place(i) - base(Math.floor(i / 3)) }));
    await rt.uploadMany(items);
    const out = new Uint8Array(64 * KiB);
    await rt.download(out, dst);
    srcs.forEach((s, i) => assert.deepEqual(out.subarray(place(i), place(i) + each), s, `item ${i} at ${place(i)}`));
    const backs = srcs.map(() => new Uint8Array(each));
    await rt.downloadMany(backs.map((b, i) => ({ dst: b, src: refs[Math.floor(i / 3)]!, srcOffset: place(i) - base(Math.floor(i / 3)) })));
    backs.forEach((b, i) => assert.deepEqual(b, srcs[i], `item ${i} read back`));
  });
}
