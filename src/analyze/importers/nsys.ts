/**
 * Nsight Systems SQLite exports (`nsys export --type sqlite`), read through input/sqlite.ts: the CUPTI activity tables
 * (MEMCPY, MEMSET, KERNEL, RUNTIME, SYNCHRONIZATION), CUDA_GPU_MEMORY_USAGE_EVENTS and the unified-memory page-fault
 * tables. Tables are created lazily by nsys, so any may be missing; columns are checked before they are read.
 * Enumerations are Nsight's, not CUPTI's: memory kinds 0 pageable, 1 pinned, 2 device, 3 array, 4 managed, 5 device
 * static, 6 managed static, 7 unknown (ENUM_CUDA_MEM_KIND); copy kinds 1 HtoD, 2 DtoH, 3 HtoA, 4 AtoH, 5 AtoA, 6 AtoD,
 * 7 DtoA, 8 DtoD, 9 HtoH, 10 PtoP, 11-13 unified-memory HtoD / DtoH / DtoD (ENUM_CUDA_MEMCPY_OPER); synchronisation
 * types 1 event, 2 stream wait, 3 stream, 4 context (ENUM_CUPTI_SYNC_TYPE). Recent exports carry these tables and
 * they are read where present (by their labels); older exports do not, and get the numbering above.
 */
import { BadInputError, isGpuError } from '../../errors.js';
import { columnsOf, expectTables, openSqlite, tablesOf, type SqliteDb } from '../../input/sqlite.js';
import { AllocLevel, Direction, MemKind, SyncKind, classifyApi, type TraceModel } from '../model.js';

/** Nsight's copy kinds when the export has no ENUM_CUDA_MEMCPY_OPER table. */
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
  11: Direction.HtoD,
  12: Direction.DtoH,
  13: Direction.DtoD,
};
/** Nsight's memory kinds when the export has no ENUM_CUDA_MEM_KIND table. */
const MEM_KIND: Record<number, number> = {
  0: MemKind.pageable,
  1: MemKind.pinned,
  2: MemKind.device,
  3: MemKind.array,
  4: MemKind.managed,
  5: MemKind.device,
  6: MemKind.managed,
  7: MemKind.unknown,
};
/** Nsight's synchronisation types when the export has no ENUM_CUPTI_SYNC_TYPE table. */
const SYNC_TYPE: Record<number, number> = { 1: SyncKind.event, 2: SyncKind.streamWait, 3: SyncKind.stream, 4: SyncKind.device };

/** A memory kind from an enum label ("Pageable", "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Managed Static"). */
function memKindLabel(label: string): number {
  const l = label.toLowerCase();
  if (l.includes('pageable')) return MemKind.pageable;
  if (l.includes('pinned')) return MemKind.pinned;
  if (l.includes('managed')) return MemKind.managed;
  if (l.includes('array')) return MemKind.array;
  if (l.includes('device')) return MemKind.device;
  return MemKind.unknown;
}

/** A copy direction from an enum label ("Host-to-Device", "CUDA_MEMCPY_KIND_UVM_DTOH"). */
function copyKindLabel(label: string): number {
  const l = label.toUpperCase().replace(/[^A-Z]/g, '');
  if (/HTOD|HOSTTODEVICE|HTOA|HOSTTOARRAY/.test(l)) return Direction.HtoD;
  if (/DTOH|DEVICETOHOST|ATOH|ARRAYTOHOST/.test(l)) return Direction.DtoH;
  if (/PTOP|PEERTOPEER/.test(l)) return Direction.PtoP;
  if (/HTOH|HOSTTOHOST/.test(l)) return Direction.HtoH;
  if (/DTOD|DEVICETODEVICE|ATOA|ATOD|DTOA|ARRAYTO|TOARRAY/.test(l)) return Direction.DtoD;
  return Direction.unknown;
}

