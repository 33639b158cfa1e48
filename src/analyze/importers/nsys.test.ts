/**
 * Nsight Systems exports: unified-memory migrations kept apart from the program's copies, prefetches told from
 * migrations on demand, page faults "not recorded" where the run did not record them, and the device of exports
 * that name it under deviceId. The exports are written by the test in nsys's table layout (testing/nsys-export.ts);
 * one case reads an export from ../shared/traces in place.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { analyzeFiles } from '../analyze.js';
import { writeNsysExport, type NsysCopy, type NsysExport } from '../../testing/nsys-export.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-nsys-'));
let n = 0;
const exported = (e: NsysExport): string => {
  const file = join(dir, `export-${++n}.sqlite`);
  writeNsysExport(file, e);
  return file;
};
const A100 = { column: 'id' as const, rows: [{ id: 0, name: 'NVIDIA A100-SXM4-80GB', totalMemory: 85_899_345_920 }] };
/** `count` migrations of 4 KiB, 20 µs apart, each taking 3 µs. */
const migrations = (count: number, copyKind: number, migrationCause: number, from = 1_000_000): NsysCopy[] =>
  Array.from({ length: count }, (_, i) => ({ start: from + i * 20_000, end: from + i * 20_000 + 3_000, bytes: 4096, copyKind, migrationCause }));
/** One pinned upload of 64 MiB and one kernel after the migrations. */
const work: Pick<NsysExport, 'copies' | 'kernels'> = {
  copies: [{ start: 100_000, end: 2_600_000 + 100_000, bytes: 64 << 20, copyKind: 1, srcKind: 1, dstKind: 2 }],
  kernels: [{ start: 10_000_000, end: 30_000_000 }],
};

test('nsys: unified-memory page migrations are no copies of the program (no small-copies saving, no torch.cat advice)', async () => {
  const file = exported({ enums: true, gpus: A100, copies: [...work.copies!, ...migrations(200, 11, 2)], kernels: work.kernels });
  const r = await analyzeFiles([file]);
  assert.equal(r.summary.copies.count, 1, 'the one upload is the only copy');
  assert.deepEqual(r.summary.migrations, [{ cause: 'page fault', direction: 'HtoD', count: 200, bytes: 200 * 4096, timeNs: 200 * 3000 }]);
  const rules = r.findings.map((f) => f.rule);
  assert.ok(!rules.includes('small-copies'), `small-copies does not fire (fired: ${rules.join(', ')})`);
  assert.doesNotMatch(JSON.stringify(r.findings), /torch\.cat/);
  const f = r.findings.find((x) => x.rule === 'managed-faults');
  assert.ok(f, 'the migrations on demand are a managed-memory finding');
  assert.equal(f.count, 200);
  assert.ok(f.evidence.some((e) => /200 migrations on demand/.test(e)));
});

test('nsys: page faults the export did not record are "not recorded", not 0', async () => {
  const file = exported({ enums: true, gpus: A100, copies: migrations(100, 11, 2), kernels: work.kernels });
  const r = await analyzeFiles([file]);
  assert.deepEqual(r.summary.faults, { gpu: null, cpu: null });
  const f = r.findings.find((x) => x.rule === 'managed-faults');
  assert.ok(f);
  assert.ok(
    f.evidence.some((e) => /page faults: not recorded/.test(e)),
    f.evidence.join('; '),
  );
  assert.ok(!f.evidence.some((e) => /\b0 GPU page-fault groups/.test(e)));
  // an older export creates the fault tables whatever was traced: empty tables alone are not a record of none
  const old = await analyzeFiles([exported({ copies: migrations(100, 11, 2), kernels: work.kernels, faultTables: {} })]);
  assert.deepEqual(old.summary.faults, { gpu: null, cpu: null });
  // the capture settings say faults were recorded: then none is a count
  const traced = exported({
    copies: migrations(100, 11, 2),
    kernels: work.kernels,
    faultTables: {},
    capture: [
      ['PROCESS_0:COLLECT_UVM_CPU_PAGE_FAULTS', 'true'],
      ['PROCESS_0:COLLECT_UVM_GPU_PAGE_FAULTS', 'true'],
    ],
  });
  const t = await analyzeFiles([traced]);
  assert.deepEqual(t.summary.faults, { gpu: 0, cpu: 0 });
  assert.ok(t.findings.find((x) => x.rule === 'managed-faults')?.evidence.some((e) => /^0 GPU page-fault groups/.test(e)));
});

