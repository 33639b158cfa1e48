/**
 * nvprof's databases (`nvprof -o FILE.nvvp` or `.nvprof`, CUDA 11 and earlier; the NVIDIA Visual Profiler opens
 * them): SQLite with one table per CUPTI activity kind, rows keyed by `_id_`, strings (kernel and device names) in
 * StringTable, and API calls named by CUPTI callback id. Enumerations are CUPTI's own, not Nsight Systems':
 * memory kinds 0 unknown, 1 pageable, 2 pinned, 3 device, 4 array, 5 managed, 6 device static, 7 managed static
 * (CUpti_ActivityMemoryKind); copy kinds 1 HtoD, 2 DtoH, 3 HtoA, 4 AtoH, 5 AtoA, 6 AtoD, 7 DtoA, 8 DtoD, 9 HtoH,
 * 10 PtoP (CUpti_ActivityMemcpyKind). Unified memory is CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER: bytes moved per
 * direction (the flags hold the migration cause) and page faults.
 */
import { BadInputError, isGpuError } from '../../errors.js';
import { columnsOf, openSqlite, tablesOf, type SqliteDb } from '../../input/sqlite.js';
import { Direction, MemKind, MigrationCause, SyncKind, classifyApi, type TraceModel } from '../model.js';
import { DRIVER_CBID, RUNTIME_CBID } from './cupti-cbid.js';

/** CUpti_ActivityMemcpyKind. */
const COPY_KIND: Record<number, number> = {
  1: Direction.HtoD,
  2: Direction.DtoH,
  3: Direction.HtoD,
  4: Direction.DtoH,
  5: Direction.DtoD,
  6: Direction.DtoD,
  7: Direction.DtoD,
  8: Direction.DtoD,
  9: Direction.HtoH,
  10: Direction.PtoP,
};
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
/** CUpti_ActivitySynchronizationType. */
const SYNC_TYPE: Record<number, number> = { 1: SyncKind.event, 2: SyncKind.streamWait, 3: SyncKind.stream, 4: SyncKind.device };
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
  const db = openSqlite(file, { what: 'an nvprof database' });
  try {
    read(db, file, model, progress);
  } catch (e) {
    if (isGpuError(e)) throw e;
    throw new BadInputError(`cannot read it as an nvprof database: ${(e as Error).message}`, file, { cause: e });
  } finally {
    db.close();
  }
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
  let rows = 0;
  const strings = new Map<number, string>();
  if (tables.has('StringTable'))
    for (const r of db.iterate('SELECT _id_ AS id, value FROM StringTable')) if (typeof r.value === 'string') strings.set(num(r.id), r.value);
  const each = function* (t: string, need: string[], optional: string[] = []): Generator<Record<string, unknown>> {
    if (!tables.has(t)) return;
    const have = columnsOf(db, t);
    for (const c of need) if (!have.has(c)) throw new BadInputError(`table ${t} has no ${c} column`, file);
    const cols = [...need, ...optional].map((c) => (have.has(c) ? `"${c}"` : `NULL AS "${c}"`)).join(', ');
    for (const r of db.iterate(`SELECT ${cols} FROM "${t}"`)) {
      if (++rows % 200_000 === 0) progress?.(rows);
      yield r;
    }
  };
  const int = (t: string, c: string, v: unknown): number => {
    if (v === null || v === undefined) return Number.NaN;
    const n = num(v);
    if (Number.isNaN(n)) throw new BadInputError(`table ${t} column ${c} holds ${String(v).slice(0, 30)}, not an integer`, file);
    return n;
  };
  const span = (t: string, r: Record<string, unknown>): [number, number] => {
    for (const c of ['start', 'end'] as const)
      if (typeof r[c] !== 'bigint' && typeof r[c] !== 'number')
        throw new BadInputError(`table ${t} column ${c} holds ${String(r[c]).slice(0, 30)}, not a timestamp`, file);
    const s = model.time(r.start as bigint);
    const e = model.time(r.end as bigint);
    if (e < s) throw new BadInputError(`table ${t}: a row ends before it starts`, file);
    return [s, e];
  };
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
      const dir = COPY_KIND[int(T, 'copyKind', r.copyKind)] ?? Direction.unknown;
      const src = MEM_KIND[int(T, 'srcKind', r.srcKind)] ?? MemKind.unknown;
      const dst = MEM_KIND[int(T, 'dstKind', r.dstKind)] ?? MemKind.unknown;
      if ((dir === Direction.HtoD && src === MemKind.unknown) || (dir === Direction.DtoH && dst === MemKind.unknown)) model.hostKindUnknown++;
      model.copies.push({
        start,
        end,
        dir,
        src,
        dst,
        bytes: int(T, 'bytes', r.bytes),
        stream: int(T, 'streamId', r.streamId) || 0,
        device: int(T, 'deviceId', r.deviceId) || 0,
        correlation: int(T, 'correlationId', r.correlationId),
        hostAddr: Number.NaN,
        op: -1,
      });
    }
  let T = 'CUPTI_ACTIVITY_KIND_MEMSET';
  for (const r of each(T, ['start', 'end'], ['bytes', 'streamId', 'deviceId'])) {
    const [start, end] = span(T, r);
    model.memsets.push({
      start,
      end,
      bytes: int(T, 'bytes', r.bytes),
      stream: int(T, 'streamId', r.streamId) || 0,
      device: int(T, 'deviceId', r.deviceId) || 0,
    });
  }
  for (const K of ['CUPTI_ACTIVITY_KIND_KERNEL', 'CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL'])
    for (const r of each(K, ['start', 'end'], ['name', 'streamId', 'deviceId'])) {
      const [start, end] = span(K, r);
      model.kernels.push({ start, end, stream: int(K, 'streamId', r.streamId) || 0, device: int(K, 'deviceId', r.deviceId) || 0 });
      model.addKernelName(strings.get(int(K, 'name', r.name)) ?? 'kernel', end - start);
    }
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
  T = 'CUPTI_ACTIVITY_KIND_SYNCHRONIZATION';
  for (const r of each(T, ['start', 'end'], ['type', 'streamId', 'correlationId'])) {
    const [start, end] = span(T, r);
    const stream = int(T, 'streamId', r.streamId);
    model.syncs.push({
      start,
      end,
      stream: Number.isNaN(stream) || stream === 0xffffffff ? -1 : stream,
      kind: SYNC_TYPE[int(T, 'type', r.type)] ?? SyncKind.unknown,
      correlation: int(T, 'correlationId', r.correlationId),
    });
  }
  readUnifiedMemory(each, int, span, model);
  progress?.(rows);
  if (model.kernels.length + model.copies.length + model.memsets.length + model.migrations.length === 0)
    model.note(`${file}: the database holds no GPU activity (no kernel, copy or memset; ${model.runtime.length} CUDA API calls)`);
}

/** Unified-memory counters: bytes moved as migrations (the flags hold the cause), and page faults. */
function readUnifiedMemory(
  each: (t: string, need: string[], optional?: string[]) => Generator<Record<string, unknown>>,
  int: (t: string, c: string, v: unknown) => number,
  span: (t: string, r: Record<string, unknown>) => [number, number],
  model: TraceModel,
): void {
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

/** A number from an SQLite integer (bigint), or NaN. */
function num(v: unknown): number {
  if (typeof v === 'bigint') return v >= -(2n ** 63n) && v <= 2n ** 63n ? Number(v) : Number.NaN;
  return typeof v === 'number' && Number.isFinite(v) ? v : Number.NaN;
}
