/**
 * `gpumem analyze` and `gpumem pool replay` on traces other projects published (../shared/traces beside the checkout;
 * SOURCES.md there says where each comes from). Expected counts were checked against the files themselves (Python's
 * json on the Kineto files, sqlite3 on the Nsight exports, the CSV rows), not taken from gpumem's output. The tests
 * read the files in place and skip, saying why, where ../shared/ is absent.
 */
import assert from 'node:assert/strict';
import { analyzeFiles } from './analyze.js';
import { ErrorCode, isGpuError } from '../errors.js';
import type { AnalyzeResult } from './result.js';
import { readTrace } from '../formats/allocator-trace.js';
import { replay } from '../replay/replay.js';
import { sharedTest, sharedTrace } from '../testing/shared-traces.js';

const at = sharedTrace;
const HTA = 'HolisticTraceAnalysis/tests/data/';
const COPY_RULES = ['pageable-copy', 'd2h-to-pageable', 'small-copies', 'redundant-copy', 'low-bandwidth'];
const ALL_RULES = [
  ...COPY_RULES,
  'sync-copy',
  'exposed-copy',
  'sync-storm',
  'alloc-churn',
  'pinned-alloc-churn',
  'managed-faults',
  'gpu-idle-on-memory',
  'fragmentation',
];

interface Expected {
  file: string;
  format: string;
  kernels: number;
  /** Copies by "direction/host kind". */
  copies?: Record<string, number>;
  memsets?: number;
  /** Runtime synchronisation calls [stream, device, event] and device-timeline sync records. */
  syncs?: [number, number, number, number];
  fire?: string[];
  /** Rules that must not fire. */
  quiet?: string[];
  notJudged?: string[];
}

const TRACES: Expected[] = [
  // Kineto, current schema
  {
    file: `${HTA}negative_queue_length_values_check/rank0.json.gz`,
    format: 'kineto',
    kernels: 6080,
    copies: { 'DtoD/device': 1280, 'HtoD/pinned': 35, 'HtoD/pageable': 45, 'DtoH/pageable': 30 },
    memsets: 277,
    fire: ['small-copies', 'pageable-copy', 'd2h-to-pageable', 'sync-storm'],
    notJudged: ['redundant-copy', 'fragmentation'],
  },
  {
    file: `${HTA}critical_path/cuda_event_sync/event_sync_trace.json.gz`,
    format: 'kineto',
    kernels: 4,
    copies: { 'DtoH/pageable': 1 },
    syncs: [1, 1, 1, 4],
  },
  {
    file: `${HTA}critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz`,
    format: 'kineto',
    kernels: 3,
    memsets: 3,
    // 3 Event Sync, 1 Context Sync and 1 Stream Wait Event (which does not block the host)
    syncs: [0, 1, 0, 5],
  },
  {
    file: `${HTA}critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz`,
    format: 'kineto',
    kernels: 79,
    copies: { 'HtoD/pageable': 16 },
    notJudged: ['fragmentation'],
  },
  {
    file: `${HTA}trace_diff/control/control.json.gz`,
    format: 'kineto',
    kernels: 8568,
    copies: { 'HtoD/pinned': 150, 'DtoD/device': 18, 'DtoH/pageable': 60 },
    memsets: 654,
    fire: ['d2h-to-pageable'],
    quiet: ['pageable-copy'],
  },
  {
    file: `${HTA}trace_filter/sampled_rank-0.json.gz`,
    format: 'kineto',
    kernels: 1154,
    copies: { 'HtoD/pinned': 8, 'DtoD/device': 8, 'HtoD/pageable': 16, 'DtoH/pageable': 8 },
    memsets: 10,
    fire: ['pageable-copy'],
  },
  { file: `${HTA}ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz`, format: 'kineto', kernels: 4350, copies: { 'DtoD/device': 1600 } },
  // roctracer under Kineto: two uploads without byte counts
  { file: `${HTA}amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz`, format: 'kineto', kernels: 14, copies: { 'HtoD/unknown': 2 } },
  { file: 'TraceLens/tests/traces/mi300/resnet_act_checkpoint.json.gz', format: 'kineto', kernels: 2995, copies: { 'DtoD/device': 550 }, memsets: 108 },
  {
    file: 'TraceLens/tests/traces/b200/eager_trace.json.gz',
    format: 'kineto',
    kernels: 768,
    copies: { 'DtoD/device': 146, 'HtoD/pinned': 13, 'HtoD/pageable': 2 },
  },
  // no GPU activity: every rule says it could not judge, none finds "no problem"
  { file: `${HTA}cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz`, format: 'kineto', kernels: 0, notJudged: ALL_RULES },
  { file: `${HTA}rank_non_gpu/rank_non_gpu.json.gz`, format: 'kineto', kernels: 0, notJudged: ALL_RULES },
  // the 2021 Kineto schema (capitalised categories)
  {
    file: 'kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz',
    format: 'kineto',
    kernels: 8772,
    copies: { 'HtoD/pageable': 12 },
    memsets: 312,
    syncs: [12, 1, 0, 0],
    fire: ['pageable-copy'],
  },
  // Nsight Systems exports: Nsight's memory-kind numbering, with and without ENUM tables
  {
    file: 'pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite',
    format: 'nsys-sqlite',
    kernels: 5,
    copies: { 'HtoD/pageable': 10, 'DtoH/pageable': 5 },
    fire: ['sync-copy', 'pageable-copy'],
  },
  {
    file: 'pipit/pipit/tests/data/cloverleaf-nsys/perlmutter-cloverleaf-cuda.sqlite',
    format: 'nsys-sqlite',
    kernels: 1312,
    copies: { 'HtoD/pageable': 254, 'DtoH/pageable': 25 },
    syncs: [0, 1312, 0, 1312],
    fire: ['sync-copy', 'pageable-copy'],
    // its 1312 device synchronisations follow kernel launches, not copies: no storm of waits on copies
    quiet: ['sync-storm'],
  },
  {
    file: 'extrap/tests/data/nsight/concurrent_example/concurrent.s4/profile4.sqlite',
    format: 'nsys-sqlite',
    kernels: 12,
    copies: { 'HtoD/pinned': 15, 'DtoH/pinned': 15 },
    memsets: 17,
    fire: ['pinned-alloc-churn'],
    quiet: ['pageable-copy', 'd2h-to-pageable'],
  },
  {
    file: 'extrap/tests/data/nsight/nsys_db/con_kernel.sqlite',
    format: 'nsys-sqlite',
    kernels: 9,
    copies: { 'HtoD/pinned': 5, 'DtoH/pinned': 6 },
    quiet: ['pageable-copy'],
  },
  // rocprofv3 and legacy rocprof
  { file: 'TraceLens/tests/rocprof/908_results.json.gz', format: 'rocprofv3-json', kernels: 43915, notJudged: [...COPY_RULES, 'sync-storm', 'alloc-churn'] },
  // results.csv holds 1004 dispatch rows (Index 0 to 1003)
  { file: 'HPCTrainingExamples/rocm-blogs-codes/finite-difference/examples/results.csv', format: 'rocprof', kernels: 1004, notJudged: COPY_RULES },
  { file: 'rocprofiler-sdk/source/docs/data/kernel_trace.csv', format: 'rocprofv3-csv', kernels: 7, notJudged: COPY_RULES },
  {
    file: 'rocprofiler-sdk@029ff02/source/docs/data/memory_copy_trace.csv',
    format: 'rocprofv3-csv',
    kernels: 0,
    copies: { 'HtoD/unknown': 4 },
    notJudged: ['exposed-copy'],
  },
  // totals per call: what they count is not judged (no saving rests on events the file did not record)
  { file: 'rocprofiler-sdk/source/docs/data/hip_api_stats.csv', format: 'rocprof-stats', kernels: 0, notJudged: ['pinned-alloc-churn'] },
];

