/**
 * The copy rates savings rest on: the catalogue link of the trace's device, the trace's own fastest copies for a
 * device the catalogue does not know (never another GPU's figures), and a bench of the machine, which must have been
 * measured on a GPU.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ErrorCode, isGpuError } from '../errors.js';
import { runCli } from '../testing/harness.js';
import { analyzeModel } from './analyze.js';
import { LINK_EFFICIENCY, ratesForModel, ratesFromBench } from './bandwidth.js';
import { Direction, MemKind, TraceModel } from './model.js';

const MiB = 2 ** 20;
const ms = 1e6;
const fixture = (p: string): string => new URL(`../../fixtures/${p}`, import.meta.url).pathname;

/** A trace of one device with pinned uploads of `bytes` each taking `ns`. */
function trace(name: string | undefined, copies: Array<[bytes: number, ns: number]>, memoryBytes?: number): TraceModel {
  const m = new TraceModel();
  if (name !== undefined) m.devices.set(0, name);
  if (memoryBytes !== undefined) m.deviceMemory.set(0, memoryBytes);
  let t = 0;
  for (const [bytes, ns] of copies) {
    m.copies.push({
      start: t,
      end: t + ns,
      bytes,
      dir: Direction.HtoD,
      src: MemKind.pinned,
      dst: MemKind.device,
      stream: 7,
      device: 0,
      correlation: Number.NaN,
      hostAddr: Number.NaN,
      op: -1,
    });
    t += ns + ms;
  }
  return m;
}

test('a catalogue device gets its own link: an RTX 4060 Ti on PCIe 4.0 x8, not a x16 card', () => {
  const r = ratesForModel(trace('NVIDIA GeForce RTX 4060 Ti', []));
  assert.equal(r.basis, 'catalogue');
  assert.equal(r.HtoD, +(15.8 * LINK_EFFICIENCY).toFixed(1));
  assert.match(r.source, /RTX 4060 Ti's PCIe 4\.0 x8 host link/);
  assert.equal(r.assumed, true);
});

test('copies at the link ceiling of an x8 card are not found slow', () => {
  // 64 MiB uploads at 13 GB/s: what PCIe 4.0 x8 gives, and under half of what an x16 link would
  const m = trace(
    'NVIDIA GeForce RTX 4060 Ti',
    Array.from({ length: 8 }, () => [64 * MiB, (64 * MiB) / 13] as [number, number]),
  );
  const r = analyzeModel(m, ratesForModel(m));
  assert.ok(!r.findings.some((f) => f.rule === 'low-bandwidth'), r.findings.map((f) => f.rule).join());
});

test("a device the catalogue does not know takes its ceiling from the trace's own fastest copies", () => {
  const m = trace('NVIDIA GeForce RTX 3070 Laptop GPU', [
    [64 * MiB, (64 * MiB) / 11.5],
    [64 * MiB, (64 * MiB) / 3],
    [16 * 1024, 20_000],
  ]);
  const r = ratesForModel(m);
  assert.equal(r.basis, 'trace');
  assert.equal(r.HtoD, 11.5);
  assert.equal(r.DtoH, null, 'no device-to-host copy: no figure, and none borrowed from another GPU');
  assert.match(r.source, /not in gpumem's catalogue \(a laptop GPU.*fastest host copies of 1 MiB or more/);
  const a = analyzeModel(m, r);
  const slow = a.findings.find((f) => f.rule === 'low-bandwidth');
  assert.ok(slow, 'the 3 GB/s copy is far below what this machine did');
  assert.equal(slow.count, 1);
  assert.match(slow.title, /fastest copies of this trace/);
});

test('a trace that names no device and has no sized copy has no rate, and claims no saving that needs one', () => {
  const m = trace(undefined, [[Number.NaN, 5000]]);
  const r = ratesForModel(m);
  assert.deepEqual([r.HtoD, r.DtoH], [null, null]);
  assert.match(r.source, /^none: the trace does not name its device/);
  const a = analyzeModel(m, r);
  for (const f of a.findings) assert.ok(Number.isFinite(f.estimatedSavingNs), f.rule);
});

test('copies faster than the assumed link raise the ceiling: no saving is priced below what the trace achieved', () => {
  const m = trace('NVIDIA A100-SXM4-80GB', [[256 * MiB, (256 * MiB) / 30]]);
  const r = ratesForModel(m);
  assert.equal(r.HtoD, 30);
  assert.match(r.source, /raised to the trace's own fastest copies \(HtoD to 30 GB\/s\)/);
});

test('pinned copies that never reach the assumed link rate lower it: no saving priced at a rate the machine did not show', () => {
  // a V100 behind a PCIe switch it shares: its large pinned uploads top out at 8.4 GB/s, not the 13.9 assumed
  const m = trace('Tesla V100-SXM2-16GB', [
    [56 * MiB, (56 * MiB) / 8.4],
    [56 * MiB, (56 * MiB) / 5.1],
  ]);
  const r = ratesForModel(m);
  assert.equal(r.HtoD, 8.4);
  assert.match(r.source, /lowered to the trace's own fastest pinned copies of 1 MiB or more \(HtoD 8\.4 GB\/s\)/);
  assert.ok(m.notes.some((n) => /the link may be shared/.test(n)));
  // 5.1 GB/s is not below half of what this machine showed: not a slow copy
  assert.ok(!analyzeModel(m, r).findings.some((f) => f.rule === 'low-bandwidth'));
});

test('a copy of unknown host memory kind is judged against the fastest copy of its direction the trace shows', () => {
  const unknown = (rates: number[]): TraceModel => {
    const m = new TraceModel();
    m.devices.set(0, 'AMD Instinct MI300X');
    rates.forEach((gbps, k) =>
      m.copies.push({
        start: k * ms,
        end: k * ms + (6 * MiB) / gbps,
        bytes: 6 * MiB,
        dir: Direction.DtoH,
        src: MemKind.device,
        dst: MemKind.unknown,
        stream: 0,
        device: 0,
        correlation: Number.NaN,
        hostAddr: Number.NaN,
        op: -1,
      }),
    );
    return m;
  };
  // one copy at 10 GB/s into memory that may be pageable: at its own ceiling, as far as the trace shows
  const one = unknown([10]);
  assert.ok(!analyzeModel(one, ratesForModel(one)).findings.some((f) => f.rule === 'low-bandwidth'));
  // beside a copy at 40 GB/s, one at 5 GB/s is slow
  const two = unknown([40, 5]);
  const f = analyzeModel(two, ratesForModel(two)).findings.find((x) => x.rule === 'low-bandwidth');
  assert.equal(f?.count, 1);
});

test('a bench measured on the host backend is refused as a source of copy rates, by the library and the CLI', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-rates-'));
  try {
    const bench = JSON.parse(readFileSync(fixture('bench/h200-bench.json'), 'utf8')) as { environment: { backend: string } };
    bench.environment.backend = 'host';
    const file = join(dir, 'host-bench.json');
    writeFileSync(file, JSON.stringify(bench));
    assert.throws(
      () => ratesFromBench(file),
      (e: unknown) => isGpuError(e, ErrorCode.BAD_INPUT) && /host backend \(no GPU\)/.test((e as Error).message),
    );
    const cli = await runCli(['analyze', fixture('traces/pytorch-cuda-tuned.pt.trace.json.gz'), '--from-bench', file]);
    assert.equal(cli.code, 2);
    assert.match(cli.err, /host backend/);
    assert.equal(cli.out, '', 'nothing half-done is printed');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
