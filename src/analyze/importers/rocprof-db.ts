/**
 * Legacy rocprof (v1) `results.db`, the SQLite database its tblextr.py writes beside results.csv and results.json
 * (ROCm/rocprofiler bin/tblextr.py, sqlitedb.py, dform.py, mem_manager.py). Its tables are what those files are
 * made from:
 * - `KERN` (named `A` before 2022): one row per dispatch (Index, KernelName, gpu-id, queue-id, ..., DispatchNs,
 *   BeginNs, EndNs, CompleteNs, DurationNs), the table results.csv dumps; without BeginNs / EndNs (a counters-only
 *   run) it holds no times;
 * - `HIP` and `HSA`: API calls (BeginNs, EndNs, pid, tid, Name, args, Index = correlation id, Data); a copy's size,
 *   host address and direction are in its call's `args` text (hip-args.ts), joined to COPY by Index;
 * - `OPS`: what HIP calls put on the GPU (BeginNs, EndNs, dev-id, queue-id, Name, ..., stream-id, Index), kernels here,
 *   copies and fills going to `COPY`, with HIP's commands that are neither ("Unknown command type", markers: hip-ops.ts);
 * - `COPY`: copies, from HIP activity (the OPS columns, Names such as CopyHostToDevice, FillBuffer) or from HSA's
 *   async-copy trace (Name async-copy); `Data` holds "...,Direction=HtoD,SrcType=pinned,DstType=device,Size=N,..."
 *   only where tblextr's memory-copy data was switched on, which is where sizes come from;
 * - `rocTX` (markers, left out as by the other readers) and `MM` (the same copy data as `Data`, not read twice).
 * The statistics (results.stats.csv ...) are views tblextr drops again, so the database holds no totals of its own.
 * A database may hold other tables beside these (a user's own, or a later tool's): they are left out, and said so.
 * Rows are read as the CSV and JSON readers read the same rows: kernels from KERN as results.csv gives them (OPS
 * kernels only where KERN has none, since both record the same dispatches), HIP and HSA calls as API calls.
 */
import { BadInputError, isGpuError } from '../../errors.js';
import { describe } from '../../input/numbers.js';
import { columnsOf, openSqlite, tablesOf, type SqliteDb, type SqlRow } from '../../input/sqlite.js';
import { Api, classifyApi, Direction, MemKind, kindsByDirection, type TraceModel } from '../model.js';
import { directionCode, memKindOf } from './fields.js';
import { HipAllocations, hipCallArgs, type HipCallArgs } from './hip-args.js';
import { hipOpKind } from './hip-ops.js';
import { parseCopyName } from './kineto.js';

/** The tables tblextr.py creates (`A` is what it named the kernel table before 2022). */
export const ROCPROF_V1_TABLES: ReadonlySet<string> = new Set(['KERN', 'A', 'HIP', 'HSA', 'COPY', 'OPS', 'rocTX', 'MM']);
/** HSA correlation ids count apart from HIP's: kept in a range of their own so that they never link to a HIP call. */
const HSA_CORRELATION = 2 ** 40;

/**
 * Whether a database's tables are tblextr's: one of its activity tables with the columns tblextr gives it (a kernel
 * table with Index and KernelName, or a call or operation table with BeginNs and EndNs), whatever else it holds.
 */
export function isRocprofV1Db(tables: ReadonlySet<string>, columns: (table: string) => ReadonlySet<string>): boolean {
  for (const t of ['KERN', 'A'])
    if (tables.has(t)) {
      const c = columns(t);
      if (c.has('KernelName') && c.has('Index')) return true;
    }
  for (const t of ['HIP', 'HSA', 'COPY', 'OPS'])
    if (tables.has(t)) {
      const c = columns(t);
      if (c.has('BeginNs') && c.has('EndNs')) return true;
    }
  return false;
}

/**
 * Reads a legacy rocprof results.db into the model.
 * @throws BadInputError when it holds no timed table, misses a column a table needs, or holds values of the wrong
 *   type; GpuError (UNSUPPORTED) when no SQLite binding is installed.
 */
export async function importRocprofDb(file: string, model: TraceModel, progress?: (rows: number) => void): Promise<void> {
  const db = openSqlite(file, { what: 'a legacy rocprof (v1) results.db' });
  try {
    read(new Tables(db, file, model, progress), file, model);
  } catch (e) {
    if (isGpuError(e)) throw e;
    throw new BadInputError(`cannot read it as a legacy rocprof results.db: ${(e as Error).message}`, file, { cause: e });
  } finally {
    db.close();
  }
  model.formats.add('rocprof-db');
}

