/**
 * The strategy advice drawn from a real bench: `gpumem bench` as it ran on one NVIDIA H200 (PCIe 5.0 x16; the file
 * in fixtures/bench/). Each recommendation quotes the figures it rests on, as the bench measured them.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { DeviceInfo } from '../backend/backend.js';
import type { BenchReport, BenchResult } from '../formats/bench-schema.js';
import { adviseDevice, adviseDeviceWithheld } from './advice.js';
import { nativeVerdict, type NativeAgreement } from './fidelity.js';
import { NATIVE_AGREEMENT } from './native-agreement.js';

const bench = JSON.parse(readFileSync(new URL('../../fixtures/bench/h200-bench.json', import.meta.url), 'utf8')) as BenchReport;
const device = bench.environment.devices[0]!;
const row = (test: string, direction: string, srcKind: string, dstKind: string, bytes: number) =>
  bench.results.find(
    (r) => r.test === test && r.direction === direction && r.srcKind === srcKind && r.dstKind === dstKind && r.bytes === bytes && r.engine === 'copy-engine',
  );
/** A figure as the advice prints it. */
const shown = (x: number): string => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

test('advice from an H200 bench: each recommendation quotes its measured figures', () => {
  const items = adviseDevice(device, bench);
  const ids = items.map((a) => a.id);
  // This bench predates the split of the managed row (it has only the old kernel-after-prefetch row, which issue
  // 14 showed wrong): no managed advice is drawn from it.
  assert.ok(!ids.includes('prefetch-managed'));
  for (const id of ['pin-staging-buffers', 'pinned-readback', 'batch-small-copies', 'memory-roofline', 'pool-allocations']) assert.ok(ids.includes(id), id);
  for (const a of items) {
    assert.ok(a.workloads.length > 0, `${a.id} names its workloads`);
    const quoted = a.evidence.filter((e) => e.unit !== 'x' && a.recommendation.includes(shown(e.value)));
    assert.ok(quoted.length >= 1, `${a.id} quotes a measured figure: ${a.recommendation}`);
  }
  const GiB = 2 ** 30;
  const pinned = row('copy', 'HtoD', 'pinned', 'device', GiB)!.medianGBps!;
  const pageable = row('copy', 'HtoD', 'pageable', 'device', GiB)!.medianGBps!;
  const pin = items.find((a) => a.id === 'pin-staging-buffers')!;
  assert.ok(pin.recommendation.includes(`Pinned ${shown(pinned)} GB/s against pageable ${shown(pageable)} GB/s`), pin.recommendation);
});

test('collective advice names the buffers that reduce fastest (figures invented to check the rule: no GPU run has measured collectives yet)', () => {
  const GiB = 2 ** 30;
  const coll = (srcKind: string, bus: number, bytes = GiB): BenchReport['results'][number] => ({
    test: 'collective',
    direction: 'all-reduce',
    srcKind,
    dstKind: srcKind,
    engine: srcKind === 'pinned' ? 'staged' : 'nccl',
    bytes,
    ranks: 2,
    device: device.index,
    counted: 'algorithm',
    medianGBps: bus,
    minGBps: bus,
    maxGBps: bus,
    medianBusGBps: bus,
    cv: 0,
    repeats: 5,
    verified: true,
  });
  const advise = (rows: BenchReport['results']) => adviseDevice(device, { ...bench, results: rows }).find((a) => a.id === 'collective-buffers');
  const gain = advise([coll('device', 100), coll('nccl-registered', 120), coll('pinned', 10), coll('device', 50, 1024), coll('pinned', 1, 1024)])!;
  assert.equal(gain.title, 'Register the buffers collectives run on');
  assert.match(gain.recommendation, /All-reduce of 1 GiB over 2 GPUs: 100 GB\/s bus bandwidth through nccl on device buffers, 10\.0 GB\/s staged/);
  assert.match(gain.recommendation, /reached 120 GB\/s against 100 GB\/s on ordinary device buffers/);
  assert.deepEqual(
    gain.evidence.map((e) => e.value),
    [100, 120, 10],
  );
  const none = advise([coll('device', 100), coll('nccl-registered', 102)])!;
  assert.equal(none.title, 'Run collectives on device buffers');
  assert.match(none.recommendation, /no gain worth their setup/);
  assert.equal(advise([coll('device', 100)]), undefined, 'one kind of buffer alone compares nothing');
});

