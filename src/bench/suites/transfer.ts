/**
 * The transfer engine against the plain ways, timed with the host clock from the call until the data has arrived
 * (as a program waits for it, and as the native CUDA C comparison program times it):
 * - pageable uploads and downloads: the runtime's direct copy, register + copy + unregister (registration counted),
 *   and staged through gpumem's stager, with the default shape and with 1 to 16 threads and 4 to 32 MiB chunks;
 * - the host copies alone (pageable into pinned memory) on 1 to 8 threads: the ceiling of a staged upload;
 * - 1000 copies of 64 KiB from pinned memory: one by one, one copyBatch (the same array each call, and a new array
 *   each call: checked in full every time), a prepared batch,
 *   one captured graph, against one copy of the same 64000 KiB;
 * - a chain of 100 small operations: enqueued one by one, and captured once and launched as a graph (per operation).
 * Every transfer is verified after its timed runs.
 */
import { availableParallelism } from 'node:os';
import type { HostCopier } from '../../backend/backend.js';
import { transferDefaults } from '../../transfer/defaults.js';
import type { BatchCopy } from '../../transfer/batch.js';
import type { BenchContext, RowFields } from '../context.js';
import { fileTransfers } from './transfer-file.js';
import { firstUpload, manyArrays } from './transfer-programs.js';

const KiB = 1024;
const MiB = 1024 * KiB;

function fillBytes(u: Uint8Array, seed: number): void {
  const w = new Uint32Array(u.buffer, u.byteOffset, u.byteLength >> 2);
  for (let i = 0; i < w.length; i++) w[i] = (Math.imul(i, 2654435761) ^ seed) >>> 0;
}

/** The parts of the transfer group; GPUMEM_TRANSFER_PARTS (a comma list) runs some of them. */
export const TRANSFER_PARTS = ['shapes', 'host', 'batch', 'chain', 'many', 'first', 'file'] as const;

export async function transferTests(ctx: BenchContext, max: number): Promise<void> {
  const quick = ctx.options.quick;
  const bytes = Math.max(4 * MiB, Math.min(max, quick ? 256 * MiB : 1024 * MiB));
  const asked = process.env.GPUMEM_TRANSFER_PARTS?.split(',').filter(Boolean) ?? [...TRANSFER_PARTS];
  const unknown = asked.filter((p) => !(TRANSFER_PARTS as readonly string[]).includes(p));
  if (unknown.length) throw new Error(`GPUMEM_TRANSFER_PARTS: unknown part ${unknown.join(', ')} (parts: ${TRANSFER_PARTS.join(', ')})`);
  const want = (p: (typeof TRANSFER_PARTS)[number]): boolean => asked.includes(p);
  const threadCounts = threadsToMeasure(quick);
  if (want('first')) await firstUpload(ctx, bytes, quick);
  if (want('shapes')) await shapes(ctx, bytes, threadCounts);
  if (want('many')) {
    await manyArrays(ctx, Math.max(1, Math.floor(bytes / (4 * MiB))), 4 * MiB, quick);
    await manyArrays(ctx, Math.max(1, Math.floor(bytes / (256 * KiB))), 64 * KiB, quick);
    await manyArrays(ctx, Math.max(1, Math.floor(bytes / (64 * KiB))), 16 * KiB, quick, false);
  }
  if (want('file')) await fileTransfers(ctx, bytes, quick);
  if (want('host')) await hostCopyRates(ctx, bytes, quick, threadCounts);
  if (want('batch')) await smallCopies(ctx, quick);
  if (want('chain')) await chains(ctx, quick);
}

function threadsToMeasure(quick: boolean): number[] {
  const d = transferDefaults();
  const cores = availableParallelism();
  return [...new Set([1, 2, 4, 8, 12, 16, d.threads])].sort((a, b) => a - b).filter((t) => t <= Math.max(2, cores) && (!quick || t === 1 || t === d.threads));
}

