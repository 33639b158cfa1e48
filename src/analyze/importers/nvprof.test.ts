/**
 * nvprof's outputs: the CSV log (--print-gpu-trace, --print-api-trace, the summary) and its SQLite database
 * (.nvvp / .nvprof). The files are written by the test in nvprof's layouts as the logs and databases other
 * projects committed show them (a units line under each header, sizes in KB of 1024, devices "Name (0)"; the
 * database's StringTable, `_id_` keys, CUPTI's own enumerations and callback ids); nothing here was recorded.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { analyzeFiles } from '../analyze.js';
import { ErrorCode, isGpuError } from '../../errors.js';
import { openSqlite } from '../../input/sqlite.js';
import { runCli } from '../../testing/harness.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-nvprof-'));
const file = (name: string, text: string): string => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};
const groups = (r: Awaited<ReturnType<typeof analyzeFiles>>) =>
  Object.fromEntries(r.summary.copies.groups.map((g) => [`${g.direction}/${g.hostKind}`, [g.count, g.bytes]]));

const OLD_HEADER =
  '"Start","Duration","Grid X","Grid Y","Grid Z","Block X","Block Y","Block Z","Registers Per Thread","Static SMem","Dynamic SMem","Size","Throughput","Device","Context","Stream","Name"';

test('nvprof CSV: a GPU trace of CUDA 8 (no memory types), times in ms and sizes in KB of 1024', async () => {
  const rows = [
    '584.620743,1.028854,,,,,,,,,,400.000000,379.670001,"GeForce GTX 1080 Ti (0)","1","7","[CUDA memcpy HtoD]"',
    '585.737919,2.053933,,,,,,,,,,800.000000,380.367811,"GeForce GTX 1080 Ti (0)","1","7","[CUDA memcpy HtoD]"',
    ...Array.from(
      { length: 10 },
      (_, i) =>
        `${(587.79694 + i * 0.1).toFixed(6)},0.077602,20,10,1,32,32,1,27,8.000000,0,,,"GeForce GTX 1080 Ti (0)","1","7","void matrixMulCUDA<int=32>(float*, float*, float*, int, int) [${1073 + i}]"`,
    ),
    '600.000000,1.937000,,,,,,,,,,800.000000,403.000000,"GeForce GTX 1080 Ti (0)","1","7","[CUDA memcpy DtoH]"',
  ];
  const log = [
    '==12400== NVPROF is profiling process 12400, command: ./matrixMul',
    '==12400== Profiling application: ./matrixMul',
    '==12400== Profiling result:',
    OLD_HEADER,
    'ms,ms,,,,,,,,KB,B,KB,MB/s,,,,',
    ...rows,
    '',
  ].join('\n');
  const r = await analyzeFiles([file('matrixMul_trace.csv', log)]);
  assert.deepEqual(r.summary.formats, ['nvprof-csv']);
  assert.deepEqual(r.summary.devices, [{ id: 0, name: 'GeForce GTX 1080 Ti' }]);
  assert.equal(r.summary.kernels.count, 10);
  assert.deepEqual(
    r.summary.kernels.top.map((k) => [k.name, k.count]),
    [['void matrixMulCUDA<int=32>(float*, float*, float*, int, int)', 10]],
  );
  assert.deepEqual(groups(r), { 'HtoD/unknown': [2, 1200 * 1024], 'DtoH/unknown': [1, 800 * 1024] });
  assert.equal(r.summary.kernels.timeNs, 10 * 77_602);
});

test('nvprof CSV: memory types, correlation ids, memsets, unified memory and the API trace of the same log', async () => {
  const gpu = [
    '======== Profiling result:',
    '"Start","Duration","Grid X","Grid Y","Grid Z","Block X","Block Y","Block Z","Registers Per Thread","Static SMem","Dynamic SMem","Size","Throughput","SrcMemType","DstMemType","Device","Context","Stream","Name","Correlation_ID"',
    'us,us,,,,,,,,KB,KB,KB,GB/s,,,,,,,',
    '0.000000,1.888000,,,,,,,,,,1.003906,0.507097,"Device",,"GeForce RTX 2080 Ti (0)","1","7","[CUDA memset]",272',
    ...Array.from(
      { length: 70 },
      (_, i) =>
        `${100 + i * 10}.000000,1.536000,,,,,,,,,,0.125000,0.077610,"Pinned","Device","GeForce RTX 2080 Ti (0)","1","22","[CUDA memcpy HtoD]",${316 + i}`,
    ),
    '2000.000000,400.000000,,,,,,,,,,4096.000000,10.0,"Pageable","Device","GeForce RTX 2080 Ti (0)","1","7","[CUDA memcpy HtoD]",400',
    '3000.000000,300.000000,,,,,,,,,,4096.000000,13.0,"Device","Pageable","GeForce RTX 2080 Ti (0)","1","7","[CUDA memcpy DtoH]",401',
    '3500.000000,20.000000,,,,,,,,,,64.000000,3.0,,,"GeForce RTX 2080 Ti (0)","1","7","[Unified Memory Memcpy HtoD]",',
    '4000.000000,50.000000,80,1,1,256,1,1,32,0.000000,0.000000,,,,,"GeForce RTX 2080 Ti (0)","1","7","add(int, float*, float*) [402]",402',
  ];
  const api = [
    '======== API calls:',
    '"Start","Duration","Name","Correlation_ID"',
    'us,us,,',
    '0.000000,2.866000,"cuDeviceGetPCIBusId",1',
    '50.000000,12.000000,"cudaMalloc",2',
    '1990.000000,420.000000,"cudaMemcpy",400',
    '2990.000000,320.000000,"cudaMemcpy",401',
    '3990.000000,5.000000,"cudaLaunchKernel",402',
    '4010.000000,45.000000,"cudaDeviceSynchronize",403',
  ];
  const r = await analyzeFiles([file('gpu_api_trace.csv', [...gpu, ...api, ''].join('\n'))]);
  assert.deepEqual(groups(r), { 'HtoD/pinned': [70, 70 * 128], 'HtoD/pageable': [1, 4 << 20], 'DtoH/pageable': [1, 4 << 20] });
  assert.equal(r.summary.memsets.count, 1);
  assert.equal(r.summary.kernels.count, 1);
  assert.deepEqual(
    r.summary.migrations.map((g) => [g.direction, g.count, g.bytes]),
    [['HtoD', 1, 65536]],
  );
  assert.equal(r.summary.syncs.memcpySync, 2);
  assert.equal(r.summary.syncs.deviceSync, 1);
  assert.equal(r.summary.allocations.mallocCalls, 1);
  // 0.125 KB is 128 bytes: 70 small pinned uploads in one burst
  const small = r.findings.find((f) => f.rule === 'small-copies');
  assert.equal(small?.count, 70);
  assert.equal(small?.bytes, 70 * 128);
});

test('nvprof CSV: the summary is read as totals per name, and the rules that need a timeline say so', async () => {
  const log = [
    '==3440639== NVPROF is profiling process 3440639, command: ./stream --mode=gpu',
    '==3440639== Profiling result:',
    '"Type","Time(%)","Time","Calls","Avg","Min","Max","Name"',
    ',%,s,,us,us,ms,',
    '"GPU activities",56.176750,1.285081,13672,93.993000,86.845000,0.103325,"hysteresis_kernel(ImageView<bool>, ImageView<bool>, int, int, bool*)"',
    '"GPU activities",15.111322,0.345682,14476,23.879000,0.800000,1.496855,"[CUDA memcpy DtoH]"',
    '"GPU activities",11.102986,0.253988,268,947.717000,771.947000,1.405177,"[CUDA memcpy HtoD]"',
    '"GPU activities",0.5,0.011,268,40.0,38.0,50.0,"[CUDA memset]"',
    '"API calls",60.0,2.100000,14744,142.0,3.0,9000.0,"cudaMemcpy"',
    '"API calls",30.0,0.500000,3,166666.0,1.0,499000.0,"cudaMalloc"',
    '',
  ].join('\n');
  const r = await analyzeFiles([file('summary.csv', log)]);
  const s = r.summary;
  assert.equal(s.kernels.count, 13672);
  assert.deepEqual(groups(r), { 'DtoH/unknown': [14476, null], 'HtoD/unknown': [268, null] });
  assert.equal(s.syncs.memcpySync, 14744);
  assert.equal(s.allocations.mallocCalls, 3);
  assert.ok(s.notApplicable.some((n) => n.rule === 'small-copies' && /aggregate statistics/.test(n.reason)));
});

test('nvprof text output and metric tables are refused, naming what to record instead (exit 2)', async () => {
  const text = file(
    'nvprof.log',
    [
      '==32541== NVPROF is profiling process 32541, command: ./a.out',
      '==32541== Profiling application: ./a.out',
      '==32541== Profiling result:',
      '            Type  Time(%)      Time     Calls       Avg       Min       Max  Name',
      ' GPU activities:   58.96%  12.6353s     44000  287.17us  1.2800us  2.7722ms  [CUDA memcpy HtoD]',
      '',
    ].join('\n'),
  );
  await assert.rejects(analyzeFiles([text]), (e: Error) => isGpuError(e, ErrorCode.BAD_INPUT) && /nvprof's text output .*--csv/.test(e.message));
  const metrics = file(
    'metrics.csv',
    [
      '==9701== Metric result:',
      '"Device","Kernel","Invocations","Metric Name","Metric Description","Min","Max","Avg"',
      '"GeForce GTX 1070 (0)","k(int)",1,"achieved_occupancy","Achieved Occupancy",0.75,0.75,0.75',
      '',
    ].join('\n'),
  );
  await assert.rejects(analyzeFiles([metrics]), /metrics or events/);
  assert.equal((await runCli(['analyze', metrics])).code, 2);
});

/** An nvprof database in nvprof's layout: StringTable, `_id_` keys, CUPTI's enumerations and callback ids. */
function nvvp(name: string, fill: boolean): string {
  const p = join(dir, name);
  const db = openSqlite(p, { write: true });
  db.exec('CREATE TABLE StringTable( _id_ INTEGER PRIMARY KEY AUTOINCREMENT, value TEXT NOT NULL UNIQUE )');
  db.exec('CREATE TABLE Version( version INTEGER)');
  db.exec(
    'CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(_id_ INTEGER PRIMARY KEY AUTOINCREMENT, copyKind INT NOT NULL, srcKind INT NOT NULL, dstKind INT NOT NULL, flags INT NOT NULL, bytes INT NOT NULL, start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL, contextId INT NOT NULL, streamId INT NOT NULL, correlationId INT NOT NULL, runtimeCorrelationId INT NOT NULL)',
  );
  db.exec(
    'CREATE TABLE CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL(_id_ INTEGER PRIMARY KEY AUTOINCREMENT, start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL, contextId INT NOT NULL, streamId INT NOT NULL, correlationId INT NOT NULL, name INT NOT NULL)',
  );
  db.exec(
    'CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(_id_ INTEGER PRIMARY KEY AUTOINCREMENT, cbid INT NOT NULL, start INT NOT NULL, end INT NOT NULL, processId INT NOT NULL, threadId INT NOT NULL, correlationId INT NOT NULL, returnValue INT NOT NULL)',
  );
  db.exec('CREATE TABLE CUPTI_ACTIVITY_KIND_DEVICE(_id_ INTEGER PRIMARY KEY AUTOINCREMENT, globalMemorySize INT NOT NULL, id INT NOT NULL, name INT NOT NULL)');
  db.exec(
    'CREATE TABLE CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER(_id_ INTEGER PRIMARY KEY AUTOINCREMENT, counterKind INT NOT NULL, value INT NOT NULL, start INT NOT NULL, end INT NOT NULL, address INT NOT NULL, srcId INT NOT NULL, dstId INT NOT NULL, streamId INT NOT NULL, processId INT NOT NULL, flags INT NOT NULL)',
  );
  db.run("INSERT INTO StringTable VALUES (0, '-- null --'), (1, 'TITAN X (Pascal)'), (2, '_Z6kernelPf')");
  if (fill) {
    const t0 = 1598853242313668392n;
    db.run('INSERT INTO CUPTI_ACTIVITY_KIND_DEVICE VALUES (1, 12788498432, 0, 1)');
    // CUPTI's numbering: copy kind 1 HtoD, 2 DtoH; memory kind 1 pageable, 2 pinned, 3 device
    for (let i = 0n; i < 5n; i++) {
      db.run(
        'INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (NULL, 1, 1, 3, 0, 1048576, ?, ?, 0, 1, 7, ?, 0)',
        t0 + i * 1000000n,
        t0 + i * 1000000n + 100000n,
        10n + i,
      );
      db.run('INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (NULL, 31, ?, ?, 1, 1, ?, 0)', t0 + i * 1000000n - 1000n, t0 + i * 1000000n + 101000n, 10n + i);
    }
    db.run('INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (NULL, 2, 3, 2, 0, 4096, ?, ?, 0, 1, 7, 30, 0)', t0 + 9000000n, t0 + 9002000n);
    db.run('INSERT INTO CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL VALUES (NULL, ?, ?, 0, 1, 7, 20, 2)', t0 + 6000000n, t0 + 8000000n);
    db.run('INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (NULL, 211, ?, ?, 1, 1, 20, 0)', t0 + 5900000n, t0 + 5905000n);
    db.run('INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (NULL, 20, ?, ?, 1, 1, 1, 0)', t0 - 5000000n, t0 - 4000000n);
    db.run('INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (NULL, 165, ?, ?, 1, 1, 21, 0)', t0 + 8000000n, t0 + 8001000n);
    // unified memory: a user prefetch of 2 MiB HtoD, and a GPU page-fault group
    db.run('INSERT INTO CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER VALUES (NULL, 1, 2097152, ?, ?, 0, 0, 1, 7, 1, 1)', t0 + 5000000n, t0 + 5200000n);
    db.run('INSERT INTO CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER VALUES (NULL, 4, 1, ?, ?, 140000000000, 0, 1, 7, 1, 1)', t0 + 6100000n, t0 + 6150000n);
  }
  db.close();
  return p;
}

