/**
 * What a file is, from its first bytes: which SQLite database (an Nsight Systems export, rocprofv3's rocpd or legacy
 * rocprof's results.db), which
 * Chrome-trace JSON (Kineto, or legacy rocprof's results.json), and, for files that are no trace, what they look
 * like (an archive, another compression, a RAPIDS log, a Triton server trace, a JSON array of something else), so
 * that a refusal names the file and says what to give instead.
 */
import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import { BadInputError, ErrorCode, isGpuError } from '../errors.js';
import { columnsOf, openSqlite, tablesOf, type SqliteDb } from '../input/sqlite.js';
import { isSegmentList } from '../formats/snapshot-file.js';
import { isNvprofDatabase } from './importers/nvvp.js';
import { isRocprofV1Db } from './importers/rocprof-db.js';

/** The JSON and SQLite formats detect.ts tells apart (the rest of TraceFormat is recognised in analyze.ts). */
export type DetectedFormat = 'kineto' | 'rocprof-json' | 'nsys-sqlite' | 'nvvp' | 'rocpd' | 'rocprof-db';

/** Names of up to `n` entries of a tar archive from its first bytes. */
function tarEntries(b: Buffer, n = 3): string[] {
  const names: string[] = [];
  for (let at = 0; at + 512 <= b.length && names.length < n; ) {
    if (b.toString('latin1', at + 257, at + 262) !== 'ustar') break;
    const name = b.toString('utf8', at, at + 100).replace(/\0.*$/s, '');
    if (name) names.push(name);
    const size = Number.parseInt(
      b
        .toString('latin1', at + 124, at + 136)
        .replace(/\0.*$/s, '')
        .trim() || '0',
      8,
    );
    if (!Number.isFinite(size)) break;
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return names;
}

/** Extensions of trace formats gpumem does not read, and what to give instead. */
const OTHER_FORMATS: ReadonlyArray<readonly [RegExp, string]> = [
  [
    /\.(pftrace|perfetto-trace|perfetto)$/i,
    "a Perfetto protobuf trace (rocprofv3 --output-format pftrace writes one): gpumem reads rocprofv3's default database (.db) or its csv / json output",
  ],
  [/\.otf2$/i, "an OTF2 trace archive (rocprofv3 --output-format otf2): gpumem reads rocprofv3's default database (.db) or its csv / json output"],
  [/\.ncu-rep$/i, 'an Nsight Compute report (kernel metrics, not a timeline): record with nsys profile and export it with nsys export --type sqlite'],
];

/**
 * Refuses a file that is no trace gpumem reads, naming what it looks like; returns when it may be one.
 * @throws BadInputError naming what the file is and what to give instead.
 */
export function refuseNonTrace(file: string, head: Buffer, gzip: boolean): void {
  for (const [re, what] of OTHER_FORMATS) if (re.test(file)) throw new BadInputError(what, file);
  if (head.length >= 262 && head.toString('latin1', 257, 262) === 'ustar') {
    const names = tarEntries(head);
    throw new BadInputError(
      `a tar archive${gzip ? ' (.tar.gz)' : ''}${names.length ? ` holding ${names.join(', ')}${names.length === 3 ? ', ...' : ''}` : ''}, not a trace: extract it (tar xf FILE) and give the trace files, or the folder they are in`,
      file,
    );
  }
  if (head.length >= 30 && head.readUInt32LE(0) === 0x04034b50) {
    const name = head.toString('utf8', 30, 30 + Math.min(head.readUInt16LE(26), 200));
    throw new BadInputError(
      `a zip archive${name ? ` (first entry ${name})` : ''}, not a trace: extract it and give the trace files, or the folder they are in`,
      file,
    );
  }
  const compressed: Array<[string, boolean]> = [
    ['bzip2', head.toString('latin1', 0, 3) === 'BZh'],
    ['xz', head.toString('latin1', 0, 6) === '\xfd7zXZ\0'],
    ['zstd', head.length >= 4 && head.readUInt32LE(0) === 0xfd2fb528],
    ['7-zip', head.toString('latin1', 0, 6) === '7z\xbc\xaf\x27\x1c'],
  ];
  const c = compressed.find(([, yes]) => yes);
  if (c) throw new BadInputError(`${c[0]}-compressed data: gpumem reads plain or gzip files; decompress it first`, file);
  const text = head.toString('utf8');
  const first = text.replace(/^\uFEFF/, '').split(/\r?\n/, 1)[0] ?? '';
  if (/^version https:\/\/git-lfs\.github\.com\/spec\/v1/.test(first)) {
    const size = /^size (\d+)$/m.exec(text)?.[1];
    throw new BadInputError(
      `a Git LFS pointer${size ? ` to a file of ${size} bytes` : ''}, not the file itself: fetch it with git lfs pull (or git lfs fetch and checkout) and analyze what that brings`,
      file,
    );
  }
  // spdlog's "[%6t][%H:%M:%S:%f][%-6l] %v", the pattern of RMM's, cuDF's and KvikIO's debug logs
  if (/^\[\s*\d+\]\[\d{2}:\d{2}:\d{2}:\d{6}\]\[\s*\w+\s*\]/.test(first))
    throw new BadInputError(
      `${/RMM LOG BEGIN/.test(text) ? 'an RMM debug log (rmm_log.txt)' : 'a RAPIDS debug log (the text log of RMM, cuDF or KvikIO)'}: messages, not allocation events; record allocations with rmm.mr.LoggingResourceAdaptor (a CSV of Thread,Time,Action,Pointer,Size,Stream), which analyze and pool replay read`,
      file,
    );
  if (/^"?Index"?,"?KernelName"?,/.test(first) && !/BeginNs/.test(first))
    throw new BadInputError(
      'a legacy rocprof (v1) counter table (rocprof -i with --pmc): hardware counters per dispatch, without times; gpumem reads the results.csv of a run with --timestamp on or --hip-trace, or its --stats tables',
      file,
    );
  if (/^"?Time \(%\)"?\s*,\s*"?Total Time \(ns\)"?/.test(first))
    throw new BadInputError(
      'an nsys stats report (totals per name): gpumem reads the SQLite export the report was made from (nsys export --type sqlite FILE.nsys-rep)',
      file,
    );
  const t = text.replace(/^\uFEFF/, '').trimStart();
  if (/^<\?xml[^>]*\?>\s*<session\b/.test(t))
    throw new BadInputError(
      'an NVIDIA Visual Profiler session file (the XML settings of a session in the Visual Profiler, no profile data): give the profile it was made from (nvprof -o FILE.nvvp writes an SQLite database gpumem reads), or record with nsys',
      file,
    );
  if (t.startsWith('[')) refuseJsonArray(file, t);
}

/** A top-level JSON array is a trace only when its elements are Chrome trace events. */
function refuseJsonArray(file: string, t: string): void {
  if (isSegmentList(t)) return; // torch.cuda.memory_snapshot()'s list of segments
  if (/^\[\s*\[/.test(t))
    throw new BadInputError(
      'a JSON array of arrays, not a trace: this is the shape of torch.profiler export_memory_timeline output ([time, action, bytes, category] rows); analyze reads the profiler trace itself (export_chrome_trace) or a memory snapshot',
      file,
    );
  if (/^\[\s*\]/.test(t)) throw new BadInputError('an empty JSON array: no trace events', file);
  if (!/^\[\s*\{/.test(t)) throw new BadInputError(`a JSON array of ${/^\[\s*"/.test(t) ? 'strings' : 'values'}, not trace events`, file);
  const firstObject = t.slice(0, 4096);
  if (/"ph"\s*:/.test(firstObject)) return; // Chrome trace events in the array form
  if (/"model_name"\s*:|"timestamps"\s*:\s*\[\s*\{\s*"name"/.test(firstObject))
    throw new BadInputError(
      "a Triton Inference Server trace (tritonserver --trace-config): request timestamps per model, not GPU activity; profile the model's process with torch.profiler or nsys",
      file,
    );
  const keys = [...new Set([...firstObject.matchAll(/"([^"\\]{1,40})"\s*:/g)].map((m) => m[1]))].slice(0, 6);
  throw new BadInputError(
    `a JSON array of objects${keys.length ? ` with keys ${keys.join(', ')}` : ''}, not trace events (Chrome trace events have "ph")`,
    file,
  );
}

/**
 * A small JSON object without "traceEvents" is refused naming its keys (a device description, a benchmark's
 * results): a trace this small is read whole to be sure, a larger one is left to the reader, which says the same.
 * @throws BadInputError for an object without trace events.
 */
export function refuseObjectWithoutEvents(file: string, text: string, sizeBytes: number): void {
  if (!text.trimStart().startsWith('{') || text.includes('"traceEvents"') || sizeBytes > 1 << 20) return;
  let v: unknown;
  try {
    v = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return; // gzip, or not JSON: the reader names what is wrong
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v) || 'traceEvents' in v) return;
  if ('ph' in v && 'name' in v)
    throw new BadInputError(
      `one Chrome trace event (ph ${JSON.stringify((v as { ph: unknown }).ph)}) alone, not a trace: a trace holds its events in "traceEvents" (a legacy rocprof results.json cut short holds only its first lane label)`,
      file,
    );
  const keys = Object.keys(v).slice(0, 6);
  throw new BadInputError(`a JSON object with keys ${keys.join(', ') || '(none)'}, not a trace (a Chrome or Kineto trace holds "traceEvents")`, file);
}

/** Legacy rocprof (v1) names its JSON lanes by process_name metadata: these labels are its own. */
const ROCPROF_LANES = /"args"\s*:\s*\{\s*"name"\s*:\s*"(CPU HIP API|CPU HSA API|COPY|GPU\d+|Markers and Ranges)"\s*\}\s*,\s*"ph"\s*:\s*"M"/;

/** Which Chrome-trace JSON a file holding "traceEvents" (or an array of events) is. */
export function jsonTraceFormat(text: string): DetectedFormat {
  return ROCPROF_LANES.test(text) ? 'rocprof-json' : 'kineto';
}

/** The first MiB of a file, for names of tables in an SQLite schema when no binding can open it. */
function firstMiB(file: string): string {
  const fd = openSync(file, 'r');
  try {
    const b = Buffer.alloc(1 << 20);
    return b.subarray(0, readSync(fd, b, 0, b.length, 0)).toString('latin1');
  } finally {
    closeSync(fd);
  }
}

/**
 * Which database an SQLite file is, by its tables and views.
 * @throws BadInputError for a database that is neither, naming what it holds.
 */
export function sqliteFormat(file: string): DetectedFormat {
  let db: SqliteDb;
  try {
    db = openSqlite(file);
  } catch (e) {
    // without a binding the schema's text still shows which it is; the reader then says how to get one
    if (!isGpuError(e, ErrorCode.UNSUPPORTED)) throw e;
    const head = firstMiB(file);
    if (/rocpd_(kernel_dispatch|info_agent|memory_copy)/.test(head)) return 'rocpd';
    if (/CREATE TABLE StringTable\s*\(\s*_id_/.test(head)) return 'nvvp';
    return /CREATE TABLE "?(KERN|A|HIP|HSA|COPY|OPS)"? \("(Index|BeginNs)"/.test(head) ? 'rocprof-db' : 'nsys-sqlite';
  }
  try {
    const tables = tablesOf(db);
    if (isNvprofDatabase(db, tables)) return 'nvvp';
    return formatOfTables(file, tables, (t) => columnsOf(db, t));
  } finally {
    db.close();
  }
}

/** Which database the tables make, or a refusal naming what it holds. */
function formatOfTables(file: string, tables: Set<string>, columns: (table: string) => ReadonlySet<string>): DetectedFormat {
  const names = [...tables];
  if (names.some((t) => t.startsWith('CUPTI_ACTIVITY_KIND_')) || tables.has('TARGET_INFO_SESSION_START_TIME')) return 'nsys-sqlite';
  if (['rocpd_kernel_dispatch', 'rocpd_memory_copy', 'rocpd_info_agent', 'rocpd_region'].some((t) => tables.has(t))) return 'rocpd';
  if (tables.has('rocpd_op') && tables.has('rocpd_api'))
    throw new BadInputError(
      "a rocmProfileData (RPD) database (rpd_tracer / runTracer.sh), not rocprofv3's rocpd: convert it with rocmProfileData's rpd2tracing.py to a Chrome trace, or record with rocprofv3, whose default database gpumem reads",
      file,
    );
  if (tables.has('StringIds') || tables.has('TARGET_INFO_GPU')) return 'nsys-sqlite';
  // legacy rocprof (v1) results.db: tblextr's tables with tblextr's columns, whatever else a user added beside them
  if (isRocprofV1Db(tables, columns)) return 'rocprof-db';
  throw new BadInputError(
    `an SQLite database that is neither an Nsight Systems export, a rocprofv3 database nor a legacy rocprof results.db (it holds ${names.length} tables and views${names.length ? `: ${names.slice(0, 6).join(', ')}${names.length > 6 ? ', ...' : ''}` : ''})`,
    file,
  );
}
