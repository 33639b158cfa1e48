/**
 * Every rule on small event models built here, where the expected finding (and its absence) can be worked out by
 * hand: the rules the recorded traces do not trigger are held to their definitions this way.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { analyzeModel } from './analyze.js';
import type { CopyRates } from './bandwidth.js';
import { AllocLevel, Api, Direction, MemKind, MigrationCause, TraceModel } from './model.js';
import type { AnalyzeResult } from './result.js';
import { call, copy, kernel } from '../testing/trace-model.js';

const RATES: CopyRates = { HtoD: 50, DtoH: 50, source: 'test: 50 GB/s', assumed: false, basis: 'bench' };
const MiB = 2 ** 20;
const us = 1000;
const ms = 1e6;

const rules = (r: AnalyzeResult): string[] => r.findings.map((f) => f.rule);
const finding = (r: AnalyzeResult, rule: string) => {
  const f = r.findings.find((x) => x.rule === rule);
  assert.ok(f, `${rule} in [${rules(r).join(', ')}]`);
  return f;
};

test('d2h-to-pageable: recurring reads into pageable memory, with the saving at the pinned rate', () => {
  const m = new TraceModel();
  for (let i = 0; i < 5; i++) {
    kernel(m, i * 10 * ms, 5 * ms);
    copy(m, i * 10 * ms + 5 * ms, 2 * ms, 16 * MiB, Direction.DtoH, MemKind.pageable);
  }
  const r = analyzeModel(m, RATES);
  const f = finding(r, 'd2h-to-pageable');
  assert.equal(f.count, 5);
  assert.equal(f.bytes, 80 * MiB);
  // each copy: 2 ms measured against 16 MiB at 50 GB/s (335.5 µs); no small copy to measure a fixed cost by, so none is added
  assert.ok(Math.abs(f.estimatedSavingNs - 5 * (2 * ms - (16 * MiB) / 50)) < 1);
  assert.match(f.savingHow, /no fixed cost/);
  assert.ok(!rules(r).includes('pageable-copy'));
});

test('sync-copy: synchronous memcpy calls; none when the copies are asynchronous', () => {
  const m = new TraceModel();
  for (let i = 0; i < 4; i++) call(m, i * ms, 300 * us, Api.memcpySync);
  const r = analyzeModel(m, RATES);
  const f = finding(r, 'sync-copy');
  assert.equal(f.count, 4);
  assert.equal(f.timeNs, 1.2 * ms);
  const a = new TraceModel();
  for (let i = 0; i < 4; i++) call(a, i * ms, 10 * us, Api.memcpyAsync);
  assert.ok(!rules(analyzeModel(a, RATES)).includes('sync-copy'));
});

test('exposed-copy: copies between kernels on one stream are exposed; the same copies under kernels are not', () => {
  const serial = new TraceModel();
  for (let i = 0; i < 5; i++) {
    kernel(serial, i * 10 * ms, 5 * ms);
    copy(serial, i * 10 * ms + 5 * ms, 4 * ms, 64 * MiB, Direction.HtoD, MemKind.pinned);
  }
  kernel(serial, 50 * ms, 5 * ms);
  const f = finding(analyzeModel(serial, RATES), 'exposed-copy');
  assert.equal(f.count, 5);
  assert.equal(f.timeNs, 20 * ms);
  assert.equal(f.estimatedSavingNs, 20 * ms, 'all of it fits under the 30 ms of kernels');
  assert.match(f.evidence.join('\n'), /share stream 7/);
  const overlapped = new TraceModel();
  for (let i = 0; i < 5; i++) {
    kernel(overlapped, i * 10 * ms, 9 * ms);
    copy(overlapped, i * 10 * ms + 1 * ms, 4 * ms, 64 * MiB, Direction.HtoD, MemKind.pinned, { stream: 8 });
  }
  assert.ok(!rules(analyzeModel(overlapped, RATES)).includes('exposed-copy'));
});

test('alloc-churn and pinned-alloc-churn: steady-state allocate and free calls; growth alone is not churn', () => {
  const m = new TraceModel();
  call(m, 0, 10 * us, Api.launch);
  for (let i = 0; i < 20; i++) {
    call(m, 10 * ms + i * ms, 80 * us, Api.malloc);
    call(m, 10 * ms + i * ms + 500 * us, 60 * us, Api.free);
  }
  // calls of one thread one after the other, as a thread makes them
  for (let i = 0; i < 3; i++) {
    call(m, 40 * ms + i * ms, 500 * us, Api.hostAlloc);
    call(m, 40 * ms + i * ms + 600 * us, 200 * us, Api.hostFree);
  }
  const r = analyzeModel(m, RATES);
  const a = finding(r, 'alloc-churn');
  // the first allocation (no free before it) and the last free (no allocation after it) are one-off
  assert.equal(a.count, 38);
  assert.equal(a.timeNs, 19 * 140 * us);
  assert.equal(a.estimatedSavingNs, 19 * 140 * us - 38 * 300, 'minus a pool hit per call');
  assert.ok(a.evidence.some((e) => /2 one-off calls/.test(e)));
  const p = finding(r, 'pinned-alloc-churn');
  assert.equal(p.count, 4);
  assert.equal(p.estimatedSavingNs, 2 * 700 * us);
  // a free that waits seconds for the device to drain counts as a typical free, not as seconds of churn
  const slow = new TraceModel();
  call(slow, 0, 10 * us, Api.launch);
  for (let i = 0; i < 100; i++) {
    call(slow, 10 * ms + i * 10 * ms, 80 * us, Api.malloc);
    call(slow, 10 * ms + i * 10 * ms + 500 * us, i === 50 ? 150 * ms : 60 * us, Api.free);
  }
  const s = finding(analyzeModel(slow, RATES), 'alloc-churn');
  assert.ok(s.timeNs < 100 * 140 * us, `counted ${s.timeNs} ns: the 150 ms free is capped at the median free`);
  assert.ok(s.estimatedSavingNs > 0 && s.estimatedSavingNs < 100 * 140 * us);
  assert.ok(s.evidence.some((e) => /1 calls took more than twice their median/.test(e)));
  const growth = new TraceModel();
  call(growth, 0, 10 * us, Api.launch);
  for (let i = 0; i < 30; i++) call(growth, 10 * ms + i * ms, 80 * us, Api.malloc);
  assert.ok(!rules(analyzeModel(growth, RATES)).includes('alloc-churn'));
});

test('managed-faults: migrations and faults on both sides are found, with ping-pong regions', () => {
  const m = new TraceModel();
  for (let i = 0; i < 10; i++) {
    m.faults.push({ time: i * ms, duration: 200 * us, bytes: Number.NaN, kind: 1, address: 0x7f0000000000 + (i % 2) * 4 * MiB });
    m.faults.push({ time: i * ms + 500 * us, duration: 0, bytes: Number.NaN, kind: 0, address: 0x7f0000000000 });
    m.migrations.push({ start: i * ms, end: i * ms + 100 * us, bytes: 2 * MiB, dir: Direction.HtoD, cause: MigrationCause.pageFault, device: 0 });
  }
  m.traced('faults');
  const f = finding(analyzeModel(m, RATES), 'managed-faults');
  assert.equal(f.count, 30);
  assert.equal(f.bytes, 20 * MiB);
  assert.match(f.evidence.join('\n'), /1 2 MiB regions faulted on both the CPU and the GPU/);
  assert.ok(f.estimatedSavingNs > 0 && f.estimatedSavingNs < f.timeNs);
});

test('redundant-copy: the same host buffer uploaded again when addresses are known; not judged without them', () => {
  const m = new TraceModel();
  for (let i = 0; i < 4; i++) {
    copy(m, i * ms, 200 * us, 8 * MiB, Direction.HtoD, MemKind.pinned, { hostAddr: 0x7f1000000000 });
    copy(m, i * ms + 300 * us, 200 * us, 8 * MiB, Direction.HtoD, MemKind.pinned, { hostAddr: 0x7f2000000000 + i * 16 * MiB });
  }
  const f = finding(analyzeModel(m, RATES), 'redundant-copy');
  assert.equal(f.count, 3, 'every upload of the same buffer after the first');
  assert.equal(f.bytes, 24 * MiB);
  const n = new TraceModel();
  copy(n, 0, 200 * us, 8 * MiB, Direction.HtoD, MemKind.pinned);
  assert.ok(analyzeModel(n, RATES).summary.notApplicable.some((x) => x.rule === 'redundant-copy'));
});

test('low-bandwidth: large pinned copies far below the rate; fast ones are fine', () => {
  const m = new TraceModel();
  copy(m, 0, 5 * ms, 64 * MiB, Direction.HtoD, MemKind.pinned); // 13.4 GB/s against 50
  copy(m, 10 * ms, 1.4 * ms, 64 * MiB, Direction.HtoD, MemKind.pinned); // 47.9 GB/s
  copy(m, 20 * ms, 10 * us, 4 * 1024, Direction.HtoD, MemKind.pinned); // small: not judged by this rule
  const f = finding(analyzeModel(m, RATES), 'low-bandwidth');
  assert.equal(f.count, 1);
  assert.equal(f.bytes, 64 * MiB);
});

test('gpu-idle-on-memory: gaps between kernels filled by copies; none when kernels run back to back', () => {
  const m = new TraceModel();
  for (let i = 0; i < 10; i++) {
    kernel(m, i * 2 * ms, 1 * ms);
    copy(m, i * 2 * ms + 1 * ms, 900 * us, 32 * MiB, Direction.HtoD, MemKind.pinned);
  }
  const f = finding(analyzeModel(m, RATES), 'gpu-idle-on-memory');
  assert.equal(f.estimatedSavingNs, 9 * 900 * us, 'the copies inside the 9 gaps between the 10 kernels');
  const busy = new TraceModel();
  for (let i = 0; i < 10; i++) kernel(busy, i * ms, ms);
  assert.ok(!rules(analyzeModel(busy, RATES)).includes('gpu-idle-on-memory'));
});

test('fragmentation from allocator totals; an allocator that holds little is fine', () => {
  const m = new TraceModel();
  m.allocs.push({
    time: 0,
    bytes: 1 * MiB,
    device: 0,
    address: 1,
    allocated: 10 * 2 ** 30,
    reserved: 14 * 2 ** 30,
    host: 0,
    agent: -1,
    level: AllocLevel.framework,
  });
  const f = finding(analyzeModel(m, RATES), 'fragmentation');
  assert.equal(f.bytes, 4 * 2 ** 30);
  assert.equal(f.severity, 'medium');
  const ok = new TraceModel();
  ok.allocs.push({
    time: 0,
    bytes: 1 * MiB,
    device: 0,
    address: 1,
    allocated: 10 * 2 ** 30,
    reserved: 10.2 * 2 ** 30,
    host: 0,
    agent: -1,
    level: AllocLevel.framework,
  });
  assert.ok(!rules(analyzeModel(ok, RATES)).includes('fragmentation'));
  const oom = new TraceModel();
  oom.ooms = 1;
  assert.equal(finding(analyzeModel(oom, RATES), 'fragmentation').severity, 'high');
});

test('an empty model gives no findings and a summary of zeros', () => {
  const r = analyzeModel(new TraceModel(), RATES);
  assert.deepEqual(r.findings, []);
  assert.equal(r.summary.copies.count, 0);
  assert.equal(r.summary.spanNs, 0);
});

test('small-copies judges the copies that have sizes when others have none', () => {
  const m = new TraceModel();
  copy(m, 0, 5 * us, Number.NaN, Direction.HtoD, MemKind.pinned);
  for (let i = 0; i < 80; i++) copy(m, 10 * us + i * 20 * us, 3 * us, 256, Direction.HtoD, MemKind.pinned);
  assert.equal(finding(analyzeModel(m, RATES), 'small-copies').count, 80);
  const none = new TraceModel();
  for (let i = 0; i < 80; i++) copy(none, i * 20 * us, 3 * us, Number.NaN, Direction.HtoD, MemKind.pinned);
  const na = analyzeModel(none, RATES).summary.notApplicable.find((n) => n.rule === 'small-copies');
  assert.match(na?.reason ?? '', /does not record copy sizes/);
});

test('a trace of several GPUs gives each its own figures', () => {
  const m = new TraceModel();
  for (let d = 0; d < 2; d++) {
    for (let i = 0; i < 10; i++) m.kernels.push({ start: i * ms, end: i * ms + (d + 1) * 100 * us, stream: 7, device: d });
    m.devices.set(d, `GPU ${d}`);
  }
  m.copies.push({
    start: 0,
    end: 50 * us,
    bytes: MiB,
    dir: Direction.HtoD,
    src: MemKind.pinned,
    dst: MemKind.device,
    stream: 1,
    device: 1,
    correlation: Number.NaN,
    hostAddr: Number.NaN,
    op: -1,
  });
  const s = analyzeModel(m, RATES).summary;
  assert.equal(s.perDevice.length, 2);
  const [g0, g1] = s.perDevice;
  assert.equal(g0?.kernels.count, 10);
  assert.equal(g0?.kernels.busyNs, 10 * 100 * us);
  assert.equal(g1?.kernels.busyNs, 10 * 200 * us);
  assert.equal(g0?.copies.count, 0);
  assert.equal(g1?.copies.bytes, MiB);
  assert.equal(s.kernels.busyNs, 10 * 300 * us, 'the totals add the GPUs up');
  const one = new TraceModel();
  one.kernels.push({ start: 0, end: us, stream: 0, device: 0 });
  assert.deepEqual(analyzeModel(one, RATES).summary.perDevice, []);
});

test('a rule whose activity was not recorded says so instead of finding nothing', () => {
  const m = new TraceModel();
  m.kernels.push({ start: 0, end: us, stream: 0, device: 0 });
  // kernels alone, from a format that does not say copies were traced
  const na = new Map(analyzeModel(m, RATES).summary.notApplicable.map((n) => [n.rule, n.reason]));
  assert.match(na.get('pageable-copy') ?? '', /did not record memory copies/);
  assert.match(na.get('sync-storm') ?? '', /did not record runtime API calls/);
  // the same kernels from a profiler that records copies with them: nothing to judge, and no problem
  m.traced('kernels', 'copies', 'runtime');
  const r = analyzeModel(m, RATES);
  assert.ok(!r.summary.notApplicable.some((n) => n.rule === 'pageable-copy' || n.rule === 'sync-storm'));
});