test("nvvp: nvprof's database is read with CUPTI's own enumerations and callback ids, not Nsight Systems'", async () => {
  const r = await analyzeFiles([nvvp('prof.nvvp', true)]);
  const s = r.summary;
  assert.deepEqual(s.formats, ['nvvp']);
  assert.deepEqual(s.devices, [{ id: 0, name: 'TITAN X (Pascal)' }]);
  // memory kind 1 is pageable in CUPTI's numbering (pinned in Nsight's): the uploads are pageable
  assert.deepEqual(groups(r), { 'HtoD/pageable': [5, 5 << 20], 'DtoH/pinned': [1, 4096] });
  assert.equal(s.kernels.count, 1);
  assert.deepEqual(
    s.kernels.top.map((k) => k.name),
    ['_Z6kernelPf'],
  );
  assert.equal(s.syncs.memcpySync, 5, 'cbid 31 is cudaMemcpy');
  assert.equal(s.syncs.deviceSync, 1, 'cbid 165 is cudaDeviceSynchronize');
  assert.equal(s.allocations.mallocCalls, 1, 'cbid 20 is cudaMalloc');
  assert.deepEqual(
    s.migrations.map((g) => [g.cause, g.direction, g.count, g.bytes]),
    [['user prefetch', 'HtoD', 1, 2097152]],
  );
  assert.deepEqual(s.faults, { gpu: 1, cpu: 0 });
});

test('nvvp: a database with no timeline, and a Visual Profiler session file, are refused as what they are', async () => {
  await assert.rejects(analyzeFiles([nvvp('empty.nvvp', false)]), /an nvprof database with no timeline/);
  const session = file(
    'session.nvvp',
    '<?xml version="1.0"?>\n<session version="2" name="profile.nvvp" hscale="1.0E-6" normalize="false">\n<timelineoptions enabletimerange="false"/>\n</session>\n',
  );
  await assert.rejects(analyzeFiles([session]), /Visual Profiler session file/);
  assert.equal((await runCli(['analyze', session])).code, 2);
});
