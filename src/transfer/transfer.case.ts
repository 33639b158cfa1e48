/**
 * The transfer conformance suite, run on every backend with a device (host always; cuda and hip where present):
 * staged uploads and downloads byte-exact over random sizes, offsets and chunk sizes; the path each took; stream
 * ordering; refusals before anything is copied; memory held busy while in flight; abort; disposal mid-transfer;
 * batched copies and their overlap check; captured chains; the pipeline. These cases time nothing: the figures come
 * from `gpumem bench --only transfer` (docs/performance.md).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { propertyParams } from '../testing/property.js';
import { ErrorCode, GpuError, InvalidArgumentError } from '../errors.js';
import { BENCH_KERNELS } from '../kernels/bench-kernels.js';
import type { Runtime } from '../runtime/runtime.js';
import type { BatchCopy } from './batch.js';
import { holdDeviceCopy } from './hold.js';

const KiB = 1024;
const MiB = 1024 * KiB;

export function pattern(n: number, seed: number): Uint8Array {
  const u = new Uint8Array(n);
  for (let i = 0; i < n; i++) u[i] = (i * 131 + seed * 7 + (i >> 9)) & 0xff;
  return u;
}

export const code = (c: string) => (e: unknown) => e instanceof GpuError && e.code === c;

/**
 * Registers the suite for one backend. `open` returns a fresh runtime. `graphs: false` leaves out the cases that
 * compile kernels and replay captured graphs (a backend over a library that only stands in for the runtime's copies).
 */
