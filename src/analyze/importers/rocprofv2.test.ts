/**
 * rocprofv2's CSV, written here from the naive PyTorch run in the layout of rocprofiler's file plugin
 * (plugin/file/file.cpp: the headers it writes, the blank line after them, quoted names, a launch's kernel name as an
 * extra cell of hip_api_trace, hcc_ops_trace's Operation by HIP's command names). Read as rocprofv2, with the run's
 * counts, its kernels counted once though results_PID.csv records them again.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { naiveRun, type Run } from '../../testing/trace-fixtures.js';
import { analyzeFiles, detectTraceFormat } from '../analyze.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-rocprofv2-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));
const run = naiveRun();
const COPY = { HtoD: 'CopyHostToDevice', DtoH: 'CopyDeviceToHost', DtoD: 'CopyDeviceToDevice', '': 'CopyDeviceToDevice' } as const;

/** The run's files as rocprofv2 --hip-trace --kernel-trace writes them into OUTPUT_PATH, for process 4242. */
function writeRocprofV2(folder: string, r: Run): { api: string; ops: string; results: string } {
  mkdirSync(folder, { recursive: true });
  const q = (s: string): string => `"${s.replace(/"/g, "'")}"`;
  const kernelOf = new Map(r.kernels.map((k) => [k.correlation, k.name]));
  const api = ['Domain,Function,Start_Timestamp,End_Timestamp,Correlation_ID', ''];
  for (const e of r.runtime) {
    const kernel = /Launch/.test(e.name) ? kernelOf.get(e.correlation) : undefined;
    api.push(`HIP_API_DOMAIN,${q(e.name)}${kernel ? `,${q(kernel)}` : ''},${e.start},${e.end},${e.correlation}`);
  }
  const ops = ['Domain,Operation,Kernel_Name,Start_Timestamp,Stop_Timestamp,Correlation_ID', ''];
  for (const e of r.copies) ops.push(`HIP_OPS_DOMAIN,${q(COPY[e.dir])},,${e.start},${e.end},${e.correlation}`);
  for (const e of r.memsets) ops.push(`HIP_OPS_DOMAIN,"FillBuffer",,${e.start},${e.end},${e.correlation}`);
  for (const e of r.kernels) ops.push(`HIP_OPS_DOMAIN,"KernelExecution",${q(e.name)},${e.start},${e.end},${e.correlation}`);
  const at = r.kernels[0]!.end;
  ops.push(`HIP_OPS_DOMAIN,"Unknown command type",,${at},${at},0`, `HIP_OPS_DOMAIN,"Marker",,${at},${at},0`);
  const results = [
    'Dispatch_ID,GPU_ID,Queue_ID,PID,TID,Grid_Size,Workgroup_Size,LDS_Per_Workgroup,Scratch_Per_Workitem,Arch_VGPR,Accum_VGPR,SGPR,Wave_Size,Kernel_Name,Start_Timestamp,End_Timestamp,Correlation_ID',
  ];
  r.kernels.forEach((e, i) => results.push(`${i},2,0,4242,4242,1024,256,0,0,16,0,32,64,${q(e.name)},${e.start},${e.end},${e.correlation}`));
  const files = { api: join(folder, 'hip_api_trace_4242.csv'), ops: join(folder, 'hcc_ops_trace_4242.csv'), results: join(folder, 'results_4242.csv') };
  writeFileSync(files.api, `${api.join('\n')}\n`);
  writeFileSync(files.ops, `${ops.join('\n')}\n`);
  writeFileSync(files.results, `${results.join('\n')}\n`);
  return files;
}

test("rocprofv2's file-plugin CSV is read as rocprofv2 with the run's counts, kernels once", async () => {
  const files = writeRocprofV2(join(dir, 'run'), run);
  for (const f of Object.values(files)) assert.equal(detectTraceFormat(f), 'rocprof-csv');
  const r = await analyzeFiles([join(dir, 'run')]);
  const s = r.summary;
  assert.deepEqual(s.formats, ['rocprofv2-csv']);
  assert.equal(s.kernels.count, run.kernels.length, 'hcc_ops_trace and results_PID.csv record the same kernels: counted once');
  assert.ok(s.notes.some((n) => n.includes('results_4242.csv') && /same kernels/.test(n)));
  const byDir = Object.fromEntries(s.copies.groups.map((g) => [g.direction, g.count]));
  assert.deepEqual(byDir, { HtoD: 1216, DtoH: 6 });
  assert.equal(s.memsets.count, run.memsets.length);
  // HIP calls, a launch's row with its kernel's name in a cell of its own
  assert.equal(s.syncs.streamSync, run.runtime.filter((e) => e.name === 'hipStreamSynchronize').length);
  assert.equal(s.syncs.deviceSync, run.runtime.filter((e) => e.name === 'hipDeviceSynchronize').length);
  assert.ok(s.notes.some((n) => /1 "Unknown command type"/.test(n)));
  assert.ok(s.notes.some((n) => /rocprofv2 records copies without their sizes/.test(n)));
});

test('rocprofv2 results_PID.csv alone gives the kernels; its HIP API file alone the calls', async () => {
  const files = writeRocprofV2(join(dir, 'alone'), run);
  const k = (await analyzeFiles([files.results])).summary;
  assert.deepEqual(k.formats, ['rocprofv2-csv']);
  assert.equal(k.kernels.count, run.kernels.length);
  const a = (await analyzeFiles([files.api])).summary;
  assert.equal(a.kernels.count, 0, 'no HIP call is a kernel');
  assert.equal(a.syncs.streamSync, run.runtime.filter((e) => e.name === 'hipStreamSynchronize').length);
});
