#!/usr/bin/env node
/**
 * Derives the analyze fixtures for formats no GPU here could record, from the real naive PyTorch trace recorded on
 * the H200 (fixtures/traces/pytorch-cuda-naive.pt.trace.json.gz): the same copies, kernels and runtime calls written
 * in the Nsight Systems SQLite export schema, in rocprofv3's CSV and JSON layouts, and as legacy rocprof statistics.
 * They test the importers on realistic event streams; they are synthesized, not recorded by those tools.
 * Run: node tools/make-analyze-fixtures.mjs
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { gunzipSync, gzipSync } from 'node:zlib';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Database: WasmDatabase } = require('node-sqlite3-wasm');
/** The few calls this script makes, over node-sqlite3-wasm (gpumem's SQLite binding), in better-sqlite3's shape. */
class Database {
  constructor(file) {
    this.db = new WasmDatabase(file);
  }
  exec(sql) {
    this.db.exec(sql);
  }
  prepare(sql) {
    const s = this.db.prepare(sql);
    return { run: (...values) => s.run(values) };
  }
  transaction(body) {
    return () => {
      this.db.exec('BEGIN');
      body();
      this.db.exec('COMMIT');
    };
  }
  close() {
    this.db.close();
  }
}
const root = new URL('../fixtures/', import.meta.url);
const trace = JSON.parse(gunzipSync(readFileSync(new URL('traces/pytorch-cuda-naive.pt.trace.json.gz', root))).toString());
const ev = trace.traceEvents.filter((e) => e.ph === 'X' && ['gpu_memcpy', 'gpu_memset', 'kernel', 'cuda_runtime', 'cuda_driver'].includes(e.cat));
const t0 = Math.min(...ev.map((e) => e.ts));
// nanoseconds on a boot-time clock like rocprofv3's, from the trace's microseconds
const BOOT = 2414192684609085n;
const ns = (us) => BOOT + BigInt(Math.round((us - t0) * 1000));
const copies = ev.filter((e) => e.cat === 'gpu_memcpy');
const kernels = ev.filter((e) => e.cat === 'kernel');
const memsets = ev.filter((e) => e.cat === 'gpu_memset');
const runtime = ev.filter((e) => e.cat === 'cuda_runtime' || e.cat === 'cuda_driver');
const kindOf = (name) => /\((\w+) -> (\w+)\)/.exec(name).slice(1);
// Nsight's numbering of memory kinds (ENUM_CUDA_MEM_KIND), as its exports write them.
const NSYS_MEM = { Pageable: 0, Pinned: 1, Device: 2 };

// --- Nsight Systems SQLite export schema (tables and columns as nsys export writes them) ---
const sqlite = new URL('traces/nsys-naive.sqlite', root);
rmSync(sqlite, { force: true });
const db = new Database(sqlite.pathname);
db.exec(`
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE TARGET_INFO_GPU (id INTEGER NOT NULL, name TEXT NOT NULL, busLocation TEXT, totalMemory INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
`);
const strings = new Map();
const sid = (s) => {
  if (!strings.has(s)) strings.set(s, strings.size + 1);
  return strings.get(s);
};
const rel = (us) => BigInt(Math.round((us - t0) * 1000));
db.prepare('INSERT INTO TARGET_INFO_GPU VALUES (0, ?, ?, ?)').run('NVIDIA H200', '0000:18:00.0', 150109880320);
const COPY = { HtoD: 1, DtoH: 2, DtoD: 8 };
const insCopy = db.prepare(
  'INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, globalPid, bytes, copyKind, srcKind, dstKind, migrationCause) VALUES (?,?,?,?,?,?,?,?,?,?,?,0)',
);
const insSet = db.prepare(
  'INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, correlationId, globalPid, value, bytes, memKind) VALUES (?,?,?,?,?,?,?,0,?,2)',
);
const insK = db.prepare(
  'INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, globalPid, demangledName, shortName) VALUES (?,?,?,?,?,?,?,?,?)',
);
const insR = db.prepare(
  'INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, returnValue) VALUES (?,?,0,?,?,?,0)',
);
db.transaction(() => {
  for (const e of copies) {
    const [s, d] = kindOf(e.name);
    insCopy.run(rel(e.ts), rel(e.ts + e.dur), 0, 1, e.args.stream, e.args.correlation, 683, e.args.bytes, COPY[e.name.slice(7, 11)], NSYS_MEM[s], NSYS_MEM[d]);
  }
  for (const e of memsets) insSet.run(rel(e.ts), rel(e.ts + e.dur), 0, 1, e.args.stream, e.args.correlation, 683, e.args.bytes);
  for (const e of kernels) insK.run(rel(e.ts), rel(e.ts + e.dur), 0, 1, e.args.stream, e.args.correlation, 683, sid(e.name), sid(e.name.slice(0, 60)));
  for (const e of runtime) insR.run(rel(e.ts), rel(e.ts + e.dur), e.tid, e.args.correlation, sid(`${e.name}_v3020`.replace(/^cu(?!da).*_v3020$/, e.name)));
  const insS = db.prepare('INSERT INTO StringIds VALUES (?, ?)');
  for (const [s, id] of strings) insS.run(id, s);
})();
db.close();

