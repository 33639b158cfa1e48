/**
 * Nsight Systems SQLite exports (`nsys export --type sqlite`), read through input/sqlite.ts: the CUPTI activity tables
 * (MEMCPY, MEMSET, KERNEL, RUNTIME, SYNCHRONIZATION), CUDA_GPU_MEMORY_USAGE_EVENTS and the unified-memory page-fault
 * tables. Tables are created lazily by nsys, so any may be missing; columns are checked before they are read.
 * Enumerations are Nsight's, not CUPTI's: memory kinds 0 pageable, 1 pinned, 2 device, 3 array, 4 managed, 5 device
 * static, 6 managed static, 7 unknown (ENUM_CUDA_MEM_KIND); copy kinds 1 HtoD, 2 DtoH, 3 HtoA, 4 AtoH, 5 AtoA, 6 AtoD,
 * 7 DtoA, 8 DtoD, 9 HtoH, 10 PtoP, 11-13 unified-memory HtoD / DtoH / DtoD (ENUM_CUDA_MEMCPY_OPER); synchronisation
 * types 1 event, 2 stream wait, 3 stream, 4 context (ENUM_CUPTI_SYNC_TYPE). Recent exports carry these tables and
 * they are read where present (by their labels); older exports do not, and get the numbering above. Copies of the
 * unified-memory kinds are the driver's page migrations, kept apart from the program's copies (model.migrations).
 */
import { BadInputError } from '../../errors.js';
import { columnsOf, expectTables, tablesOf, type SqliteDb } from '../../input/sqlite.js';
import { readDatabase, sqliteRows } from './sqlite-rows.js';
import { CUPTI_COPY_KIND, CUPTI_SYNC_TYPE, pushCopy, readKernels, readMemsets, readSyncs } from './cupti-records.js';
import { AllocLevel, Direction, MemKind, MigrationCause, SyncKind, classifyApi, type TraceModel } from '../model.js';

/** Nsight's copy kinds when the export has no ENUM_CUDA_MEMCPY_OPER table: CUPTI's, and 11-13 for unified memory. */
const COPY_KIND: Record<number, number> = { ...CUPTI_COPY_KIND, 11: Direction.HtoD, 12: Direction.DtoH, 13: Direction.DtoD };
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

/** A migration cause from an enum label ("User prefetch", "CUDA_UNIFIED_MEMORY_MIGRATION_CAUSE_COHERENCE"). */
function migrationLabel(label: string): number {
  const l = label.toUpperCase().replace(/[^A-Z]/g, '');
  if (/USER/.test(l)) return MigrationCause.userPrefetch;
  if (/SPECUL|CAUSEPREFETCH$/.test(l)) return MigrationCause.speculativePrefetch;
  if (/PAGEFAULT|COHERENCE/.test(l)) return MigrationCause.pageFault;
  if (/EVICT/.test(l)) return MigrationCause.eviction;
  if (/ACCESSCOUNTER/.test(l)) return MigrationCause.accessCounters;
  return MigrationCause.unknown;
}

/** CUPTI's migration causes when the export has no ENUM_CUDA_UNIF_MEM_MIGRATION table (the numbering is CUPTI's). */
const MIGRATION_CAUSE: Record<number, number> = { 0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 5 };

/** Copy kinds that are unified-memory migrations, by the export's label ("Unified Host-to-Device", "..._UVM_HTOD"). */
const isUnifiedLabel = (label: string): boolean => /UVM|UNIFIED/i.test(label);

/** A small integer id as the binding gives it (a bigint), or undefined. */
const smallId = (v: unknown): number | undefined =>
  typeof v === 'bigint' && v >= 0n && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : typeof v === 'number' && Number.isSafeInteger(v) ? v : undefined;

/**
 * The GPUs an export names: TARGET_INFO_GPU (id and totalMemory; exports before about 2021 name the device under
 * deviceId and give no memory), with the memory from TARGET_INFO_CUDA_GPU (globalMemorySize) where that is all
 * there is.
 */
function readDevices(db: SqliteDb, tables: Set<string>, model: TraceModel): void {
  const pick = (c: Set<string>, ...names: string[]): string | undefined => names.find((n) => c.has(n));
  for (const [t, idCols, memCols] of [
    ['TARGET_INFO_GPU', ['id', 'deviceId', 'cuDevice'], ['totalMemory']],
    ['TARGET_INFO_CUDA_GPU', ['deviceId', 'id'], ['globalMemorySize', 'totalMemory']],
  ] as const) {
    if (!tables.has(t)) continue;
    const c = columnsOf(db, t);
    const idCol = pick(c, ...idCols);
    const memCol = pick(c, ...memCols);
    if (!idCol || !c.has('name')) continue;
    for (const r of db.all(`SELECT "${idCol}" AS id, name, ${memCol ? `"${memCol}"` : 'NULL'} AS mem FROM "${t}"`)) {
      const k = smallId(r.id);
      if (k === undefined || typeof r.name !== 'string' || r.name === '') continue;
      if (!model.devices.has(k)) model.devices.set(k, r.name);
      const mem = smallId(r.mem);
      if (mem !== undefined && mem > 0 && !model.deviceMemory.has(k)) model.deviceMemory.set(k, mem);
    }
  }
}

/**
 * Whether the run recorded unified-memory page faults: the capture settings say so (META_DATA_CAPTURE's
 * COLLECT_UVM_CPU_PAGE_FAULTS / COLLECT_UVM_GPU_PAGE_FAULTS, nsys profile --cuda-um-cpu-page-faults /
 * --cuda-um-gpu-page-faults), whatever the fault tables hold. Older exports create every table whether or not its
 * activity was traced, so an empty fault table alone does not say that faults were recorded.
 */
