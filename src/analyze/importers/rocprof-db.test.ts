/**
 * Legacy rocprof (v1) results.db, written here from the naive PyTorch run with the CREATE TABLE statements
 * rocprofiler's tblextr.py issues (its table_descr, ext/api/copy/ops_table_descr column lists, DurationNs added by
 * dform.post_process_data; ROCm/rocprofiler bin/tblextr.py): recognised by its tables, read with the run's counts,
 * the same counts as the results.json of the same run, sizes and host kinds from tblextr's memory-copy data where it
 * is there, and partial or hostile databases refused with a typed error.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ErrorCode, isGpuError } from '../../errors.js';
import { openSqlite, type SqlParam } from '../../input/sqlite.js';
import { runCli } from '../../testing/harness.js';
import { findingOf, naiveRun, PINNED_BASE, PINNED_BYTES, type Run, v1CallArgs, writeRocprofV1Json } from '../../testing/trace-fixtures.js';
import { analyzeFiles, detectTraceFormat, loadTraces } from '../analyze.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-rocprof-db-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));
const fixture = (p: string): string => new URL(`../../../fixtures/${p}`, import.meta.url).pathname;
const run = naiveRun();
const find = findingOf;

const KERN =
  '"Index" INTEGER, "KernelName" TEXT, "gpu-id" INTEGER, "queue-id" INTEGER, "queue-index" INTEGER, "pid" INTEGER, "tid" INTEGER, "grd" INTEGER, "wgr" INTEGER, "lds" INTEGER, "scr" INTEGER, "arch_vgpr" INTEGER, "accum_vgpr" INTEGER, "sgpr" INTEGER, "wave_size" INTEGER, "sig" INTEGER, "obj" INTEGER';
const KERN_TIMES = ', "DispatchNs" INTEGER, "BeginNs" INTEGER, "EndNs" INTEGER, "CompleteNs" INTEGER, "DurationNs" INTEGER';
const API =
  '"BeginNs" INTEGER, "EndNs" INTEGER, "pid" INTEGER, "tid" INTEGER, "Name" TEXT, "args" TEXT, "Index" INTEGER, "Data" TEXT, "__section" INTEGER, "__lane" INTEGER, "DurationNs" INTEGER';
const OPS =
  '"BeginNs" INTEGER, "EndNs" INTEGER, "dev-id" INTEGER, "queue-id" INTEGER, "Name" TEXT, "pid" INTEGER, "tid" INTEGER, "roctx-range" TEXT, "stream-id" INTEGER, "Index" INTEGER, "Data" TEXT, "__section" INTEGER, "__lane" INTEGER, "DurationNs" INTEGER';
const ROCTX = '"BeginNs" INTEGER, "EndNs" INTEGER, "pid" INTEGER, "tid" INTEGER, "Name" TEXT, "Index" INTEGER, "__section" INTEGER, "__lane" INTEGER';
const COPY_NAME = { HtoD: 'CopyHostToDevice', DtoH: 'CopyDeviceToHost', DtoD: 'CopyDeviceToDevice', '': 'Copy' } as const;

/**
 * Writes the run as tblextr.py lays out a --hip-trace run: rocTX, HIP, COPY and OPS (the ops layout), and KERN
 * unless `kern` is false (named `A`, as tblextr named it before 2022, with `kernTable`). `data` fills COPY's Data as
 * mem_manager.py writes it when its memory-copy data is on; `args` fills HIP's args as roctracer formats them;
 * `unknown` adds zero-length OPS rows HIP names "Unknown command type"; `extra` is SQL run after (a table of one's own).
 */