// --- rocprofv3 CSV (columns as documented by rocprofiler-sdk): HIP names for the CUDA calls ---
const hipName = (n) =>
  n
    .replace(/^cudaLaunchKernelExC$/, 'hipExtLaunchKernel')
    .replace(/^cuLaunchKernel$/, 'hipModuleLaunchKernel')
    .replace(/^cuda/, 'hip')
    .replace('hipStreamIsCapturing', 'hipStreamIsCapturing');
const dir = new URL('traces/rocprofv3-naive/', root);
rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
const q = (s) => `"${String(s).replace(/"/g, '""')}"`;
const DIR = { HtoD: 'MEMORY_COPY_HOST_TO_DEVICE', DtoH: 'MEMORY_COPY_DEVICE_TO_HOST', DtoD: 'MEMORY_COPY_DEVICE_TO_DEVICE' };
writeFileSync(
  new URL('683_agent_info.csv', dir),
  [
    '"Node_Id","Logical_Node_Id","Agent_Type","Cpu_Cores_Count","Simd_Count","Name","Vendor_Name","Product_Name"',
    '0,0,"CPU",64,0,"AMD EPYC 9534","CPU","AMD EPYC 9534"',
    '1,1,"GPU",0,1216,"gfx942","AMD","AMD Instinct MI300X"',
    '',
  ].join('\n'),
);
writeFileSync(
  new URL('683_memory_copy_trace.csv', dir),
  [
    '"Kind","Direction","Stream_Id","Source_Agent_Id","Destination_Agent_Id","Correlation_Id","Start_Timestamp","End_Timestamp"',
    ...copies.map((e) => {
      const d = e.name.slice(7, 11);
      return [
        q('MEMORY_COPY'),
        q(DIR[d]),
        e.args.stream === 7 ? 1 : 2,
        d === 'HtoD' ? 0 : 1,
        d === 'HtoD' ? 1 : 0,
        e.args.correlation,
        ns(e.ts),
        ns(e.ts + e.dur),
      ].join(',');
    }),
    '',
  ].join('\n'),
);
writeFileSync(
  new URL('683_kernel_trace.csv', dir),
  [
    '"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp","Private_Segment_Size","Group_Segment_Size","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"',
    ...kernels.map((e, i) =>
      [q('KERNEL_DISPATCH'), 1, 1, 1, 708, i + 1, i + 1, q(e.name), e.args.correlation, ns(e.ts), ns(e.ts + e.dur), 0, 0, ...e.args.block, ...e.args.grid].join(
        ',',
      ),
    ),
    '',
  ].join('\n'),
);
writeFileSync(
  new URL('683_hip_api_trace.csv', dir),
  [
    '"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"',
    ...runtime.map((e) => [q('HIP_RUNTIME_API'), q(hipName(e.name)), 683, e.tid, e.args.correlation, ns(e.ts), ns(e.ts + e.dur)].join(',')),
    '',
  ].join('\n'),
);

