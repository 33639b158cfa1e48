/** The safetensors bench rows on the host backend: warm and cold loads verified, the disk reference, a kept file reused. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { tensorByteSize } from '../../formats/safetensors.js';
import { openRuntime } from '../../runtime/runtime.js';
import { BenchContext } from '../context.js';
import { benchCheckpoint, safetensorsTests } from './safetensors.js';

const GiB = 2 ** 30;

test('the full-size checkpoint is 2 GiB of many tensors, each name once, as a transformer lays them out', () => {
  const entries = benchCheckpoint(2 * GiB);
  const bytes = entries.reduce((s, e) => s + (tensorByteSize(e.dtype, e.shape) as number), 0);
  // The bar is stated for a 2 GiB file: within 1% of it, never above.
  assert.ok(bytes <= 2 * GiB && bytes > 0.99 * 2 * GiB, String(bytes));
  assert.ok(entries.length >= 100, 'many tensors, as a model has');
  assert.equal(new Set(entries.map((e) => e.name)).size, entries.length);
  assert.ok(entries.some((e) => e.dtype === 'F32') && entries.some((e) => e.dtype === 'BF16'));
});

test('bench rows: page cache and cold loads verified against the file, dd iflag=direct beside them; a kept file is reused', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-bench-st-'));
  const saved = process.env.GPUMEM_BENCH_DIR;
  process.env.GPUMEM_BENCH_DIR = dir;
  try {
    using rt = openRuntime({ backend: 'host' });
    const run = async (): Promise<BenchContext> => {
      const ctx = new BenchContext(rt, 0, { quick: true });
      await safetensorsTests(ctx, 2 * 2 ** 20);
      ctx[Symbol.dispose]();
      return ctx;
    };
    const first = await run();
    const rows = first.results.filter((r) => r.direction === 'file-HtoD');
    const warm = rows.find((r) => r.srcKind === 'file (page cache)');
    assert.ok(warm, 'a page-cache row');
    assert.match(warm.engine, /^loadSafetensors \(buffered\)$/);
    assert.ok(rows.every((r) => r.verified && r.medianGBps !== undefined && r.medianGBps > 0));
    assert.ok(
      rows.some((r) => r.srcKind === 'file (cold)' && r.engine.startsWith('loadSafetensors')),
      'a cold row (fsync, then posix_fadvise drop)',
    );
    const file = join(dir, 'gpumem-bench-2MiB.safetensors');
    const mtime = statSync(file).mtimeMs;
    await run();
    assert.equal(statSync(file).mtimeMs, mtime, 'the kept checkpoint is reused, not written again');
    assert.equal(rt.liveMemory().device.count, 0);
  } finally {
    if (saved === undefined) delete process.env.GPUMEM_BENCH_DIR;
    else process.env.GPUMEM_BENCH_DIR = saved;
    rmSync(dir, { recursive: true, force: true });
  }
});
