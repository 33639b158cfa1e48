/**
 * Host <-> device copies from and to every host kind (pageable, pinned, write-combined pinned, mapped), one way and
 * both ways at once, and device to device; through the copy engines (memcpyAsync) and through kernels (SM copies).
 */
import type { Allocation } from '../../memory/allocation.js';
import type { BenchContext, RowFields } from '../context.js';
import { sizes } from '../context.js';

const KiB = 1024;
const MiB = 1024 * KiB;

/** Copy sizes for a mode, capped at `max`. */
export function copySizes(quick: boolean, max: number): number[] {
  const list = quick ? [64 * KiB, MiB, 16 * MiB, 256 * MiB] : sizes(4 * KiB, 1024 * MiB, 4);
  const capped = list.filter((s) => s <= max);
  return capped.length ? capped : [Math.max(4 * KiB, Math.floor(max / (4 * KiB)) * 4 * KiB)];
}

function reps(ctx: BenchContext, bytes: number, pageable: boolean): number {
  if (ctx.options.quick) return bytes >= 16 * MiB ? 5 : 10;
  return pageable ? 10 : 20;
}

/** A prepared copy as a timing op: checked once, one native call per run (as a native benchmark's loop). */
const prep =
  (c: { run(): void }): (() => void) =>
  () =>
    c.run();

let seedCounter = 1;
const nextSeed = (): number => (seedCounter = (seedCounter * 1103515245 + 12345) >>> 0);

/** Measures one copy (or kernel copy) of `bytes` from `src` to `dst`, verified, and adds the row. */
async function measure(
  ctx: BenchContext,
  row: RowFields,
  src: Allocation,
  dst: Allocation,
  bytes: number,
  via: Allocation | undefined,
  run: () => void,
  counted: 'one-way' | 'read+write',
  nReps: number,
): Promise<void> {
  ctx.checkAbort();
  const seed = nextSeed();
  await ctx.fillPattern(src, seed, bytes, via);
  ctx.rt.fill(dst, 0, { bytes, stream: ctx.stream });
  await ctx.stream.synchronize();
  // A copy from or to pageable memory blocks the host until it is done: it cannot sit behind the timing gate.
  const pageable = src.kind === 'pageable' || dst.kind === 'pageable';
  const ms = await ctx.timeDevice(run, nReps, 3, ctx.stream, !pageable);
  const ok = await ctx.verifyPattern(dst, seed, bytes, via);
  ctx.addBandwidth(row, ms, counted === 'read+write' ? 2 * bytes : bytes, counted, ok);
}

