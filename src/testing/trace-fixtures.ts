/**
 * Trace files written by the tests in formats no machine here can record, from the naive PyTorch run recorded on an
 * H200 (fixtures/traces/pytorch-cuda-naive.pt.trace.json.gz): rocprofv3's rocpd database, in both table layouts it
 * has had (timestamps on the rows, or in a table of their own), built from CREATE TABLE and CREATE VIEW statements
 * written here after rocprofiler-sdk's documented columns; and legacy rocprof's results.json and --stats CSVs in the
 * layout its tblextr.py writes. They are synthesized, not recorded by those tools.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { openSqlite } from '../input/sqlite.js';
import type { AnalyzeResult, Finding } from '../analyze/result.js';

export interface RunEvent {
  name: string;
  /** Nanoseconds on a boot-time clock, as ROCm tools write them. */
  start: bigint;
  end: bigint;
  bytes: number;
  stream: number;
  correlation: number;
  tid: number;
  dir: 'HtoD' | 'DtoH' | 'DtoD' | '';
  /** The host side of a copy as the CUDA trace recorded it. */
  host: 'Pageable' | 'Pinned' | '';
}

export interface Run {
  copies: RunEvent[];
  kernels: RunEvent[];
  memsets: RunEvent[];
  /** Runtime calls, named as HIP names them. */
  runtime: RunEvent[];
}

/** The HIP name of a CUDA runtime or driver call. */
export const hipName = (n: string): string =>
  n
    .replace(/^cudaLaunchKernelExC$/, 'hipExtLaunchKernel')
    .replace(/^cuLaunchKernel$/, 'hipModuleLaunchKernel')
    .replace(/^cuda/, 'hip');

const BOOT = 2414192684609085n;

/** The naive run's GPU events and runtime calls, on a nanosecond clock. */
export function naiveRun(): Run {
  type E = { ph: string; cat?: string; name: string; ts: number; dur: number; tid: number; args: Record<string, number> };
  const file = new URL('../../fixtures/traces/pytorch-cuda-naive.pt.trace.json.gz', import.meta.url);
  const all = (JSON.parse(gunzipSync(readFileSync(file)).toString()) as { traceEvents: E[] }).traceEvents.filter((e) => e.ph === 'X');
  // the clock tools/make-analyze-fixtures.mjs put rocprofv3's CSV of this run on
  const gpu = ['gpu_memcpy', 'gpu_memset', 'kernel', 'cuda_runtime', 'cuda_driver'];
  const t0 = Math.min(...all.filter((e) => gpu.includes(e.cat ?? '')).map((e) => e.ts));
  const ns = (us: number): bigint => BOOT + BigInt(Math.round((us - t0) * 1000));
  const of = (cats: string[], rename = (n: string) => n): RunEvent[] =>
    all
      .filter((e) => cats.includes(e.cat ?? ''))
      .map((e) => {
        const m = /Memcpy (HtoD|DtoH|DtoD) \((\w+) -> (\w+)\)/.exec(e.name);
        const dir = (m?.[1] ?? '') as RunEvent['dir'];
        const host = (dir === 'HtoD' ? m?.[2] : dir === 'DtoH' ? m?.[3] : '') as RunEvent['host'];
        return {
          name: rename(e.name),
          start: ns(e.ts),
          end: ns(e.ts + e.dur),
          bytes: e.args.bytes ?? 0,
          stream: e.args.stream ?? 0,
          correlation: e.args.correlation ?? 0,
          tid: e.tid,
          dir,
          host,
        };
      });
  return { copies: of(['gpu_memcpy']), kernels: of(['kernel']), memsets: of(['gpu_memset']), runtime: of(['cuda_runtime', 'cuda_driver'], hipName) };
}

/** Host addresses the rocpd copies carry: pageable ones outside the one pinned allocation, pinned ones inside it. */
export const PINNED_BASE = 0x7f3a00000000;
export const PINNED_BYTES = 2 * 1024 * 1024;
const PAGEABLE_BASE = 0x55d0c0000000;

/**
 * Writes the run as a rocpd database: agents (a CPU and an MI300X), kernels, copies with sizes and host addresses,
 * the pinned host allocation the device-to-host copies land in, and HIP calls as regions of category
 * HIP_RUNTIME_API. `layout` 'rows' keeps start/end on each row (rocpd schema 3.0); 'timestamps' keeps them in a
 * rocpd_timestamp table and names agent indexes in full (the layout before it). Either way the data views give
 * start, end and name.
 */