const results = new Map<string, Promise<AnalyzeResult>>();
const analyzed = (file: string): Promise<AnalyzeResult> => {
  let r = results.get(file);
  if (!r) results.set(file, (r = analyzeFiles([at(file)])));
  return r;
};

for (const e of TRACES) {
  sharedTest(`shared trace ${e.file}: read as ${e.format}`, {}, async () => {
    const r = await analyzed(e.file);
    const s = r.summary;
    assert.deepEqual(s.formats, [e.format]);
    assert.equal(s.kernels.count, e.kernels, 'kernels');
    const groups = Object.fromEntries(s.copies.groups.map((g) => [`${g.direction}/${g.hostKind}`, g.count]));
    assert.deepEqual(groups, e.copies ?? {}, 'copies by direction and host memory');
    if (e.memsets !== undefined) assert.equal(s.memsets.count, e.memsets, 'memsets');
    if (e.syncs) assert.deepEqual([s.syncs.streamSync, s.syncs.deviceSync, s.syncs.eventSync, s.syncs.deviceRecords], e.syncs, 'synchronisations');
    const fired = r.findings.map((f) => f.rule);
    for (const rule of e.fire ?? []) assert.ok(fired.includes(rule), `${rule} fires (fired: ${fired.join(', ')})`);
    for (const rule of e.quiet ?? []) assert.ok(!fired.includes(rule), `${rule} does not fire`);
    const notJudged = s.notApplicable.map((n) => n.rule);
    for (const rule of e.notJudged ?? []) assert.ok(notJudged.includes(rule), `${rule} says it could not judge (said: ${notJudged.join(', ')})`);
    for (const f of r.findings) {
      assert.ok(Number.isFinite(f.estimatedSavingNs) && f.estimatedSavingNs >= 0, `${f.rule}: a finite saving`);
      assert.ok(f.estimatedSavingNs <= s.spanNs, `${f.rule}: saves no more than the trace's span`);
    }
  });
}

