/**
 * A safetensors checkpoint to the device, as a program loads its weights: a file of many tensors laid out as a
 * transformer's (2 GiB in a full run, the size the bar is set at; a few MiB with --quick), written once,
 * then loaded with `loadSafetensors` from the page cache (warm) and with the file dropped from the page cache
 * before each load (cold), beside `dd iflag=direct` reading the same file, the disk's own rate without the page
 * cache. Timed with the host clock from the call until the last byte is on the device, headers included; GB/s
 * counts the bytes of the tensors (GB = 1e9). Each row is verified: every loaded byte read back and compared with
 * the file.
 *
 * The file goes to $GPUMEM_BENCH_DIR (kept there, and reused by later runs, so that the PyTorch comparison
 * `benchmarks/pytorch/safetensors_load.py` can load the same file) or to the system's temporary folder (removed).
 * The page cache is dropped per file with `dd iflag=nocache count=0` (posix_fadvise DONTNEED, no root needed);
 * where `fincore` is installed the drop is checked, and a cold row whose file stayed cached is not reported.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, statfsSync } from 'node:fs';
import { makeTempFolder, removeTempFolder } from '../../input/temp-folders.js';
import { open, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { ErrorCode, GpuError } from '../../errors.js';
import { layoutSafetensors, parseHeader, type SafetensorsEntry } from '../../formats/safetensors.js';
import { loadSafetensors } from '../../runtime/safetensors.js';
import { verifyLoaded } from '../../runtime/safetensors-io.js';
import type { BenchContext, RowFields } from '../context.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
/** Written into the file's metadata; a kept file with another recipe is written again. */
const RECIPE = 'gpumem-bench-safetensors/1';

/**
 * The tensors of a decoder-only transformer of hidden size `d` (BF16 weights, F32 norms) until `bytes` are
 * filled: per layer q, k, v, o [d, d], gate and up [f, d], down [d, f], two norms [d]; the rest an embedding.
 */
export function benchCheckpoint(bytes: number): SafetensorsEntry[] {
  const d = bytes >= 512 * MiB ? 2048 : 256;
  const f = Math.round((d * 11) / 4 / 64) * 64;
  const layerBytes = (4 * d * d + 3 * f * d) * 2 + 2 * d * 4;
  const layers = Math.max(1, Math.floor((bytes * 0.9) / layerBytes));
  const out: SafetensorsEntry[] = [];
  for (let i = 0; i < layers; i++) {
    const p = `model.layers.${i}`;
    for (const n of ['q_proj', 'k_proj', 'v_proj', 'o_proj']) out.push({ name: `${p}.self_attn.${n}.weight`, dtype: 'BF16', shape: [d, d] });
    out.push({ name: `${p}.mlp.gate_proj.weight`, dtype: 'BF16', shape: [f, d] });
    out.push({ name: `${p}.mlp.up_proj.weight`, dtype: 'BF16', shape: [f, d] });
    out.push({ name: `${p}.mlp.down_proj.weight`, dtype: 'BF16', shape: [d, f] });
    out.push({ name: `${p}.input_layernorm.weight`, dtype: 'F32', shape: [d] });
    out.push({ name: `${p}.post_attention_layernorm.weight`, dtype: 'F32', shape: [d] });
  }
  const rows = Math.max(1, Math.floor((bytes - layers * layerBytes) / (2 * d)));
  out.push({ name: 'model.embed_tokens.weight', dtype: 'BF16', shape: [rows, d] });
  return out;
}

/** Writes the checkpoint: the reference writer's layout, tensor bytes a pattern that differs per word and per file position. */
async function writeCheckpoint(path: string, entries: SafetensorsEntry[]): Promise<number> {
  const layout = layoutSafetensors(entries, { format: 'pt', recipe: RECIPE });
  const fh = await open(path, 'w');
  try {
    await fh.write(layout.prefix, 0, layout.prefix.byteLength, 0);
    const piece = new Uint32Array((64 * MiB) / 4);
    for (let at = 0; at < layout.dataBytes; at += piece.byteLength) {
      const n = Math.min(piece.byteLength, layout.dataBytes - at);
      const base = at / 4;
      for (let i = 0; i < n / 4; i++) piece[i] = Math.imul(base + i, 2654435761) >>> 0;
      await fh.write(new Uint8Array(piece.buffer, 0, n), 0, n, layout.dataOffset + at);
    }
    // Written back to disk now: the page cache drops only clean pages, and the cold rows need it to drop them all.
    await fh.datasync();
  } finally {
    await fh.close();
  }
  return layout.fileBytes;
}

/** True when `path` is a checkpoint of this recipe and size (a kept file from an earlier run). */
async function reusable(path: string, fileBytes: number): Promise<boolean> {
  try {
    if ((await stat(path)).size !== fileBytes) return false;
    const fh = await open(path, 'r');
    try {
      const prefix = new Uint8Array(8);
      await fh.read(prefix, 0, 8, 0);
      const n = Number(new DataView(prefix.buffer).getBigUint64(0, true));
      if (n > MiB) return false;
      const head = new Uint8Array(n);
      if ((await fh.read(head, 0, n, 8)).bytesRead !== n) return false;
      return parseHeader(head, fileBytes).metadata?.get('recipe') === RECIPE;
    } finally {
      await fh.close();
    }
  } catch {
    return false;
  }
}

