/**
 * benchmarks/compare.mjs, the script that puts gpumem's bench beside the native programs of benchmarks/native/:
 * gpumem's side is a real host-backend bench run; the native side is written here, row for row with the same keys,
 * at chosen distances, so that the table's verdicts can be checked.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runCli } from '../testing/harness.js';
import type { BenchReport } from '../formats/bench-schema.js';

const compare = fileURLToPath(new URL('../../benchmarks/compare.mjs', import.meta.url));

test('compare.mjs pairs native rows with gpumem rows by key and says which agree within the native spread', async () => {
  const r = await runCli(['bench', '--backend', 'host', '--quick', '--max-size', '1MiB', '--only', 'stream', 'alloc', '--json']);
  assert.equal(r.code, 0, r.err);
  const bench = JSON.parse(r.out) as BenchReport;
  const paired = bench.results.filter((x) => x.engine !== 'gpumem-pool');
  const pool = bench.results.filter((x) => x.engine === 'gpumem-pool');
  assert.ok(paired.length >= 6 && pool.length > 0);
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-compare-'));
  try {
    writeFileSync(join(dir, 'gpumem-memory-1.json'), r.out);
    writeFileSync(join(dir, 'gpumem-memory-2.json'), r.out);
    // Native rounds: the first row agrees (gpumem inside a 4% spread), every other row is twice gpumem's figure.
    const nativeRound = (scale: number): string =>
      paired
        .map((x, i) => {
          const value = (x.counted === 'latency' ? x.medianUs! : x.medianGBps!) * (i === 0 ? scale : 2);
          const { test: t, direction, srcKind, dstKind, engine, bytes, counted } = x;
          return JSON.stringify({
            test: t,
            direction,
            srcKind,
            dstKind,
            engine,
            bytes,
            counted,
            verified: true,
            [counted === 'latency' ? 'us' : 'gbps']: [value, value],
          });
        })
        .join('\n');
    writeFileSync(join(dir, 'native-memory-1.jsonl'), nativeRound(0.98));
    writeFileSync(join(dir, 'native-memory-2.jsonl'), nativeRound(1.02));
    const text = execFileSync(process.execPath, [compare, dir], { encoding: 'utf8' });
    const rows = text.split('\n').filter((l) => /^\| (stream|alloc) \|/.test(l));
    assert.equal(rows.length, paired.length, 'one table row per paired bench row');
    assert.match(rows[0]!, /\| [+-]0\.0% \| 4\.0% \| yes \|$/);
    for (const l of rows.slice(1)) assert.match(l, /\| -50\.0% \| 0\.0% \| \*\*no\*\* \|$/);
    assert.match(text, new RegExp(`1 of ${paired.length} rows within the native program's own run-to-run spread`));
    assert.match(text, new RegExp(`No native counterpart: ${pool.length} rows of gpumem's own caching pool`));
    const agreement = JSON.parse(readFileSync(join(dir, 'agreement.json'), 'utf8')) as { rows: Array<{ agrees: boolean; unit: string }> };
    assert.deepEqual(
      agreement.rows.map((x) => x.agrees),
      paired.map((_, i) => i === 0),
    );
    assert.ok(agreement.rows.some((x) => x.unit === 'µs') && agreement.rows.some((x) => x.unit === 'GB/s'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("compare.mjs reads the NCCL yardstick's text and holds all-reduce from 64 MiB to the 5% bar", () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-compare-'));
  try {
    // The yardstick's output as native-collectives.cu prints it; the figures are made up to test the parsing.
    const native = (scale: number): string =>
      [
        'nccl 22803, 2 GPUs',
        'cudaMalloc buffers',
        'op              bytes        time_us   algbw_GB/s  busbw_GB/s',
        `all-reduce          ${2 ** 27}     1000.0       134.22      ${(134.22 * scale).toFixed(2)}`,
        `all-gather          ${2 ** 27}     1000.0       134.22      ${(67.11 * scale).toFixed(2)}`,
        'ncclMemAlloc + ncclCommRegister buffers',
        'op              bytes        time_us   algbw_GB/s  busbw_GB/s',
        `all-reduce          ${2 ** 27}     1000.0       134.22      ${(140 * scale).toFixed(2)}`,
      ].join('\n');
    writeFileSync(join(dir, 'native-collectives-1.txt'), native(1));
    writeFileSync(join(dir, 'native-collectives-2.txt'), native(1.01));
    const row = (direction: string, srcKind: string, bus: number) => ({
      test: 'collective',
      direction,
      srcKind,
      dstKind: srcKind,
      engine: 'nccl',
      bytes: 2 ** 27,
      ranks: 2,
      medianBusGBps: bus,
    });
    const gpumem = JSON.stringify({ results: [row('all-reduce', 'device', 130), row('all-gather', 'device', 60), row('all-reduce', 'nccl-registered', 120)] });
    writeFileSync(join(dir, 'gpumem-collectives-1.json'), gpumem);
    const text = execFileSync(process.execPath, [compare, dir], { encoding: 'utf8' });
    assert.match(text, /### Collectives over 2 GPUs/);
    const lines = text.split('\n').filter((l) => /^\| (all-reduce|all-gather) \|/.test(l));
    assert.equal(lines.length, 3);
    assert.match(lines.find((l) => l.includes('all-reduce | device'))!, /\| 96% \| 1\.0% \| met \(≥ 95%\) \|$/);
    assert.match(lines.find((l) => l.includes('all-reduce | nccl-registered'))!, /\| 85% \| 1\.0% \| \*\*not met\*\* \(< 95%\) \|$/);
    assert.match(lines.find((l) => l.includes('all-gather'))!, /\| 89% \| 1\.0% \| {2}\|$/, 'only all-reduce carries the bar');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
