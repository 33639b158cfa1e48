/**
 * nvprof's databases (`nvprof -o FILE.nvvp` or `.nvprof`, CUDA 11 and earlier; the NVIDIA Visual Profiler opens
 * them): SQLite with one table per CUPTI activity kind, rows keyed by `_id_`, strings (kernel and device names) in
 * StringTable, and API calls named by CUPTI callback id. Enumerations are CUPTI's own, not Nsight Systems':
 * memory kinds 0 unknown, 1 pageable, 2 pinned, 3 device, 4 array, 5 managed, 6 device static, 7 managed static
 * (CUpti_ActivityMemoryKind); copy kinds 1 HtoD, 2 DtoH, 3 HtoA, 4 AtoH, 5 AtoA, 6 AtoD, 7 DtoA, 8 DtoD, 9 HtoH,
 * 10 PtoP (CUpti_ActivityMemcpyKind). Unified memory is CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER: bytes moved per
 * direction (the flags hold the migration cause) and page faults.
 */
import { BadInputError } from '../../errors.js';
import { columnsOf, tablesOf, type SqliteDb } from '../../input/sqlite.js';
import { Direction, MemKind, MigrationCause, classifyApi, type TraceModel } from '../model.js';
import { DRIVER_CBID, RUNTIME_CBID } from './cupti-cbid.js';
import { readDatabase, sqliteRows, type SqliteRows } from './sqlite-rows.js';
import { CUPTI_COPY_KIND, CUPTI_SYNC_TYPE, pushCopy, readKernels, readMemsets, readSyncs } from './cupti-records.js';

/** CUpti_ActivityMemoryKind. */
const MEM_KIND: Record<number, number> = {
  0: MemKind.unknown,
  1: MemKind.pageable,
  2: MemKind.pinned,
  3: MemKind.device,
  4: MemKind.array,
  5: MemKind.managed,
  6: MemKind.device,
  7: MemKind.managed,
};
/** CUpti_ActivityUnifiedMemoryCounterKind: the byte counters, as directions. */
const UM_BYTES: Record<number, number> = { 1: Direction.HtoD, 2: Direction.DtoH, 8: Direction.DtoD };
const UM_CPU_PAGE_FAULT = 3;
const UM_GPU_PAGE_FAULT = 4;

/** The activity tables that hold a timeline; a database with none of them holds nothing gpumem reads. */
const ACTIVITY = ['MEMCPY', 'MEMCPY2', 'MEMSET', 'KERNEL', 'CONCURRENT_KERNEL', 'RUNTIME', 'DRIVER', 'UNIFIED_MEMORY_COUNTER'].map(
  (k) => `CUPTI_ACTIVITY_KIND_${k}`,
);

/** True for the tables of an nvprof database (StringTable and `_id_` keys), as opposed to an Nsight Systems export. */
export function isNvprofDatabase(db: SqliteDb, tables: Set<string>): boolean {
  if (!tables.has('StringTable')) return false;
  const t = [...tables].find((n) => n.startsWith('CUPTI_ACTIVITY_KIND_'));
  return t !== undefined && columnsOf(db, t).has('_id_');
}

/**
 * Reads an nvprof database into the model.
 * @throws BadInputError when it holds no activity gpumem reads, or values of the wrong type.
 */
export async function importNvvp(file: string, model: TraceModel, progress?: (rows: number) => void): Promise<void> {
  readDatabase(file, 'an nvprof database', (db) => read(db, file, model, progress));
  model.formats.add('nvvp');
}