sharedTest('shared traces: the advice on a CUDA trace names CUDA APIs, never ROCm ones', {}, async () => {
  for (const f of ['pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite', `${HTA}negative_queue_length_values_check/rank0.json.gz`]) {
    const text = JSON.stringify(await analyzed(f));
    assert.doesNotMatch(text, /ROCm|\bhip[A-Z]/, f);
    assert.match(text, /\bcuda(HostAlloc|Memcpy)/, f);
  }
});

sharedTest('shared traces: the rocprofv3 JSON of kernels only names what it did not record', {}, async () => {
  const r = await analyzed('TraceLens/tests/rocprof/908_results.json.gz');
  assert.equal(r.findings.length, 0);
  const reason = r.summary.notApplicable.find((n) => n.rule === 'pageable-copy')?.reason ?? '';
  assert.match(reason, /did not record memory copies/);
});

sharedTest('shared traces: small-copies leaves out calls that waited for the GPU (5 calls of ~145 ms)', {}, async () => {
  const r = await analyzed(`${HTA}negative_queue_length_values_check/rank0.json.gz`);
  const f = r.findings.find((x) => x.rule === 'small-copies');
  assert.ok(f);
  // the calls took 758 ms in all, nearly all of it blocked: the saving is what batching recovers, well under 1%
  assert.ok(f.timeNs > 0.5 * r.summary.spanNs);
  assert.ok(f.estimatedSavingNs < 0.01 * r.summary.spanNs, `saving ${f.estimatedSavingNs} ns`);
  assert.ok(f.evidence.some((e) => /waiting for earlier GPU work/.test(e)));
});

sharedTest('shared traces: alloc-churn counts neither start-up allocations nor a one-off 6.0 s cudaFree', {}, async () => {
  const r = await analyzed(`${HTA}critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz`);
  const f = r.findings.find((x) => x.rule === 'alloc-churn');
  // the benchmark frees and allocates again between its iterations: churn, found, without the one-off calls
  assert.ok(f, `alloc-churn in ${r.findings.map((x) => x.rule).join(', ')}`);
  assert.ok(f.estimatedSavingNs < 1e9, `saving ${f.estimatedSavingNs} ns`);
  assert.ok(f.evidence.some((e) => /one-off calls/.test(e)));
  assert.ok(f.evidence.some((e) => /left out of the saving/.test(e)));
});

sharedTest('shared traces: files that are not traces are refused with what they are', {}, async () => {
  const cases: Array<[string, RegExp]> = [
    [`${HTA}memory_analysis/memory_timeline.raw.gz`, /export_memory_timeline/],
    [`${HTA}execution_trace/benchmark_simple_add_et.json.gz`, /execution trace/],
    ['HPCTrainingExamples/rocm-blogs-codes/finite-difference/examples/results.json', /not a trace gpumem reads/],
  ];
  for (const [file, message] of cases)
    await assert.rejects(analyzeFiles([at(file)]), (e: Error) => isGpuError(e, ErrorCode.BAD_INPUT) && message.test(e.message));
});

sharedTest('shared traces: analyze DIR reads the files of one rocprofv3 run together', {}, async () => {
  // a directory of one profiler's files is one run: analyze DIR reads them together
  const r = await analyzeFiles([at('rocprofiler-sdk@029ff02/source/docs/data')]);
  assert.equal(r.summary.kernels.count, 8);
  assert.equal(r.summary.copies.count, 4);
});

sharedTest('shared snapshots: replay of a recording started mid-run starts from the memory live at its start', {}, async () => {
  for (const name of ['memory_ctx128_forward', 'memory_ctx256_forward_mixed', 'memory_ctx128_fullstep']) {
    const trace = await readTrace(at(`cs336-a2-systems/memory_files/${name}.pickle.json.gz`));
    const report = replay(trace);
    const t = report.trace;
    assert.ok(t.startedMidRun, `${name}: recording started mid-run`);
    assert.ok(t.startedMidRun.blocks > 0 && t.startedMidRun.bytes > 0);
    assert.ok(t.peakReservedBytes !== undefined && t.peakReservedBytes >= t.peakRequestedBytes, `${name}: reserved ≥ requested`);
    assert.equal(t.untrackedFrees, 0, `${name}: every free matches a block`);
    for (const c of report.configurations) {
      assert.ok(c.peakReservedBytes >= c.peakAllocatedBytes && c.peakAllocatedBytes >= c.peakRequestedBytes);
      assert.ok(c.minDeviceBytes >= t.startedMidRun.bytes, `${name} ${c.name}: needs at least what was live at the start`);
    }
  }
});

sharedTest('shared traces: the chunked and the careful JSON readers give the same analysis of every Kineto trace', {}, async () => {
  for (const e of TRACES.filter((x) => x.format === 'kineto')) {
    const careful = await analyzeFiles([at(e.file)], { jsonReader: 'careful' });
    assert.deepEqual(await analyzed(e.file), careful, e.file);
  }
});