function faultsTraced(db: SqliteDb, tables: Set<string>): boolean {
  if (!tables.has('META_DATA_CAPTURE')) return false;
  const c = columnsOf(db, 'META_DATA_CAPTURE');
  if (!c.has('name') || !c.has('value')) return false;
  return db
    .all("SELECT value FROM META_DATA_CAPTURE WHERE name LIKE '%COLLECT_UVM_%PAGE_FAULTS'")
    .some((r) => typeof r.value === 'string' && r.value.toLowerCase() === 'true');
}

/** The other tables the reader reads, besides the four activity tables that mark an export. */
const NSYS_TABLES = [
  'StringIds',
  'TARGET_INFO_GPU',
  'TARGET_INFO_CUDA_GPU',
  'META_DATA_CAPTURE',
  'ENUM_CUDA_MEM_KIND',
  'ENUM_CUDA_MEMCPY_OPER',
  'ENUM_CUPTI_SYNC_TYPE',
  'ENUM_CUDA_UNIF_MEM_MIGRATION',
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
  readDatabase(file, 'an Nsight Systems export', (db) => read(db, file, model, progress));
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
  if (faultsTraced(db, tables)) model.traced('faults');
  const columns = (t: string): Set<string> => columnsOf(db, t);
  const id = smallId;
  const strings = new Map<number, string>();
  if (tables.has('StringIds'))
    for (const r of db.iterate('SELECT id, value FROM StringIds')) {
      const k = id(r.id);
      if (k !== undefined && typeof r.value === 'string') strings.set(k, r.value);
    }
  readDevices(db, tables, model);
  // The export's own enumerations, by label, where it carries them.
  /** An enumeration's labels by id, where the export carries the table. */
  const labels = (t: string): Map<number, string> | undefined => {
    if (!tables.has(t)) return undefined;
    const c = columns(t);
    const label = c.has('label') ? 'label' : c.has('name') ? 'name' : undefined;
    if (!c.has('id') || !label) return undefined;
    const out = new Map<number, string>();
    for (const r of db.all(`SELECT id, "${label}" AS label FROM "${t}"`)) {
      const k = id(r.id);
      if (k !== undefined && typeof r.label === 'string') out.set(k, r.label);
    }
    return out;
  };
  const enumTable = (t: string, fromLabel: (label: string) => number, fallback: Record<number, number>): Record<number, number> => {
    const l = labels(t);
    return l ? Object.fromEntries([...l].map(([k, v]) => [k, fromLabel(v)])) : fallback;
  };
  const memKinds = enumTable('ENUM_CUDA_MEM_KIND', memKindLabel, MEM_KIND);
  const copyKinds = enumTable('ENUM_CUDA_MEMCPY_OPER', copyKindLabel, COPY_KIND);
  const syncTypes = enumTable('ENUM_CUPTI_SYNC_TYPE', syncLabel, CUPTI_SYNC_TYPE);
  const causes = enumTable('ENUM_CUDA_UNIF_MEM_MIGRATION', migrationLabel, MIGRATION_CAUSE);
  const copyLabels = labels('ENUM_CUDA_MEMCPY_OPER');
  // unified-memory copy kinds: by the export's labels, else Nsight's numbering (11-13)
  const unified = (kind: number): boolean => (copyLabels ? isUnifiedLabel(copyLabels.get(kind) ?? '') : kind >= 11 && kind <= 13);
  const rows = sqliteRows(db, tables, file, model, progress);
  const { each, int, stamp, span } = rows;

  let T = 'CUPTI_ACTIVITY_KIND_MEMCPY';
  for (const r of each(T, ['start', 'end', 'bytes', 'copyKind'], ['srcKind', 'dstKind', 'streamId', 'deviceId', 'correlationId', 'migrationCause'])) {
    const [start, end] = span(T, r);
    const copyKind = int(T, 'copyKind', r.copyKind);
    const dir = copyKinds[copyKind] ?? Direction.unknown;
    const cause = int(T, 'migrationCause', r.migrationCause);
    // a unified-memory migration (a UVM copy kind, or its cause recorded) is the driver moving managed pages: not
    // one of the program's copies, kept apart from them
    if (unified(copyKind) || cause > 0) {
      model.migrations.push({
        start,
        end,
        bytes: int(T, 'bytes', r.bytes),
        dir,
        cause: causes[cause] ?? MigrationCause.unknown,
        device: int(T, 'deviceId', r.deviceId) || 0,
      });
      continue;
    }
    const src = memKinds[int(T, 'srcKind', r.srcKind)] ?? MemKind.unknown;
    const dst = memKinds[int(T, 'dstKind', r.dstKind)] ?? MemKind.unknown;
    pushCopy(model, rows, T, r, { start, end, dir, src, dst });
  }
  readMemsets(model, rows, 'CUPTI_ACTIVITY_KIND_MEMSET');
  readKernels(model, rows, 'CUPTI_ACTIVITY_KIND_KERNEL', ['shortName', 'demangledName'], (r) =>
    strings.get(int('KERNEL', 'shortName', r.shortName ?? r.demangledName)),
  );
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
  readSyncs(model, rows, 'CUPTI_ACTIVITY_KIND_SYNCHRONIZATION', 'syncType', syncTypes);
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
  progress?.(rows.rows);
  if (model.kernels.length + model.copies.length + model.memsets.length + model.migrations.length === 0)
    model.note(
      `${file}: the export holds no GPU activity (no kernel, copy or memset; ${model.runtime.length} CUDA API calls): did the GPU work fall outside the profiled range?`,
    );
}
