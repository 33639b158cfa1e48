/**
 * Device memory through kernels: STREAM copy, scale, add, triad; read-only and write-only; a working-set sweep
 * that shows the cache levels; strided, misaligned and random access; pointer-chase latency.
 */
import type { Allocation } from '../../memory/allocation.js';
import type { BenchContext } from '../context.js';

const KiB = 1024;
const MiB = 1024 * KiB;

/** The doubles that bytes 0x3f and 0x40 repeated make (what fill() writes). */
const X = new Float64Array(new Uint8Array(8).fill(0x3f).buffer)[0]!;
const Y = new Float64Array(new Uint8Array(8).fill(0x40).buffer)[0]!;

function arrayBytes(ctx: BenchContext, max: number): number {
  const want = ctx.options.quick ? 256 * MiB : 1024 * MiB;
  return Math.max(MiB, Math.min(want, Math.floor(max / MiB) * MiB));
}

/** Reads the first `n` doubles of a device buffer. */
async function head(ctx: BenchContext, a: Allocation, n: number): Promise<Float64Array> {
  using h = ctx.rt.allocPinned(n * 8);
  ctx.rt.copy(h, a, { bytes: n * 8, stream: ctx.stream });
  await ctx.stream.synchronize();
  return h.typed(Float64Array).slice();
}

export async function streamTests(ctx: BenchContext, max: number): Promise<void> {
  const { dev, rt, stream } = ctx;
  const bytes = arrayBytes(ctx, max);
  const n = bytes / 8;
  ctx.progress(`STREAM on 3 arrays of ${bytes / MiB} MiB`);
  using x = dev.alloc(bytes);
  using y = dev.alloc(bytes);
  using z = dev.alloc(bytes);
  rt.fill(x, 0x3f, { stream });
  rt.fill(y, 0x40, { stream });
  const g = ctx.grid(16, n);
  const reps = ctx.options.quick ? 10 : 20;
  const s = 3;
  const kernels: Array<[string, () => void, number, (z0: number) => boolean]> = [
    ['copy', ctx.prepared('stream_copy', g, [z, x, n]), 2, (v) => v === X],
    ['scale', ctx.prepared('stream_scale', g, [z, x, s, n]), 2, (v) => v === s * X],
    ['add', ctx.prepared('stream_add', g, [z, x, y, n]), 3, (v) => v === X + Y],
    ['triad', ctx.prepared('stream_triad', g, [z, x, y, s, n]), 3, (v) => v === X + s * Y],
  ];
  for (const [name, run, arrays, check] of kernels) {
    ctx.checkAbort();
    rt.fill(z, 0, { stream });
    const ms = await ctx.timeDevice(run, reps);
    const got = await head(ctx, z, 512);
    ctx.addBandwidth(
      { test: 'stream', direction: name, srcKind: 'device', dstKind: 'device', engine: 'sm', bytes },
      ms,
      arrays * bytes,
      'read+write',
      got.every(check),
    );
  }
  // Read-only and write-only, 16-byte accesses.
  const v = bytes / 16;
  using sink = dev.alloc(8);
  const ro = await ctx.timeDevice(ctx.prepared('read_only', ctx.grid(16, v), [x, v, 1, sink]), reps);
  const intact = (await head(ctx, x, 512)).every((d) => d === X);
  ctx.addBandwidth({ test: 'stream', direction: 'read-only', srcKind: 'device', dstKind: 'device', engine: 'sm', bytes }, ro, bytes, 'one-way', intact);
  const wo = await ctx.timeDevice(ctx.prepared('write_only', ctx.grid(16, v), [z, v, 0x0123456789abcdefn]), reps);
  const w = new BigUint64Array((await head(ctx, z, 64)).buffer);
  let ok = true;
  for (let i = 0; i < 32; i++) ok &&= w[2 * i] === 0x0123456789abcdefn && w[2 * i + 1] === (0x0123456789abcdefn ^ BigInt(i));
  ctx.addBandwidth({ test: 'stream', direction: 'write-only', srcKind: 'device', dstKind: 'device', engine: 'sm', bytes }, wo, bytes, 'one-way', ok);
}