export function writeRocpd(file: string, run: Run, layout: 'rows' | 'timestamps' = 'rows'): void {
  const db = openSqlite(file, { write: true });
  const U = '_3f2a9c10';
  const rows = layout === 'rows';
  const se = rows ? '"start" INTEGER NOT NULL, "end" INTEGER NOT NULL' : 'start_id INTEGER NOT NULL, end_id INTEGER NOT NULL';
  const tables = [
    'string (id INTEGER PRIMARY KEY, guid TEXT, string TEXT NOT NULL UNIQUE)',
    'info_agent (id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, type TEXT, absolute_index INTEGER, logical_index INTEGER, type_index INTEGER, name TEXT, product_name TEXT, extdata TEXT)',
    'info_kernel_symbol (id INTEGER PRIMARY KEY, guid TEXT, kernel_name TEXT, display_name TEXT)',
    'event (id INTEGER PRIMARY KEY, guid TEXT, category_id INTEGER, stack_id INTEGER, correlation_id INTEGER)',
    'timestamp (id INTEGER PRIMARY KEY, guid TEXT, value INTEGER NOT NULL)',
    `region (id INTEGER PRIMARY KEY, guid TEXT, pid INTEGER, tid INTEGER, ${se}, name_id INTEGER NOT NULL, event_id INTEGER)`,
    `kernel_dispatch (id INTEGER PRIMARY KEY, guid TEXT, agent_id INTEGER, kernel_id INTEGER, dispatch_id INTEGER, queue_id INTEGER, stream_id INTEGER, ${se}, region_name_id INTEGER, event_id INTEGER)`,
    `memory_copy (id INTEGER PRIMARY KEY, guid TEXT, ${se}, name_id INTEGER, dst_agent_id INTEGER, dst_address INTEGER, src_agent_id INTEGER, src_address INTEGER, size INTEGER NOT NULL, queue_id INTEGER, stream_id INTEGER, event_id INTEGER)`,
    `memory_allocate (id INTEGER PRIMARY KEY, guid TEXT, agent_id INTEGER, type TEXT, level TEXT, ${se}, address INTEGER, size INTEGER NOT NULL, event_id INTEGER)`,
  ];
  const names = tables.map((t) => t.slice(0, t.indexOf(' ')));
  const T = (n: string, v: string): string => (rows ? `${v}."${n}"` : `(SELECT value FROM rocpd_timestamp WHERE id = ${v}.${n}_id)`);
  const idx = rows ? 'log_index' : 'logical_index';
  db.exec(
    [
      ...tables.map((t) => `CREATE TABLE "rocpd_${t.replace(' ', `${U}" `)}`),
      ...names.map((n) => `CREATE VIEW "rocpd_${n}" AS SELECT * FROM "rocpd_${n}${U}"`),
      `CREATE VIEW kernels AS SELECT K.id, S.display_name AS name, A.logical_index AS agent_${idx}, A.type AS agent_type, K.stream_id, K.queue_id,
         ${T('start', 'K')} AS "start", ${T('end', 'K')} AS "end", E.stack_id FROM rocpd_kernel_dispatch K
         JOIN rocpd_info_agent A ON A.id = K.agent_id JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id JOIN rocpd_event E ON E.id = K.event_id`,
      `CREATE VIEW memory_copies AS SELECT M.id, ${T('start', 'M')} AS "start", ${T('end', 'M')} AS "end", N.string AS name, M.size, M.stream_id, M.queue_id,
         D.type AS dst_agent_type, D.logical_index AS dst_agent_${idx}, M.dst_address, S.type AS src_agent_type, S.logical_index AS src_agent_${idx}, M.src_address, E.stack_id
         FROM rocpd_memory_copy M JOIN rocpd_string N ON N.id = M.name_id JOIN rocpd_info_agent D ON D.id = M.dst_agent_id
         JOIN rocpd_info_agent S ON S.id = M.src_agent_id JOIN rocpd_event E ON E.id = M.event_id`,
      `CREATE VIEW memory_allocations AS SELECT M.id, ${T('start', 'M')} AS "start", ${T('end', 'M')} AS "end", M.type, M.level, A.type AS agent_type,
         A.logical_index AS agent_${idx}, M.address, M.size, E.stack_id FROM rocpd_memory_allocate M
         LEFT JOIN rocpd_info_agent A ON A.id = M.agent_id JOIN rocpd_event E ON E.id = M.event_id`,
      `CREATE VIEW regions AS SELECT R.id, (SELECT string FROM rocpd_string C WHERE C.id = E.category_id) AS category, N.string AS name, R.pid, R.tid,
         ${T('start', 'R')} AS "start", ${T('end', 'R')} AS "end", E.stack_id FROM rocpd_region R
         JOIN rocpd_string N ON N.id = R.name_id JOIN rocpd_event E ON E.id = R.event_id`,
    ].join(';\n'),
  );
  const strings = new Map<string, number>();
  const str = (s: string): number => {
    let id = strings.get(s);
    if (id === undefined) {
      id = strings.size + 1;
      strings.set(s, id);
      db.run(`INSERT INTO "rocpd_string${U}" (id, string) VALUES (?, ?)`, id, s);
    }
    return id;
  };
  let events = 0;
  const event = (category: string, stack: number): number => {
    db.run(`INSERT INTO "rocpd_event${U}" (id, category_id, stack_id, correlation_id) VALUES (?, ?, ?, ?)`, ++events, str(category), stack, stack);
    return events;
  };
  let stamps = 0;
  /** The start and end columns' values: the times, or the ids of two timestamp rows. */
  const times = (e: { start: bigint; end: bigint }): [bigint | number, bigint | number] => {
    if (rows) return [e.start, e.end];
    for (const v of [e.start, e.end]) db.run(`INSERT INTO "rocpd_timestamp${U}" (id, value) VALUES (?, ?)`, ++stamps, v);
    return [stamps - 1, stamps];
  };
  const cols = rows ? '"start", "end"' : 'start_id, end_id';
  db.exec('BEGIN');
  db.run(`INSERT INTO "rocpd_info_agent${U}" VALUES (1, 'g', 1, 1, 'CPU', 0, 0, 0, 'AMD EPYC 9534', 'AMD EPYC 9534', '{}')`);
  db.run(
    `INSERT INTO "rocpd_info_agent${U}" VALUES (2, 'g', 1, 1, 'GPU', 1, 1, 0, 'gfx942', 'AMD Instinct MI300X', ?)`,
    JSON.stringify({ local_mem_size: 192 * 2 ** 30 }),
  );
  const first = run.copies[0] ?? run.kernels[0];
  if (first) {
    const at = { start: first.start - 50_000n, end: first.start - 40_000n };
    db.run(
      `INSERT INTO "rocpd_memory_allocate${U}" (agent_id, type, level, ${cols}, address, size, event_id) VALUES (1, 'ALLOC', 'REAL', ?, ?, ?, ?, ?)`,
      ...times(at),
      PINNED_BASE,
      PINNED_BYTES,
      event('MEMORY_ALLOCATION', 1),
    );
    // scratch memory is the runtime's, not the application's: the reader leaves it out
    db.run(
      `INSERT INTO "rocpd_memory_allocate${U}" (agent_id, type, level, ${cols}, address, size, event_id) VALUES (2, 'ALLOC', 'SCRATCH', ?, ?, ?, ?, ?)`,
      ...times(at),
      0x7e00_0000_0000,
      1 << 20,
      event('SCRATCH_MEMORY', 2),
    );
  }
  const DIRECTION = { HtoD: 'MEMORY_COPY_HOST_TO_DEVICE', DtoH: 'MEMORY_COPY_DEVICE_TO_HOST', DtoD: 'MEMORY_COPY_DEVICE_TO_DEVICE', '': 'MEMORY_COPY_NONE' };
  let pageable = PAGEABLE_BASE;
  run.copies.forEach((e, i) => {
    const host = e.host === 'Pinned' ? PINNED_BASE + 64 * (i % 1024) : (pageable += 4096);
    const [src, dst] = e.dir === 'HtoD' ? [1, 2] : e.dir === 'DtoH' ? [2, 1] : [2, 2];
    db.run(
      `INSERT INTO "rocpd_memory_copy${U}" (${cols}, name_id, dst_agent_id, dst_address, src_agent_id, src_address, size, queue_id, stream_id, event_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`,
      ...times(e),
      str(DIRECTION[e.dir]),
      dst,
      e.dir === 'HtoD' ? 0x7e00_0000_0000 : host,
      src,
      e.dir === 'HtoD' ? host : 0x7e00_0000_0000,
      e.bytes,
      e.stream === 7 ? 1 : 2,
      event('MEMORY_COPY', e.correlation),
    );
  });
  run.kernels.forEach((e, i) => {
    db.run(`INSERT INTO "rocpd_info_kernel_symbol${U}" (id, kernel_name, display_name) VALUES (?, ?, ?)`, i + 1, e.name, e.name);
    db.run(
      `INSERT INTO "rocpd_kernel_dispatch${U}" (agent_id, kernel_id, dispatch_id, queue_id, stream_id, ${cols}, region_name_id, event_id) VALUES (2, ?, ?, 1, 1, ?, ?, ?, ?)`,
      i + 1,
      i + 1,
      ...times(e),
      str(e.name),
      event('KERNEL_DISPATCH', e.correlation),
    );
  });
  for (const e of run.runtime)
    db.run(
      `INSERT INTO "rocpd_region${U}" (pid, tid, ${cols}, name_id, event_id) VALUES (683, ?, ?, ?, ?, ?)`,
      e.tid,
      ...times(e),
      str(e.name),
      event('HIP_RUNTIME_API', e.correlation),
    );
  // a marker region: not an API call
  if (first)
    db.run(
      `INSERT INTO "rocpd_region${U}" (pid, tid, ${cols}, name_id, event_id) VALUES (683, 683, ?, ?, ?, ?)`,
      ...times(first),
      str('step'),
      event('MARKER_CORE_API', 0),
    );
  db.exec('COMMIT');
  db.close();
}

/** The lanes legacy rocprof labels, by their pid (tblextr.py: COPY 1, HIP 2, HSA 3, GPUs from 6). */
const V1_LANES: ReadonlyArray<readonly [number, string]> = [
  [0, 'Markers and Ranges'],
  [1, 'COPY'],
  [2, 'CPU HIP API'],
  [6, 'GPU0'],
  [518, 'GPU Barriers0'],
];

/**
 * Writes the run as legacy rocprof's results.json: process_name labels, then one event per call and per activity
 * with ts / dur as microsecond strings and the row's BeginNs / EndNs in args.
 */
export function writeRocprofV1Json(file: string, run: Run): void {
  const start =
    [run.copies, run.kernels, run.runtime]
      .flat()
      .map((e) => e.start)
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))[0] ?? 0n;
  const out: string[] = ['{ "traceEvents":[{}'];
  V1_LANES.forEach(([pid, name], i) => out.push(`,{"args":{"name":"${name}"},"ph":"M","pid":${pid},"name":"process_name","sort_index":${i}}`));
  const ev = (pid: number, tid: number, e: RunEvent, name: string, args: Record<string, string>): void => {
    const us = (v: bigint): string => String((v - start) / 1000n);
    const dur = (e.end - e.start) / 1000n;
    const all = { BeginNs: String(e.start), EndNs: String(e.end), ...args };
    out.push(
      `,{"ph":"X","name":"${name}","pid":${pid},"tid":${tid},"ts":"${us(e.start)}","dur":"${dur === 0n ? 1 : dur}",\n  "args":{\n    ${Object.entries(all)
        .map(([k, v]) => `"${k}":"${v}"`)
        .join(',\n    ')}\n  }\n}`,
    );
  };
  const COPY = { HtoD: 'CopyHostToDevice', DtoH: 'CopyDeviceToHost', DtoD: 'CopyDeviceToDevice', '': 'Copy' };
  const opOf = new Map([...run.copies, ...run.memsets].map((c) => [c.correlation, c]));
  for (const e of run.runtime) ev(2, e.tid, e, e.name, { pid: '683', tid: String(e.tid), Name: e.name, args: v1CallArgs(e, opOf) });
  for (const e of run.copies)
    ev(1, e.stream, e, COPY[e.dir], { 'dev-id': '0', 'queue-id': '0', Name: COPY[e.dir], pid: '683', tid: '683', 'stream-id': String(e.stream) });
  for (const e of run.memsets) ev(1, e.stream, e, 'FillBuffer', { 'dev-id': '0', Name: 'FillBuffer', 'stream-id': String(e.stream) });
  for (const e of run.kernels)
    ev(6, e.stream, e, e.name.replace(/"/g, "'"), { 'dev-id': '0', 'queue-id': '0', Name: e.name.replace(/"/g, "'"), 'stream-id': String(e.stream) });
  out.push('],\n"otherData": {\n    "ROCm version": "5.7.1"\n  }\n}');
  writeFileSync(file, out.join('\n'));
}

/** Where the run's copy calls' host memory is said to be in rocprof's argument text: a device buffer and a host one. */
const V1_DEVICE = 0x7f28b1200000;

/**
 * The argument text legacy rocprof writes beside a call (HIP.args, args.args), as roctracer formats it: a copy call's
 * destination, source, sizeBytes and hipMemcpyKind, a memset's destination, value and sizeBytes, from the copy or
 * memset of the same correlation id (`opOf`); other calls `( )`.
 */
export function v1CallArgs(e: RunEvent, opOf: ReadonlyMap<number, RunEvent>): string {
  const c = /Memcpy|Memset/.test(e.name) ? opOf.get(e.correlation) : undefined;
  if (!c) return '( )';
  if (/Memset/.test(e.name)) return `( dst(0x${V1_DEVICE.toString(16)}) value(0) sizeBytes(${c.bytes}) stream(0x1))`;
  const host = (c.host === 'Pinned' ? PINNED_BASE : PAGEABLE_BASE) + 4096 * (c.correlation % 512);
  const [dst, src] = c.dir === 'DtoH' ? [host, V1_DEVICE] : c.dir === 'HtoD' ? [V1_DEVICE, host] : [V1_DEVICE, V1_DEVICE + (1 << 20)];
  const kind = { HtoD: 1, DtoH: 2, DtoD: 3, '': 4 }[c.dir];
  return `( dst(0x${dst.toString(16)}) src(0x${src.toString(16)}) sizeBytes(${c.bytes}) kind(${kind}))`;
}

/**
 * Legacy rocprof --stats tables of the run: kernels (results.stats.csv), HIP calls (hip_stats) and copies
 * (copy_stats). `bare` writes names as tblextr did before 2022, unquoted, their commas bare; `hipOps` adds what its
 * tables of HIP's operations hold beside kernels and copies: the fills (FillBuffer, in copy_stats), barrier packets
 * and commands HIP has no name for (in the kernel table, as its OPS statistics list them).
 */
export function writeRocprofV1Stats(prefix: string, run: Run, o: { bare?: boolean; hipOps?: boolean } = {}): { kernels: string; hip: string; copies: string } {
  const table = (events: RunEvent[], key: (e: RunEvent) => string): string => {
    const by = new Map<string, [number, bigint]>();
    for (const e of events) {
      const v = by.get(key(e)) ?? [0, 0n];
      by.set(key(e), [v[0] + 1, v[1] + (e.end - e.start)]);
    }
    const total = [...by.values()].reduce((s, [, t]) => s + t, 0n);
    const rows = [...by].sort((a, b) => Number(b[1][1] - a[1][1]));
    const quote = (n: string): string => (o.bare ? n : `"${n.replace(/"/g, '""')}"`);
    return [
      '"Name","Calls","TotalDurationNs","AverageNs","Percentage"',
      ...rows.map(([name, [calls, t]]) => `${quote(name)},${calls},${t},${t / BigInt(calls)},${((100 * Number(t)) / Number(total)).toFixed(6)}`),
      '',
    ].join('\n');
  };
  const at = run.kernels[0]!.start;
  const op = (name: string, dur: bigint): RunEvent => ({ ...run.kernels[0]!, name, start: at, end: at + dur });
  const ops = o.hipOps ? [op('Unknown command type', 0n), op('Unknown command type', 0n), op('<barrier packet>', 5_000n)] : [];
  const files = { kernels: `${prefix}.stats.csv`, hip: `${prefix}.hip_stats.csv`, copies: `${prefix}.copy_stats.csv` };
  writeFileSync(
    files.kernels,
    table([...run.kernels, ...ops], (e) => e.name),
  );
  writeFileSync(
    files.hip,
    table(run.runtime, (e) => e.name),
  );
  writeFileSync(
    files.copies,
    table([...run.copies, ...(o.hipOps ? run.memsets.map((e) => ({ ...e, name: 'FillBuffer', dir: '' as const })) : [])], (e) =>
      e.name === 'FillBuffer' ? e.name : e.dir === 'HtoD' ? 'CopyHostToDevice' : e.dir === 'DtoH' ? 'CopyDeviceToHost' : 'CopyDeviceToDevice',
    ),
  );
  return files;
}

/** The finding of `rule` in an analysis, asserted present (the message lists the rules that were found). */
export function findingOf(r: AnalyzeResult, rule: string): Finding {
  const f = r.findings.find((x) => x.rule === rule);
  assert.ok(f, `${rule} in ${r.findings.map((x) => x.rule).join(', ')}`);
  return f;
}
