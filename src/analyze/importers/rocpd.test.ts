/**
 * rocprofv3's default database (rocpd), written here from the naive PyTorch run in both table layouts rocpd has had
 * (testing/trace-fixtures.ts): recognised as rocpd, read through its views, with the counts of the run it was written
 * from, the same findings as the Kineto trace of that run, and the same counts as rocprofv3's CSV of it. Databases
 * that are not rocpd are refused by what they are.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ErrorCode, isGpuError } from '../../errors.js';
import { openSqlite } from '../../input/sqlite.js';
import { findingOf, naiveRun, writeRocpd } from '../../testing/trace-fixtures.js';
import { runCli } from '../../testing/harness.js';
import { analyzeFiles, detectTraceFormat } from '../analyze.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-rocpd-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));
const fixture = (p: string): string => new URL(`../../../fixtures/${p}`, import.meta.url).pathname;
const run = naiveRun();
const find = findingOf;

for (const layout of ['rows', 'timestamps'] as const) {
  test(`a rocpd database (${layout === 'rows' ? 'times on the rows' : 'times in rocpd_timestamp'}) is read through its views with the run's counts`, async () => {
    const db = join(dir, `${layout}.db`);
    writeRocpd(db, run, layout);
    assert.equal(detectTraceFormat(db), 'rocpd');
    const r = await analyzeFiles([db]);
    const s = r.summary;
    assert.deepEqual(s.formats, ['rocpd']);
    assert.deepEqual(s.devices, [{ id: 1, name: 'AMD Instinct MI300X (gfx942)' }]);
    assert.equal(s.kernels.count, run.kernels.length);
    assert.equal(s.copies.count, run.copies.length);
    assert.equal(
      s.copies.bytes,
      run.copies.reduce((t, e) => t + e.bytes, 0),
    );
    assert.equal(s.syncs.streamSync, run.runtime.filter((e) => e.name === 'hipStreamSynchronize').length);
    assert.equal(s.syncs.deviceSync, run.runtime.filter((e) => e.name === 'hipDeviceSynchronize').length);
    // the scratch allocation is the runtime's and the marker region is no API call: neither is counted
    assert.equal(s.allocations.driverAllocEvents, 1);
    // host memory kinds inferred from the pinned allocation's address range, as for rocprofv3's JSON
    const pinned = run.copies.filter((e) => e.host === 'Pinned').length;
    assert.ok(
      s.notes.some((n) => n.includes(`${pinned} pinned, ${run.copies.length - pinned} pageable`)),
      s.notes.join('\n'),
    );
    assert.match(s.rates.source, /AMD Instinct MI300X's PCIe 5\.0 x16/);
  });
}

test('rocpd gives the findings of the Kineto trace of the same run', async () => {
  const db = join(dir, 'findings.db');
  writeRocpd(db, run);
  const [rocpd, kineto] = await Promise.all([analyzeFiles([db]), analyzeFiles([fixture('traces/pytorch-cuda-naive.pt.trace.json.gz')])]);
  for (const rule of ['pageable-copy', 'small-copies', 'sync-storm']) {
    assert.equal(find(rocpd, rule).count, find(kineto, rule).count, `${rule} count`);
    assert.equal(find(rocpd, rule).bytes, find(kineto, rule).bytes, `${rule} bytes`);
  }
});

test("rocpd and rocprofv3's CSV of one run give the same counts", async () => {
  const csvDir = fixture('traces/rocprofv3-naive');
  const csv = await analyzeFiles(readdirSync(csvDir).map((f) => join(csvDir, f)));
  const db = join(dir, 'csv.db');
  writeRocpd(db, run);
  const rocpd = await analyzeFiles([db]);
  assert.equal(rocpd.summary.kernels.count, csv.summary.kernels.count);
  assert.equal(rocpd.summary.copies.count, csv.summary.copies.count);
  assert.deepEqual(rocpd.summary.syncs, csv.summary.syncs);
});

test('a rocprofv3 output folder holding the database is read from it', async () => {
  const out = join(dir, 'out', 'host');
  const { mkdirSync } = await import('node:fs');
  mkdirSync(out, { recursive: true });
  writeRocpd(join(out, '683_results.db'), run);
  const r = await analyzeFiles([join(dir, 'out')]);
  assert.deepEqual(r.summary.formats, ['rocpd']);
  assert.equal(r.summary.kernels.count, run.kernels.length);
});

test('hostile values in a rocpd view are refused naming the view and column', async () => {
  const db = join(dir, 'hostile.db');
  writeRocpd(db, { ...run, copies: run.copies.slice(0, 3), kernels: [], runtime: [] });
  const w = openSqlite(db, { write: true });
  w.exec("UPDATE rocpd_memory_copy_3f2a9c10 SET size = 'lots' WHERE id = 2");
  w.close();
  await assert.rejects(
    analyzeFiles([db]),
    (e: unknown) => isGpuError(e, ErrorCode.BAD_INPUT) && /memory_copies column size holds "lots"/.test((e as Error).message),
  );
});

test('SQLite databases that are not rocpd or nsys are refused by what they are', async () => {
  const rpd = join(dir, 'trace.rpd');
  let w = openSqlite(rpd, { write: true });
  w.exec(
    'CREATE TABLE rocpd_string (id INTEGER PRIMARY KEY, string TEXT); CREATE TABLE rocpd_op (id INTEGER PRIMARY KEY); CREATE TABLE rocpd_api (id INTEGER PRIMARY KEY)',
  );
  w.close();
  assert.throws(
    () => detectTraceFormat(rpd),
    (e: unknown) => isGpuError(e, ErrorCode.BAD_INPUT) && /rocmProfileData \(RPD\)/.test((e as Error).message),
  );
  const other = join(dir, 'app.db');
  w = openSqlite(other, { write: true });
  w.exec('CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)');
  w.close();
  const cli = await runCli(['analyze', other]);
  assert.equal(cli.code, 2);
  assert.match(cli.err, /neither an Nsight Systems export, a rocprofv3 database nor a legacy rocprof results\.db \(it holds 1 tables and views: users\)/);
  assert.equal(cli.out, '');
});