/**
 * Read bandwidth against working-set size, from 4 KiB to well past the L2: every block reads the whole working set,
 * so the aggregate shows the level the set fits in (L1 per SM, then L2, then device memory).
 */
export async function cacheSweep(ctx: BenchContext, max: number): Promise<void> {
  const { dev, rt, stream } = ctx;
  const l2 = dev.info().l2Bytes ?? 4 * MiB;
  const top = Math.min(max, Math.max(16 * l2, 256 * MiB));
  const step = ctx.options.quick ? 4 : 2;
  const sets: number[] = [];
  for (let w = 4 * KiB; w <= top; w *= step) sets.push(w);
  ctx.progress(`cache sweep: ${sets.length} working sets, 4 KiB to ${top / MiB} MiB`);
  using buf = dev.alloc(sets[sets.length - 1]!);
  using sink = dev.alloc(8);
  rt.fill(buf, 0x3f, { stream });
  const perLaunch = ctx.host ? 8 * MiB : ctx.options.quick ? 2 * 1024 * MiB : 8 * 1024 * MiB;
  const grid = ctx.host ? 1 : ctx.multiprocessors * 2;
  for (const w of sets) {
    ctx.checkAbort();
    const v = w / 16;
    const reps = Math.max(1, Math.min(1 << 20, Math.round(perLaunch / (w * grid))));
    const ms = await ctx.timeDevice(ctx.prepared('read_blocks', grid, [buf, v, reps, sink], stream, 512), ctx.options.quick ? 5 : 10, 1);
    const intact = (await head(ctx, buf, 8)).every((d) => d === X);
    ctx.addBandwidth(
      { test: 'cache', direction: 'read', srcKind: 'device', dstKind: 'device', engine: 'sm', bytes: w },
      ms,
      w * reps * grid,
      'one-way',
      intact,
    );
  }
}

/** Strided reads, misaligned copies, random gathers. */
export async function accessTests(ctx: BenchContext, max: number): Promise<void> {
  const { dev, rt, stream } = ctx;
  const bytes = Math.min(max, ctx.options.quick ? 64 * MiB : 256 * MiB);
  const reps = ctx.options.quick ? 5 : 10;
  ctx.progress(`access patterns on ${bytes / MiB} MiB`);
  using a = dev.alloc(bytes);
  using b = dev.alloc(bytes);
  using sink = dev.alloc(8);
  rt.fill(a, 0x3f, { stream });
  for (const stride of [1, 2, 4, 8, 16, 32]) {
    ctx.checkAbort();
    const n = Math.floor(bytes / 4 / stride);
    const ms = await ctx.timeDevice(ctx.prepared('strided_read', ctx.grid(16, n), [a, n, stride, sink]), reps);
    ctx.addBandwidth(
      { test: 'access', direction: `stride-${stride * 4}B`, srcKind: 'device', dstKind: 'device', engine: 'sm', bytes: n * 4 },
      ms,
      n * 4,
      'useful-bytes',
      true,
    );
  }
  // Aligned and misaligned 4-byte copies: offsetting both pointers by 4 bytes breaks 128-byte alignment.
  const words = bytes / 4 - 1;
  for (const [label, off] of [
    ['aligned', 0],
    ['misaligned-4B', 4],
  ] as const) {
    const seed = 0x5eed + off;
    await ctx.fillPattern(a, seed, bytes);
    rt.fill(b, 0, { stream });
    const ms = await ctx.timeDevice(
      ctx.prepared('copy_u32', ctx.grid(16, words), [{ allocation: b, offset: off }, { allocation: a, offset: off }, words]),
      reps,
    );
    // Check the copied words against the source (the copy skipped word 0 when offset).
    using hA = rt.allocPinned(4096);
    using hB = rt.allocPinned(4096);
    rt.copy(hA, a, { bytes: 4096, stream });
    rt.copy(hB, b, { bytes: 4096, stream });
    await stream.synchronize();
    const ua = hA.typed(Uint32Array);
    const ub = hB.typed(Uint32Array);
    let ok = true;
    for (let i = off / 4; i < 1024; i++) ok &&= ua[i] === ub[i];
    ctx.addBandwidth(
      { test: 'access', direction: label, srcKind: 'device', dstKind: 'device', engine: 'sm', bytes: words * 4 },
      ms,
      2 * words * 4,
      'read+write',
      ok,
    );
  }
  // Random gather: out[i] = data[idx[i]], idx a random permutation.
  const n = Math.min(bytes / 4, ctx.host ? 1 << 18 : ctx.options.quick ? 1 << 22 : 1 << 24);
  using idx = dev.alloc(n * 4);
  using out = dev.alloc(n * 4);
  using hostIdx = rt.allocPinned(n * 4);
  const perm = hostIdx.typed(Uint32Array);
  for (let i = 0; i < n; i++) perm[i] = i;
  let r = 0x12345678;
  for (let i = n - 1; i > 0; i--) {
    r = (Math.imul(r, 1664525) + 1013904223) >>> 0;
    const j = r % (i + 1);
    const t = perm[i]!;
    perm[i] = perm[j]!;
    perm[j] = t;
  }
  rt.copy(idx, hostIdx, { stream });
  await ctx.fillPattern(a, 77, n * 4);
  const ms = await ctx.timeDevice(ctx.prepared('gather', ctx.grid(16, n), [out, a, idx, n]), reps);
  using hOut = rt.allocPinned(4096);
  rt.copy(hOut, out, { bytes: 4096, stream });
  await stream.synchronize();
  const o = hOut.typed(Uint32Array);
  let ok = true;
  for (let i = 0; i < 1024; i++) ok &&= o[i] === (Math.imul(perm[i]!, 2654435761 | 0) ^ 77) >>> 0;
  ctx.addBandwidth(
    { test: 'access', direction: 'random-gather', srcKind: 'device', dstKind: 'device', engine: 'sm', bytes: n * 4 },
    ms,
    3 * n * 4,
    'read+write+index',
    ok,
  );
}