/** A synchronisation kind from an enum label ("Event sync", "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT"). */
function syncLabel(label: string): number {
  const l = label.toUpperCase().replace(/[^A-Z]/g, '');
  if (/STREAMWAIT/.test(l)) return SyncKind.streamWait;
  if (/EVENT/.test(l)) return SyncKind.event;
  if (/STREAM/.test(l)) return SyncKind.stream;
  if (/CONTEXT/.test(l)) return SyncKind.device;
  return SyncKind.unknown;
}

/** The other tables the reader reads, besides the four activity tables that mark an export. */
const NSYS_TABLES = [
  'StringIds',
  'TARGET_INFO_GPU',
  'ENUM_CUDA_MEM_KIND',
  'ENUM_CUDA_MEMCPY_OPER',
  'ENUM_CUPTI_SYNC_TYPE',
  'CUPTI_ACTIVITY_KIND_SYNCHRONIZATION',
  'CUDA_GPU_MEMORY_USAGE_EVENTS',
  'CUDA_UM_CPU_PAGE_FAULT_EVENTS',
  'CUDA_UM_GPU_PAGE_FAULT_EVENTS',
];

/** SQLite files start with this 16-byte header. */
export const SQLITE_MAGIC = 'SQLite format 3\0';

/**
 * Reads an nsys SQLite export into the model.
 * @throws BadInputError when the file is not SQLite or not an nsys export, or holds values of the wrong type.
 */
export async function importNsys(file: string, model: TraceModel, progress?: (rows: number) => void): Promise<void> {
  const db = openSqlite(file, { what: 'an Nsight Systems export' });
  try {
    read(db, file, model, progress);
  } catch (e) {
    if (isGpuError(e)) throw e;
    throw new BadInputError(`cannot read it as an nsys export: ${(e as Error).message}`, file, { cause: e });
  } finally {
    db.close();
  }
  model.formats.add('nsys-sqlite');
}