/** Drops `path` from the page cache; answers the fraction still resident where fincore can tell, else undefined. */
function dropFromCache(path: string): number | undefined {
  spawnSync('dd', [`if=${path}`, 'iflag=nocache', 'count=0', 'status=none'], { stdio: 'ignore' });
  const r = spawnSync('fincore', ['--bytes', '--noheadings', '--output', 'RES,SIZE', path], { encoding: 'utf8' });
  if (r.status !== 0) return undefined;
  const [res, size] = r.stdout.trim().split(/\s+/).map(Number);
  return res !== undefined && size ? res / size : undefined;
}

/** Seconds `dd iflag=direct` takes to read `path` (bypassing the page cache), or undefined where O_DIRECT fails. */
function ddDirect(path: string): number | undefined {
  const t0 = performance.now();
  const r = spawnSync('dd', [`if=${path}`, 'of=/dev/null', 'bs=64M', 'iflag=direct', 'status=none'], { stdio: 'ignore' });
  return r.status === 0 ? (performance.now() - t0) / 1e3 : undefined;
}

/**
 * The file-HtoD rows (see the module comment), for `bench --only transfer`.
 * @throws GpuError UNSUPPORTED when the folder has no room for the checkpoint (the bench records it as a failed group)
 */
export async function safetensorsTests(ctx: BenchContext, max: number): Promise<void> {
  const quick = ctx.options.quick;
  const target = quick ? Math.max(MiB, Math.min(max, 64 * MiB)) : 2 * GiB;
  const keep = process.env.GPUMEM_BENCH_DIR;
  const folder = keep ?? makeTempFolder('gpumem-bench-');
  const entries = benchCheckpoint(target);
  const fileBytes = layoutSafetensors(entries, { format: 'pt', recipe: RECIPE }).fileBytes;
  const path = join(folder, `gpumem-bench-${Math.round(target / MiB)}MiB.safetensors`);
  try {
    if (!(await reusable(path, fileBytes))) {
      const fs = statfsSync(folder);
      if (fs.bavail * fs.bsize < fileBytes + 256 * MiB) {
        throw new GpuError(
          ErrorCode.UNSUPPORTED,
          `${folder} has ${Math.floor((fs.bavail * fs.bsize) / MiB)} MiB free, the checkpoint needs ${Math.ceil(fileBytes / MiB)} MiB (set GPUMEM_BENCH_DIR)`,
        );
      }
      ctx.progress(`safetensors: writing a ${(fileBytes / GiB).toFixed(2)} GiB checkpoint of ${entries.length} tensors to ${path}`);
      await writeCheckpoint(path, entries);
    }
    const reps = quick ? 3 : 5;
    const dataBytes = fileBytes - layoutSafetensors(entries, { format: 'pt', recipe: RECIPE }).dataOffset;
    const row = (srcKind: string, engine: string): RowFields => ({
      test: 'transfer',
      direction: 'file-HtoD',
      srcKind,
      dstKind: 'device',
      engine,
      bytes: dataBytes,
      copies: entries.length,
    });
    const load = async (before?: () => void): Promise<{ ms: number[]; paths: string[]; ok: boolean }> => {
      const ms: number[] = [];
      const paths = new Set<string>();
      // Warm rows start after one untimed load (pinned slots, the stager, V8's first pass), as a steady loader runs.
      if (!before) (await loadSafetensors(path, ctx.dev))[Symbol.dispose]();
      for (let i = 0; i < reps; i++) {
        ctx.checkAbort();
        before?.();
        const t0 = performance.now();
        using loaded = await loadSafetensors(path, ctx.dev, ctx.options.signal ? { signal: ctx.options.signal } : {});
        ms.push(performance.now() - t0);
        for (const p of loaded.paths) paths.add(p);
      }
      using last = await loadSafetensors(path, ctx.dev);
      const v = await verifyLoaded(ctx.rt, last.tensors.values());
      return { ms, paths: [...paths], ok: v.ok && v.bytes === dataBytes };
    };
    ctx.progress(`safetensors: loading ${(dataBytes / GiB).toFixed(2)} GiB from the page cache`);
    spawnSync('cat', [path], { stdio: 'ignore' }); // into the page cache
    const warm = await load();
    ctx.addBandwidth(row('file (page cache)', `loadSafetensors (${warm.paths.join(', ')})`), warm.ms, dataBytes, 'one-way', warm.ok);

    ctx.progress('safetensors: loading with the file dropped from the page cache before each load');
    let resident: number | undefined;
    const cold = await load(() => {
      resident = Math.max(resident ?? 0, dropFromCache(path) ?? 0);
    });
    if (resident !== undefined && resident > 0.05) {
      ctx.progress(`safetensors: the page cache kept ${(resident * 100).toFixed(0)}% of the file after dropping it: no cold row`);
    } else {
      ctx.addBandwidth(row('file (cold)', `loadSafetensors (${cold.paths.join(', ')})`), cold.ms, dataBytes, 'one-way', cold.ok);
    }
    const dd: number[] = [];
    for (let i = 0; i < reps; i++) {
      dropFromCache(path);
      const s = ddDirect(path);
      if (s === undefined) break;
      dd.push(s * 1e3);
    }
    if (dd.length === reps) {
      ctx.addBandwidth(
        { ...row('file (cold)', 'dd iflag=direct bs=64M'), dstKind: 'host (discarded)', bytes: fileBytes, copies: 1 },
        dd,
        fileBytes,
        'one-way',
        true,
      );
    } else ctx.progress('safetensors: dd iflag=direct cannot read this file system (no O_DIRECT): no disk reference row');
  } finally {
    if (!keep) removeTempFolder(folder);
    else if (!existsSync(path)) ctx.progress(`safetensors: ${path} was not written`);
  }
}