/** Dependent-load latency: one thread follows a random cycle through a working set, one 128-byte line per hop. */
export async function latencyTests(ctx: BenchContext, max: number): Promise<void> {
  const { dev, rt, stream } = ctx;
  const l2 = dev.info().l2Bytes ?? 4 * MiB;
  const sets = [32 * KiB, Math.max(64 * KiB, Math.floor(l2 / 4 / 128) * 128), Math.min(max, Math.max(4 * l2, 256 * MiB))];
  const steps = ctx.host ? 20_000 : ctx.options.quick ? 100_000 : 1_000_000;
  const LINE = 128;
  for (const w of sets) {
    ctx.checkAbort();
    const lines = Math.floor(w / LINE);
    const per = LINE / 8;
    ctx.progress(`pointer chase over ${w} bytes`);
    using next = dev.alloc(lines * LINE);
    using host = rt.allocPinned(lines * LINE);
    using out = dev.alloc(8);
    const order = new Uint32Array(lines);
    for (let i = 0; i < lines; i++) order[i] = i;
    let r = 0x9e3779b9;
    for (let i = lines - 1; i > 0; i--) {
      r = (Math.imul(r, 1664525) + 1013904223) >>> 0;
      const j = r % (i + 1);
      const t = order[i]!;
      order[i] = order[j]!;
      order[j] = t;
    }
    const h = host.typed(BigUint64Array);
    for (let i = 0; i < lines; i++) h[order[i]! * per] = BigInt(order[(i + 1) % lines]! * per);
    rt.copy(next, host, { stream });
    const ms = await ctx.timeDevice(ctx.prepared('pointer_chase', 1, [next, steps, out], stream, 1), ctx.options.quick ? 5 : 10, 1);
    // Where the chase must end: follow the cycle on the host.
    let p = 0;
    const pos = new Uint32Array(lines);
    for (let i = 0; i < lines; i++) pos[order[i]!] = i;
    p = order[(pos[0]! + steps) % lines]! * per;
    using o = rt.allocPinned(8);
    rt.copy(o, out, { stream });
    await stream.synchronize();
    const ok = o.typed(BigUint64Array)[0] === BigInt(p);
    ctx.addLatency(
      { test: 'latency', direction: 'pointer-chase', srcKind: 'device', dstKind: 'device', engine: 'sm', bytes: w },
      ms.map((t) => (t * 1000) / steps),
      ok,
    );
  }
}