function read(db: SqliteDb, file: string, model: TraceModel, progress?: (rows: number) => void): void {
  const tables = tablesOf(db);
  const rowsIn = (t: string): boolean => tables.has(t) && db.all(`SELECT 1 FROM "${t}" LIMIT 1`).length > 0;
  const metrics = rowsIn('CUPTI_ACTIVITY_KIND_METRIC') || rowsIn('CUPTI_ACTIVITY_KIND_EVENT');
  if (!ACTIVITY.some(rowsIn))
    throw new BadInputError(
      `an nvprof database with no timeline (none of ${ACTIVITY.map((t) => t.replace('CUPTI_ACTIVITY_KIND_', '')).join(', ')} holds a row${metrics ? '; it holds metrics or events, as nvprof --metrics writes' : ''}): profile the run with nvprof -o FILE.nvvp and no --metrics or --events, or with nsys`,
      file,
    );
  // nvprof creates the tables of the activity it recorded
  const has = (...kinds: string[]): boolean => kinds.some((k) => tables.has(`CUPTI_ACTIVITY_KIND_${k}`));
  if (has('KERNEL', 'CONCURRENT_KERNEL')) model.traced('kernels');
  if (has('MEMCPY', 'MEMCPY2')) model.traced('copies');
  if (has('RUNTIME', 'DRIVER')) model.traced('runtime');
  if (metrics)
    model.note(
      `${file}: the run collected metrics or events (nvprof --metrics / --events), which replays each kernel: kernel times are those of the replays, and copies and API calls are recorded only where their tables hold rows`,
    );
  const rows = sqliteRows(db, tables, file, model, progress);
  const { each, int, span } = rows;
  const strings = new Map<number, string>();
  for (const r of each('StringTable', ['_id_', 'value'])) if (typeof r.value === 'string') strings.set(int('StringTable', '_id_', r._id_), r.value);
  for (const r of each('CUPTI_ACTIVITY_KIND_DEVICE', ['id', 'name'], ['globalMemorySize'])) {
    const name = strings.get(int('DEVICE', 'name', r.name));
    const id = int('DEVICE', 'id', r.id);
    if (name === undefined || Number.isNaN(id)) continue;
    model.devices.set(id, name);
    const mem = int('DEVICE', 'globalMemorySize', r.globalMemorySize);
    if (mem > 0) model.deviceMemory.set(id, mem);
  }
  for (const T of ['CUPTI_ACTIVITY_KIND_MEMCPY', 'CUPTI_ACTIVITY_KIND_MEMCPY2'])
    for (const r of each(T, ['start', 'end', 'bytes', 'copyKind'], ['srcKind', 'dstKind', 'streamId', 'deviceId', 'correlationId'])) {
      const [start, end] = span(T, r);
      const dir = CUPTI_COPY_KIND[int(T, 'copyKind', r.copyKind)] ?? Direction.unknown;
      const src = MEM_KIND[int(T, 'srcKind', r.srcKind)] ?? MemKind.unknown;
      const dst = MEM_KIND[int(T, 'dstKind', r.dstKind)] ?? MemKind.unknown;
      pushCopy(model, rows, T, r, { start, end, dir, src, dst });
    }
  readMemsets(model, rows, 'CUPTI_ACTIVITY_KIND_MEMSET');
  for (const K of ['CUPTI_ACTIVITY_KIND_KERNEL', 'CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL'])
    readKernels(model, rows, K, ['name'], (r) => strings.get(int(K, 'name', r.name)));
  for (const [A, names] of [
    ['CUPTI_ACTIVITY_KIND_RUNTIME', RUNTIME_CBID],
    ['CUPTI_ACTIVITY_KIND_DRIVER', DRIVER_CBID],
  ] as const)
    for (const r of each(A, ['start', 'end', 'cbid'], ['threadId', 'correlationId'])) {
      const [start, end] = span(A, r);
      const name = names.get(int(A, 'cbid', r.cbid)) ?? '';
      model.runtime.push({
        start,
        end,
        api: classifyApi(name),
        thread: int(A, 'threadId', r.threadId) || 0,
        correlation: int(A, 'correlationId', r.correlationId),
      });
    }
  readSyncs(model, rows, 'CUPTI_ACTIVITY_KIND_SYNCHRONIZATION', 'type', CUPTI_SYNC_TYPE);
  readUnifiedMemory(rows, model);
  progress?.(rows.rows);
  if (model.kernels.length + model.copies.length + model.memsets.length + model.migrations.length === 0)
    model.note(`${file}: the database holds no GPU activity (no kernel, copy or memset; ${model.runtime.length} CUDA API calls)`);
}

/** Unified-memory counters: bytes moved as migrations (the flags hold the cause), and page faults. */
function readUnifiedMemory({ each, int, span }: SqliteRows, model: TraceModel): void {
  const T = 'CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER';
  let any = false;
  for (const r of each(T, ['start', 'end', 'counterKind', 'value'], ['address', 'flags'])) {
    any = true;
    const [start, end] = span(T, r);
    const kind = int(T, 'counterKind', r.counterKind);
    const value = int(T, 'value', r.value);
    const dir = UM_BYTES[kind];
    if (dir !== undefined) {
      const cause = int(T, 'flags', r.flags);
      model.migrations.push({ start, end, bytes: value, dir, cause: cause >= 0 && cause <= 5 ? cause : MigrationCause.unknown, device: 0 });
    } else if (kind === UM_GPU_PAGE_FAULT)
      model.faults.push({ time: start, duration: end - start, bytes: Number.NaN, kind: 1, address: int(T, 'address', r.address) });
    else if (kind === UM_CPU_PAGE_FAULT)
      // a CPU fault counter row counts the faults in its interval
      for (let i = 0; i < Math.min(value, 1_000_000); i++)
        model.faults.push({ time: start, duration: 0, bytes: Number.NaN, kind: 0, address: int(T, 'address', r.address) });
  }
  // nvprof's unified-memory profiling records transfers and faults together: counters in the table say it was on
  if (any) model.traced('faults');
}
