/**
 * Legacy rocprof (v1): its results.json (the Chrome trace of --hip-trace, lanes named by process metadata, string
 * ts / dur, no cat) and its --stats tables, written here from the naive PyTorch run in the layout rocprofiler's
 * tblextr.py writes (testing/trace-fixtures.ts). Counts are the run's; the statistics are counted as what they
 * total (kernels as kernels) and judged by the rules that can judge totals.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { findingOf, naiveRun, writeRocprofV1Json, writeRocprofV1Stats } from '../../testing/trace-fixtures.js';
import { analyzeFiles, detectTraceFormat, loadTraces } from '../analyze.js';

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
  // the copies carry no size: each one's is in the sizeBytes argument of the call that made it, paired in order
  assert.equal(
    s.copies.bytes,
    run.copies.reduce((t, e) => t + e.bytes, 0),
  );
  const m = await loadTraces([file]);
  const byStart = [...run.copies].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  const got = [...Array(m.copies.length).keys()].sort((a, b) => m.copies.get(a, 'start') - m.copies.get(b, 'start'));
  assert.deepEqual(
    got.map((i) => m.copies.get(i, 'bytes')),
    byStart.map((e) => e.bytes),
  );
  assert.ok(s.notes.some((n) => /1222 of 1222 copies sized by the sizeBytes argument/.test(n)));
  const na = new Map(s.notApplicable.map((n) => [n.rule, n.reason]));
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
  // rules that need a timeline, sizes or host kinds say why they cannot judge totals; none claims "no problem", and
  // none claims a saving: the synchronisations the totals count are not judged, saying what totals cannot tell
  assert.deepEqual(r.findings, []);
  const na = new Map(r.summary.notApplicable.map((n) => [n.rule, n.reason]));
  const syncs = streamSyncs + run.runtime.filter((e) => e.name === 'hipDeviceSynchronize').length;
  assert.match(na.get('sync-storm') ?? '', new RegExp(`totals per call .*: ${syncs} calls`));
  for (const rule of ['pageable-copy', 'small-copies', 'exposed-copy', 'gpu-idle-on-memory', 'low-bandwidth', 'redundant-copy'])
    assert.match(na.get(rule) ?? '', /aggregate statistics/, rule);
});

test("--stats tables as rocprof wrote them before 2022 (C++ names unquoted) and with HIP's own commands: read right", async () => {
  const files = writeRocprofV1Stats(join(dir, 'bare'), run, { bare: true, hipOps: true });
  assert.ok(
    run.kernels.some((k) => k.name.includes(',')),
    'the run has kernel names with commas',
  );
  const r = await analyzeFiles([files.kernels, files.copies]);
  const s = r.summary;
  // every kernel by its whole name, the barrier packet and the unnamed command left out of the kernels
  assert.equal(s.kernels.count, run.kernels.length);
  assert.equal(s.kernels.timeNs, Number(run.kernels.reduce((t, e) => t + (e.end - e.start), 0n)));
  const names = new Set(run.kernels.map((k) => k.name));
  for (const k of s.aggregates?.kernels ?? []) assert.ok(names.has(k.name), `a kernel of the run: ${k.name.slice(0, 80)}`);
  const note = s.notes.find((n) => /left out of the totals/.test(n)) ?? '';
  assert.match(note, /"Unknown command type" \(2 calls\)/);
  assert.match(note, /"<barrier packet>" \(1 calls\)/);
  // fills are memsets, not copies of unknown direction
  assert.equal(s.copies.count, run.copies.length);
  assert.deepEqual(s.copies.groups.map((g) => g.direction).sort(), ['DtoH', 'HtoD']);
  assert.equal(s.memsets.count, run.memsets.length);
});

test('HIP commands on the GPU lanes that are not kernels ("Unknown command type") are neither kernels nor copies', async () => {
  const file = join(dir, 'unknown.json');
  writeRocprofV1Json(file, run);
  const at = run.kernels[0]!.start;
  const odd = (pid: number, name: string): string =>
    `,{"ph":"X","name":"${name}","pid":${pid},"tid":0,"ts":"1","dur":"0","args":{"BeginNs":"${at}","EndNs":"${at}","Name":"${name}"}}`;
  const text = readFileSync(file, 'utf8').replace(
    '],\n"otherData"',
    `${odd(6, 'Unknown command type')}${odd(6, 'Unknown command type')}${odd(1, 'Unknown command type')}],\n"otherData"`,
  );
  writeFileSync(file, text);
  const s = (await analyzeFiles([file])).summary;
  assert.equal(s.kernels.count, run.kernels.length);
  assert.equal(s.copies.count, run.copies.length);
  assert.ok(s.notes.some((n) => /3 "Unknown command type" in the GPU and COPY lanes/.test(n)));
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

test('a results.json cut short to its first lane label is refused as one trace event, not read as empty', async () => {
  const file = join(dir, 'cut.json');
  writeFileSync(file, '{"args":{"name":"COPY"},"ph":"M","pid":1,"name":"process_name","sort_index":0}\n');
  await assert.rejects(analyzeFiles([file]), (e: Error) => /one Chrome trace event \(ph "M"\) alone, not a trace/.test(e.message));
});

test('a results.json with GPU lanes from both KERN and OPS (--timestamp on with --hip-trace) counts each dispatch once', async () => {
  const file = join(dir, 'both.json');
  writeRocprofV1Json(file, run);
  const kern = run.kernels
    .map(
      (e, i) =>
        `,{"ph":"X","name":"k${i}","pid":6,"tid":0,"ts":"1","dur":"1","args":{"KernelName":"k${i}","gpu-id":"0","BeginNs":"${e.start}","EndNs":"${e.end}"}}`,
    )
    .join('');
  writeFileSync(file, readFileSync(file, 'utf8').replace('],\n"otherData"', `${kern}],\n"otherData"`));
  const s = (await analyzeFiles([file])).summary;
  assert.equal(s.kernels.count, run.kernels.length);
  assert.ok(s.notes.some((n) => /kernel events from HIP's operations \(OPS\) left out/.test(n)));
});

test('a results.csv of dispatches whose kernel names hold bare commas (rocprof before 2022) reads each name whole', async () => {
  const file = join(dir, 'bare', 'results.csv');
  mkdirSync(join(dir, 'bare'), { recursive: true });
  const head = 'Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,vgpr,sgpr,fbar,sig,obj,DispatchNs,BeginNs,EndNs,CompleteNs,DurationNs';
  const rows = run.kernels.map(
    (e, i) =>
      `${i},${e.name} [clone .kd],0,0,${i},683,683,256,256,0,0,8,16,0,0x0,0x7f00,${e.start - 100n},${e.start},${e.end},${e.end + 100n},${e.end - e.start}`,
  );
  writeFileSync(file, `${head}\n${rows.join('\n')}\n`);
  const s = (await analyzeFiles([file])).summary;
  assert.equal(s.kernels.count, run.kernels.length);
  assert.equal(s.kernels.timeNs, Number(run.kernels.reduce((t, e) => t + (e.end - e.start), 0n)));
  // names over 200 characters are kept cut, with an ellipsis: each is the start of one of the run's names
  const names = run.kernels.map((k) => k.name);
  for (const k of s.kernels.top)
    assert.ok(names.includes(k.name) || names.some((n) => k.name.endsWith('…') && n.startsWith(k.name.slice(0, -1))), k.name.slice(0, 80));
});