/** tblextr's tables of one database, read with the checks every table needs. */
class Tables {
  readonly cols: Map<string, Set<string>>;
  readonly others: string[];
  /** The kernel table: KERN, or A as tblextr named it before. */
  readonly kern: string | undefined;
  rows = 0;

  constructor(
    private readonly db: SqliteDb,
    private readonly file: string,
    private readonly model: TraceModel,
    readonly progress?: (rows: number) => void,
  ) {
    const tables = tablesOf(db);
    this.cols = new Map([...tables].filter((t) => ROCPROF_V1_TABLES.has(t)).map((t) => [t, columnsOf(db, t)] as const));
    this.others = [...tables].filter((t) => !ROCPROF_V1_TABLES.has(t));
    this.kern = ['KERN', 'A'].find((t) => this.cols.get(t)?.has('KernelName'));
  }

  /** Rows of a table. */
  count(table: string): number {
    for (const r of this.db.iterate(`SELECT count(*) AS n FROM "${table}"`)) return Number(r.n);
    return 0;
  }

  timed(t: string | undefined): boolean {
    return t !== undefined && this.cols.get(t)?.has('BeginNs') === true && this.cols.get(t)?.has('EndNs') === true;
  }

  /** Rows of a table: each wanted column, NULL where the table has none; `need` columns must exist. */
  *each(table: string, want: readonly string[], need: readonly string[] = []): Generator<SqlRow> {
    const have = this.cols.get(table);
    if (!have) return;
    const missing = need.filter((c) => !have.has(c));
    if (missing.length) throw new BadInputError(`table ${table} has no ${missing.join(', ')} column`, this.file);
    const list = want.map((c) => (have.has(c) ? `"${c}"` : `NULL AS "${c}"`));
    for (const r of this.db.iterate(`SELECT ${list.join(', ')} FROM "${table}"`)) {
      if (++this.rows % 200_000 === 0) this.progress?.(this.rows);
      yield r;
    }
  }

  int(table: string, c: string, v: unknown): number {
    if (v === null || v === undefined || v === '') return Number.NaN;
    if (typeof v === 'bigint' && v >= 0n && v <= 2n ** 63n) return Number(v);
    if (typeof v === 'number' && Number.isFinite(v) && v >= 0) return v;
    throw new BadInputError(`table ${table} column ${c} holds ${describe(typeof v === 'bigint' ? String(v) : v)}, not a count or an id`, this.file);
  }

  id(table: string, c: string, v: unknown): number {
    return this.int(table, c, v) || 0;
  }

  span(table: string, r: SqlRow): [number, number] {
    for (const c of ['BeginNs', 'EndNs'])
      if (typeof r[c] !== 'bigint' && typeof r[c] !== 'number')
        throw new BadInputError(`table ${table} column ${c} holds ${describe(r[c] ?? null)}, not a timestamp`, this.file);
    const start = this.model.time(r.BeginNs as bigint);
    const end = this.model.time(r.EndNs as bigint);
    if (end < start) throw new BadInputError(`table ${table}: row ${String(r.Index ?? '?')} ends before it starts`, this.file);
    return [start, end];
  }
}

const text = (v: unknown): string => (typeof v === 'string' ? v.replace(/^"(.*)"$/, '$1') : '');

function read(t: Tables, file: string, model: TraceModel): void {
  const activity = [t.kern, 'OPS', 'COPY', 'HIP', 'HSA'].filter((x): x is string => t.timed(x));
  if (activity.length === 0) {
    if (t.kern && t.count(t.kern) === 0)
      throw new BadInputError(
        `a legacy rocprof (v1) results.db with no timed table and an empty ${t.kern}: rocprof saw no kernel dispatch in the run (nothing ran on the GPU, or the program exited before rocprof wrote its data)`,
        file,
      );
    if (t.kern)
      throw new BadInputError(
        `a legacy rocprof (v1) results.db whose ${t.kern} table has no BeginNs / EndNs: hardware counters per dispatch, without times (rocprof --pmc); record with --timestamp on, --stats or --hip-trace`,
        file,
      );
    throw new BadInputError(`no rocprof table with BeginNs / EndNs (it holds ${[...t.cols.keys(), ...t.others].join(', ') || 'no tables'})`, file);
  }
  if (t.others.length > 0)
    model.note(`${file}: tables that are not rocprof's left out: ${t.others.slice(0, 6).join(', ')}${t.others.length > 6 ? ', ...' : ''}`);
  readKernels(t, file, model);
  const args = readCalls(t, model);
  readCopies(t, file, model, args);
  t.progress?.(t.rows);
  if (t.timed(t.kern) || t.timed('OPS')) model.traced('kernels');
  if (t.timed('COPY')) model.traced('copies');
  // --hip-trace records HIP calls with the kernels and copies they start, as the JSON reader takes a HIP lane to say
  if (t.timed('HIP')) model.traced('runtime', 'kernels', 'copies');
  else if (t.timed('HSA')) model.traced('runtime');
  if (model.kernels.length + model.copies.length + model.memsets.length + model.runtime.length === 0)
    model.note(`${file}: the rocprof results.db tables (${activity.join(', ')}) hold no rows`);
}

