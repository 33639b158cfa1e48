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
import type { BenchReport } from './schema.js';

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
