/**
 * Legacy rocprof (v1) `results.db`, the SQLite database its tblextr.py writes beside results.csv and results.json
 * (ROCm/rocprofiler bin/tblextr.py, sqlitedb.py, dform.py, mem_manager.py). Its tables are what those files are
 * made from:
 * - `KERN`: one row per dispatch (Index, KernelName, gpu-id, queue-id, ..., DispatchNs, BeginNs, EndNs, CompleteNs,
 *   DurationNs), the table results.csv dumps; without BeginNs / EndNs (a counters-only run) it holds no times;
 * - `HIP` and `HSA`: API calls (BeginNs, EndNs, pid, tid, Name, args, Index = correlation id, Data);
 * - `OPS`: what HIP calls put on the GPU (BeginNs, EndNs, dev-id, queue-id, Name, ..., stream-id, Index), kernels here,
 *   copies and fills going to `COPY`;
 * - `COPY`: copies, from HIP activity (the OPS columns, Names such as CopyHostToDevice, FillBuffer) or from HSA's
 *   async-copy trace (Name async-copy); `Data` holds "...,Direction=HtoD,SrcType=pinned,DstType=device,Size=N,..."
 *   only where tblextr's memory-copy data was switched on, which is where sizes come from;
 * - `rocTX` (markers, left out as by the other readers) and `MM` (the same copy data as `Data`, not read twice).
 * The statistics (results.stats.csv ...) are views tblextr drops again, so the database holds no totals of its own.
 * Rows are read as the CSV and JSON readers read the same rows: kernels from KERN as results.csv gives them (OPS
 * kernels only where KERN has none, since both record the same dispatches), HIP and HSA calls as API calls.
 */
import { BadInputError, isGpuError } from '../../errors.js';
import { describe } from '../../input/numbers.js';
import { columnsOf, openSqlite, tablesOf, type SqliteDb, type SqlRow } from '../../input/sqlite.js';
import { classifyApi, Direction, MemKind, kindsByDirection, type TraceModel } from '../model.js';
import { directionCode, memKindOf } from './fields.js';
import { parseCopyName } from './kineto.js';

/** The tables tblextr.py creates; a database holding others is not one it wrote. */
export const ROCPROF_V1_TABLES: ReadonlySet<string> = new Set(['KERN', 'HIP', 'HSA', 'COPY', 'OPS', 'rocTX', 'MM']);
/** HSA correlation ids count apart from HIP's: kept in a range of their own so that they never link to a HIP call. */
const HSA_CORRELATION = 2 ** 40;

/**
 * Reads a legacy rocprof results.db into the model.
 * @throws BadInputError when it holds no timed table, misses a column a table needs, or holds values of the wrong
 *   type; GpuError (UNSUPPORTED) when no SQLite binding is installed.
 */
export async function importRocprofDb(file: string, model: TraceModel, progress?: (rows: number) => void): Promise<void> {
  const db = openSqlite(file, { what: 'a legacy rocprof (v1) results.db' });
  try {
    read(db, file, model, progress);
  } catch (e) {
    if (isGpuError(e)) throw e;
    throw new BadInputError(`cannot read it as a legacy rocprof results.db: ${(e as Error).message}`, file, { cause: e });
  } finally {
    db.close();
  }
  model.formats.add('rocprof-db');
}