/** Kernels: the kernel table's dispatches, as results.csv gives them; OPS records the same dispatches from the HIP side. */
function readKernels(t: Tables, file: string, model: TraceModel): void {
  const kern = t.timed(t.kern) ? [...t.each(t.kern!, ['KernelName', 'gpu-id', 'queue-id', 'BeginNs', 'EndNs', 'Index'], ['KernelName'])] : [];
  for (const r of kern) {
    const [start, end] = t.span(t.kern!, r);
    model.kernels.push({ start, end, stream: t.id(t.kern!, 'queue-id', r['queue-id']), device: t.id(t.kern!, 'gpu-id', r['gpu-id']) });
    model.addKernelName(text(r.KernelName).replace(/ \[clone \.kd\]$/, '') || 'kernel', end - start);
  }
  let leftOut = 0;
  const other = new Map<string, number>();
  if (t.timed('OPS'))
    for (const r of t.each('OPS', ['Name', 'dev-id', 'stream-id', 'queue-id', 'BeginNs', 'EndNs', 'Index'], ['Name'])) {
      const name = text(r.Name);
      const kind = hipOpKind(name);
      if (kind === 'barrier') continue; // barriers are the runtime's, on a lane of their own
      if (kind !== 'kernel') {
        other.set(name, (other.get(name) ?? 0) + 1);
        continue;
      }
      if (kern.length > 0) {
        leftOut++;
        continue;
      }
      const [start, end] = t.span('OPS', r);
      const stream = t.int('OPS', 'stream-id', r['stream-id']);
      model.kernels.push({
        start,
        end,
        stream: Number.isNaN(stream) ? t.id('OPS', 'queue-id', r['queue-id']) : stream,
        device: t.id('OPS', 'dev-id', r['dev-id']),
      });
      model.addKernelName(name.replace(/ \[clone \.kd\]$/, '') || 'kernel', end - start);
    }
  if (leftOut > 0) model.note(`${file}: ${leftOut} OPS kernel rows left out: ${t.kern} records the same dispatches, and is read as results.csv is`);
  noteOtherOps(model, file, 'OPS', other);
}

/** A note naming HIP commands that are neither kernels nor copies, left out of both. */
export function noteOtherOps(model: TraceModel, file: string, where: string, other: ReadonlyMap<string, number>): void {
  if (other.size === 0) return;
  const list = [...other].map(([n, k]) => `${k} "${n}"`).join(', ');
  model.note(`${file}: ${list} in ${where}: HIP commands that are neither kernels nor copies, left out of both`);
}

/** API calls, HIP and HSA, as the CSV reader keeps both domains; returns the copy and memset calls' arguments by Index. */
function readCalls(t: Tables, model: TraceModel): Map<number, HipCallArgs> {
  const args = new Map<number, HipCallArgs>();
  const allocations = new HipAllocations(model);
  for (const table of ['HIP', 'HSA'] as const) {
    if (!t.timed(table)) continue;
    for (const r of t.each(table, ['Name', 'tid', 'BeginNs', 'EndNs', 'Index', 'args'], ['Name'])) {
      const [start, end] = t.span(table, r);
      const index = t.int(table, 'Index', r.Index);
      const api = classifyApi(text(r.Name));
      const correlation = table === 'HSA' && !Number.isNaN(index) ? HSA_CORRELATION + index : index;
      model.runtime.push({ start, end, api, thread: t.id(table, 'tid', r.tid), correlation });
      if (table !== 'HIP' || typeof r.args !== 'string') continue;
      if (!Number.isNaN(index) && (api === Api.memcpySync || api === Api.memcpyAsync || api === Api.memset)) args.set(index, hipCallArgs(r.args));
      allocations.call(api, text(r.Name), r.args, end);
    }
  }
  if (allocations.recorded > 0) model.traced('allocations');
  return args;
}

