/**
 * Legacy rocprof (v1) files other projects published (../shared/traces, SOURCES.md there): two --hip-trace runs,
 * each as results.db, results.json and --stats tables. Expected figures are counted from the files themselves here,
 * with SQL on the database and the JSON's own events, not taken from gpumem's output: the copies' sizes are the
 * sizeBytes of the hipMemcpy calls that made them, joined by Index in the database.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { openSqlite } from '../input/sqlite.js';
import { analyzeFiles } from './analyze.js';

const ROOT = ['../../../shared/traces/', '../../../../shared/traces/'].map((p) => new URL(p, import.meta.url).pathname).find(existsSync) ?? '../shared/traces/';
const skip = existsSync(ROOT) ? false : `${ROOT} is absent (the shared traces sit beside the checkout)`;
const RUNS = ['batched_gemm', 'HIP_Programming'];

/** Bytes by copy direction, from COPY joined to the sizeBytes of its HIP call, in SQL. */
function copyBytesBySql(file: string): Record<string, number> {
  const db = openSqlite(file);
  try {
    const out: Record<string, number> = {};
    // joined here, not in SQL: the reader's bounds refuse a join through HIP's non-unique Index
    const args = new Map(db.all('SELECT "Index" AS i, args FROM HIP').map((r) => [Number(r.i), String(r.args)]));
    for (const r of db.iterate('SELECT "Index" AS i, Name AS name FROM COPY')) {
      if (!args.has(Number(r.i))) continue;
      const dir = String(r.name) === 'CopyHostToDevice' ? 'HtoD' : String(r.name) === 'CopyDeviceToHost' ? 'DtoH' : String(r.name);
      out[dir] = (out[dir] ?? 0) + Number(/sizeBytes\((\d+)\)/.exec(args.get(Number(r.i)) ?? '')?.[1]);
    }
    return out;
  } finally {
    db.close();
  }
}

for (const name of RUNS) {
  test(`shared ${name}: results.db and results.json give each copy its call's size, the same in both`, { skip }, async () => {
    const expected = copyBytesBySql(`${ROOT}${name}/results.db`);
    for (const file of ['results.db', 'results.json']) {
      const s = (await analyzeFiles([`${ROOT}${name}/${file}`])).summary;
      const got = Object.fromEntries(s.copies.groups.map((g) => [g.direction, g.bytes]));
      assert.deepEqual(got, expected, `${name}/${file}`);
      assert.equal(s.kernels.count, 1, `${name}/${file}: one kernel`);
      // three hipMalloc and three hipFree calls: allocations counted, so fragmentation says what it lacks instead
      assert.equal(s.allocations.mallocCalls, 3);
      const why = s.notApplicable.find((n) => n.rule === 'fragmentation')?.reason ?? '';
      assert.match(why, /records 6 allocation events but not what the allocator reserved/, `${name}/${file}`);
    }
  });

  test(`shared ${name}: the --stats totals of hipMemcpy claim no saving, saying what totals cannot tell`, { skip }, async () => {
    const stats = readFileSync(`${ROOT}${name}/results.hip_stats.csv`, 'utf8');
    const calls = Number(/"hipMemcpy",(\d+),/.exec(stats)?.[1]);
    const r = await analyzeFiles([`${ROOT}${name}/results.hip_stats.csv`]);
    assert.deepEqual(
      r.findings.map((f) => f.rule),
      [],
    );
    const why = r.summary.notApplicable.find((n) => n.rule === 'sync-copy')?.reason ?? '';
    assert.match(why, new RegExp(`only totals per call \\(hipMemcpy ${calls}[,:].*cannot tell how much of each call waited`));
  });
}

test('shared ozaki_tests: a --stats table of Tensile and template kernels counts every call as the file totals it', { skip }, async () => {
  const text = readFileSync(`${ROOT}ozaki_tests/results.stats.csv`, 'utf8');
  const rows = text
    .trim()
    .split('\n')
    .slice(1)
    .map((l) => /,(\d+),(\d+),\d+,[\d.e+-]+$/.exec(l));
  const calls = rows.reduce((s, m) => s + Number(m?.[1]), 0);
  const ns = rows.reduce((s, m) => s + Number(m?.[2]), 0);
  const s = (await analyzeFiles([`${ROOT}ozaki_tests/results.stats.csv`])).summary;
  assert.equal(s.kernels.count, calls);
  assert.equal(s.kernels.timeNs, ns);
});
