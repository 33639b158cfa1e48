/**
 * The strategy advice drawn from a real bench: `gpumem bench` as it ran on one NVIDIA H200 (PCIe 5.0 x16; the file
 * in fixtures/bench/). Each recommendation quotes the figures it rests on, as the bench measured them.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { BenchReport } from '../bench/schema.js';
import { adviseDevice } from './advice.js';

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
  for (const id of ['pin-staging-buffers', 'pinned-readback', 'batch-small-copies', 'prefetch-managed', 'memory-roofline', 'pool-allocations'])
    assert.ok(ids.includes(id), id);
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