function writeRocprofV1Db(
  file: string,
  r: Run,
  o: { kern?: boolean; kernTable?: 'KERN' | 'A'; data?: boolean; args?: boolean; unknown?: number; extra?: string } = {},
): void {
  const kern = o.kernTable ?? 'KERN';
  const db = openSqlite(file, { write: true });
  db.exec(`CREATE TABLE rocTX (${ROCTX}); CREATE TABLE HIP (${API}); CREATE TABLE COPY (${OPS}); CREATE TABLE OPS (${OPS});`);
  if (o.kern !== false) db.exec(`CREATE TABLE ${kern} (${KERN}${KERN_TIMES})`);
  if (o.extra) db.exec(o.extra);
  const opOf = new Map([...r.copies, ...r.memsets].map((c) => [c.correlation, c]));
  const ins = (table: string, cols: string[], vals: SqlParam[]): void =>
    db.run(`INSERT INTO ${table} (${cols.map((c) => `"${c}"`).join(',')}) VALUES (${cols.map(() => '?').join(',')})`, ...vals);
  db.exec('BEGIN');
  ins('rocTX', ['BeginNs', 'EndNs', 'pid', 'tid', 'Name', 'Index'], [run.kernels[0]!.start, run.kernels[0]!.start + 1n, 683, 683, 'step', 0]);
  for (const e of r.runtime)
    ins(
      'HIP',
      ['BeginNs', 'EndNs', 'pid', 'tid', 'Name', 'args', 'Index', 'DurationNs'],
      [e.start, e.end, 683, e.tid, e.name, o.args ? v1CallArgs(e, opOf) : '', e.correlation, e.end - e.start],
    );
  const ops = ['BeginNs', 'EndNs', 'dev-id', 'queue-id', 'Name', 'pid', 'tid', 'stream-id', 'Index', 'Data', 'DurationNs'];
  for (const e of r.copies) {
    const data = o.data
      ? `${e.start},${e.end},683,${e.tid},hipMemcpyAsync,Direction=${e.dir},SrcType=${e.dir === 'HtoD' ? e.host.toLowerCase() : 'device'},DstType=${e.dir === 'DtoH' ? e.host.toLowerCase() : 'device'},Size=${e.bytes},Async=1`
      : '';
    ins('COPY', ops, [e.start, e.end, 0, 0, COPY_NAME[e.dir], 683, e.tid, e.stream, e.correlation, data, e.end - e.start]);
  }
  for (const e of r.memsets) ins('COPY', ops, [e.start, e.end, 0, 0, 'FillBuffer', 683, e.tid, e.stream, e.correlation, '', e.end - e.start]);
  for (const e of r.kernels) ins('OPS', ops, [e.start, e.end, 0, 0, e.name, 683, e.tid, e.stream, e.correlation, '', e.end - e.start]);
  ins('OPS', ops, [r.kernels[0]!.start, r.kernels[0]!.start, 0, 0, '"<barrier packet>"', 683, 0, 0, 0, '', 0]);
  for (let i = 0; i < (o.unknown ?? 0); i++) {
    const at = r.kernels[i % r.kernels.length]!.end;
    ins('OPS', ops, [at, at, 0, 0, 'Unknown command type', 683, 0, 0, 900_000 + i, '', 0]);
  }
  if (o.kern !== false)
    r.kernels.forEach((e, i) =>
      ins(
        kern,
        ['Index', 'KernelName', 'gpu-id', 'queue-id', 'DispatchNs', 'BeginNs', 'EndNs', 'CompleteNs', 'DurationNs'],
        [i, `${e.name} [clone .kd]`, 0, 0, e.start - 1000n, e.start, e.end, e.end + 1000n, e.end - e.start],
      ),
    );
  db.exec('COMMIT');
  db.close();
}

test("a rocprof results.db is read from its tables with the run's counts, the same as its results.json", async () => {
  const file = join(dir, 'results.db');
  writeRocprofV1Db(file, run);
  assert.equal(detectTraceFormat(file), 'rocprof-db');
  const json = join(dir, 'results.json');
  writeRocprofV1Json(json, run);
  const [r, j] = await Promise.all([analyzeFiles([file]), analyzeFiles([json])]);
  const s = r.summary;
  assert.deepEqual(s.formats, ['rocprof-db']);
  // KERN and OPS record the same dispatches: each counted once, the barrier packet not at all
  assert.equal(s.kernels.count, run.kernels.length);
  assert.equal(s.kernels.timeNs, Number(run.kernels.reduce((t, e) => t + (e.end - e.start), 0n)));
  assert.equal(s.copies.count, run.copies.length);
  assert.equal(s.memsets.count, run.memsets.length);
  assert.equal(s.copies.bytes, null, 'without memory-copy data the database holds no sizes');
  assert.ok(s.notes.some((n) => /carry no byte count/.test(n)));
  for (const k of ['kernels', 'copies', 'memsets'] as const) assert.equal(s[k].count, j.summary[k].count, k);
  assert.deepEqual(s.syncs, j.summary.syncs);
});

