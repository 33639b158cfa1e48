/**
 * gpumem analyze on real traces: the naive and tuned PyTorch pipelines recorded with torch.profiler on an H200, the
 * same naive run in the nsys SQLite schema and rocprofv3's CSV and JSON layouts (synthesized from it by
 * tools/make-analyze-fixtures.mjs), legacy rocprof statistics, and PyTorch memory snapshots. Expected figures are
 * computed here from the files themselves, independently of the importers.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { findingOf } from '../testing/trace-fixtures.js';
import { gunzipSync } from 'node:zlib';
import { analyzeFiles, detectTraceFormat } from './analyze.js';
import type { AnalyzeResult } from './result.js';
import { CHROMIUM, inChromium, runCli } from '../testing/harness.js';

const fixture = (p: string): string => new URL(`../../fixtures/${p}`, import.meta.url).pathname;
const NAIVE = fixture('traces/pytorch-cuda-naive.pt.trace.json.gz');
const TUNED = fixture('traces/pytorch-cuda-tuned.pt.trace.json.gz');
const NSYS = fixture('traces/nsys-naive.sqlite');
const ROCPROF_JSON = fixture('traces/rocprofv3-naive.json.gz');
const ROCPROF_DIR = fixture('traces/rocprofv3-naive');
const ROCPROF_CSV = readdirSync(ROCPROF_DIR).map((f) => join(ROCPROF_DIR, f));
const STATS = [fixture('traces/rocprof-naive.copy_stats.csv'), fixture('traces/rocprof-naive.hip_stats.csv')];
const SNAPSHOT = fixture('snapshots/gpt2-train.snapshot.json.gz');

type KEvent = { ph: string; cat?: string; name: string; dur: number; args: Record<string, number> };
const naiveEvents = (JSON.parse(gunzipSync(readFileSync(NAIVE)).toString()) as { traceEvents: KEvent[] }).traceEvents;

const rules = (r: AnalyzeResult): string[] => r.findings.map((f) => f.rule);
const find = findingOf;

test('the naive pipeline raises pageable-copy, small-copies and sync-storm; the tuned one none of the three', async () => {
  const naive = await analyzeFiles([NAIVE]);
  for (const rule of ['pageable-copy', 'small-copies', 'sync-storm']) find(naive, rule);
  const tuned = await analyzeFiles([TUNED]);
  for (const rule of ['pageable-copy', 'small-copies', 'sync-storm']) assert.ok(!rules(tuned).includes(rule), `tuned raised ${rule}`);
  // the tuned trace's pinned copies are seen as pinned
  assert.ok(tuned.summary.copies.groups.some((g) => g.direction === 'HtoD' && g.hostKind === 'pinned' && g.count === 18));
});

test('naive trace: figures match the trace file, savings are computed from it', async () => {
  const r = await analyzeFiles([NAIVE]);
  const copies = naiveEvents.filter((e) => e.cat === 'gpu_memcpy');
  const pageable = copies.filter((e) => e.name.includes('Pageable -> Device'));
  assert.equal(r.summary.copies.count, copies.length);
  const g = r.summary.copies.groups.find((x) => x.direction === 'HtoD' && x.hostKind === 'pageable')!;
  assert.equal(g.count, pageable.length);
  assert.equal(
    g.bytes,
    pageable.reduce((s, e) => s + e.args.bytes!, 0),
  );
  assert.ok(Math.abs(g.timeNs - pageable.reduce((s, e) => s + e.dur * 1000, 0)) < 1000);
  const syncs = naiveEvents.filter((e) => e.cat === 'cuda_runtime' && e.name === 'cudaStreamSynchronize').length;
  assert.equal(r.summary.syncs.streamSync, syncs);
  // pageable-copy counts only recurring sizes: the 4 one-time uploads (weights, 1 of each size) are left out
  const sizes = new Map<number, number>();
  for (const e of pageable) sizes.set(e.args.bytes!, (sizes.get(e.args.bytes!) ?? 0) + 1);
  const recurring = pageable.filter((e) => sizes.get(e.args.bytes!)! >= 3);
  const p = find(r, 'pageable-copy');
  assert.equal(p.count, recurring.length);
  assert.ok(p.estimatedSavingNs > 0 && p.estimatedSavingNs < p.timeNs, 'a saving below the time spent');
  assert.match(p.evidence.join('\n'), /one-time pageable HtoD copies/);
  const s = find(r, 'sync-storm');
  assert.equal(s.count, syncs + naiveEvents.filter((e) => e.cat === 'cuda_runtime' && e.name === 'cudaDeviceSynchronize').length);
  assert.match(s.evidence.join('\n'), /aten::item/);
  assert.ok(
    r.findings.every((f, i) => i === 0 || r.findings[i - 1]!.estimatedSavingNs >= f.estimatedSavingNs),
    'sorted by saving',
  );
  assert.match(r.summary.rates.source, /H200/);
  assert.ok(r.summary.notApplicable.some((n) => n.rule === 'redundant-copy'));
});

test('the nsys export and the rocprofv3 JSON of the same run give the same findings as the Kineto trace', async () => {
  const kineto = await analyzeFiles([NAIVE]);
  for (const file of [NSYS, ROCPROF_JSON]) {
    const r = await analyzeFiles([file]);
    for (const rule of ['pageable-copy', 'small-copies', 'sync-storm']) {
      const a = find(kineto, rule);
      const b = find(r, rule);
      assert.equal(b.count, a.count, `${file} ${rule} count`);
      assert.equal(b.bytes, a.bytes, `${file} ${rule} bytes`);
    }
  }
  // rocprofv3 JSON does not say pinned or pageable: inferred from the pinned allocation's address range
  const j = await analyzeFiles([ROCPROF_JSON]);
  assert.ok(
    j.summary.notes.some((n) => /inferred for 1222 copies .* 6 pinned, 1216 pageable/.test(n)),
    j.summary.notes.join('\n'),
  );
  assert.equal(j.summary.devices[0]?.name, 'AMD Instinct MI300X (gfx942)');
  assert.match(j.summary.rates.source, /MI300X/);
  // An AMD device gets a share of its link that was measured on an NVIDIA GPU: the output says it is an assumption, and whose.
  assert.equal(j.summary.rates.assumed, true);
  assert.match(j.summary.rates.source, /^assumed: .*measured on an NVIDIA H200 .*\(not measured on any AMD GPU\)/);
});

test('rocprofv3 CSV: sizes and host kinds are not recorded, so those rules say they cannot judge; sync-storm still fires', async () => {
  const r = await analyzeFiles(ROCPROF_CSV);
  find(r, 'sync-storm');
  const na = new Map(r.summary.notApplicable.map((n) => [n.rule, n.reason]));
  assert.match(na.get('pageable-copy') ?? '', /unknown host memory kind/);
  assert.match(na.get('small-copies') ?? '', /copy sizes/);
  assert.ok(r.summary.notes.some((n) => /no byte counts/.test(n)));
  assert.equal(r.summary.copies.count, naiveEvents.filter((e) => e.cat === 'gpu_memcpy').length);
  assert.equal(r.summary.kernels.count, naiveEvents.filter((e) => e.cat === 'kernel').length);
});

test('legacy rocprof statistics become aggregates; the syncs they total are not judged, no saving claimed', async () => {
  const r = await analyzeFiles(STATS);
  assert.ok(r.summary.aggregates);
  assert.deepEqual(
    r.summary.aggregates.copies.map((c) => [c.direction, c.calls]),
    [
      ['HtoD', 1216],
      ['DtoH', 6],
    ],
  );
  // totals say how many synchronisations, not which waited on copies: no finding rests on them
  assert.ok(!rules(r).includes('sync-storm'));
  const why = r.summary.notApplicable.find((n) => n.rule === 'sync-storm')?.reason ?? '';
  assert.match(why, /only totals per call .*1224 calls.*cannot tell which synchronisations follow copies/);
});

test('a PyTorch memory snapshot: segments summarised as the file says, fragmentation found', async () => {
  const snap = JSON.parse(gunzipSync(readFileSync(SNAPSHOT)).toString()) as {
    segments: Array<{ total_size: number; allocated_size: number; blocks: Array<{ size: number; state: string }> }>;
  };
  const reserved = snap.segments.reduce((s, x) => s + x.total_size, 0);
  const stranded = snap.segments
    .filter((x) => x.allocated_size > 0)
    .flatMap((x) => x.blocks.filter((b) => b.state === 'inactive'))
    .reduce((s, b) => s + b.size, 0);
  const r = await analyzeFiles([SNAPSHOT]);
  assert.equal(r.summary.allocations.segments?.reservedBytes, reserved);
  assert.equal(r.summary.allocations.segments?.inactiveSplitBytes, stranded);
  const f = find(r, 'fragmentation');
  assert.equal(f.bytes, stranded);
  assert.ok(!rules(r).includes('alloc-churn'), 'segment growth without frees is not churn');
});

test('formats are recognised by content', () => {
  assert.equal(detectTraceFormat(NAIVE), 'kineto');
  assert.equal(detectTraceFormat(NSYS), 'nsys-sqlite');
  assert.equal(detectTraceFormat(ROCPROF_JSON), 'rocprofv3-json');
  for (const f of [...ROCPROF_CSV, ...STATS]) assert.equal(detectTraceFormat(f), 'rocprof-csv');
  assert.equal(detectTraceFormat(SNAPSHOT), 'memory-snapshot');
  assert.equal(detectTraceFormat(fixture('pool/rmm-log.csv')), 'alloc-log');
});

test('gpumem analyze --json prints the documented shape; --from-bench takes the rates from a bench file', async () => {
  const r = await runCli(['analyze', NAIVE, '--json', '--from-bench', fixture('bench/h200-bench.json')]);
  assert.equal(r.code, 0, r.err);
  const j = JSON.parse(r.out) as AnalyzeResult;
  assert.equal(j.schema, 'gpumem.analyze/1');
  assert.ok(j.summary && Array.isArray(j.findings));
  for (const f of j.findings) {
    for (const k of ['rule', 'severity', 'count', 'bytes', 'timeNs', 'estimatedSavingNs', 'evidence', 'change'] as const)
      assert.ok(k in f, `${f.rule} has ${k}`);
    assert.ok(Array.isArray(f.evidence) && f.evidence.length > 0);
  }
  assert.match(j.summary.rates.source, /h200-bench\.json: pinned copies of \d+ bytes measured by gpumem bench/);
  assert.equal(j.summary.rates.assumed, false);
  const text = await runCli(['analyze', TUNED]);
  assert.equal(text.code, 0, text.err);
  assert.match(text.out, /copies \(GB\/s = 1e9/);
  assert.match(text.out, /HtoD\s+pinned\s+18/);
});

test('the analyze page shows findings and a timeline of copies against kernels per stream', async (t) => {
  if (!CHROMIUM) return t.skip('chromium is not installed (.ci/run installs it)');
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-analyze-html-'));
  try {
    const html = join(dir, 'a.html');
    const r = await runCli(['analyze', NAIVE, '--html', html]);
    assert.equal(r.code, 0, r.err);
    const { value, errors } = await inChromium<{ lanes: string[]; series: string[]; bars: number; text: string }>(
      html,
      `(() => {
        const c = window.gpumemCharts[0];
        return { lanes: c.data.labels, series: c.data.datasets.map((d) => d.label), bars: c.data.datasets.reduce((s, d) => s + d.data.length, 0), text: document.body.innerText };
      })()`,
    );
    assert.deepEqual(errors, []);
    assert.deepEqual(value.lanes, ['GPU 0 stream 7']);
    assert.ok(value.series.includes('kernel') && value.series.includes('copy HtoD pageable'), value.series.join());
    // the run has fewer events than the page's cap of 3000: every copy, memset and kernel is a bar
    const gpuEvents = naiveEvents.filter((e) => e.ph === 'X' && ['gpu_memcpy', 'gpu_memset', 'kernel'].includes(e.cat ?? '')).length;
    assert.equal(value.bars, gpuEvents);
    assert.match(value.text, /sync-storm/);
    assert.match(value.text, /pageable-copy/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('copy names of both Kineto flavours and runtime names of CUDA, HIP and nsys are understood', async () => {
  const { parseCopyName } = await import('./importers/kineto.js');
  const { classifyApi, Api, Direction, MemKind } = await import('./model.js');
  assert.deepEqual(parseCopyName('Memcpy HtoD (Pageable -> Device)'), { dir: Direction.HtoD, src: MemKind.pageable, dst: MemKind.device });
  assert.deepEqual(parseCopyName('Memcpy DtoH (Device -> Pinned)'), { dir: Direction.DtoH, src: MemKind.device, dst: MemKind.pinned });
  assert.deepEqual(parseCopyName('Memcpy HtoD (Host -> Device)'), { dir: Direction.HtoD, src: MemKind.unknown, dst: MemKind.device });
  assert.deepEqual(parseCopyName('CopyDeviceToHost'), { dir: Direction.DtoH, src: MemKind.device, dst: MemKind.unknown });
  assert.equal(parseCopyName('Memcpy DtoD (Device -> Device)').dir, Direction.DtoD);
  const cases: Array<[string, number]> = [
    ['cudaMemcpyAsync', Api.memcpyAsync],
    ['hipMemcpyWithStream', Api.memcpySync],
    ['cudaMemcpy', Api.memcpySync],
    ['hipMemcpyHtoD', Api.memcpySync],
    ['cudaStreamSynchronize_v3020', Api.streamSync],
    ['hipDeviceSynchronize', Api.deviceSync],
    ['cuCtxSynchronize', Api.deviceSync],
    ['cudaHostAlloc', Api.hostAlloc],
    ['hipHostMalloc', Api.hostAlloc],
    ['hipMallocManaged', Api.mallocManaged],
    ['cudaMallocAsync', Api.mallocAsync],
    ['cudaLaunchKernel', Api.launch],
    ['cudaGetDevice', Api.other],
    // driver-level virtual memory management (expandable segments): physical memory taken, given back, mapped
    ['cuMemCreate', Api.malloc],
    ['cuMemRelease', Api.free],
    ['hipMemRelease', Api.free],
    ['cuMemMap', Api.vmmMap],
    ['cuMemUnmap', Api.vmmUnmap],
  ];
  for (const [name, api] of cases) assert.equal(classifyApi(name), api, name);
});

test('a ROCm-flavour Kineto trace: host kind unknown, said so, and the rules that need it do not guess', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-rocm-kineto-'));
  try {
    const text = gunzipSync(readFileSync(NAIVE))
      .toString()
      .replace(/Memcpy (HtoD|DtoH) \((Pageable|Pinned|Device) -> (Device|Pageable|Pinned)\)/g, (_, d: string) =>
        d === 'HtoD' ? 'Memcpy HtoD (Host -> Device)' : 'Memcpy DtoH (Device -> Host)',
      )
      .replaceAll('NVIDIA H200', 'AMD Instinct MI300X');
    const file = join(dir, 'rocm.json');
    writeFileSync(file, text);
    const r = await analyzeFiles([file]);
    assert.ok(r.summary.copies.groups.every((g) => g.hostKind === 'unknown'));
    assert.ok(!rules(r).includes('pageable-copy'));
    assert.ok(r.summary.notApplicable.some((n) => n.rule === 'pageable-copy'));
    assert.ok(r.summary.notes.some((n) => /ROCm traces do not/.test(n)));
    find(r, 'small-copies');
    find(r, 'sync-storm');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the chunked and the careful JSON readers give the same analysis of every Kineto fixture', async () => {
  const files = readdirSync(fixture('traces'))
    .map((f) => fixture(`traces/${f}`))
    .filter((f) => /\.json(\.gz)?$/.test(f) && detectTraceFormat(f) === 'kineto');
  assert.ok(files.length >= 2, 'the naive and the tuned trace');
  for (const f of files) {
    const chunked = await analyzeFiles([f], { jsonReader: 'chunked' });
    assert.ok(chunked.summary.kernels.count > 0, `${f} is read`);
    assert.deepEqual(await analyzeFiles([f], { jsonReader: 'careful' }), chunked, f);
  }
});

test('a "__proto__" member lends an event no fields, and both JSON readers read it alike', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-proto-'));
  try {
    const file = join(dir, 'proto.json');
    const copy = '{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pageable -> Device)","ts":1,"dur":2,"args":{"stream":7}}';
    writeFileSync(
      file,
      `{"traceEvents":[{"__proto__":{"bytes":1048576}},${copy},{"ph":"X","cat":"kernel","name":"k","ts":5,"dur":1,"__proto__":{"args":{"bytes":7}}}]}`,
    );
    const results = await Promise.all((['chunked', 'careful'] as const).map((jsonReader) => analyzeFiles([file], { jsonReader })));
    for (const r of results) {
      assert.equal(r.summary.copies.count, 1);
      assert.equal(r.summary.copies.bytes, null, 'no byte count inherited from a "__proto__" member');
      assert.equal(r.summary.kernels.count, 1);
    }
    assert.deepEqual(results[0], results[1]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the span includes synchronisation records that end after every call and kernel', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-span-'));
  try {
    const file = join(dir, 'sync.json');
    const events = [
      { ph: 'X', cat: 'kernel', name: 'k', ts: 100, dur: 10, args: { stream: 7 } },
      { ph: 'X', cat: 'cuda_runtime', name: 'cudaLaunchKernel', ts: 95, dur: 4, args: { correlation: 1 } },
      // a context synchronisation at the end of the run, recorded only on the device timeline
      { ph: 'X', cat: 'cuda_sync', name: 'Context Sync', ts: 112, dur: 88, args: { stream: -1, cuda_sync_kind: 'Context Sync' } },
    ];
    writeFileSync(file, JSON.stringify({ traceEvents: events }));
    const r = await analyzeFiles([file]);
    assert.equal(r.summary.spanNs, (112 + 88 - 95) * 1000);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the 2021 schema's computeProperties names the device, as deviceProperties does", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-2021-'));
  try {
    const file = join(dir, 'worker0.pt.trace.json');
    const trace = {
      schemaVersion: 1,
      computeProperties: [{ id: 0, name: 'Tesla V100-DGXS-32GB', totalGlobalMem: 34084028416, major: 7, minor: 0 }],
      traceEvents: [{ ph: 'X', cat: 'Kernel', name: 'k', pid: 0, tid: 'stream 7', ts: 1, dur: 5, args: { device: 0, stream: 7 } }],
    };
    writeFileSync(file, JSON.stringify(trace));
    const r = await analyzeFiles([file]);
    assert.deepEqual(r.summary.devices, [{ id: 0, name: 'Tesla V100-DGXS-32GB' }]);
    assert.match(r.summary.rates.source, /NVIDIA Tesla V100's PCIe 3\.0 x16 host link/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
