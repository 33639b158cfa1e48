/**
 * Legacy rocprof (v1): its results.json (the Chrome trace of --hip-trace, lanes named by process metadata, string
 * ts / dur, no cat) and its --stats tables, written here from the naive PyTorch run in the layout rocprofiler's
 * tblextr.py writes (testing/trace-fixtures.ts). Counts are the run's; the statistics are counted as what they
 * total (kernels as kernels) and judged by the rules that can judge totals.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { findingOf, naiveRun, writeRocprofV1Json, writeRocprofV1Stats } from '../../testing/trace-fixtures.js';
import { analyzeFiles, detectTraceFormat } from '../analyze.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-rocprof-v1-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));
const fixture = (p: string): string => new URL(`../../../fixtures/${p}`, import.meta.url).pathname;
const run = naiveRun();
const streamSyncs = run.runtime.filter((e) => e.name === 'hipStreamSynchronize').length;
const find = findingOf;

test("rocprof results.json: lanes by their process names, times from BeginNs / EndNs, the run's counts", async () => {
  const file = join(dir, 'results.json');
  writeRocprofV1Json(file, run);
  assert.equal(detectTraceFormat(file), 'rocprof-json');
  const r = await analyzeFiles([file]);
  const s = r.summary;
  assert.deepEqual(s.formats, ['rocprof-json']);
  assert.equal(s.kernels.count, run.kernels.length);
  assert.equal(s.copies.count, run.copies.length);
  assert.equal(s.memsets.count, run.memsets.length);
  assert.equal(s.syncs.streamSync, streamSyncs);
  const byDir = Object.fromEntries(s.copies.groups.map((g) => [g.direction, g.count]));
  assert.deepEqual(byDir, { HtoD: run.copies.filter((e) => e.dir === 'HtoD').length, DtoH: run.copies.filter((e) => e.dir === 'DtoH').length });
  // nanosecond times: the copy time is the run's to the nanosecond, not rounded to microseconds
  assert.equal(s.copies.timeNs, Number(run.copies.reduce((t, e) => t + (e.end - e.start), 0n)));
  assert.equal(find(r, 'sync-storm').count, streamSyncs + run.runtime.filter((e) => e.name === 'hipDeviceSynchronize').length);
  assert.ok(s.notes.some((n) => /carry no byte counts/.test(n)));
  const na = new Map(s.notApplicable.map((n) => [n.rule, n.reason]));
  assert.match(na.get('small-copies') ?? '', /copy sizes/);
  assert.match(na.get('pageable-copy') ?? '', /unknown host memory kind/);
});

test('rocprof --stats tables count as what they total: kernels as kernels, copies as copies, calls as calls', async () => {
  const files = writeRocprofV1Stats(join(dir, 'results'), run);
  const r = await analyzeFiles([files.kernels, files.hip, files.copies]);
  const s = r.summary;
  assert.deepEqual(s.formats, ['rocprof-stats']);
  assert.equal(s.kernels.count, run.kernels.length);
  assert.equal(s.kernels.timeNs, Number(run.kernels.reduce((t, e) => t + (e.end - e.start), 0n)));
  assert.equal(s.copies.count, run.copies.length);
  assert.equal(s.syncs.streamSync, streamSyncs);
  assert.ok(!s.aggregates?.apis.some((a) => run.kernels.some((k) => k.name === a.name)), 'no kernel is filed as an API call');
  const storm = find(r, 'sync-storm');
  assert.equal(storm.count, streamSyncs + run.runtime.filter((e) => e.name === 'hipDeviceSynchronize').length);
  // rules that need a timeline, sizes or host kinds say why they cannot judge totals; none claims "no problem"
  const na = new Map(r.summary.notApplicable.map((n) => [n.rule, n.reason]));
  for (const rule of ['pageable-copy', 'small-copies', 'exposed-copy', 'gpu-idle-on-memory', 'low-bandwidth', 'redundant-copy'])
    assert.match(na.get(rule) ?? '', /aggregate statistics/, rule);
});

test('statistics beside the trace of the same activity are left out, so nothing is counted twice', async () => {
  const folder = join(dir, 'run');
  mkdirSync(folder);
  writeRocprofV1Json(join(folder, 'results.json'), run);
  writeRocprofV1Stats(join(folder, 'results'), run);
  const r = await analyzeFiles([folder]);
  assert.deepEqual(r.summary.formats, ['rocprof-json']);
  assert.equal(r.summary.kernels.count, run.kernels.length);
  // rocprofv3 CSV traces given with a statistics table of kernels: the table is left out
  const csvDir = fixture('traces/rocprofv3-naive');
  const csv = readdirSync(csvDir).map((f) => join(csvDir, f));
  const stats = writeRocprofV1Stats(join(dir, 'v3'), run);
  const both = await analyzeFiles([...csv, stats.kernels]);
  assert.equal(both.summary.kernels.count, run.kernels.length);
  assert.ok(both.summary.notes.some((n) => n.includes(stats.kernels) && /counted twice/.test(n)));
});