test('copy sizes and host memory kinds come from the Data column, giving the findings of the Kineto trace', async () => {
  const file = join(dir, 'data.db');
  writeRocprofV1Db(file, run, { data: true });
  const [r, kineto] = await Promise.all([analyzeFiles([file]), analyzeFiles([fixture('traces/pytorch-cuda-naive.pt.trace.json.gz')])]);
  assert.equal(
    r.summary.copies.bytes,
    run.copies.reduce((t, e) => t + e.bytes, 0),
  );
  for (const rule of ['pageable-copy', 'sync-storm']) {
    assert.equal(find(r, rule).count, find(kineto, rule).count, `${rule} count`);
    assert.equal(find(r, rule).bytes, find(kineto, rule).bytes, `${rule} bytes`);
  }
});

test('copy and fill sizes come from the sizeBytes of the HIP call of the same Index, host kinds from its addresses', async () => {
  const file = join(dir, 'args.db');
  writeRocprofV1Db(file, run, { args: true });
  // one pinned buffer, allocated before the run as PyTorch's pin_memory() does: hipHostMalloc's ptr(...) size(...)
  const w = openSqlite(file, { write: true });
  const t0 = run.runtime[0]!.start - 10_000n;
  w.run(
    'INSERT INTO HIP ("BeginNs", "EndNs", "pid", "tid", "Name", "args", "Index") VALUES (?, ?, 683, 683, ?, ?, ?)',
    t0,
    t0 + 5000n,
    'hipHostMalloc',
    `( ptr(0x${PINNED_BASE.toString(16)}) size(${PINNED_BYTES * 256}) flags(0))`,
    999_999,
  );
  w.close();
  const m = await loadTraces([file]);
  const start = (a: bigint, b: bigint): number => (a < b ? -1 : a > b ? 1 : 0);
  const order = [...Array(m.copies.length).keys()].sort((a, b) => m.copies.get(a, 'start') - m.copies.get(b, 'start'));
  assert.deepEqual(
    order.map((i) => m.copies.get(i, 'bytes')),
    [...run.copies].sort((a, b) => start(a.start, b.start)).map((e) => e.bytes),
    "each copy has its own call's size",
  );
  const s = (await analyzeFiles([file])).summary;
  assert.equal(
    s.memsets.bytes,
    run.memsets.reduce((t, e) => t + e.bytes, 0),
  );
  // the host kinds the CUDA trace recorded, inferred from the calls' host addresses against the one pinned buffer
  const byKind = Object.fromEntries(s.copies.groups.map((g) => [`${g.direction}/${g.hostKind}`, g.count]));
  assert.deepEqual(byKind, { 'HtoD/pageable': 1216, 'DtoH/pinned': 6 });
  assert.ok(s.notes.some((n) => /sizes taken from the sizeBytes argument of the HIP call/.test(n)));
});