test('report quotes only kinds of row that matched native CUDA C, names the run and the comparison, and lists what it left out', () => {
  // The kernel, managed and allocation rows of gpumem bench from the published comparison's first round (one H200,
  // 2026-12-01), judged against that comparison (src/report/native-agreement.ts, written by gpu:verify).
  const memory = JSON.parse(readFileSync(new URL('../../fixtures/bench/h200-memory-2026-12-01.json', import.meta.url), 'utf8')) as BenchReport;
  const dev = memory.environment.devices[0]!;
  const { items, withheld } = adviseDeviceWithheld(dev, memory);
  // The managed rows after a prefetch lay apart from native C in every round: no "prefetch" advice quotes them.
  assert.equal(NATIVE_AGREEMENT.rows['managed|kernels-after-prefetch|managed|device|sm|1073741824'], 'differs');
  assert.ok(!items.some((a) => a.id === 'prefetch-managed'));
  assert.deepEqual(
    withheld.map((w) => w.source),
    ['managed kernels-after-prefetch managed->device sm 1 GiB', 'managed first-kernel-after-prefetch managed->device sm 1 GiB'],
  );
  for (const w of withheld) assert.match(w.reason, /NVIDIA H200, 2026-12-01 \(docs\/evidence\/2026-12-01-1x-h200\)/);
  // Every quoted figure says which run measured it and how its kind compared with native C; none is a withheld kind.
  const evidence = items.flatMap((a) => a.evidence);
  assert.ok(evidence.length > 5);
  for (const e of evidence) {
    assert.match(e.run ?? '', new RegExp(`gpumem bench \\(full\\) on this machine, ${memory.environment.date}, device 0 \\(NVIDIA H200\\)`));
    assert.notEqual(e.nativeState, 'differs', e.source);
    assert.ok(e.native && e.native.length > 20, e.source);
  }
  const triad = evidence.find((e) => e.source?.startsWith('stream triad'))!;
  assert.equal(triad.nativeState, 'agrees');
  assert.match(triad.native!, /^agreed with native CUDA C within its run-to-run spread at 1 GiB/);
});

test('nativeVerdict: matched by kind at the nearest compared size; rows apart are left out, noisy rows are not (invented table)', () => {
  const table: NativeAgreement = {
    measured: '2000-01-01',
    machine: 'Test GPU',
    evidence: 'nowhere',
    rows: {
      'copy|HtoD|pinned|device|copy-engine|1048576': 'agrees',
      'copy|HtoD|pinned|device|copy-engine|1073741824': 'differs',
      'copy|DtoH|device|pageable|copy-engine|1073741824': 'indistinct',
      'copy|DtoH|device|pinned|copy-engine|1073741824': 'unjudged',
    },
  };
  const r = (direction: string, srcKind: string, dstKind: string, bytes: number) =>
    ({ test: 'copy', direction, srcKind, dstKind, engine: 'copy-engine', bytes, device: 0, counted: 'one-way', verified: true }) as BenchResult;
  assert.equal(nativeVerdict(r('HtoD', 'pinned', 'device', 4 << 20), 'cuda', table).state, 'agrees', '4 MiB is nearer 1 MiB than 1 GiB');
  assert.equal(nativeVerdict(r('HtoD', 'pinned', 'device', 256 << 20), 'cuda', table).state, 'differs', '256 MiB is nearer 1 GiB');
  assert.equal(nativeVerdict(r('DtoH', 'device', 'pageable', 1 << 30), 'cuda', table).state, 'agrees');
  assert.match(nativeVerdict(r('DtoH', 'device', 'pageable', 1 << 30), 'cuda', table).detail, /run-to-run noise/);
  assert.equal(nativeVerdict(r('DtoH', 'device', 'pinned', 1 << 30), 'cuda', table).state, 'not compared');
  assert.equal(nativeVerdict(r('DtoD', 'device', 'device', 1 << 30), 'cuda', table).state, 'not compared', 'no such kind in the table');
  assert.equal(nativeVerdict(r('HtoD', 'pinned', 'device', 256 << 20), 'hip', table).state, 'not compared', 'the comparison ran on CUDA');
});