export function transferConformance(label: string, open: () => Runtime, options: { graphs?: boolean } = {}): void {
  const withRt = (name: string, fn: (rt: Runtime) => Promise<void> | void): void => {
    test(`${label}: ${name}`, async () => {
      using rt = open();
      await fn(rt);
    });
  };
  const withGraphs: typeof withRt = (name, fn) => {
    if (options.graphs !== false) withRt(name, fn);
  };

  withRt('upload then download through the stager is byte-exact at any size, offset and chunk size; nothing lands outside', async (rt) => {
    const gpu = rt.device(0);
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 300 * KiB }),
        fc.integer({ min: 0, max: 3000 }),
        fc.integer({ min: 0, max: 3000 }),
        fc.constantFrom(4 * KiB, 8 * KiB + 512, 64 * KiB),
        fc.integer({ min: 2, max: 5 }),
        fc.constantFrom('device', 'managed'),
        async (n, hostOff, devOff, chunkBytes, depth, kind) => {
          using st = rt.createStager({ chunkBytes, depth, threads: 2, directBelow: 0 });
          using dst = kind === 'device' ? gpu.alloc(n + devOff + 100) : gpu.allocManaged(n + devOff + 100);
          rt.fill(dst, 0xee);
          const src = pattern(n + hostOff, n);
          const up = await st.upload(dst, src, { srcOffset: hostOff, dstOffset: devOff });
          assert.equal(up.path, 'staged');
          assert.equal(up.bytes, n);
          assert.equal(up.chunks, Math.ceil(n / chunkBytes));
          const back = new Uint8Array(n + devOff + 100);
          const down = await st.download(back, dst, { bytes: n + devOff + 100 });
          assert.equal(down.direction, 'download');
          assert.deepEqual(back.subarray(devOff, devOff + n), src.subarray(hostOff));
          assert.ok(
            back.subarray(0, devOff).every((b) => b === 0xee),
            'nothing before the destination range',
          );
          assert.ok(
            back.subarray(devOff + n).every((b) => b === 0xee),
            'nothing after it',
          );
          // Into a typed array at an offset, and out of part of the device memory.
          const view = new Uint16Array(2 + Math.ceil(n / 2));
          await st.download(view, dst, { srcOffset: devOff, bytes: n, dstOffset: 2 });
          assert.deepEqual(new Uint8Array(view.buffer, 2, n), src.subarray(hostOff));
        },
      ),
      propertyParams(40),
    );
  });

  withRt('the path each transfer took: pinned and registered memory go direct, small pageable copies too, large ones are staged', async (rt) => {
    const gpu = rt.device(0);
    using dst = gpu.alloc(4 * MiB);
    using pinned = rt.allocPinned(MiB);
    pinned.view().set(pattern(MiB, 1));
    const viaPinned = await rt.upload(dst, pinned);
    assert.equal(viaPinned.path, 'pinned');
    using registered = rt.allocPageable(new ArrayBuffer(MiB), { register: true });
    registered.view().set(pattern(MiB, 2));
    assert.equal((await rt.upload(dst, registered)).path, 'registered');
    const small = await rt.upload(dst, pattern(1000, 3));
    assert.equal(small.path, 'direct');
    assert.equal(small.threads, 0);
    const large = await rt.upload(dst, pattern(3 * MiB, 4));
    assert.equal(large.path, 'staged');
    assert.ok(large.gbps > 0 && large.seconds > 0);
    const out = new Uint8Array(3 * MiB);
    await rt.download(out, dst, { bytes: 3 * MiB });
    assert.deepEqual(out, pattern(3 * MiB, 4));
    // Forced paths.
    assert.equal((await rt.upload(dst, pattern(1000, 5), { path: 'staged' })).path, 'staged');
    assert.equal((await rt.upload(dst, pattern(3 * MiB, 6), { path: 'direct' })).path, 'direct');
    const check = new Uint8Array(3 * MiB);
    await rt.download(check, dst, { bytes: 3 * MiB, path: 'direct' });
    assert.deepEqual(check, pattern(3 * MiB, 6));
  });

  withRt('a transfer on a stream is ordered after the work already on it, and transfers through one stager take turns', async (rt) => {
    const gpu = rt.device(0);
    using s = gpu.createStream();
    using dst = gpu.alloc(MiB);
    rt.fill(dst, 9, { stream: s });
    const a = pattern(MiB, 7);
    await rt.upload(dst, a, { stream: s, path: 'staged' });
    const out = new Uint8Array(MiB);
    await rt.download(out, dst);
    assert.deepEqual(out, a, 'the upload landed after the fill');
    // Many transfers at once through the same (default) stager: each lands whole.
    using many = gpu.alloc(8 * 256 * KiB);
    const srcs = Array.from({ length: 8 }, (_, i) => pattern(256 * KiB, 20 + i));
    await Promise.all(srcs.map((b, i) => rt.upload(many, b, { dstOffset: i * 256 * KiB, path: 'staged' })));
    const all = new Uint8Array(8 * 256 * KiB);
    await rt.download(all, many);
    for (let i = 0; i < 8; i++) assert.deepEqual(all.subarray(i * 256 * KiB, (i + 1) * 256 * KiB), srcs[i]);
  });

  withRt('bad transfers are refused before anything is copied, with typed errors', async (rt) => {
    const gpu = rt.device(0);
    assert.throws(() => rt.createStager({ chunkBytes: 0 }), code(ErrorCode.INVALID_SIZE));
    assert.throws(() => rt.createStager({ chunkBytes: 1000 }), code(ErrorCode.INVALID_SIZE));
    assert.throws(() => rt.createStager({ chunkBytes: 2 ** 40 }), code(ErrorCode.INVALID_SIZE));
    assert.throws(() => rt.createStager({ chunkBytes: 512 * MiB, depth: 64 }), code(ErrorCode.INVALID_SIZE));
    assert.throws(() => rt.createStager({ threads: 0 }), InvalidArgumentError);
    assert.throws(() => rt.createStager({ depth: 1.5 }), InvalidArgumentError);
    using small = gpu.alloc(4 * KiB);
    rt.fill(small, 0x5a);
    await assert.rejects(rt.upload(small, new Uint8Array(4 * KiB + 1)), code(ErrorCode.OUT_OF_BOUNDS));
    await assert.rejects(rt.upload(small, new Uint8Array(4 * KiB), { dstOffset: 1 }), code(ErrorCode.OUT_OF_BOUNDS));
    await assert.rejects(rt.upload(small, new Uint8Array(16), { srcOffset: 17 }), code(ErrorCode.OUT_OF_BOUNDS));
    await assert.rejects(rt.upload(small, new Uint8Array(16), { bytes: -1 }), code(ErrorCode.INVALID_SIZE));
    await assert.rejects(rt.upload(small, new Uint8Array(16), { bytes: 1.5 }), code(ErrorCode.INVALID_SIZE));
    await assert.rejects(rt.upload(small, new Uint8Array(0)), code(ErrorCode.INVALID_SIZE));
    await assert.rejects(rt.upload(small, new SharedArrayBuffer(16) as unknown as ArrayBuffer), /SharedArrayBuffer/);
    await assert.rejects(rt.upload(small, 'text' as unknown as ArrayBuffer), InvalidArgumentError);
    using pinned = rt.allocPinned(4 * KiB);
    await assert.rejects(rt.upload(pinned, new Uint8Array(16)), /expected device or managed memory/);
    await assert.rejects(rt.download(small, small), /expected host memory/);
    await assert.rejects(rt.upload(small, new Uint8Array(16), { path: 'fast' as 'auto' }), InvalidArgumentError);
    const out = new Uint8Array(4 * KiB);
    await rt.download(out, small);
    assert.ok(
      out.every((b) => b === 0x5a),
      'nothing was written by the refused transfers',
    );
    const freed = gpu.alloc(4 * KiB);
    freed.free();
    await assert.rejects(rt.upload(freed, new Uint8Array(16)), code(ErrorCode.DISPOSED));
  });

  withRt('memory in use by a transfer cannot be freed until the transfer settles', async (rt) => {
    const gpu = rt.device(0);
    const dst = gpu.alloc(2 * MiB);
    const src = rt.allocPageable(2 * MiB);
    src.view().set(pattern(2 * MiB, 11));
    const running = rt.upload(dst, src, { path: 'staged' });
    assert.equal(dst.busy, true);
    assert.throws(() => dst.free(), code(ErrorCode.BUSY));
    assert.throws(() => src.free(), code(ErrorCode.BUSY));
    await running;
    assert.equal(dst.busy, false);
    const out = new Uint8Array(2 * MiB);
    await rt.download(out, dst);
    assert.deepEqual(out, pattern(2 * MiB, 11));
    dst.free();
    src.free();
  });

  withRt('an aborted transfer stops after the chunks in flight, rejects with ABORTED, and the stager goes on working', async (rt) => {
    const gpu = rt.device(0);
    using st = rt.createStager({ chunkBytes: 16 * KiB, depth: 3, threads: 2 });
    using dst = gpu.alloc(4 * MiB);
    rt.fill(dst, 0);
    const ac = new AbortController();
    // The second chunk's device copy waits until the abort has landed: the first chunk is all that may arrive.
    const hold = holdDeviceCopy(st, 2);
    const p = st.upload(dst, pattern(4 * MiB, 3), { signal: ac.signal });
    await hold.reached;
    ac.abort();
    hold.release();
    await assert.rejects(p, code(ErrorCode.ABORTED));
    const out = new Uint8Array(4 * MiB);
    await st.download(out, dst);
    assert.deepEqual(out.subarray(0, 16 * KiB), pattern(4 * MiB, 3).subarray(0, 16 * KiB), 'the chunk copied before the abort landed');
    assert.ok(
      out.subarray(16 * KiB).every((b) => b === 0),
      'no chunk after the abort was copied',
    );
    const again = pattern(4 * MiB, 4);
    await st.upload(dst, again);
    await st.download(out, dst);
    assert.deepEqual(out, again);
    const pre = new AbortController();
    pre.abort();
    await assert.rejects(st.upload(dst, again, { signal: pre.signal }), code(ErrorCode.ABORTED));
  });

  test(`${label}: disposing the runtime during a transfer stops it cleanly: the promise rejects, nothing crashes`, async () => {
    const rt = open();
    const dst = rt.device(0).alloc(8 * MiB);
    // The transfer is held at its first device copy while the runtime goes away.
    const hold = holdDeviceCopy(rt.defaultStager(0), 1);
    const p = rt.upload(dst, pattern(8 * MiB, 1), { path: 'staged' });
    await hold.reached;
    rt[Symbol.dispose]();
    hold.release();
    await assert.rejects(p, (e: unknown) => e instanceof GpuError);
    assert.equal(dst.disposed, true);
  });

  withRt('copyBatch: one call carries many copies byte-exact; pageable copies go one by one beside it', (rt) => {
    const gpu = rt.device(0);
    using s = gpu.createStream();
    const n = 200;
    using host = rt.allocPinned(n * 4 * KiB);
    host.view().set(pattern(n * 4 * KiB, 5));
    using dev = gpu.alloc(n * 4 * KiB);
    using pageable = rt.allocPageable(4 * KiB);
    pageable.view().set(pattern(4 * KiB, 9));
    using back = rt.allocPinned(n * 4 * KiB + 4 * KiB);
    const up: BatchCopy[] = Array.from({ length: n }, (_, i) => ({
      dst: dev,
      src: host,
      dstOffset: (n - 1 - i) * 4 * KiB,
      srcOffset: i * 4 * KiB,
      bytes: 4 * KiB,
    }));
    const r = rt.copyBatch(up, { stream: s });
    // (HIP 7.1 to 7.12 also say they passed no attributes)
    assert.deepEqual(
      { copies: r.copies, bytes: r.bytes, nativeCalls: r.nativeCalls, path: r.path },
      { copies: n, bytes: n * 4 * KiB, nativeCalls: 1, path: 'batch' },
    );
    const down: BatchCopy[] = [
      { dst: back, src: dev, bytes: n * 4 * KiB },
      { dst: back, src: pageable, dstOffset: n * 4 * KiB },
    ];
    const r2 = rt.copyBatch(down, { stream: s });
    assert.equal(r2.nativeCalls, 2, 'the batch call, and the pageable copy on its own');
    s.waitSync();
    const got = back.view();
    for (let i = 0; i < n; i++)
      assert.deepEqual(got.subarray((n - 1 - i) * 4 * KiB, (n - i) * 4 * KiB), pattern(n * 4 * KiB, 5).subarray(i * 4 * KiB, (i + 1) * 4 * KiB));
    assert.deepEqual(got.subarray(n * 4 * KiB), pattern(4 * KiB, 9));
    const prepared = rt.prepareBatch(up, { stream: s });
    assert.equal(prepared.run().nativeCalls, 1);
  });

  withRt('copyBatch refuses overlapping copies and bad ones before enqueuing anything (checked against brute force)', async (rt) => {
    const gpu = rt.device(0);
    using s = gpu.createStream();
    using a = gpu.alloc(4096);
    using b = gpu.alloc(4096);
    rt.fill(a, 1);
    rt.fill(b, 2);
    const range = fc.record({
      dst: fc.constantFrom(0, 1),
      src: fc.constantFrom(0, 1),
      dstOffset: fc.integer({ min: 0, max: 3000 }),
      srcOffset: fc.integer({ min: 0, max: 3000 }),
      bytes: fc.integer({ min: 1, max: 1000 }),
    });
    fc.assert(
      fc.property(fc.array(range, { minLength: 1, maxLength: 6 }), (rs) => {
        const mem = [a, b];
        const copies = rs.map((r) => ({ dst: mem[r.dst]!, src: mem[r.src]!, dstOffset: r.dstOffset, srcOffset: r.srcOffset, bytes: r.bytes }));
        const span = (m: number, off: number, n: number): [number, number] => [mem[m]!.address + off, mem[m]!.address + off + n];
        const hit = (x: [number, number], y: [number, number]): boolean => x[0] < y[1] && y[0] < x[1];
        let bad = false;
        for (let i = 0; i < rs.length; i++) {
          for (let j = 0; j < rs.length; j++) {
            const di = span(rs[i]!.dst, rs[i]!.dstOffset, rs[i]!.bytes);
            // a copy's own destination and source may not overlap either
            if (i === j) {
              if (hit(di, span(rs[j]!.src, rs[j]!.srcOffset, rs[j]!.bytes))) bad = true;
              continue;
            }
            if (hit(di, span(rs[j]!.dst, rs[j]!.dstOffset, rs[j]!.bytes)) || hit(di, span(rs[j]!.src, rs[j]!.srcOffset, rs[j]!.bytes))) bad = true;
          }
        }
        let refused = false;
        try {
          rt.prepareBatch(copies, { stream: s });
        } catch (e) {
          assert.ok(e instanceof InvalidArgumentError && e.code === ErrorCode.OUT_OF_BOUNDS, String(e));
          refused = true;
        }
        assert.equal(refused, bad, JSON.stringify(rs));
      }),
      propertyParams(400),
    );
    assert.throws(() => rt.copyBatch([{ dst: a, src: b, bytes: 5000 }], { stream: s }), code(ErrorCode.OUT_OF_BOUNDS));
    assert.throws(() => rt.copyBatch([], { stream: s }), code(ErrorCode.INVALID_SIZE));
    assert.throws(() => rt.copyBatch([{ dst: a, src: b }], { stream: gpu.defaultStream }), /created stream/);
    assert.throws(
      () =>
        rt.copyBatch(
          [
            { dst: a, src: b, bytes: 16 },
            { dst: 12345, src: b, bytes: 16 },
          ],
          { stream: s },
        ),
      code(ErrorCode.FOREIGN_ADDRESS),
    );
    await s.synchronize();
    const check = rt.allocPinned(4096);
    rt.copy(check, a);
    assert.ok(
      check.view().every((x) => x === 1),
      'nothing was copied by the refused batches',
    );
    check.free();
  });

  withRt('copyBatch called again with the same array: any change to a copy is checked again, freed memory refused', async (rt) => {
    const gpu = rt.device(0);
    using s = gpu.createStream();
    using s2 = gpu.createStream();
    using host = rt.allocPinned(8 * KiB);
    host.view().set(pattern(8 * KiB, 3));
    using dev = gpu.alloc(8 * KiB);
    using back = rt.allocPinned(8 * KiB);
    const copies: BatchCopy[] = [
      { dst: dev, src: host, bytes: 4 * KiB },
      { dst: dev, src: host, dstOffset: 4 * KiB, srcOffset: 4 * KiB, bytes: 4 * KiB },
    ];
    for (let step = 0; step < 3; step++) assert.equal(rt.copyBatch(copies, { stream: s }).copies, 2);
    rt.copy(back, dev, { stream: s });
    await s.synchronize();
    assert.deepEqual(back.view(), pattern(8 * KiB, 3));
    // Changed in place: each change is checked as a new batch would be.
    copies[1]!.bytes = 8 * KiB;
    assert.throws(() => rt.copyBatch(copies, { stream: s }), code(ErrorCode.OUT_OF_BOUNDS));
    copies[1] = { dst: dev, src: host, dstOffset: 2 * KiB, bytes: 4 * KiB };
    assert.throws(() => rt.copyBatch(copies, { stream: s }), /overlaps/);
    copies[1] = { dst: dev, src: host, dstOffset: 4 * KiB, srcOffset: 0, bytes: 4 * KiB };
    assert.equal(rt.copyBatch(copies, { stream: s2 }).bytes, 8 * KiB, 'another stream: checked and run there');
    copies.push({ dst: back, src: dev, bytes: 4 * KiB });
    assert.throws(() => rt.copyBatch(copies, { stream: s2 }), /overlaps/, 'a copy added: the batch is checked again');
    copies.pop();
    await s2.synchronize();
    rt.copy(back, dev, { stream: s2 });
    await s2.synchronize();
    assert.deepEqual(back.view(4 * KiB), pattern(8 * KiB, 3).subarray(0, 4 * KiB));
    const gone = rt.allocPinned(4 * KiB);
    const withGone: BatchCopy[] = [{ dst: dev, src: gone }];
    rt.copyBatch(withGone, { stream: s });
    await s.synchronize();
    gone.free();
    assert.throws(
      () => rt.copyBatch(withGone, { stream: s }),
      (e: unknown) => e instanceof GpuError && e.code === ErrorCode.DISPOSED,
    );
  });

  withGraphs('a captured chain replays copies, fills, kernels, events and host functions at every launch', async (rt) => {
    const gpu = rt.device(0);
    using s = gpu.createStream();
    using src = rt.allocPinned(8 * KiB);
    using dev = gpu.alloc(8 * KiB);
    using out = rt.allocPinned(8 * KiB);
    using done = gpu.createEvent({ timing: false });
    const k = gpu.loadModule(BENCH_KERNELS).kernel('stream_scale');
    let calls = 0;
    const seen: number[] = [];
    const f64 = out.typed(Float64Array);
    using graph = rt.capture(s, (g) => {
      rt.copy(dev, src, { stream: s });
      rt.fill(dev, 0, { stream: s, offset: 4 * KiB, bytes: 8 });
      k.launch({ grid: 1, block: 64, stream: s }, dev, dev, 2, 512);
      rt.copy(out, dev, { stream: s });
      done.record(s);
      g.onHost(() => {
        calls++;
        seen.push(f64[1]!);
      });
    });
    assert.equal(graph.hostNodes, 1);
    for (let round = 1; round <= 3; round++) {
      src.typed(Float64Array).fill(round);
      await graph.launch();
      assert.equal(calls, round);
      assert.equal(f64[0], 2 * round, "the kernel ran on this launch's data");
      assert.equal(f64[512], 0, 'the fill ran after the copy');
      assert.equal(seen[round - 1], 2 * round, 'the host function ran after the copy back');
    }
    // An event recorded inside the capture orders work within the graph; launches record nothing into it.
    assert.throws(() => done.query(), code(ErrorCode.INVALID_STATE));
    done.record(s);
    await s.synchronize();
    assert.equal(done.query(), true);
  });

  withGraphs('inside a capture, waits are refused; an error in the recording or in a host function is reported', async (rt) => {
    const gpu = rt.device(0);
    using s = gpu.createStream();
    using a = gpu.alloc(1024);
    using b = gpu.alloc(1024);
    assert.throws(() => rt.capture(s, () => void rt.copy(a, b)), code(ErrorCode.INVALID_STATE));
    assert.throws(() => rt.capture(s, () => void s.waitSync()), code(ErrorCode.INVALID_STATE));
    assert.throws(() => rt.capture(s, () => void s.onHost(() => 1)), code(ErrorCode.INVALID_STATE));
    assert.throws(() => rt.capture(gpu.defaultStream, () => {}), code(ErrorCode.INVALID_STATE));
    assert.throws(
      () =>
        rt.capture(s, () => {
          throw new Error('boom');
        }),
      /boom/,
    );
    assert.throws(() => rt.capture(s, (async () => {}) as unknown as () => void), /synchronously/);
    // The stream works normally after every failed capture.
    rt.copy(a, b, { stream: s });
    await s.synchronize();
    using g = rt.capture(s, (scope) =>
      scope.onHost(() => {
        throw new Error('host function failed');
      }),
    );
    await assert.rejects(g.launch(), /host function failed/);
    g[Symbol.dispose]();
    assert.throws(() => g.enqueue(), code(ErrorCode.DISPOSED));
  });

  withGraphs('the pipeline uploads, computes and downloads every chunk and reports its stages', async (rt) => {
    const gpu = rt.device(0);
    const n = 10_000;
    using input = rt.allocPinned(n * 8);
    using output = rt.allocPinned(n * 8);
    input.typed(Float64Array).forEach((_, i, a) => {
      a[i] = i;
    });
    const scale = gpu.loadModule(BENCH_KERNELS).kernel('stream_scale');
    const r = await rt.pipeline({
      input,
      output,
      chunkBytes: 8 * 1000,
      compute: (c) => scale.launch({ grid: 4, block: 64, stream: c.stream }, c.output, c.input, 3, c.bytes / 8),
    });
    assert.equal(r.chunks, 10);
    const got = output.typed(Float64Array);
    for (let i = 0; i < n; i += 997) assert.equal(got[i], 3 * i);
    assert.ok(r.serialSeconds >= r.boundSeconds && r.overlap >= 0 && r.overlap < 1);
    using pageable = rt.allocPageable(n * 8);
    await assert.rejects(rt.pipeline({ input: pageable, output, chunkBytes: 8000, compute: () => {} }), /pinned or mapped/);
    await assert.rejects(rt.pipeline({ input, output, chunkBytes: 8000, compute: () => {}, outputBytes: (b) => 2 * b }), code(ErrorCode.OUT_OF_BOUNDS));
  });
}