// --- rocprofv3 JSON: the same copies with sizes and host addresses, plus the pinned allocation the .item() reads land in ---
const PINNED = 0x7f3a00000000;
const PAGEABLE = 0x55d0c0000000;
const agents = [
  { id: { handle: 11 }, type: 1, name: 'AMD EPYC 9534', logical_node_id: 0 },
  { id: { handle: 22 }, type: 2, name: 'gfx942', product_name: 'AMD Instinct MI300X', logical_node_id: 1 },
];
const strs = {
  buffer_records: [
    {
      kind: 'MEMORY_COPY',
      operations: ['MEMORY_COPY_NONE', 'MEMORY_COPY_HOST_TO_HOST', 'MEMORY_COPY_HOST_TO_DEVICE', 'MEMORY_COPY_DEVICE_TO_HOST', 'MEMORY_COPY_DEVICE_TO_DEVICE'],
    },
    { kind: 'KERNEL_DISPATCH', operations: ['KERNEL_DISPATCH_NONE', 'KERNEL_DISPATCH_ENQUEUE', 'KERNEL_DISPATCH_COMPLETE'] },
    { kind: 'HIP_RUNTIME_API', operations: [...new Set(runtime.map((e) => hipName(e.name)))] },
    {
      kind: 'MEMORY_ALLOCATION',
      operations: [
        'MEMORY_ALLOCATION_NONE',
        'MEMORY_ALLOCATION_ALLOCATE',
        'MEMORY_ALLOCATION_VMEM_ALLOCATE',
        'MEMORY_ALLOCATION_FREE',
        'MEMORY_ALLOCATION_VMEM_FREE',
      ],
    },
  ],
};
const n = (us) => Number(ns(us));
let pageableAt = PAGEABLE;
const tool = {
  metadata: { pid: 683, note: 'synthesized by gpumem tools/make-analyze-fixtures.mjs from a PyTorch trace recorded on an H200' },
  agents,
  strings: strs,
  kernel_symbols: kernels.map((e, i) => ({ kernel_id: i + 1, formatted_kernel_name: e.name })),
  buffer_records: {
    memory_allocation: [
      {
        kind: 3,
        operation: 1,
        agent_id: { handle: 11 },
        allocation_size: 2 * 1024 * 1024,
        address: { handle: PINNED },
        correlation_id: { internal: 1, external: 0 },
        start_timestamp: n(copies[0].ts) - 50000,
        end_timestamp: n(copies[0].ts) - 40000,
        thread_id: 683,
      },
    ],
    memory_copy: copies.map((e, i) => {
      const d = e.name.slice(7, 11);
      const [, dstKind] = kindOf(e.name);
      const host = dstKind === 'Pinned' ? PINNED + 64 * (i % 1024) : (pageableAt += 4096);
      return {
        kind: 0,
        operation: d === 'HtoD' ? 2 : 3,
        src_agent_id: { handle: d === 'HtoD' ? 11 : 22 },
        dst_agent_id: { handle: d === 'HtoD' ? 22 : 11 },
        bytes: e.args.bytes,
        src_address: { handle: d === 'HtoD' ? host : 0x7e0000000000 },
        dst_address: { handle: d === 'HtoD' ? 0x7e0000000000 : host },
        stream_id: { handle: e.args.stream === 7 ? 1 : 2 },
        correlation_id: { internal: e.args.correlation, external: 0 },
        start_timestamp: n(e.ts),
        end_timestamp: n(e.ts + e.dur),
        thread_id: 683,
      };
    }),
    kernel_dispatch: kernels.map((e, i) => ({
      kind: 1,
      operation: 2,
      dispatch_info: { kernel_id: i + 1, queue_id: { handle: 1 }, agent_id: { handle: 22 } },
      stream_id: { handle: 1 },
      correlation_id: { internal: e.args.correlation, external: 0 },
      start_timestamp: n(e.ts),
      end_timestamp: n(e.ts + e.dur),
      thread_id: 708,
    })),
    hip_api: runtime.map((e) => ({
      kind: 2,
      operation: strs.buffer_records[2].operations.indexOf(hipName(e.name)),
      correlation_id: { internal: e.args.correlation, external: 0 },
      start_timestamp: n(e.ts),
      end_timestamp: n(e.ts + e.dur),
      thread_id: e.tid,
    })),
  },
};
writeFileSync(new URL('traces/rocprofv3-naive.json.gz', root), gzipSync(JSON.stringify({ 'rocprofiler-sdk-tool': [tool] }), { level: 9 }));

// --- legacy rocprof statistics (Name, Calls, TotalDurationNs, AverageNs, Percentage) ---
const stats = (rows) => {
  const total = rows.reduce((s, r) => s + r[2], 0);
  return [
    '"Name","Calls","TotalDurationNs","AverageNs","Percentage"',
    ...rows.map(([name, calls, t]) => [q(name), calls, t, Math.round(t / calls), ((100 * t) / total).toFixed(6)].join(',')),
    '',
  ].join('\n');
};
const agg = (list, key) => {
  const m = new Map();
  for (const e of list) {
    const k = key(e);
    const v = m.get(k) ?? [k, 0, 0];
    v[1]++;
    v[2] += Math.round(e.dur * 1000);
    m.set(k, v);
  }
  return [...m.values()].sort((a, b) => b[2] - a[2]);
};
writeFileSync(
  new URL('traces/rocprof-naive.copy_stats.csv', root),
  stats(agg(copies, (e) => (e.name.slice(7, 11) === 'HtoD' ? 'CopyHostToDevice' : 'CopyDeviceToHost'))),
);
writeFileSync(new URL('traces/rocprof-naive.hip_stats.csv', root), stats(agg(runtime, (e) => hipName(e.name))));
console.log(
  `wrote nsys-naive.sqlite, rocprofv3-naive/ (4 CSV), rocprofv3-naive.json.gz, rocprof-naive.{copy,hip}_stats.csv from ${copies.length} copies, ${kernels.length} kernels, ${runtime.length} runtime calls`,
);