/** Pageable uploads and downloads: the runtime's direct copy, register + copy, the stager's shapes, rt.upload / rt.download. */
async function shapes(ctx: BenchContext, bytes: number, threadCounts: number[]): Promise<void> {
  const { rt, dev } = ctx;
  const quick = ctx.options.quick;
  const reps = quick ? 3 : 5;
  const d = transferDefaults();
  const row = (direction: string, srcKind: string, dstKind: string, engine: string, n: number, extra: Partial<RowFields> = {}): RowFields => ({
    test: 'transfer',
    direction,
    srcKind,
    dstKind,
    engine,
    bytes: n,
    ...extra,
  });
  ctx.progress(`transfer: pageable uploads and downloads of ${bytes / MiB} MiB`);
  using devBuf = dev.alloc(bytes);
  const host = new Uint8Array(bytes);
  fillBytes(host, 0x5eed);
  const back = new Uint8Array(bytes);
  const verify = async (): Promise<boolean> => {
    back.fill(0);
    await rt.download(back, devBuf, { path: 'staged' });
    return Buffer.from(back.buffer, back.byteOffset, back.byteLength).equals(Buffer.from(host.buffer, host.byteOffset, host.byteLength));
  };
  const clear = (): void => rt.fill(devBuf, 0);

  // The runtime's own pageable copy (cudaMemcpy / hipMemcpy from pageable memory).
  using pageable = rt.allocPageable(host.buffer as ArrayBuffer);
  clear();
  let ms = await ctx.timeHost(() => rt.copy(devBuf, pageable), reps);
  ctx.addBandwidth(row('HtoD', 'pageable', 'device', 'runtime-direct', bytes), ms, bytes, 'one-way', await verify());
  // Downloads through the runtime's pageable copy.
  back.fill(0);
  using pageableBack = rt.allocPageable(back.buffer as ArrayBuffer);
  ms = await ctx.timeHost(() => rt.copy(pageableBack, devBuf), reps);
  ctx.addBandwidth(row('DtoH', 'device', 'pageable', 'runtime-direct', bytes), ms, bytes, 'one-way', Buffer.from(back.buffer).equals(Buffer.from(host.buffer)));
  // Register the buffer, copy, unregister: the registration is counted.
  if (rt.backend.capabilities.hostRegister) {
    clear();
    ms = await ctx.timeHost(() => {
      using reg = rt.allocPageable(host.buffer as ArrayBuffer, { register: true });
      rt.copy(devBuf, reg);
    }, reps);
    ctx.addBandwidth(row('HtoD', 'pageable', 'device', 'register+copy+unregister', bytes), ms, bytes, 'one-way', await verify());
  }
  // Shapes: threads at the default chunk, chunks at the default threads.
  const chunkSizes = (quick ? [d.chunkBytes] : [4 * MiB, 8 * MiB, 16 * MiB, 32 * MiB]).filter((c) => c * d.depth <= d.pinnedBudgetBytes && c <= bytes);
  const shapes = [
    ...threadCounts.map((t) => ({ threads: t, chunkBytes: d.chunkBytes })),
    ...chunkSizes.filter((c) => c !== d.chunkBytes).map((c) => ({ threads: d.threads, chunkBytes: c })),
  ];
  for (const shape of shapes) {
    ctx.progress(`transfer: staged with ${shape.threads} threads, ${shape.chunkBytes / MiB} MiB chunks`);
    using st = rt.createStager({ device: dev.index, ...shape, directBelow: 0 });
    clear();
    await st.upload(devBuf, host);
    ms = await ctx.timeHost(() => st.upload(devBuf, host), reps, 0);
    ctx.addBandwidth(row('HtoD', 'pageable', 'device', 'staged', bytes, shape), ms, bytes, 'one-way', await verify());
    back.fill(0);
    await st.download(back, devBuf);
    ms = await ctx.timeHost(() => st.download(back, devBuf), reps, 0);
    const ok = Buffer.from(back.buffer).equals(Buffer.from(host.buffer));
    ctx.addBandwidth(row('DtoH', 'device', 'pageable', 'staged', bytes, shape), ms, bytes, 'one-way', ok);
  }
  // rt.upload and rt.download, through the runtime's default stager, measured after the shapes: in earlier runs on
  // H200s, staged transfers right after the runtime's own pageable copies and registration of the same buffers ran
  // slower than the same shape measured later (44 against 52 GB/s); the cause is not known. The native program also
  // meets its staged shapes after its direct copies.
  clear();
  let last = await rt.upload(devBuf, host);
  ms = await ctx.timeHost(async () => (last = await rt.upload(devBuf, host)), reps, 1);
  ctx.addBandwidth(
    row('HtoD', 'pageable', 'device', `gpumem-upload (${last.path})`, bytes, { threads: last.threads, chunkBytes: last.chunkBytes }),
    ms,
    bytes,
    'one-way',
    await verify(),
  );

  back.fill(0);
  ms = await ctx.timeHost(async () => (last = await rt.download(back, devBuf)), reps);
  ctx.addBandwidth(
    row('DtoH', 'device', 'pageable', `gpumem-download (${last.path})`, bytes, { threads: last.threads, chunkBytes: last.chunkBytes }),
    ms,
    bytes,
    'one-way',
    Buffer.from(back.buffer).equals(Buffer.from(host.buffer)),
  );
  pageable.free();
  pageableBack.free();
}

/** The host copies alone: pageable into pinned memory on N threads (the ceiling of a staged upload). */
async function hostCopyRates(ctx: BenchContext, bytes: number, quick: boolean, threadCounts: number[]): Promise<void> {
  const { rt } = ctx;
  const n = Math.min(bytes, 256 * MiB);
  const host = new Uint8Array(n);
  fillBytes(host, 0x5eed);
  using pinned = rt.allocPinned(n);
  using src = rt.allocPageable(host.buffer as ArrayBuffer);
  for (const t of threadCounts.filter((x) => x <= 12)) {
    ctx.progress(`transfer: host copies into pinned memory on ${t} thread(s)`);
    let copier: HostCopier | undefined;
    try {
      copier = rt.backend.createHostCopier(t);
      const c = copier;
      const ms = await ctx.timeHost(() => c.copy(pinned.address, src.address, n), quick ? 3 : 5);
      const ok = Buffer.from(pinned.view().buffer, pinned.view().byteOffset, n).equals(Buffer.from(host.buffer, 0, n));
      ctx.addBandwidth(
        { test: 'transfer', direction: 'HtoH', srcKind: 'pageable', dstKind: 'pinned', engine: 'host-threads', bytes: n, threads: t },
        ms,
        n,
        'one-way',
        ok,
      );
    } finally {
      copier?.dispose();
    }
  }
}

