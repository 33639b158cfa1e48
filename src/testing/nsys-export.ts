/**
 * Small Nsight Systems SQLite exports written by the tests, in the table layout `nsys export --type sqlite` writes
 * (the columns of the exports in ../shared/traces: CUPTI_ACTIVITY_KIND_MEMCPY with copyKind / srcKind / dstKind /
 * migrationCause, StringIds, TARGET_INFO_GPU, the ENUM_* tables and META_DATA_CAPTURE of recent releases). Each
 * test writes only the tables its case needs; nothing here was recorded by nsys.
 */
import { openSqlite } from '../input/sqlite.js';

export interface NsysCopy {
  start: number;
  end: number;
  bytes: number;
  copyKind: number;
  srcKind?: number;
  dstKind?: number;
  migrationCause?: number;
  deviceId?: number;
  correlationId?: number;
}

export interface NsysExport {
  copies?: NsysCopy[];
  kernels?: Array<{ start: number; end: number; name?: string; deviceId?: number }>;
  /** Runtime calls by name. */
  runtime?: Array<{ start: number; end: number; name: string; correlationId?: number }>;
  /** TARGET_INFO_GPU rows; `column` names the id column ('id' today, 'deviceId' in exports before about 2021). */
  gpus?: { column: 'id' | 'deviceId'; rows: Array<{ id: number; name: string; totalMemory?: number }> };
  /** Write the ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND and ENUM_CUDA_UNIF_MEM_MIGRATION tables (recent exports). */
  enums?: boolean;
  /** META_DATA_CAPTURE rows (name, value), as nsys 2023 and later write them. */
  capture?: Array<[string, string]>;
  /** Create the unified-memory fault tables (empty unless rows are given), as older exports create every table. */
  faultTables?: { gpu?: Array<{ start: number; end: number; address: number }>; cpu?: Array<{ start: number; address: number }> };
}

/** Nsight's labels for its copy kinds, memory kinds and migration causes, as the exports carry them. */
const MEMCPY_OPER = [
  'Unknown',
  'Host-to-Device',
  'Device-to-Host',
  'Host-to-Array',
  'Array-to-Host',
  'Array-to-Array',
  'Array-to-Device',
  'Device-to-Array',
  'Device-to-Device',
  'Host-to-Host',
  'Peer-to-Peer',
  'Unified Host-to-Device',
  'Unified Device-to-Host',
  'Unified Device-to-Device',
];
const MEM_KIND = ['Pageable', 'Pinned', 'Device', 'Array', 'Managed', 'Device Static', 'Managed Static', 'Unknown'];
const MIGRATION = ['Unknown', 'User prefetch', 'Page fault', 'Speculative prefecth', 'Eviction', 'Access counters'];

/** Writes an export to `file`. */
export function writeNsysExport(file: string, e: NsysExport): void {
  const db = openSqlite(file, { write: true });
  try {
    const strings = new Map<string, number>();
    const sid = (s: string): number => {
      let k = strings.get(s);
      if (k === undefined) strings.set(s, (k = strings.size + 1));
      return k;
    };
    db.exec('CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)');
    db.exec(
      'CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER, migrationCause INTEGER)',
    );
    for (const c of e.copies ?? [])
      db.run(
        'INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, ?, 1, 7, ?, 1, ?, ?, ?, ?, ?)',
        c.start,
        c.end,
        c.deviceId ?? 0,
        c.correlationId ?? 0,
        c.bytes,
        c.copyKind,
        c.srcKind ?? 7,
        c.dstKind ?? 7,
        c.migrationCause ?? 0,
      );
    db.exec('CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER, streamId INTEGER, shortName INTEGER)');
    for (const k of e.kernels ?? [])
      db.run('INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, 7, ?)', k.start, k.end, k.deviceId ?? 0, sid(k.name ?? 'kernel'));
    db.exec(
      'CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER)',
    );
    for (const [i, r] of (e.runtime ?? []).entries())
      db.run('INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 1, ?, ?)', r.start, r.end, r.correlationId ?? 100000 + i, sid(r.name));
    if (e.gpus) {
      db.exec(
        `CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, ${e.gpus.column} INTEGER NOT NULL, name TEXT, busLocation TEXT${e.gpus.column === 'id' ? ', totalMemory INTEGER' : ''})`,
      );
      for (const g of e.gpus.rows)
        if (e.gpus.column === 'id') db.run('INSERT INTO TARGET_INFO_GPU VALUES (0, ?, ?, ?, ?)', g.id, g.name, '0000:01:00.0', g.totalMemory ?? null);
        else db.run('INSERT INTO TARGET_INFO_GPU VALUES (0, ?, ?, ?)', g.id, g.name, '0000:01:00.0');
    }
    if (e.enums) {
      for (const [t, labels] of [
        ['ENUM_CUDA_MEMCPY_OPER', MEMCPY_OPER],
        ['ENUM_CUDA_MEM_KIND', MEM_KIND],
        ['ENUM_CUDA_UNIF_MEM_MIGRATION', MIGRATION],
      ] as const) {
        db.exec(`CREATE TABLE ${t} (id INTEGER PRIMARY KEY, name TEXT, label TEXT)`);
        for (const [id, label] of labels.entries()) db.run(`INSERT INTO ${t} VALUES (?, ?, ?)`, id, label.toUpperCase().replace(/\W+/g, '_'), label);
      }
    }
    if (e.capture) {
      db.exec('CREATE TABLE META_DATA_CAPTURE (name TEXT, value TEXT)');
      for (const [n, v] of e.capture) db.run('INSERT INTO META_DATA_CAPTURE VALUES (?, ?)', n, v);
    }
    if (e.faultTables) {
      db.exec(
        'CREATE TABLE CUDA_UM_GPU_PAGE_FAULT_EVENTS (start INTEGER NOT NULL, end INTEGER NOT NULL, globalPid INTEGER, deviceId INTEGER, address INTEGER, numberOfPageFaults INTEGER)',
      );
      for (const f of e.faultTables.gpu ?? []) db.run('INSERT INTO CUDA_UM_GPU_PAGE_FAULT_EVENTS VALUES (?, ?, 1, 0, ?, 1)', f.start, f.end, f.address);
      db.exec('CREATE TABLE CUDA_UM_CPU_PAGE_FAULT_EVENTS (start INTEGER NOT NULL, globalPid INTEGER, address INTEGER)');
      for (const f of e.faultTables.cpu ?? []) db.run('INSERT INTO CUDA_UM_CPU_PAGE_FAULT_EVENTS VALUES (?, 1, ?)', f.start, f.address);
    }
    for (const [s, k] of strings) db.run('INSERT INTO StringIds VALUES (?, ?)', k, s);
  } finally {
    db.close();
  }
}
