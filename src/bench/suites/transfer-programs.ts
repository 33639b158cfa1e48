/**
 * Transfers as programs make them (issue 22), timed with the host clock from the first call until every byte has
 * arrived, one-way bytes, GB = 1e9:
 * - 256 separate arrays of 4 MiB (weights loaded tensor by tensor), 4096 arrays of 64 KiB and 16384 of 16 KiB (a
 *   batch of small inputs) to the device: awaited in turn (`await rt.upload` each; not the 16 KiB arrays), all at
 *   once (`Promise.all` of rt.upload), as one list (`rt.uploadMany`) and as one list landing in the reverse order
 *   (the engine lays each chunk out in device order: it lands as in order); and back as one list (`rt.downloadMany`);
 * - the first 1 GiB upload of a fresh process, in child processes (first-upload-child.ts), two ways: the source ready
 *   before the runtime opens and the upload right after the allocation (nothing had time to start in the
 *   background), and the runtime opened first, then the source filled (the background start had that time).
 * Every row is verified after its timed runs.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { BenchContext, RowFields } from '../context.js';

const KiB = 1024;
const MiB = 1024 * KiB;

function fill(u: Uint8Array, seed: number): void {
  const w = new Uint32Array(u.buffer, u.byteOffset, u.byteLength >> 2);
  for (let i = 0; i < w.length; i++) w[i] = (Math.imul(i, 2654435761) ^ seed) >>> 0;
}

/**
 * Many separate arrays to one device allocation and back: up awaited in turn (where `eachRows`), all at once
 * (Promise.all of rt.upload), as one list (rt.uploadMany), and as one list whose arrays go to the device in the
 * reverse order (the list order continues nothing; the engine lays each chunk out in device order, segment-list.ts);
 * down as one list (rt.downloadMany).
 */
export async function manyArrays(ctx: BenchContext, count: number, each: number, quick: boolean, eachRows = true): Promise<void> {
  const { rt, dev } = ctx;
  const total = count * each;
  ctx.progress(`transfer: ${count} arrays of ${each / KiB} KiB`);
  using dst = dev.alloc(total);
  const srcs = Array.from({ length: count }, (_, i) => {
    const u = new Uint8Array(each);
    fill(u, i);
    return u;
  });
  const reps = quick ? 3 : 5;
  const back = new Uint8Array(total);
  const verifyAt = async (place: (i: number) => number): Promise<boolean> => {
    await rt.download(back, dst);
    return srcs.every((s, i) => Buffer.from(back.buffer, place(i) * each, each).equals(Buffer.from(s.buffer)));
  };
  const row = (direction: string, engine: string): RowFields => ({
    test: 'transfer',
    direction,
    srcKind: direction === 'HtoD-many' ? 'pageable' : 'device',
    dstKind: direction === 'HtoD-many' ? 'device' : 'pageable',
    engine,
    bytes: total,
    copies: count,
  });
  const inOrder = (i: number): number => i;
  const reversed = (i: number): number => count - 1 - i;
  const ways: Array<[string, () => Promise<unknown>, (i: number) => number]> = [
    ['promise-all', () => Promise.all(srcs.map((s, i) => rt.upload(dst, s, { dstOffset: i * each }))), inOrder],
    ['uploadMany', () => rt.uploadMany(srcs.map((src, i) => ({ dst, src, dstOffset: i * each }))), inOrder],
    ['uploadMany (reverse order)', () => rt.uploadMany(srcs.map((src, i) => ({ dst, src, dstOffset: reversed(i) * each }))), reversed],
  ];
  if (eachRows) {
    ways.unshift([
      'await-each',
      async () => {
        for (let i = 0; i < count; i++) await rt.upload(dst, srcs[i]!, { dstOffset: i * each });
      },
      inOrder,
    ]);
  }
  const d = rt.defaultStager(dev.index);
  const shape = { threads: d.threads, chunkBytes: d.chunkBytes };
  for (const [engine, op, place] of ways) {
    rt.fill(dst, 0);
    const ms = await ctx.timeHost(op, reps, 2);
    ctx.addBandwidth({ ...row('HtoD-many', engine), ...shape }, ms, total, 'one-way', await verifyAt(place));
  }
  // Down: the device memory holds the arrays in order (the last upload above put them back in order first).
  await rt.uploadMany(srcs.map((src, i) => ({ dst, src, dstOffset: i * each })));
  const outs = srcs.map(() => new Uint8Array(each));
  const ms = await ctx.timeHost(() => rt.downloadMany(outs.map((o, i) => ({ dst: o, src: dst, srcOffset: i * each }))), reps, 2);
  const ok = outs.every((o, i) => Buffer.from(o.buffer).equals(Buffer.from(srcs[i]!.buffer)));
  ctx.addBandwidth({ ...row('DtoH-many', 'downloadMany'), ...shape }, ms, total, 'one-way', ok);
}

/**
 * The first upload of a fresh process, in child processes: each fills its 1 GiB buffer before gpumem is imported,
 * then opens the runtime, allocates the destination and times its first rt.upload.
 */
export async function firstUpload(ctx: BenchContext, bytes: number, quick: boolean): Promise<void> {
  const { rt, dev } = ctx;
  // What a first call pays (threads booting, the ring pinned) exists only where the copier has threads of its own.
  if (!rt.backend.capabilities.hostCopierThreads) return;
  const child = fileURLToPath(new URL('./first-upload-child.js', import.meta.url));
  for (const order of ['source-first', 'runtime-first'] as const) {
    ctx.progress(`transfer: the first upload of ${bytes / MiB} MiB in a fresh process (${order})`);
    const ms: number[] = [];
    const second: number[] = [];
    let verified = true;
    let shape: { threads?: number; chunkBytes?: number } = {};
    for (let i = 0; i < (quick ? 2 : 3); i++) {
      ctx.checkAbort();
      const out = await runChild(child, [rt.backend.name, String(dev.index), String(bytes), order], ctx.options.signal);
      const r = JSON.parse(out.trim().split('\n').pop() ?? '{}') as {
        ms?: number;
        secondMs?: number;
        verified?: boolean;
        threads?: number;
        chunkBytes?: number;
      };
      if (typeof r.ms !== 'number') throw new Error(`the first-upload child answered ${out}`);
      ctx.progress(`transfer: first upload: ${out.trim()}`);
      ms.push(r.ms);
      if (typeof r.secondMs === 'number') second.push(r.secondMs);
      verified &&= r.verified === true;
      shape = { threads: r.threads, chunkBytes: r.chunkBytes };
    }
    const engine = order === 'source-first' ? 'gpumem-upload (first call)' : 'gpumem-upload (first call, runtime opened first)';
    ctx.addBandwidth(
      { test: 'transfer', direction: 'HtoD-first', srcKind: 'pageable', dstKind: 'device', engine, bytes, ...shape },
      ms,
      bytes,
      'one-way',
      verified,
    );
    if (second.length > 0) {
      ctx.addBandwidth(
        { test: 'transfer', direction: 'HtoD-first', srcKind: 'pageable', dstKind: 'device', engine: `${engine}, then the second call`, bytes, ...shape },
        second,
        bytes,
        'one-way',
        verified,
      );
    }
  }
}

function runChild(script: string, args: string[], signal: AbortSignal | undefined): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'], signal });
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    p.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    p.once('error', reject);
    p.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`the first-upload child exited ${code}: ${err.trim()}`))));
  });
}
