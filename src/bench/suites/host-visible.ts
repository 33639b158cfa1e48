/**
 * Memory the host and the device share: managed memory (first touch by a kernel; after a prefetch, the first kernel,
 * which still pays for mapping the pages, and the kernels after it; with read-mostly advice; read back by the host) and zero-copy mapped memory read and written by kernels across the link.
 */
import type { BenchContext } from '../context.js';

const MiB = 1024 * 1024;

export async function managedTests(ctx: BenchContext, max: number): Promise<void> {
  const { dev, rt, stream } = ctx;
  if (!rt.backend.capabilities.managedMemory || !ctx.module) return;
  const info = dev.info();
  const free = dev.memGetInfo().freeBytes;
  // Never ask for more managed memory than the device has free.
  const bytes = Math.min(max, ctx.options.quick ? 256 * MiB : 1024 * MiB, Math.floor(free / 4 / MiB) * MiB);
  const v = bytes / 16;
  const state = `concurrent managed access ${info.concurrentManagedAccess ? 'yes' : 'no'}${info.xnack ? `, XNACK ${info.xnack.enabled === undefined ? 'unknown' : info.xnack.enabled ? 'on' : 'off'}` : ''}`;
  ctx.progress(`managed memory, ${bytes / MiB} MiB (${state})`);
  using sink = dev.alloc(8);
  const reps = ctx.options.quick ? 3 : 5;
  const firstTouch: number[] = [];
  const afterPrefetch: number[] = [];
  const steadyAfterPrefetch: number[] = [];
  const readMostly: number[] = [];
  const hostRead: number[] = [];
  const prefetch: number[] = [];
  let intact = true;
  for (let r = 0; r < reps; r++) {
    ctx.checkAbort();
    using m = dev.allocManaged(bytes);
    // Pages start on the host: the CPU writes them.
    m.view().fill(0x3f);
    using a = dev.createEvent();
    using b = dev.createEvent();
    /**
     * Device time of `op`, between two events on the stream, waited for on this thread as a native program waits
     * (and as timeDevice does): waiting on a worker thread left the device idle longer between the kernels after a
     * prefetch, and they ran slower (3554 against 3918 GB/s on an H200, benchmarks/managed-probe.mjs).
     */
    const timed = async (op: () => void): Promise<number> => {
      a.record(stream);
      op();
      b.record(stream);
      b.waitSync();
      return b.elapsedSince(a);
    };
    // Checked and packed before the timed windows, as every other kernel row is: a launch checked and packed inside
    // the window counted that JavaScript work as kernel time (on the development machine 10-16 us per call while V8
    // has not optimised it, 372 us for the first; the managed rows run it only a few times per process).
    const readAll = ctx.prepared('read_only', ctx.grid(16, v), [m, v, 1, sink]);
    firstTouch.push(await timed(readAll));
    // Back to the host, then prefetch to the device and read again.
    m.prefetch('host', stream);
    await stream.synchronize();
    prefetch.push(await timed(() => m.prefetch(dev.index, stream)));
    afterPrefetch.push(await timed(readAll));
    // the same pages read again: what a kernel reads once the device has them mapped
    for (let k = 0; k < 4; k++) steadyAfterPrefetch.push(await timed(readAll));
    // Read-mostly: pages from the host are duplicated on first read rather than moved.
    m.prefetch('host', stream);
    await stream.synchronize();
    m.advise('read-mostly');
    readMostly.push(await timed(readAll));
    m.advise('unset-read-mostly');
    // The device writes; the host reads it all back (host clock).
    ctx.launch('write_only', ctx.grid(16, v), [m, v, 0x3f3f3f3f3f3f3f3fn]);
    await stream.synchronize();
    const t0 = performance.now();
    const u = m.typed(Float64Array);
    let acc = 0;
    for (let i = 0; i < u.length; i += 512) acc += u[i]!; // one read per 4 KiB page migrates every page
    hostRead.push(performance.now() - t0);
    intact &&= m.typed(BigUint64Array)[0] === 0x3f3f3f3f3f3f3f3fn && Number.isFinite(acc);
  }
  const row = (direction: string, engine: string): { test: string; direction: string; srcKind: string; dstKind: string; engine: string; bytes: number } => ({
    test: 'managed',
    direction,
    srcKind: 'managed',
    dstKind: direction === 'host-read-back' ? 'host' : 'device',
    engine,
    bytes,
  });
  ctx.addBandwidth(row('first-touch-by-kernel', 'sm'), firstTouch, bytes, 'one-way', intact);
  ctx.addBandwidth(row('prefetch-to-device', 'driver'), prefetch, bytes, 'one-way', intact);
  ctx.addBandwidth(row('first-kernel-after-prefetch', 'sm'), afterPrefetch, bytes, 'one-way', intact);
  ctx.addBandwidth(row('kernels-after-prefetch', 'sm'), steadyAfterPrefetch, bytes, 'one-way', intact);
  ctx.addBandwidth(row('kernel-read-mostly', 'sm'), readMostly, bytes, 'one-way', intact);
  const hr = ctx.addBandwidth(row('host-read-back', 'host'), hostRead, bytes, 'one-way', intact);
  hr.note = `host clock; ${state}`;
}

export async function zeroCopyTests(ctx: BenchContext, max: number): Promise<void> {
  const { rt, stream } = ctx;
  if (!rt.backend.capabilities.mappedMemory || !ctx.module) return;
  const bytes = Math.min(max, ctx.options.quick ? 64 * MiB : 256 * MiB);
  const v = bytes / 16;
  ctx.progress(`zero-copy: kernels on ${bytes / MiB} MiB of mapped host memory`);
  using m = rt.allocMapped(bytes);
  using sink = ctx.dev.alloc(8);
  m.view().fill(0x3f);
  const reps = ctx.options.quick ? 5 : 10;
  const rd = await ctx.timeDevice(ctx.prepared('read_only', ctx.grid(16, v), [m, v, 1, sink]), reps);
  ctx.addBandwidth(
    { test: 'zero-copy', direction: 'kernel-read', srcKind: 'mapped', dstKind: 'device', engine: 'sm', bytes },
    rd,
    bytes,
    'one-way',
    m.view()[bytes - 1] === 0x3f,
  );
  const wr = await ctx.timeDevice(ctx.prepared('write_only', ctx.grid(16, v), [m, v, 0x4242424242424242n]), reps);
  await stream.synchronize();
  const w = m.typed(BigUint64Array);
  ctx.addBandwidth(
    { test: 'zero-copy', direction: 'kernel-write', srcKind: 'device', dstKind: 'mapped', engine: 'sm', bytes },
    wr,
    bytes,
    'one-way',
    w[0] === 0x4242424242424242n && w[w.length - 2] === 0x4242424242424242n,
  );
}
