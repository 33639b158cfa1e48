/**
 * Transfers as programs make them (issue 22), timed with the host clock from the first call until every byte has
 * arrived, one-way bytes, GB = 1e9:
 * - 256 separate arrays of 4 MiB (weights loaded tensor by tensor) and 4096 arrays of 64 KiB (a batch of small
 *   inputs) to the device: awaited in turn (`await rt.upload` each), all at once (`Promise.all` of rt.upload) and as
 *   one list (`rt.uploadMany`);
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

/** Many separate arrays to one device allocation, three ways. */
export async function manyArrays(ctx: BenchContext, count: number, each: number, quick: boolean): Promise<void> {
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
  const verify = async (): Promise<boolean> => {
    const back = new Uint8Array(total);
    await rt.download(back, dst);
    return srcs.every((s, i) => Buffer.from(back.buffer, i * each, each).equals(Buffer.from(s.buffer)));
  };
  const row = (engine: string): RowFields => ({
    test: 'transfer',
    direction: 'HtoD-many',
    srcKind: 'pageable',
    dstKind: 'device',
    engine,
    bytes: total,
    copies: count,
  });
  const ways: Array<[string, () => Promise<unknown>]> = [
    [
      'await-each',
      async () => {
        for (let i = 0; i < count; i++) await rt.upload(dst, srcs[i]!, { dstOffset: i * each });
      },
    ],
    ['promise-all', () => Promise.all(srcs.map((s, i) => rt.upload(dst, s, { dstOffset: i * each })))],
    ['uploadMany', () => rt.uploadMany(srcs.map((src, i) => ({ dst, src, dstOffset: i * each })))],
  ];
  for (const [engine, op] of ways) {
    rt.fill(dst, 0);
    const ms = await ctx.timeHost(op, reps, 2);
    const d = rt.defaultStager(dev.index);
    ctx.addBandwidth({ ...row(engine), threads: d.threads, chunkBytes: d.chunkBytes }, ms, total, 'one-way', await verify());
  }
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