function read(db: SqliteDb, file: string, model: TraceModel, progress?: (rows: number) => void): void {
  const tables = tablesOf(db);
  const cols = new Map([...tables].filter((t) => ROCPROF_V1_TABLES.has(t)).map((t) => [t, columnsOf(db, t)] as const));
  const timed = (t: string): boolean => cols.get(t)?.has('BeginNs') === true && cols.get(t)?.has('EndNs') === true;
  const activity = ['KERN', 'OPS', 'COPY', 'HIP', 'HSA'].filter(timed);
  if (activity.length === 0) {
    if (cols.has('KERN'))
      throw new BadInputError(
        'a legacy rocprof (v1) results.db whose KERN table has no BeginNs / EndNs: hardware counters per dispatch, without times (rocprof --pmc); record with --timestamp on, --stats or --hip-trace',
        file,
      );
    throw new BadInputError(`no rocprof table with BeginNs / EndNs (it holds ${[...tables].join(', ') || 'no tables'})`, file);
  }
  let rows = 0;
  /** Rows of a table: each wanted column, NULL where the table has none; `need` columns must exist. */
  const each = function* (table: string, want: readonly string[], need: readonly string[] = []): Generator<SqlRow> {
    const have = cols.get(table);
    if (!have) return;
    const missing = need.filter((c) => !have.has(c));
    if (missing.length) throw new BadInputError(`table ${table} has no ${missing.join(', ')} column`, file);
    const list = want.map((c) => (have.has(c) ? `"${c}"` : `NULL AS "${c}"`));
    for (const r of db.iterate(`SELECT ${list.join(', ')} FROM "${table}"`)) {
      if (++rows % 200_000 === 0) progress?.(rows);
      yield r;
    }
  };
  const int = (table: string, c: string, v: unknown): number => {
    if (v === null || v === undefined || v === '') return Number.NaN;
    if (typeof v === 'bigint' && v >= 0n && v <= 2n ** 63n) return Number(v);
    if (typeof v === 'number' && Number.isFinite(v) && v >= 0) return v;
    throw new BadInputError(`table ${table} column ${c} holds ${describe(typeof v === 'bigint' ? String(v) : v)}, not a count or an id`, file);
  };
  const span = (table: string, r: SqlRow): [number, number] => {
    for (const c of ['BeginNs', 'EndNs'])
      if (typeof r[c] !== 'bigint' && typeof r[c] !== 'number')
        throw new BadInputError(`table ${table} column ${c} holds ${describe(r[c] ?? null)}, not a timestamp`, file);
    const start = model.time(r.BeginNs as bigint);
    const end = model.time(r.EndNs as bigint);
    if (end < start) throw new BadInputError(`table ${table}: row ${String(r.Index ?? '?')} ends before it starts`, file);
    return [start, end];
  };
  const text = (v: unknown): string => (typeof v === 'string' ? v.replace(/^"(.*)"$/, '$1') : '');
  const id = (table: string, c: string, v: unknown): number => int(table, c, v) || 0;

  // Kernels: KERN's dispatches, as results.csv gives them; OPS records the same dispatches from the HIP side
  const kern = timed('KERN') ? [...each('KERN', ['KernelName', 'gpu-id', 'queue-id', 'BeginNs', 'EndNs', 'Index'], ['KernelName'])] : [];
  for (const r of kern) {
    const [start, end] = span('KERN', r);
    model.kernels.push({ start, end, stream: id('KERN', 'queue-id', r['queue-id']), device: id('KERN', 'gpu-id', r['gpu-id']) });
    model.addKernelName(text(r.KernelName).replace(/ \[clone \.kd\]$/, '') || 'kernel', end - start);
  }
  let opsLeftOut = 0;
  if (timed('OPS'))
    for (const r of each('OPS', ['Name', 'dev-id', 'stream-id', 'queue-id', 'BeginNs', 'EndNs', 'Index'], ['Name'])) {
      const name = text(r.Name);
      if (/<barrier packet>|^Marker/i.test(name)) continue; // barriers are the runtime's, on a lane of their own
      if (kern.length > 0) {
        opsLeftOut++;
        continue;
      }
      const [start, end] = span('OPS', r);
      const stream = int('OPS', 'stream-id', r['stream-id']);
      model.kernels.push({
        start,
        end,
        stream: Number.isNaN(stream) ? id('OPS', 'queue-id', r['queue-id']) : stream,
        device: id('OPS', 'dev-id', r['dev-id']),
      });
      model.addKernelName(name.replace(/ \[clone \.kd\]$/, '') || 'kernel', end - start);
    }
  if (opsLeftOut > 0) model.note(`${file}: ${opsLeftOut} OPS kernel rows left out: KERN records the same dispatches, and is read as results.csv is`);

  // Copies and fills
  let withoutBytes = 0;
  if (timed('COPY')) {
    const fromHsa = !cols.get('COPY')?.has('dev-id'); // fill_copy_db's layout: HSA async copies, HSA correlation ids
    for (const r of each('COPY', ['Name', 'dev-id', 'stream-id', 'queue-id', 'tid', 'BeginNs', 'EndNs', 'Index', 'Data'], ['Name'])) {
      const name = text(r.Name);
      if (/barrier|marker/i.test(name)) continue;
      const [start, end] = span('COPY', r);
      const stream = fromHsa ? id('COPY', 'tid', r.tid) : id('COPY', 'stream-id', r['stream-id']);
      const device = id('COPY', 'dev-id', r['dev-id']);
      const data = parseData(text(r.Data));
      if (/^Fill/i.test(name)) {
        model.memsets.push({ start, end, bytes: data.bytes, stream, device });
        continue;
      }
      const parsed = parseCopyName(name);
      const dir = data.dir !== Direction.unknown ? data.dir : parsed.dir;
      const hostSide = dir === Direction.HtoD ? data.src : dir === Direction.DtoH ? data.dst : MemKind.device;
      if ((dir === Direction.HtoD || dir === Direction.DtoH) && hostSide !== MemKind.pageable && hostSide !== MemKind.pinned) model.hostKindUnknown++;
      if (Number.isNaN(data.bytes)) withoutBytes++;
      const index = int('COPY', 'Index', r.Index);
      model.copies.push({
        start,
        end,
        dir,
        src: data.src !== MemKind.unknown ? data.src : kindsByDirection(dir).src,
        dst: data.dst !== MemKind.unknown ? data.dst : kindsByDirection(dir).dst,
        bytes: data.bytes,
        stream,
        device,
        correlation: Number.isNaN(index) ? index : fromHsa ? HSA_CORRELATION + index : index,
        hostAddr: Number.NaN,
        op: -1,
      });
    }
  }
  if (withoutBytes > 0)
    model.note(
      `${withoutBytes} rocprof results.db copies carry no byte count (tblextr records sizes only with its memory-copy data on): size-based findings need a rocprofv3 database or JSON, or an nsys or Kineto trace`,
    );

  // API calls: HIP and HSA, as the CSV reader keeps both domains of the API trace
  for (const table of ['HIP', 'HSA'] as const) {
    if (!timed(table)) continue;
    for (const r of each(table, ['Name', 'tid', 'BeginNs', 'EndNs', 'Index'], ['Name'])) {
      const [start, end] = span(table, r);
      const index = int(table, 'Index', r.Index);
      const correlation = table === 'HSA' && !Number.isNaN(index) ? HSA_CORRELATION + index : index;
      model.runtime.push({ start, end, api: classifyApi(text(r.Name)), thread: id(table, 'tid', r.tid), correlation });
    }
  }
  progress?.(rows);

  if (timed('KERN') || timed('OPS')) model.traced('kernels');
  if (timed('COPY')) model.traced('copies');
  // --hip-trace records HIP calls with the kernels and copies they start, as the JSON reader takes a HIP lane to say
  if (timed('HIP')) model.traced('runtime', 'kernels', 'copies');
  else if (timed('HSA')) model.traced('runtime');
  if (model.kernels.length + model.copies.length + model.memsets.length + model.runtime.length === 0)
    model.note(`${file}: the rocprof results.db tables (${activity.join(', ')}) hold no rows`);
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
