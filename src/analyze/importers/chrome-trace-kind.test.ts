/**
 * Chrome traces of tools other than the PyTorch profiler: never taken for an empty Kineto trace. Those that hold
 * CUDA calls with byte counts (eBPF monitors, interposers) are read as those calls; the others are refused naming
 * what they are. The files are written by the test in each tool's shape; the shared traces are read in place.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { analyzeFiles } from '../analyze.js';
import { ErrorCode, isGpuError } from '../../errors.js';
import { runCli } from '../../testing/harness.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-chrome-'));
const file = (name: string, v: unknown): string => {
  const p = join(dir, name);
  writeFileSync(p, JSON.stringify(v));
  return p;
};
const refused = async (path: string, message: RegExp): Promise<void> => {
  await assert.rejects(analyzeFiles([path]), (e: Error) => isGpuError(e, ErrorCode.BAD_INPUT) && message.test(e.message), path);
  const r = await runCli(['analyze', path]);
  assert.equal(r.code, 2, `${path}: exit 2`);
  assert.match(r.err, message);
};

test('a Clang -ftime-trace profile is refused as what it is, exit 2', async () => {
  const events = ['Source', 'ParseClass', 'InstantiateFunction', 'Frontend', 'Backend', 'Total ExecuteCompiler'].map((name, i) => ({
    pid: 1,
    tid: 1,
    ph: 'X',
    ts: i * 100,
    dur: 50,
    name,
    args: { detail: 'x.cpp' },
  }));
  await refused(file('time-trace.json', { traceEvents: events, beginningOfTime: 1_700_000_000_000_000 }), /Clang -ftime-trace compilation profile/);
});

test('an NCCL profiler-plugin trace (an array of b/e events) is refused as what it is', async () => {
  const events = [
    { name: 'Group API', cat: 'GROUP_API', ph: 'b', id: 0, pid: 1, tid: 1, ts: 1.5, args: { groupDepth: 1 } },
    { name: 'AllReduce', cat: 'COLL', ph: 'b', id: 0, pid: 1, tid: 1, ts: 2.5, args: { count: 1048576, datatype: 'ncclFloat32' } },
    { name: 'AllReduce', cat: 'COLL', ph: 'e', id: 0, pid: 1, tid: 1, ts: 90.5 },
    { name: 'Group API', cat: 'GROUP_API', ph: 'e', id: 0, pid: 1, tid: 1, ts: 91 },
  ];
  await refused(file('nccl-profiler.json', events), /NCCL profiler-plugin trace/);
});

test("another tool's trace with a schemaVersion and kernel-like events is not read as an empty Kineto trace", async () => {
  const events = Array.from({ length: 20 }, (_, i) => ({ name: `matmul_kernel_${i % 3}`, cat: 'gpu', ph: 'X', ts: i * 10, dur: 5, pid: 1, tid: 1 }));
  await refused(
    file('other.json', { schemaVersion: 1, traceEvents: events, displayTimeUnit: 'ns' }),
    /a Chrome trace from a tool other than the PyTorch profiler: 20 events in categories gpu \(20\)/,
  );
});

test('a torch.autograd.profiler trace from before Kineto is refused, saying how to record one gpumem reads', async () => {
  const events = [
    { name: 'aten::mm', ph: 'X', ts: 10, dur: 30, tid: 1, pid: 'CPU functions', args: {} },
    { name: 'aten::mm', ph: 's', ts: 10, tid: 1, pid: 'CPU functions', id: 0, cat: 'cpu_to_cuda', args: {} },
    { name: 'aten::mm', ph: 'f', ts: 12, tid: 0, pid: 'CUDA functions', id: 0, cat: 'cpu_to_cuda', args: {} },
    { name: 'aten::mm', ph: 'X', ts: 12, dur: 25, tid: 0, pid: 'CUDA functions', args: {} },
  ];
  await refused(file('autograd.json', events), /before Kineto .*torch\.profiler\.profile/);
});

test("an eBPF monitor's trace of CUDA driver calls is read as those calls, its copies as totals with their byte counts", async () => {
  const events: object[] = [{ name: 'process_name', ph: 'M', pid: 42, args: { name: 'python' } }];
  let ts = 1000;
  const call = (name: string, dur: number, args: object = {}): void => {
    events.push({ name, cat: 'cuda', ph: 'X', ts, dur, pid: 42, tid: 42, args });
    ts += dur + 5;
  };
  call('cuMemAlloc_v2', 120, { size: 64 << 20 });
  for (let i = 0; i < 10; i++) {
    call('cuMemcpyHtoD_v2', 700, { size: 4 << 20 });
    call('cuLaunchKernel', 6);
    // begin / end pairs, the byte count on the begin
    events.push({ name: 'cuMemcpyDtoH_v2', cat: 'cuda', ph: 'B', ts, pid: 42, tid: 42, args: { bytes: 4096 } });
    events.push({ name: 'cuMemcpyDtoH_v2', cat: 'cuda', ph: 'E', ts: ts + 40, pid: 42, tid: 42 });
    ts += 50;
    call('cuStreamSynchronize', 300);
  }
  call('cuMemFree_v2', 80);
  const r = await analyzeFiles([file('ebpf.json', { traceEvents: events })]);
  const s = r.summary;
  assert.deepEqual(s.formats, ['chrome-trace']);
  const groups = Object.fromEntries(s.copies.groups.map((g) => [g.direction, [g.count, g.bytes]]));
  assert.deepEqual(groups, { HtoD: [10, 10 * (4 << 20)], DtoH: [10, 10 * 4096] });
  assert.equal(s.copies.bytes, 10 * (4 << 20) + 10 * 4096);
  assert.equal(s.kernels.count, 0, 'launch calls are not kernels');
  assert.equal(s.syncs.streamSync, 10);
  assert.equal(s.syncs.memcpySync, 20);
  assert.equal(s.allocations.mallocCalls, 1);
  assert.equal(s.allocations.freeCalls, 1);
  assert.ok(
    s.notes.some((n) => /a Chrome trace of another tool .* read as its 42 CUDA \/ HIP calls/.test(n)),
    s.notes.join('; '),
  );
  // no rule judges copies the trace did not time on the GPU
  const reason = s.notApplicable.find((n) => n.rule === 'small-copies')?.reason ?? '';
  assert.match(reason, /copies only as totals of the calls/);
  for (const f of r.findings) assert.ok(!['small-copies', 'pageable-copy', 'low-bandwidth', 'exposed-copy', 'gpu-idle-on-memory'].includes(f.rule), f.rule);
});

const ROOT = ['../../../../shared/traces/', '../../../../../shared/traces/'].map((p) => new URL(p, import.meta.url).pathname).find(existsSync);
test('shared traces: a generic Chrome trace of request spans is refused; Kineto traces without GPU events still read', {
  skip: ROOT ? false : '../shared/traces is absent',
}, async () => {
  // python json: 2000 events, cat resnet50, ph b/e, no traceEvents object
  await refused(`${ROOT}ml-serving-system-building/chrome_trace.json`, /tool other than the PyTorch profiler: 2000 events in categories resnet50 \(2000\)/);
  for (const f of ['HolisticTraceAnalysis/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz', 'kernelforge/chrome_trace.json']) {
    const r = await analyzeFiles([`${ROOT}${f}`]);
    assert.deepEqual(r.summary.formats, ['kineto'], f);
  }
});