test('managed-memory advice on AMD with XNACK off says pages are not migrated on access (figures invented to check the rule: no AMD run exists)', () => {
  const base = bench.results.find((r) => r.test === 'copy')!;
  const managed = (direction: string, medianGBps: number): BenchResult => ({
    ...base,
    device: 0,
    test: 'managed',
    direction,
    srcKind: 'managed',
    dstKind: 'device',
    engine: 'sm',
    medianGBps,
  });
  const hip: BenchReport = {
    ...bench,
    environment: { ...bench.environment, backend: 'hip' },
    results: [managed('first-touch-by-kernel', 20), managed('kernels-after-prefetch', 900)],
  };
  const pick = (xnack: DeviceInfo['xnack']) => adviseDevice({ index: 0, concurrentManagedAccess: true, xnack }, hip).find((a) => a.id === 'prefetch-managed');
  const off = pick({ arch: false, enabled: false, source: 'runtime' });
  assert.ok(off, 'the managed rows give advice');
  assert.match(off.title, /^XNACK is off: managed memory is not migrated when kernels touch it/);
  assert.match(off.recommendation, /runtime reports no pageable memory access.*HSA_XNACK=1/);
  // With XNACK on, the page-fault wording stands; concurrentManagedAccess alone (HMM in the kernel) no longer decides.
  const on = pick({ arch: true, enabled: true, source: 'arch' });
  assert.ok(on && !/XNACK is off/.test(on.title));
  assert.match(on.recommendation, /migrates them on demand/);
});

test('every rule reads through the native filter: transfer rows whose kind differed from native C are left out too (invented rows and table)', () => {
  const GiB = 2 ** 30;
  const transfer = (direction: string, srcKind: string, dstKind: string, engine: string, gbps: number): BenchResult => ({
    test: 'transfer',
    direction,
    srcKind,
    dstKind,
    engine,
    bytes: GiB,
    device: device.index,
    counted: 'one-way',
    medianGBps: gbps,
    minGBps: gbps,
    maxGBps: gbps,
    cv: 0,
    repeats: 3,
    verified: true,
  });
  const rows = [transfer('HtoD', 'pageable', 'device', 'runtime-direct', 7), transfer('HtoD', 'pageable', 'device', 'gpumem-upload', 45)];
  const withRows: BenchReport = { ...bench, environment: { ...bench.environment, backend: 'cuda' }, results: [...bench.results, ...rows] };
  const table = (verdict: 'agrees' | 'differs'): NativeAgreement => ({
    measured: '2026-12-01',
    machine: 'NVIDIA H200',
    evidence: 'invented',
    rows: { [`transfer|HtoD|pageable|device|gpumem-upload|${GiB}`]: verdict, [`transfer|HtoD|pageable|device|runtime-direct|${GiB}`]: 'agrees' },
  });
  const agreed = adviseDeviceWithheld(device, withRows, table('agrees'));
  assert.ok(agreed.items.some((a) => a.id === 'stage-pageable-transfers'));
  const differed = adviseDeviceWithheld(device, withRows, table('differs'));
  assert.ok(!differed.items.some((a) => a.id === 'stage-pageable-transfers'), 'the staged row is not quoted');
  assert.ok(differed.withheld.some((w) => w.source === 'transfer HtoD pageable->device gpumem-upload 1 GiB'));
});