/** Copies and fills, sized by tblextr's memory-copy data where it was on, else by the arguments of their calls. */
function readCopies(t: Tables, file: string, model: TraceModel, args: ReadonlyMap<number, HipCallArgs>): void {
  if (!t.timed('COPY')) return;
  const fromHsa = !t.cols.get('COPY')?.has('dev-id'); // fill_copy_db's layout: HSA async copies, HSA correlation ids
  const rows = [...t.each('COPY', ['Name', 'dev-id', 'stream-id', 'queue-id', 'tid', 'BeginNs', 'EndNs', 'Index', 'Data'], ['Name'])];
  // a call's size belongs to its record when it made one: a hipMemset filled in two pieces gives neither a size
  const perIndex = new Map<number, number>();
  for (const r of rows) {
    const i = t.int('COPY', 'Index', r.Index);
    if (!Number.isNaN(i)) perIndex.set(i, (perIndex.get(i) ?? 0) + 1);
  }
  let withoutBytes = 0;
  let fromCalls = 0;
  const other = new Map<string, number>();
  for (const r of rows) {
    const name = text(r.Name);
    const kind = hipOpKind(name);
    if (kind === 'barrier') continue;
    if (kind === 'other') {
      other.set(name, (other.get(name) ?? 0) + 1);
      continue;
    }
    const [start, end] = t.span('COPY', r);
    const stream = fromHsa ? t.id('COPY', 'tid', r.tid) : t.id('COPY', 'stream-id', r['stream-id']);
    const device = t.id('COPY', 'dev-id', r['dev-id']);
    const index = t.int('COPY', 'Index', r.Index);
    const call = !fromHsa && perIndex.get(index) === 1 ? args.get(index) : undefined;
    const data = parseData(text(r.Data));
    const bytes = Number.isNaN(data.bytes) ? (call?.bytes ?? Number.NaN) : data.bytes;
    if (Number.isNaN(data.bytes) && !Number.isNaN(bytes)) fromCalls++;
    if (kind === 'fill') {
      model.memsets.push({ start, end, bytes, stream, device });
      continue;
    }
    const parsed = parseCopyName(name);
    const dir = data.dir !== Direction.unknown ? data.dir : parsed.dir !== Direction.unknown ? parsed.dir : (call?.dir ?? Direction.unknown);
    const hostSide = dir === Direction.HtoD ? data.src : dir === Direction.DtoH ? data.dst : MemKind.device;
    if ((dir === Direction.HtoD || dir === Direction.DtoH) && hostSide !== MemKind.pageable && hostSide !== MemKind.pinned) model.hostKindUnknown++;
    if (Number.isNaN(bytes)) withoutBytes++;
    const hostAddr = dir === Direction.HtoD ? call?.src : dir === Direction.DtoH ? call?.dst : undefined;
    model.copies.push({
      start,
      end,
      dir,
      src: data.src !== MemKind.unknown ? data.src : kindsByDirection(dir).src,
      dst: data.dst !== MemKind.unknown ? data.dst : kindsByDirection(dir).dst,
      bytes,
      stream,
      device,
      correlation: Number.isNaN(index) ? index : fromHsa ? HSA_CORRELATION + index : index,
      hostAddr: hostAddr ?? Number.NaN,
      op: -1,
    });
  }
  noteOtherOps(model, file, 'COPY', other);
  if (fromCalls > 0)
    model.note(`${file}: ${fromCalls} copy and fill sizes taken from the sizeBytes argument of the HIP call that made them (HIP.args, joined by Index)`);
  if (withoutBytes > 0)
    model.note(
      `${withoutBytes} rocprof results.db copies carry no byte count (neither tblextr's memory-copy data nor a sizeBytes argument of their call): size-based findings skip them`,
    );
}

/** What tblextr's memory-copy data ("...,Direction=HtoD,SrcType=pinned,DstType=device,Size=N,Async=0") says. */
function parseData(data: string): { dir: number; src: number; dst: number; bytes: number } {
  const field = (k: string): string => new RegExp(`(?:^|,)${k}=([^,]*)`).exec(data)?.[1] ?? '';
  const size = field('Size');
  return {
    dir: directionCode(field('Direction')),
    src: memKindOf(field('SrcType')),
    dst: memKindOf(field('DstType')),
    bytes: /^\d+$/.test(size) ? Number(size) : Number.NaN,
  };
}