function read(db: SqliteDb, file: string, model: TraceModel, progress?: (rows: number) => void): void {
  const known = ['CUPTI_ACTIVITY_KIND_MEMCPY', 'CUPTI_ACTIVITY_KIND_KERNEL', 'CUPTI_ACTIVITY_KIND_RUNTIME', 'CUPTI_ACTIVITY_KIND_MEMSET'];
  // nsys writes every object read here as a table: a view of one of those names is not an nsys export (and a view
  // can hold a query that never ends)
  expectTables(db, file, [...known, ...NSYS_TABLES], 'Nsight Systems');
  const tables = tablesOf(db, ['table']);
  if (!known.some((t) => tables.has(t)))
    throw new BadInputError(
      `an Nsight Systems export with no CUDA activity (no CUPTI_ACTIVITY_KIND_* table${tables.has('OSRT_API') ? '; it holds OS runtime calls' : ''}): the run was recorded without --trace=cuda, or its CUDA work fell outside the profiled range`,
      file,
    );
  // nsys --trace=cuda records kernels, copies and runtime calls together (a table is written only where events were)
  model.traced('kernels', 'copies', 'runtime');
  const columns = (t: string): Set<string> => columnsOf(db, t);
  /** A small integer id as the binding gives it (a bigint), or undefined. */
  const id = (v: unknown): number | undefined =>
    typeof v === 'bigint' && v >= 0n && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : typeof v === 'number' && Number.isSafeInteger(v) ? v : undefined;
  const strings = new Map<number, string>();
  if (tables.has('StringIds'))
    for (const r of db.iterate('SELECT id, value FROM StringIds')) {
      const k = id(r.id);
      if (k !== undefined && typeof r.value === 'string') strings.set(k, r.value);
    }
  if (tables.has('TARGET_INFO_GPU')) {
    const c = columns('TARGET_INFO_GPU');
    if (c.has('id') && c.has('name'))
      for (const r of db.all(`SELECT id, name, ${c.has('totalMemory') ? 'totalMemory' : 'NULL'} AS mem FROM TARGET_INFO_GPU`)) {
        const k = id(r.id);
        if (k === undefined || typeof r.name !== 'string') continue;
        model.devices.set(k, r.name);
        const mem = id(r.mem);
        if (mem !== undefined && mem > 0) model.deviceMemory.set(k, mem);
      }
  }
  // The export's own enumerations, by label, where it carries them.
  const enumTable = (t: string, fromLabel: (label: string) => number, fallback: Record<number, number>): Record<number, number> => {
    if (!tables.has(t)) return fallback;
    const c = columns(t);
    const label = c.has('label') ? 'label' : c.has('name') ? 'name' : undefined;
    if (!c.has('id') || !label) return fallback;
    const out: Record<number, number> = {};
    for (const r of db.all(`SELECT id, "${label}" AS label FROM "${t}"`)) {
      const k = id(r.id);
      if (k !== undefined && typeof r.label === 'string') out[k] = fromLabel(r.label);
    }
    return out;
  };
  const memKinds = enumTable('ENUM_CUDA_MEM_KIND', memKindLabel, MEM_KIND);
  const copyKinds = enumTable('ENUM_CUDA_MEMCPY_OPER', copyKindLabel, COPY_KIND);
  const syncTypes = enumTable('ENUM_CUPTI_SYNC_TYPE', syncLabel, SYNC_TYPE);
  let rows = 0;
  /** Rows of a table with the wanted columns (missing optional ones read as NULL); start/end as bigints. */
  const each = function* (t: string, need: string[], optional: string[] = []): Generator<Record<string, unknown>> {
    if (!tables.has(t)) return;
    const have = columns(t);
    for (const c of need) if (!have.has(c)) throw new BadInputError(`table ${t} has no ${c} column`, file);
    const cols = [...need, ...optional].map((c) => (have.has(c) ? `"${c}"` : `NULL AS "${c}"`)).join(', ');
    for (const r of db.iterate(`SELECT ${cols} FROM "${t}"`)) {
      if (++rows % 200_000 === 0) progress?.(rows);
      yield r;
    }
  };
  const int = (t: string, c: string, v: unknown): number => {
    if (v === null || v === undefined) return Number.NaN;
    if (typeof v === 'bigint' && v >= 0n && v <= 2n ** 63n) return Number(v);
    if (typeof v === 'number' && Number.isFinite(v)) return v;
    throw new BadInputError(`table ${t} column ${c} holds ${typeof v === 'string' ? JSON.stringify(v.slice(0, 30)) : String(v)}, not an integer`, file);
  };
  const stamp = (t: string, c: string, v: unknown): number => {
    if (typeof v === 'bigint' || (typeof v === 'number' && Number.isFinite(v))) return model.time(v);
    throw new BadInputError(`table ${t} column ${c} holds ${String(v).slice(0, 30)}, not a timestamp`, file);
  };
  const span = (t: string, r: Record<string, unknown>): [number, number] => {
    const s = stamp(t, 'start', r.start);
    const e = stamp(t, 'end', r.end);
    if (e < s) throw new BadInputError(`table ${t}: a row ends before it starts`, file);
    return [s, e];
  };

  let T = 'CUPTI_ACTIVITY_KIND_MEMCPY';
  for (const r of each(T, ['start', 'end', 'bytes', 'copyKind'], ['srcKind', 'dstKind', 'streamId', 'deviceId', 'correlationId', 'migrationCause'])) {
    const [start, end] = span(T, r);
    const copyKind = int(T, 'copyKind', r.copyKind);
    const dir = copyKinds[copyKind] ?? Direction.unknown;
    // a unified-memory migration (its cause recorded, or a UVM copy kind) moves managed pages, whatever the kinds say
    const migration = int(T, 'migrationCause', r.migrationCause) > 0 || copyKind >= 11;
    const src = migration ? MemKind.managed : (memKinds[int(T, 'srcKind', r.srcKind)] ?? MemKind.unknown);
    const dst = migration ? MemKind.managed : (memKinds[int(T, 'dstKind', r.dstKind)] ?? MemKind.unknown);
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
  T = 'CUPTI_ACTIVITY_KIND_MEMSET';
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
  T = 'CUPTI_ACTIVITY_KIND_KERNEL';
  for (const r of each(T, ['start', 'end'], ['shortName', 'demangledName', 'streamId', 'deviceId'])) {
    const [start, end] = span(T, r);
    model.kernels.push({ start, end, stream: int(T, 'streamId', r.streamId) || 0, device: int(T, 'deviceId', r.deviceId) || 0 });
    const id = r.shortName ?? r.demangledName;
    model.addKernelName(strings.get(int(T, 'shortName', id)) ?? 'kernel', end - start);
  }
  T = 'CUPTI_ACTIVITY_KIND_RUNTIME';
  // Exports taken with --cudabacktrace hold some calls twice, an outer row with the call chain and an inner one, both
  // with the call's correlation id: one call is kept once.
  const callSeen = new Set<string>();
  for (const r of each(T, ['start', 'end', 'nameId'], ['globalTid', 'correlationId'])) {
    const [start, end] = span(T, r);
    const correlation = int(T, 'correlationId', r.correlationId);
    if (!Number.isNaN(correlation) && correlation !== 0) {
      const key = `${String(r.globalTid)}:${correlation}`;
      if (callSeen.has(key)) continue;
      callSeen.add(key);
    }
    const name = strings.get(int(T, 'nameId', r.nameId)) ?? '';
    model.runtime.push({
      start,
      end,
      api: classifyApi(name),
      thread: int(T, 'globalTid', r.globalTid) || 0,
      correlation,
    });
  }
  T = 'CUPTI_ACTIVITY_KIND_SYNCHRONIZATION';
  for (const r of each(T, ['start', 'end'], ['streamId', 'syncType', 'correlationId'])) {
    const [start, end] = span(T, r);
    const stream = int(T, 'streamId', r.streamId);
    const type = int(T, 'syncType', r.syncType);
    model.syncs.push({
      start,
      end,
      stream: Number.isNaN(stream) ? -1 : stream,
      kind: syncTypes[type] ?? SyncKind.unknown,
      correlation: int(T, 'correlationId', r.correlationId),
    });
  }
  T = 'CUDA_GPU_MEMORY_USAGE_EVENTS';
  for (const r of each(T, ['start', 'bytes', 'memoryOperationType'], ['address', 'deviceId', 'memKind'])) {
    const op = int(T, 'memoryOperationType', r.memoryOperationType);
    const bytes = int(T, 'bytes', r.bytes);
    const kind = memKinds[int(T, 'memKind', r.memKind)];
    model.allocs.push({
      time: stamp(T, 'start', r.start),
      bytes: op === 1 ? -bytes : bytes,
      device: int(T, 'deviceId', r.deviceId) || 0,
      address: int(T, 'address', r.address),
      allocated: Number.NaN,
      reserved: Number.NaN,
      host: kind === MemKind.pinned || kind === MemKind.pageable ? 1 : kind === undefined ? Number.NaN : 0,
      agent: -1,
      level: AllocLevel.driver,
    });
  }
  T = 'CUDA_UM_GPU_PAGE_FAULT_EVENTS';
  for (const r of each(T, ['start'], ['end', 'address', 'numberOfPageFaults'])) {
    const time = stamp(T, 'start', r.start);
    const end = r.end === null ? time : stamp(T, 'end', r.end);
    model.faults.push({ time, duration: Math.max(0, end - time), bytes: Number.NaN, kind: 1, address: int(T, 'address', r.address) });
  }
  T = 'CUDA_UM_CPU_PAGE_FAULT_EVENTS';
  for (const r of each(T, ['start'], ['address']))
    model.faults.push({ time: stamp(T, 'start', r.start), duration: 0, bytes: Number.NaN, kind: 0, address: int(T, 'address', r.address) });
  progress?.(rows);
  if (model.kernels.length + model.copies.length + model.memsets.length === 0)
    model.note(
      `${file}: the export holds no GPU activity (no kernel, copy or memset; ${model.runtime.length} CUDA API calls): did the GPU work fall outside the profiled range?`,
    );
}