/** 1000 copies of 64 KiB from pinned memory to the device, five ways. */
async function smallCopies(ctx: BenchContext, quick: boolean): Promise<void> {
  const { rt, dev, stream } = ctx;
  const K = 1000;
  const S = 64 * KiB;
  const total = K * S;
  ctx.progress(`transfer: ${K} copies of ${S / KiB} KiB`);
  using pinned = rt.allocPinned(total);
  fillBytes(pinned.view(), 77);
  using d = dev.alloc(total);
  using check = rt.allocPinned(total);
  const verify = async (): Promise<boolean> => {
    check.view().fill(0);
    rt.copy(check, d, { stream });
    await stream.synchronize();
    return Buffer.from(check.view()).equals(Buffer.from(pinned.view()));
  };
  const reps = quick ? 5 : 10;
  const copies: BatchCopy[] = Array.from({ length: K }, (_, i) => ({ dst: d, src: pinned, dstOffset: i * S, srcOffset: i * S, bytes: S }));
  const row = (engine: string): RowFields => ({
    test: 'transfer',
    direction: 'HtoD-small',
    srcKind: 'pinned',
    dstKind: 'device',
    engine,
    bytes: total,
    copies: K,
  });
  // 200 warm-up calls: a program that enqueues batches does so every step, and by then V8 runs the checks optimized
  // (in the first few dozen calls, checking 1000 copies cost up to 10 times more).
  const timed = async (name: string, op: () => void): Promise<void> => {
    rt.fill(d, 0);
    const ms = await ctx.timeHost(
      () => {
        op();
        stream.waitSync();
      },
      reps,
      200,
    );
    ctx.addBandwidth(row(name), ms, total, 'one-way', await verify());
  };
  const one = copies.map((c) => rt.prepareCopy(c.dst, c.src, { ...c, stream }));
  await timed('one-by-one', () => {
    for (const c of one) c.run();
  });
  // The same array every call, as a training step enqueues its batch: checked on the first call, then compared
  // copy by copy with what was checked. A new array every call is checked in full each time.
  await timed('copyBatch', () => void rt.copyBatch(copies, { stream }));
  await timed('copyBatch-new-array', () => void rt.copyBatch(copies.slice(), { stream }));
  const prepared = rt.prepareBatch(copies, { stream });
  await timed('prepared-batch', () => void prepared.run());
  if (rt.backend.capabilities.graphs) {
    using s = dev.createStream({ nonBlocking: true });
    using graph = rt.capture(s, () => {
      for (const c of copies) rt.copy(c.dst, c.src, { ...c, stream: s });
    });
    rt.fill(d, 0);
    const ms = await ctx.timeHost(
      () => {
        graph.enqueue();
        s.waitSync();
      },
      reps,
      2,
    );
    ctx.addBandwidth(row('graph'), ms, total, 'one-way', await verify());
  }
  const single = rt.prepareCopy(d, pinned, { stream });
  await timed('single-copy', () => single.run());
}

/** A chain of 100 small operations (fills and copies of 4 KiB on the device): one by one, and as one graph. */
async function chains(ctx: BenchContext, quick: boolean): Promise<void> {
  const { rt, dev } = ctx;
  const N = 100;
  using a = dev.alloc(4 * KiB);
  using b = dev.alloc(4 * KiB);
  using s = dev.createStream({ nonBlocking: true });
  const enqueue = (on: typeof s, i: number): void => {
    if (i % 2 === 0) rt.fill(a, i & 0xff, { stream: on });
    else rt.copy(b, a, { stream: on });
  };
  const reps = quick ? 10 : 30;
  const perOp = (ms: number[]): number[] => ms.map((m) => (m * 1000) / N);
  const one = await ctx.timeHost(
    () => {
      for (let i = 0; i < N; i++) enqueue(s, i);
      s.waitSync();
    },
    reps,
    3,
  );
  ctx.addLatency({ test: 'transfer', direction: 'chain-100', srcKind: 'device', dstKind: 'device', engine: 'one-by-one', bytes: 4 * KiB }, perOp(one), true);
  if (!rt.backend.capabilities.graphs) return;
  using graph = rt.capture(s, () => {
    for (let i = 0; i < N; i++) enqueue(s, i);
  });
  const g = await ctx.timeHost(
    () => {
      graph.enqueue();
      s.waitSync();
    },
    reps,
    3,
  );
  // Same work, same result: b holds the last fill's value (98).
  using check = rt.allocPinned(4 * KiB);
  rt.copy(check, b);
  const ok = check.view().every((x) => x === 98);
  ctx.addLatency({ test: 'transfer', direction: 'chain-100', srcKind: 'device', dstKind: 'device', engine: 'graph', bytes: 4 * KiB }, perOp(g), ok);
}