test('nsys: migrations that follow cudaMemPrefetchAsync are not on demand', async () => {
  const prefetch = [
    { start: 900_000, end: 950_000, name: 'cudaMemPrefetchAsync_v2' },
    { start: 960_000, end: 990_000, name: 'cudaMemPrefetchAsync_v2' },
  ];
  // the cause recorded: user prefetch
  const user = await analyzeFiles([exported({ enums: true, gpus: A100, copies: migrations(100, 11, 1), kernels: work.kernels, runtime: prefetch })]);
  assert.equal(user.summary.migrations[0]?.cause, 'user prefetch');
  assert.ok(!user.findings.some((f) => f.rule === 'managed-faults' || f.rule === 'small-copies'), user.findings.map((f) => f.rule).join(', '));
  // no cause recorded (older numbering, no enum tables): after the program's prefetch calls they are not called on demand
  const unknown = await analyzeFiles([exported({ copies: migrations(100, 11, 0), kernels: work.kernels, runtime: prefetch })]);
  assert.equal(unknown.summary.copies.count, 0);
  assert.equal(unknown.summary.migrations[0]?.count, 100);
  assert.ok(!unknown.findings.some((f) => f.rule === 'managed-faults'), unknown.findings.map((f) => f.rule).join(', '));
});

test("nsys: without enum tables, copy kinds 11-13 are Nsight's unified-memory kinds", async () => {
  const r = await analyzeFiles([exported({ copies: [...migrations(70, 12, 2), ...migrations(70, 13, 3, 5_000_000)], kernels: work.kernels })]);
  assert.equal(r.summary.copies.count, 0);
  const groups = Object.fromEntries(r.summary.migrations.map((g) => [`${g.cause}/${g.direction}`, g.count]));
  assert.deepEqual(groups, { 'page fault/DtoH': 70, 'speculative prefetch/DtoD': 70 });
});

test('nsys: an export that names its GPU under deviceId (TARGET_INFO_GPU before about 2021) keeps its device', async () => {
  const r = await analyzeFiles([exported({ gpus: { column: 'deviceId', rows: [{ id: 0, name: 'NVIDIA A100-SXM4-80GB' }] }, ...work })]);
  assert.deepEqual(r.summary.devices, [{ id: 0, name: 'NVIDIA A100-SXM4-80GB' }]);
  assert.equal(r.summary.rates.basis, 'catalogue');
});

const ROOT = ['../../../../shared/traces/', '../../../../../shared/traces/'].map((p) => new URL(p, import.meta.url).pathname).find(existsSync);
test('nsys: the extrap export with sampled call chains names its 4 A100s (TARGET_INFO_GPU.deviceId)', {
  skip: ROOT ? false : '../shared/traces is absent',
}, async () => {
  // sqlite3: SELECT deviceId, name FROM TARGET_INFO_GPU gives 0-3, A100-PCIE-40GB; TARGET_INFO_CUDA_GPU.globalMemorySize 42505273344
  const r = await analyzeFiles([`${ROOT}extrap/tests/data/nsight/sampled_callchains/ex-gpu.s10/ex-gpu.s10.sqlite`]);
  assert.deepEqual(
    r.summary.devices.map((d) => d.name),
    ['A100-PCIE-40GB', 'A100-PCIE-40GB', 'A100-PCIE-40GB', 'A100-PCIE-40GB'],
  );
  assert.equal(r.summary.kernels.count, 6);
  assert.match(r.summary.rates.source, /A100/);
});