export async function copyTests(ctx: BenchContext, max: number): Promise<void> {
  const { rt, dev, stream } = ctx;
  const list = copySizes(ctx.options.quick, max);
  const top = list[list.length - 1]!;
  ctx.progress(`copies: ${list.length} sizes up to ${top / MiB} MiB`);
  using a = dev.alloc(top);
  using b = dev.alloc(top);
  using pinned = rt.allocPinned(top);
  using pinned2 = rt.allocPinned(top);
  using pageable = rt.allocPageable(top);
  using pageable2 = rt.allocPageable(top);
  using mapped = rt.allocMapped(top);
  using wc = rt.backend.capabilities.writeCombined ? rt.allocPinned(top, { writeCombined: true }) : undefined;
  using s2 = dev.createStream({ nonBlocking: true });
  using eStart = dev.createEvent({ timing: false });
  using eDone = dev.createEvent({ timing: false });

  const hostKinds: Array<[string, Allocation]> = [
    ['pageable', pageable],
    ['pinned', pinned],
    ...(wc ? ([['pinned-wc', wc]] as Array<[string, Allocation]>) : []),
    ['mapped', mapped],
  ];
  for (const bytes of list) {
    ctx.progress(`copies: ${bytes} bytes`);
    for (const [kind, h] of hostKinds) {
      const pg = kind === 'pageable';
      await measure(
        ctx,
        { test: 'copy', direction: 'HtoD', srcKind: kind, dstKind: 'device', engine: 'copy-engine', bytes },
        h,
        a,
        bytes,
        b,
        prep(rt.prepareCopy(a, h, { bytes, stream })),
        'one-way',
        reps(ctx, bytes, pg),
      );
      if (kind === 'pinned-wc') continue; // the host should only write write-combined memory
      await measure(
        ctx,
        { test: 'copy', direction: 'DtoH', srcKind: 'device', dstKind: kind, engine: 'copy-engine', bytes },
        a,
        h,
        bytes,
        b,
        prep(rt.prepareCopy(h, a, { bytes, stream })),
        'one-way',
        reps(ctx, bytes, pg),
      );
    }
    // Both directions at once: HtoD on the context stream, DtoH on a second stream, timed from the first start to the last end.
    for (const [kind, up, down] of [
      ['pinned', pinned, pinned2],
      ['pageable', pageable, pageable2],
    ] as const) {
      const seed = nextSeed();
      await ctx.fillPattern(up, seed, bytes, b);
      await ctx.fillPattern(a, seed, bytes);
      ctx.rt.fill(b, 0, { bytes, stream });
      const upCopy = rt.prepareCopy(b, up, { bytes, stream });
      const downCopy = rt.prepareCopy(down, a, { bytes, stream: s2 });
      const ms = await ctx.timeDevice(
        () => {
          eStart.record(stream);
          s2.waitEvent(eStart);
          upCopy.run();
          downCopy.run();
          eDone.record(s2);
          stream.waitEvent(eDone);
        },
        reps(ctx, bytes, kind === 'pageable'),
        3,
        stream,
        kind !== 'pageable',
      );
      const ok = (await ctx.verifyPattern(b, seed, bytes)) && (await ctx.verifyPattern(down, seed, bytes, b));
      ctx.addBandwidth(
        { test: 'copy', direction: 'bidirectional', srcKind: kind, dstKind: 'device', engine: 'copy-engine', bytes },
        ms,
        2 * bytes,
        'both-directions',
        ok,
      );
    }
    await measure(
      ctx,
      { test: 'copy', direction: 'DtoD', srcKind: 'device', dstKind: 'device', engine: 'copy-engine', bytes },
      a,
      b,
      bytes,
      undefined,
      prep(rt.prepareCopy(b, a, { bytes, stream })),
      'read+write',
      reps(ctx, bytes, false),
    );
    if (ctx.module && bytes % 16 === 0) {
      const v = bytes / 16;
      const g = ctx.grid(16, v, 512);
      const k = (dst: Allocation, src: Allocation): (() => void) => {
        const launch = ctx.module!.kernel('copy_v16').prepare({ grid: g, block: 512, stream }, dst, src, v);
        return () => launch.launch();
      };
      await measure(
        ctx,
        { test: 'sm-copy', direction: 'HtoD', srcKind: 'pinned', dstKind: 'device', engine: 'sm', bytes },
        pinned,
        a,
        bytes,
        b,
        k(a, pinned),
        'one-way',
        reps(ctx, bytes, false),
      );
      await measure(
        ctx,
        { test: 'sm-copy', direction: 'DtoH', srcKind: 'device', dstKind: 'pinned', engine: 'sm', bytes },
        a,
        pinned,
        bytes,
        b,
        k(pinned, a),
        'one-way',
        reps(ctx, bytes, false),
      );
      await measure(
        ctx,
        { test: 'sm-copy', direction: 'HtoD', srcKind: 'mapped', dstKind: 'device', engine: 'sm', bytes },
        mapped,
        a,
        bytes,
        b,
        k(a, mapped),
        'one-way',
        reps(ctx, bytes, false),
      );
      await measure(
        ctx,
        { test: 'sm-copy', direction: 'DtoD', srcKind: 'device', dstKind: 'device', engine: 'sm', bytes },
        a,
        b,
        bytes,
        undefined,
        k(b, a),
        'read+write',
        reps(ctx, bytes, false),
      );
    }
  }
}