test("a results.db with a table of its own beside rocprof's, or its kernel table named A (before 2022), is read", async () => {
  const file = join(dir, 'extra.db');
  writeRocprofV1Db(file, run, { kernTable: 'A', extra: 'CREATE TABLE notes (id INTEGER, text TEXT)', unknown: 4 });
  assert.equal(detectTraceFormat(file), 'rocprof-db');
  const s = (await analyzeFiles([file])).summary;
  assert.equal(s.kernels.count, run.kernels.length);
  assert.equal(s.copies.count, run.copies.length);
  assert.ok(s.notes.some((n) => /tables that are not rocprof's left out: notes/.test(n)));
});

test('HIP commands that are neither kernels nor copies ("Unknown command type") are neither, in OPS or COPY', async () => {
  const file = join(dir, 'unknown.db');
  writeRocprofV1Db(file, run, { kern: false, unknown: 3 });
  const w = openSqlite(file, { write: true });
  const at = run.copies[0]!.start;
  w.run('INSERT INTO COPY ("BeginNs", "EndNs", "dev-id", "Name", "stream-id", "Index") VALUES (?, ?, 0, ?, 0, 777777)', at, at, 'Unknown command type');
  w.close();
  const s = (await analyzeFiles([file])).summary;
  assert.equal(s.kernels.count, run.kernels.length, 'kernels from OPS, the unnamed commands left out');
  assert.equal(s.copies.count, run.copies.length);
  assert.deepEqual(s.copies.groups.map((g) => g.direction).sort(), ['DtoH', 'HtoD'], 'no copy of unknown direction');
  assert.ok(s.notes.some((n) => /3 "Unknown command type" in OPS/.test(n)));
  assert.ok(s.notes.some((n) => /1 "Unknown command type" in COPY/.test(n)));
});

test('without KERN (no --timestamp) the kernels come from OPS', async () => {
  const file = join(dir, 'ops.db');
  writeRocprofV1Db(file, run, { kern: false });
  const s = (await analyzeFiles([file])).summary;
  assert.equal(s.kernels.count, run.kernels.length);
  assert.equal(s.copies.count, run.copies.length);
});

test('a results.db of a run rocprof saw no dispatch in (an empty KERN of two columns) is refused as that, not as counters', async () => {
  const file = join(dir, 'empty.db');
  const db = openSqlite(file, { write: true });
  db.exec('CREATE TABLE KERN ("Index" INTEGER, "KernelName" TEXT)');
  db.close();
  await assert.rejects(
    analyzeFiles([file]),
    (e: unknown) => isGpuError(e, ErrorCode.BAD_INPUT) && /no timed table and an empty KERN: rocprof saw no kernel dispatch/.test((e as Error).message),
  );
});

test('a counters-only results.db (KERN without times) is refused as what it is, exit 2 and nothing printed', async () => {
  const file = join(dir, 'pmc.db');
  const db = openSqlite(file, { write: true });
  db.exec(`CREATE TABLE KERN (${KERN}, "SQ_WAVES" INTEGER); INSERT INTO KERN ("Index", "KernelName", "SQ_WAVES") VALUES (0, 'k', 64)`);
  db.close();
  assert.equal(detectTraceFormat(file), 'rocprof-db');
  await assert.rejects(
    analyzeFiles([file]),
    (e: unknown) => isGpuError(e, ErrorCode.BAD_INPUT) && /hardware counters per dispatch, without times/.test((e as Error).message),
  );
  const cli = await runCli(['analyze', file]);
  assert.equal(cli.code, 2);
  assert.match(cli.err, /without times/);
  assert.equal(cli.out, '');
});

test('hostile or partial tables are refused naming the table and column', async () => {
  const bad = join(dir, 'hostile.db');
  writeRocprofV1Db(bad, { ...run, copies: run.copies.slice(0, 3) });
  let w = openSqlite(bad, { write: true });
  w.exec("UPDATE COPY SET BeginNs = 'soon' WHERE rowid = 2");
  w.close();
  await assert.rejects(
    analyzeFiles([bad]),
    (e: unknown) => isGpuError(e, ErrorCode.BAD_INPUT) && /table COPY column BeginNs holds "soon"/.test((e as Error).message),
  );
  const partial = join(dir, 'partial.db');
  w = openSqlite(partial, { write: true });
  w.exec('CREATE TABLE HIP ("BeginNs" INTEGER, "EndNs" INTEGER, "tid" INTEGER); INSERT INTO HIP VALUES (1, 2, 3)');
  w.close();
  await assert.rejects(
    analyzeFiles([partial]),
    (e: unknown) => isGpuError(e, ErrorCode.BAD_INPUT) && /table HIP has no Name column/.test((e as Error).message),
  );
  // tables named as rocprof's without its columns: not its database, and refused naming what it holds
  const other = join(dir, 'other.db');
  w = openSqlite(other, { write: true });
  w.exec('CREATE TABLE KERN (id INTEGER); CREATE TABLE users (id INTEGER)');
  w.close();
  assert.throws(
    () => detectTraceFormat(other),
    (e: unknown) =>
      isGpuError(e, ErrorCode.BAD_INPUT) &&
      /neither .* nor a legacy rocprof results\.db \(it holds 2 tables and views: KERN, users\)/.test((e as Error).message),
  );
});
