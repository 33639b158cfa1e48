/**
 * What findings may claim: no saving larger than what the events it rests on could give back, no gpu-idle saving
 * larger than the kernel time memory work could hide under, and findings that claim the same time marked as
 * overlapping. Hand-built traces where the bound is known, and random traces for the invariants.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { propertyParams } from '../testing/property.js';
import { analyzeModel } from './analyze.js';
import type { CopyRates } from './bandwidth.js';
import { Api, Direction, MemKind, TraceModel } from './model.js';
import type { AnalyzeResult } from './result.js';
import { call, copy, kernel } from '../testing/trace-model.js';

const RATES: CopyRates = { HtoD: 25, DtoH: 25, source: 'test: 25 GB/s', assumed: false, basis: 'bench' };
const us = 1000;
const ms = 1e6;
const MiB = 2 ** 20;

const finding = (r: AnalyzeResult, rule: string) => r.findings.find((f) => f.rule === rule);

test('gpu-idle-on-memory saves no more than the kernel time memory work could hide under', () => {
  // 0.54 ms of kernels, 69 ms of one copy engine's copies between them: overlapping them could hide 0.54 ms, not 69
  const m = new TraceModel();
  let t = 0;
  for (let i = 0; i < 3; i++) {
    kernel(m, t, 180 * us);
    t += 200 * us;
    copy(m, t, 23 * ms, 256 * MiB, Direction.HtoD, MemKind.pinned);
    t += 23 * ms + 50 * us;
  }
  kernel(m, t, 0);
  const f = finding(analyzeModel(m, RATES), 'gpu-idle-on-memory');
  assert.ok(f);
  assert.ok(f.estimatedSavingNs <= 540 * us, `saving ${f.estimatedSavingNs} ns over 0.54 ms of kernels`);
  assert.ok(f.evidence.some((e) => /at most that much of the memory work can run under them/.test(e)));
});

test('a pageable copy and the synchronisation that waits for it claim the same time: marked as overlapping', () => {
  const m = new TraceModel();
  for (let i = 0; i < 30; i++) {
    const t = i * 10 * ms;
    kernel(m, t, 2 * ms);
    call(m, t + 2 * ms, 100 * us, Api.memcpyAsync);
    copy(m, t + 2 * ms + 50 * us, 4 * ms, 16 * MiB, Direction.HtoD, MemKind.pageable);
    call(m, t + 2 * ms + 100 * us, 4 * ms, Api.streamSync);
  }
  const r = analyzeModel(m, RATES);
  const pageable = finding(r, 'pageable-copy');
  const storm = finding(r, 'sync-storm');
  assert.ok(pageable && storm, r.findings.map((f) => f.rule).join());
  assert.ok(pageable.overlapsWith.includes('sync-storm'));
  assert.ok(storm.overlapsWith.includes('pageable-copy'));
});

test('findings on time apart are not marked as overlapping', () => {
  const m = new TraceModel();
  // pageable uploads in the first half, synchronous-call churn of device memory in the second
  for (let i = 0; i < 10; i++) copy(m, i * ms, 500 * us, 8 * MiB, Direction.HtoD, MemKind.pageable);
  for (let i = 0; i < 20; i++) {
    call(m, 50 * ms + i * ms, 100 * us, Api.malloc);
    call(m, 50 * ms + i * ms + 300 * us, 100 * us, Api.free);
  }
  const r = analyzeModel(m, RATES);
  const pageable = finding(r, 'pageable-copy');
  const churn = finding(r, 'alloc-churn');
  assert.ok(pageable && churn, r.findings.map((f) => f.rule).join());
  assert.deepEqual(pageable.overlapsWith, []);
  assert.deepEqual(churn.overlapsWith, []);
});

test("a synchronisation that waits for the GPU's own work saves only the time the GPU sat idle in it", () => {
  const m = new TraceModel();
  for (let i = 0; i < 25; i++) {
    const t = i * 10 * ms;
    call(m, t, 20 * us, Api.memcpyAsync);
    copy(m, t + 10 * us, 30 * us, 4096, Direction.DtoH, MemKind.pinned);
    // the host waits 5 ms, 4.9 ms of it while a kernel it needs finishes
    kernel(m, t + 50 * us, 4.9 * ms);
    call(m, t + 20 * us, 5 * ms, Api.streamSync);
  }
  const f = finding(analyzeModel(m, RATES), 'sync-storm');
  assert.ok(f);
  assert.ok(f.estimatedSavingNs <= 25 * (5 * ms - 4.9 * ms), `saving ${f.estimatedSavingNs} ns`);
  assert.ok(f.evidence.some((e) => /GPU was running the kernels and copies the host waited for/.test(e)));
});

test('a synchronous copy call held far longer than its peers by something else is counted at the median call', () => {
  const m = new TraceModel();
  for (let i = 0; i < 5; i++) {
    const t = i * 600 * ms;
    // the first call sits 490 ms with the GPU idle: not its 5 µs copy
    call(m, t, i === 0 ? 490 * ms : 30 * us, Api.memcpySync);
    copy(m, t + (i === 0 ? 489.99 * ms : 20 * us), 5 * us, 64, Direction.HtoD, MemKind.pageable);
  }
  const f = finding(analyzeModel(m, RATES), 'sync-copy');
  assert.ok(f);
  assert.ok(f.estimatedSavingNs <= 5 * 30 * us, `saving ${f.estimatedSavingNs} ns`);
  assert.ok(f.evidence.some((e) => /1 calls took more than twice the median call/.test(e)));
});

const event = fc.record({
  kind: fc.constantFrom('kernel', 'htod', 'dtoh', 'sync', 'memcpy', 'malloc', 'free', 'hostAlloc'),
  start: fc.integer({ min: 0, max: 200 * ms }),
  dur: fc.integer({ min: 0, max: 5 * ms }),
  bytes: fc.oneof(fc.constant(Number.NaN), fc.integer({ min: 1, max: 64 * MiB })),
  host: fc.constantFrom(MemKind.pageable, MemKind.pinned, MemKind.unknown),
});

test('on any trace, savings are finite, within the span, overlaps are mutual, and gpu-idle within the kernel time', () => {
  fc.assert(
    fc.property(fc.array(event, { maxLength: 120 }), (events) => {
      const m = new TraceModel();
      for (const e of events) {
        if (e.kind === 'kernel') kernel(m, e.start, e.dur);
        else if (e.kind === 'htod' || e.kind === 'dtoh') copy(m, e.start, e.dur, e.bytes, e.kind === 'htod' ? Direction.HtoD : Direction.DtoH, e.host);
        else call(m, e.start, e.dur, { sync: Api.streamSync, memcpy: Api.memcpySync, malloc: Api.malloc, free: Api.free, hostAlloc: Api.hostAlloc }[e.kind]);
      }
      const r = analyzeModel(m, RATES);
      let kernelNs = 0;
      for (let i = 0; i < m.kernels.length; i++) kernelNs += m.kernels.get(i, 'end') - m.kernels.get(i, 'start');
      for (const f of r.findings) {
        assert.ok(Number.isFinite(f.estimatedSavingNs) && f.estimatedSavingNs >= 0, `${f.rule}: finite`);
        assert.ok(f.estimatedSavingNs <= r.summary.spanNs, `${f.rule}: within the span`);
        for (const o of f.overlapsWith) assert.ok(finding(r, o)?.overlapsWith.includes(f.rule), `${f.rule} and ${o} overlap both ways`);
      }
      const idle = finding(r, 'gpu-idle-on-memory');
      if (idle) assert.ok(idle.estimatedSavingNs <= kernelNs, 'gpu-idle within the kernel time');
    }),
    propertyParams(200),
  );
});
