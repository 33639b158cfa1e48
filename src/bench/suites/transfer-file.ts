/**
 * Files to the device and back (issue 22), timed with the host clock from the call until every byte has arrived,
 * one-way bytes, GB = 1e9. A file of the transfer size is written to the temporary folder (GPUMEM_BENCH_DIR
 * overrides it: put it on the disk you mean to measure), then:
 * - from the page cache: `rt.uploadFile` (auto: the range is cached, so buffered reads), and the way a program does
 *   it without gpumem's file path: `fs.readFileSync` then `rt.upload` (only below 2 GiB, Node's limit);
 * - cold, the file's pages dropped before each run (posix_fadvise DONTNEED after fdatasync): `rt.uploadFile` (auto:
 *   O_DIRECT where the file system allows it) and forced buffered reads;
 * - back: `rt.downloadFile` into the page cache.
 * Each row names the path the engine took. Every row is verified after its timed runs.
 */
import { closeSync, fdatasyncSync, openSync, readFileSync, writeSync } from 'node:fs';
import { makeTempFolder, removeTempFolder } from '../../input/temp-folders.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { BenchContext } from '../context.js';

const MiB = 2 ** 20;

async function timeWall(ctx: BenchContext, op: () => Promise<unknown>, reps: number, before?: () => void): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < reps; i++) {
    ctx.checkAbort();
    before?.();
    const t0 = performance.now();
    await op();
    out.push(performance.now() - t0);
  }
  return out;
}

export async function fileTransfers(ctx: BenchContext, bytes: number, quick: boolean): Promise<void> {
  const { rt, dev } = ctx;
  const dir = makeTempFolder('gpumem-bench-', process.env.GPUMEM_BENCH_DIR ?? tmpdir());
  const path = join(dir, 'file.bin');
  const reps = quick ? 2 : 3;
  try {
    ctx.progress(`transfer: writing a ${bytes / MiB} MiB file in ${dir}`);
    const piece = new Uint8Array(64 * MiB);
    const w32 = new Uint32Array(piece.buffer);
    for (let i = 0; i < w32.length; i++) w32[i] = (Math.imul(i, 2654435761) ^ 0xf11e) >>> 0;
    const fd = openSync(path, 'w');
    try {
      for (let at = 0; at < bytes; at += piece.length) writeSync(fd, piece, 0, Math.min(piece.length, bytes - at), at);
      fdatasyncSync(fd);
    } finally {
      closeSync(fd);
    }
    using dst = dev.alloc(bytes);
    const expected = (back: Uint8Array): boolean => {
      for (let at = 0; at < bytes; at += piece.length) {
        const n = Math.min(piece.length, bytes - at);
        if (!Buffer.from(back.buffer, back.byteOffset + at, n).equals(Buffer.from(piece.buffer, 0, n))) return false;
      }
      return true;
    };
    const verify = async (): Promise<boolean> => {
      const back = new Uint8Array(bytes);
      await rt.download(back, dst);
      return expected(back);
    };
    const stager = rt.defaultStager(dev.index);
    const copier = stager.copier();
    const dropCache = (): void => {
      const d = openSync(path, 'r');
      try {
        if (copier.dropCache?.(d, 0, bytes) !== true) throw new Error('the page cache cannot be dropped here (posix_fadvise)');
      } finally {
        closeSync(d);
      }
    };
    const row = (srcKind: string, engine: string) => ({
      test: 'transfer',
      direction: 'FtoD',
      srcKind,
      dstKind: 'device',
      engine,
      bytes,
      threads: stager.threads,
      chunkBytes: stager.chunkBytes,
    });
    // From the page cache (read once to be sure it is there).
    readFileSync(path);
    let last = await rt.uploadFile(dst, path);
    let ms = await timeWall(ctx, async () => (last = await rt.uploadFile(dst, path)), reps);
    ctx.addBandwidth(row('file-cached', `uploadFile (${last.path})`), ms, bytes, 'one-way', await verify());
    if (bytes < 2 ** 31) {
      rt.fill(dst, 0);
      ms = await timeWall(ctx, () => rt.upload(dst, readFileSync(path)), reps);
      ctx.addBandwidth({ ...row('file-cached', 'readFileSync+upload'), threads: undefined, chunkBytes: undefined }, ms, bytes, 'one-way', await verify());
    }
    // Cold: the pages dropped before each run.
    if (copier.dropCache) {
      for (const path_ of ['auto', 'buffered'] as const) {
        rt.fill(dst, 0);
        ms = await timeWall(ctx, async () => (last = await rt.uploadFile(dst, path, { path: path_ })), reps, dropCache);
        const engine = path_ === 'auto' ? `uploadFile (${last.path})` : 'uploadFile (buffered, forced)';
        ctx.addBandwidth(row('file-cold', engine), ms, bytes, 'one-way', await verify());
      }
    }
    if (rt.backend.capabilities.gpuDirectStorage) await cufileRows(ctx, path, bytes, reps);
    // Back into a file (the page cache absorbs the writes).
    const out = join(dir, 'out.bin');
    await rt.upload(dst, readFileSync(path));
    ms = await timeWall(ctx, () => rt.downloadFile(out, dst), reps);
    ctx.addBandwidth(
      { ...row('device', 'downloadFile (buffered)'), direction: 'DtoF', dstKind: 'file' },
      ms,
      bytes,
      'one-way',
      expected(new Uint8Array(readFileSync(out))),
    );
  } finally {
    removeTempFolder(dir);
  }
}

/** uploadFile through cuFile (compatibility mode where nvidia-fs is absent), measured in a child process. */
async function cufileRows(ctx: BenchContext, path: string, bytes: number, reps: number): Promise<void> {
  ctx.progress('transfer: uploadFile through cuFile (a child process)');
  const child = fileURLToPath(new URL('./cufile-child.js', import.meta.url));
  const out = await new Promise<string>((resolve) => {
    const p = spawn(process.execPath, [child, String(ctx.dev.index), path, String(bytes), String(reps)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      signal: ctx.options.signal,
    });
    let text = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => {
      text += d.toString();
    });
    p.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    p.once('error', (e) => resolve(JSON.stringify({ fallback: e.message })));
    p.once('exit', (code, signal) =>
      resolve(code === 0 ? text : JSON.stringify({ fallback: `the cuFile child ended with ${code ?? signal}: ${err.trim().slice(-300)}` })),
    );
  });
  const r = JSON.parse(out.trim().split('\n').pop() ?? '{}') as { cached?: number[]; cold?: number[]; verified?: boolean; fallback?: string };
  if (!r.cached || !r.cold) {
    ctx.progress(`transfer: no cuFile rows: ${r.fallback ?? out.trim()}`);
    return;
  }
  for (const [kind, ms] of [
    ['file-cached', r.cached],
    ['file-cold', r.cold],
  ] as const) {
    ctx.addBandwidth(
      { test: 'transfer', direction: 'FtoD', srcKind: kind, dstKind: 'device', engine: 'uploadFile (cufile)', bytes },
      ms,
      bytes,
      'one-way',
      r.verified === true,
    );
  }
}
