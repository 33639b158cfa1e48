/**
 * Kineto traces, the small things: whole nanoseconds in the JSON (durations in µs with three decimals are whole
 * nanoseconds), no pinned rate taken from the trace's own pageable copies, a note for launches without GPU
 * activity, and a rank comparison that never says "saves about 0 ns". The traces are written by the test in
 * Kineto's shape; one case reads a shared trace in place.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { analyzeFiles } from '../analyze.js';
import { renderRanks, savesAcrossRanks } from '../../render/analyze-ranks-text.js';
import type { RanksResult } from '../ranks.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-kineto-'));
const trace = (name: string, events: object[], extra: object = {}): string => {
  const p = join(dir, name);
  writeFileSync(p, JSON.stringify({ schemaVersion: 1, ...extra, traceEvents: events }));
  return p;
};
const kernel = (ts: number, dur: number) => ({ ph: 'X', cat: 'kernel', name: 'k', ts, dur, pid: 0, tid: 7, args: { device: 0, stream: 7, correlation: 1 } });
/** Pageable uploads of 64 MiB at about 3.3 GB/s, each of a duration in µs with three decimals. */
const pageable = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    ph: 'X',
    cat: 'gpu_memcpy',
    name: 'Memcpy HtoD (Pageable -> Device)',
    ts: 1000 + i * 30_000,
    dur: 20_337.071,
    pid: 0,
    tid: 7,
    args: { device: 0, stream: 7, correlation: 100 + i, bytes: 64 << 20 },
  }));

/** Every number of the result whose key ends in Ns or bytes, with its path. */
function nsFigures(v: unknown, path = ''): Array<[string, number]> {
  if (typeof v === 'number') return /(Ns|bytes|Bytes)$/.test(path) ? [[path, v]] : [];
  if (Array.isArray(v)) return v.flatMap((x) => nsFigures(x, path));
  if (v && typeof v === 'object') return Object.entries(v).flatMap(([k, x]) => nsFigures(x, k));
  return [];
}

test('kineto: durations and savings are whole nanoseconds in the JSON (4.07 µs is 4070 ns, not 4070.0000000000005)', async () => {
  const file = trace('fractions.json', [kernel(10, 4.07), kernel(20, 4.07), ...pageable(4)], {
    deviceProperties: [{ id: 0, name: 'NVIDIA A100-SXM4-80GB', totalGlobalMem: 85_899_345_920 }],
  });
  const r = await analyzeFiles([file]);
  assert.equal(r.summary.kernels.timeNs, 8140);
  const fractional = nsFigures(r).filter(([, x]) => !Number.isInteger(x));
  assert.deepEqual(fractional, []);
  assert.ok(r.findings.some((f) => f.rule === 'pageable-copy' && f.estimatedSavingNs > 0));
});

test('kineto: no rate "from pinned memory" is taken from the trace\'s own pageable copies', async () => {
  // no device named: the only rate the trace could give is that of its pageable copies, which is no pinned rate
  const r = await analyzeFiles([trace('pageable-only.json', [kernel(10, 5), ...pageable(4)])]);
  assert.deepEqual([r.summary.rates.HtoD, r.summary.rates.DtoH], [null, null]);
  assert.match(r.summary.rates.source, /other than 4 from or to pageable memory/);
  const pageableRule = r.summary.notApplicable.find((n) => n.rule === 'pageable-copy');
  assert.ok(pageableRule, 'pageable-copy cannot price the copies without a pinned rate');
  assert.doesNotMatch(JSON.stringify(r.findings), /GB\/s from pinned memory/);
});

test('kineto: launches with no GPU activity get a note, as nsys exports in that state do', async () => {
  const launches = Array.from({ length: 5 }, (_, i) => ({
    ph: 'X',
    cat: 'cuda_runtime',
    name: 'cudaLaunchKernel',
    ts: 10 + i * 10,
    dur: 4,
    pid: 0,
    tid: 1,
    args: { correlation: i },
  }));
  const r = await analyzeFiles([trace('launches.json', launches, { deviceProperties: [{ id: 0, name: 'NVIDIA H100 80GB HBM3' }] })]);
  assert.ok(
    r.summary.notes.some((n) => /holds no GPU activity \(no kernel, copy or memset; 5 CUDA \/ HIP runtime calls, 5 of them kernel launches\)/.test(n)),
    r.summary.notes.join('; '),
  );
});

const ROOT = ['../../../../shared/traces/', '../../../../../shared/traces/'].map((p) => new URL(p, import.meta.url).pathname).find(existsSync);
test('kineto: the HTA CUPTI-profiler trace (1862 runtime calls, 77 launches, no GPU events) gets the note', {
  skip: ROOT ? false : '../shared/traces is absent',
}, async () => {
  // python json: cat cuda_runtime 1862, 77 of them cudaLaunchKernel; no kernel, gpu_memcpy or gpu_memset events
  const r = await analyzeFiles([`${ROOT}HolisticTraceAnalysis/tests/data/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz`]);
  assert.ok(
    r.summary.notes.some((n) => /no GPU activity .*1862 CUDA \/ HIP runtime calls, 77 of them kernel launches/.test(n)),
    r.summary.notes.join('; '),
  );
});

test('ranks: a rule that fired with no saving priced never "saves about 0 ns"', () => {
  assert.equal(savesAcrossRanks(0, 0), 'no time saved that the traces can price (see each rank)');
  assert.match(savesAcrossRanks(0, 5e6), /saves up to 5\.00 ms on a rank, nothing on the median rank/);
  const rank = (n: number) => ({
    rank: n,
    file: `rank-${n}.json`,
    result: undefined as never,
    findings: [{ rule: 'sync-storm', severity: 'low', title: 'Many blocking synchronisations', estimatedSavingNs: 0 }],
    metrics: { spanNs: 1e9, kernelBusyNs: 5e8, gpuIdleNs: 5e8, copyNs: 1e7, copyBytes: 0, syncBlockedNs: 1e6, syncs: 10, savingNs: 0 },
  });
  const r = {
    schema: 'gpumem.analyze-ranks/1',
    format: 'kineto',
    workers: 1,
    wallNs: 1e6,
    ranks: [rank(0), rank(1)],
    refused: [],
    rules: [{ rule: 'sync-storm', title: 'Many blocking synchronisations', ranks: [0, 1], medianSavingNs: 0, maxSavingNs: 0 }],
    stragglers: [],
    method: 'm',
    notes: [],
  } as unknown as RanksResult;
  const text = renderRanks(r);
  assert.doesNotMatch(text, /saves about 0 ns|\(0 ns\)/);
  assert.match(text, /sync-storm: Many blocking synchronisations — on 2 of 2 ranks; no time saved/);
});
