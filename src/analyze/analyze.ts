/**
 * `gpumem analyze`: recognise each file's format, import them into one event model (files from one run share its
 * clock, as rocprofv3's CSV files do), infer what the traces leave unsaid, run the rules and summarise.
 * Pure TypeScript: no GPU library is loaded.
 */
import { BadInputError, isGpuError } from '../errors.js';
import { statSync } from 'node:fs';
import { filesInFolder, type FolderFiles } from '../input/folder.js';
import { fsReason } from '../input/fs-errors.js';
import { headBytes, inputFileSize, isGzipFile, sniffBytes, fileSize } from '../input/files.js';
import { ratesForModel, ratesFromBench, type CopyRates } from './bandwidth.js';
import { AnalysisContext } from './context.js';
import { inferHostKinds } from './infer.js';
import { TraceModel } from './model.js';
import type { AnalyzeResult, Summary } from './result.js';
import { RULES, type RuleResult } from './rules/index.js';
import { settleSavings } from './savings.js';
import { summarize } from './summary.js';
import { importKineto, type JsonReader } from './importers/kineto.js';
import { importRocprofCsv, importRocprofJson, rocprofCsvKind, rocprofCsvRole } from './importers/rocprof.js';
import { importNsys, SQLITE_MAGIC } from './importers/nsys.js';
import { importNvvp } from './importers/nvvp.js';
import { importNvprofCsv, isNvprofLogLine, nvprofTableKind, splitCsvLine } from './importers/nvprof-csv.js';
import { importAllocLog, importSnapshot } from './importers/allocator.js';
import { isPickleFile, isSegmentList, snapshotEncoding } from '../formats/snapshot-file.js';
import { importRocpd } from './importers/rocpd.js';
import { importRocprofDb } from './importers/rocprof-db.js';
import { importRocprofV1Json } from './importers/rocprof-json.js';
import { jsonTraceFormat, refuseNonTrace, refuseObjectWithoutEvents, sqliteFormat } from './detect.js';

import { TRACE_FORMATS, type TraceFormat } from './trace-formats.js';

export { TRACE_FORMATS, type TraceFormat };

/** Splits a CSV header line into names (quotes removed). */
function headerOf(line: string): string[] {
  return line.split(',').map((c) => c.trim().replace(/^"(.*)"$/, '$1'));
}

/**
 * Recognises a trace file's format from its first bytes.
 * @throws BadInputError naming what was expected.
 */
export function detectTraceFormat(file: string): TraceFormat {
  if (/\.(nsys-rep|qdrep)$/i.test(file))
    throw new BadInputError('an Nsight Systems report must be exported first: nsys export --type sqlite --output trace.sqlite FILE.nsys-rep', file);
  const head = sniffBytes(file, 65536);
  if (head.toString('latin1', 0, 16) === SQLITE_MAGIC) {
    if (headBytes(file, 16).toString('latin1') !== SQLITE_MAGIC)
      throw new BadInputError('a gzip-compressed SQLite database: decompress it first (gunzip)', file);
    return sqliteFormat(file);
  }
  // an XML file (the Visual Profiler's session file) is refused as what it is, before HTML goes to the snapshot reader
  if (/^\s*<\?xml/.test(head.toString('utf8', 0, 512).replace(/^\uFEFF/, ''))) refuseNonTrace(file, head, isGzipFile(file));
  // a pickle of anything but a memory snapshot, or an HTML page but memory_viz's, is refused naming what it holds
  if (isPickleFile(file) || /^\s*</.test(head.toString('utf8', 0, 512).replace(/^\uFEFF/, ''))) {
    snapshotEncoding(file);
    return 'memory-snapshot';
  }
  refuseNonTrace(file, head, isGzipFile(file));
  const text = head.toString('utf8');
  const t = text
    .replace(/^\uFEFF/, '')
    .trimStart()
    .slice(0, 8192);
  if (t.startsWith('{') || t.startsWith('[')) {
    if (/^\{\s*"schema"\s*:/.test(t) && /"nodes"\s*:/.test(t))
      throw new BadInputError(
        'a PyTorch execution trace (ExecutionTraceObserver): it records operators, not GPU activity; analyze reads the torch.profiler trace of the same run (export_chrome_trace)',
        file,
      );
    if (/^\{\s*"t"\s*:/.test(t)) return 'alloc-log';
    if (t.includes('"rocprofiler-sdk-tool"')) return 'rocprofv3-json';
    if ((/"(segments|device_traces)"\s*:/.test(t) && !t.includes('"traceEvents"')) || isSegmentList(t)) return 'memory-snapshot';
    if (!isGzipFile(file)) refuseObjectWithoutEvents(file, text, fileSize(file));
    return jsonTraceFormat(text);
  }
  const first = t.split(/\r?\n/, 1)[0] ?? '';
  if (/^Thread\s*,\s*Time\s*,\s*Action/i.test(first)) return 'alloc-log';
  if (isNvprofLogLine(first) || nvprofTableKind(splitCsvLine(first)) !== 'other') return 'nvprof-csv';
  if (rocprofCsvKind(headerOf(first))) return 'rocprof-csv';
  if (text.includes('\0'))
    throw new BadInputError(
      'a binary file gpumem does not read (formats: Kineto JSON, rocprofv3 database, CSV or JSON, rocprof CSV or JSON, nsys SQLite export, nvprof CSV or .nvvp, PyTorch memory snapshot, gpumem/RMM allocation logs)',
      file,
    );
  throw new BadInputError(
    `not a trace gpumem reads (first line: ${JSON.stringify(first.slice(0, 80))}); formats: Kineto JSON, rocprofv3 database, CSV or JSON, rocprof CSV or JSON, nsys SQLite export, nvprof CSV or .nvvp, PyTorch memory snapshot, gpumem/RMM allocation logs`,
    file,
  );
}

/** An error of the file system (ENOENT, EACCES, EISDIR...) or of zlib (Z_DATA_ERROR...), as Node gives them. */
function isFileError(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException | null)?.code;
  return e instanceof Error && !isGpuError(e) && typeof code === 'string' && /^(E[A-Z]+|Z_[A-Z_]+|ERR_STREAM_PREMATURE_CLOSE)$/.test(code);
}

export interface AnalyzeOptions {
  /** Force a format for every file (default: detect each). */
  format?: TraceFormat;
  /** gpumem bench JSON to take copy rates from. */
  fromBench?: string;
  /** How Kineto JSON is read (default 'chunked'; 'careful' is the token-by-token reader). */
  jsonReader?: JsonReader;
  /** Called as input is read: file, bytes read so far (rows, for SQLite), file size. */
  progress?: (file: string, done: number, total: number) => void;
}

/** Formats that record the same activity (kernels, copies, API calls), each with its own clock. */
const PROFILER_FORMATS: readonly TraceFormat[] = TRACE_FORMATS.filter((f) => f !== 'memory-snapshot' && f !== 'alloc-log');
/** Which profiler format a folder's files are read in when it holds several: the one that records the most. */
const FOLDER_PREFERENCE: readonly TraceFormat[] = [
  'rocpd',
  'rocprofv3-json',
  'nsys-sqlite',
  'nvvp',
  'kineto',
  'rocprof-db',
  'rocprof-json',
  'rocprof-csv',
  'nvprof-csv',
];

/** The files of a folder named on the command line, and what was skipped in it. @throws BadInputError when it cannot be listed. */
function readFolder(path: string): FolderFiles {
  try {
    return filesInFolder(path);
  } catch (e) {
    throw new BadInputError(`cannot list the folder (${fsReason(e)})`, path);
  }
}

/**
 * The trace files to read and their formats. A folder (what `rocprofv3 -d DIR` writes: DIR/HOST/PID_*.csv and .json)
 * gives the traces it holds, in one profiler format (the richer one when the tool wrote two; a note says so) and
 * skips the rest. Files named on the command line must not mix profiler formats: two recordings of one run would
 * double every count, and their clocks differ.
 * @throws BadInputError naming the files.
 */
export function traceInputs(paths: readonly string[], forced?: TraceFormat): { inputs: Array<{ file: string; format: TraceFormat }>; notes: string[] } {
  const inputs: Array<{ file: string; format: TraceFormat }> = [];
  const notes: string[] = [];
  for (const path of paths) {
    let isDir = false;
    try {
      isDir = statSync(path).isDirectory();
    } catch (e) {
      throw new BadInputError(`cannot read it (${fsReason(e)})`, path);
    }
    if (!isDir) {
      // a pipe or a device is refused by what it is, before a reader would wait on it
      if (inputFileSize(path) === 0) throw new BadInputError('the file is empty', path);
      inputs.push({ file: path, format: forced ?? detectTraceFormat(path) });
      continue;
    }
    const found: Array<{ file: string; format: TraceFormat }> = [];
    let skipped = 0;
    const folder = readFolder(path);
    notes.push(...folder.notes);
    for (const file of folder.files) {
      try {
        found.push({ file, format: forced ?? detectTraceFormat(file) });
      } catch {
        skipped++;
      }
    }
    const profilers = FOLDER_PREFERENCE.filter((f) => found.some((x) => x.format === f));
    const keep = profilers[0];
    const kept = found.filter((x) => !PROFILER_FORMATS.includes(x.format) || x.format === keep);
    if (kept.length === 0) throw new BadInputError(`the folder holds no trace gpumem reads (${skipped} other files)`, path);
    if (profilers.length > 1)
      notes.push(
        `${path}: the folder holds the run in ${profilers.join(' and ')}; read as ${keep} (${kept.length} files), the rest left out so that nothing is counted twice`,
      );
    if (skipped > 0) notes.push(`${path}: ${skipped} files that are not traces were skipped`);
    inputs.push(...kept);
  }
  const kept = withoutTotalsOfTracedActivity(inputs);
  if (kept.length < inputs.length) {
    const left = inputs.filter((x) => !kept.includes(x)).map((x) => x.file);
    notes.push(`${left.join(', ')}: statistics of activity the trace tables record event by event, left out so that nothing is counted twice`);
    inputs.splice(0, inputs.length, ...kept);
  }
  const once = withoutRocprofV2Dispatches(inputs);
  if (once.length < inputs.length) {
    const left = inputs.filter((x) => !once.includes(x)).map((x) => x.file);
    notes.push(`${left.join(', ')}: rocprofv2's dispatch table, left out: its hcc_ops_trace records the same kernels with the copies`);
    inputs.splice(0, inputs.length, ...once);
  }
  const formats = [...new Set(inputs.map((x) => x.format).filter((f) => PROFILER_FORMATS.includes(f)))];
  if (formats.length > 1) {
    const list = formats
      .map(
        (f) =>
          `${f}: ${inputs
            .filter((x) => x.format === f)
            .map((x) => x.file)
            .join(', ')}`,
      )
      .join('; ');
    throw new BadInputError(
      `the files are profiler traces in ${formats.length} formats (${list}). Two tools' recordings of one run would count every copy twice, and each has its own clock: analyze one format at a time`,
    );
  }
  return { inputs, notes };
}

/** The inputs less rocprof statistics tables that total an activity another input records event by event. */
function withoutTotalsOfTracedActivity<T extends { file: string; format: TraceFormat }>(inputs: T[]): T[] {
  const csv = inputs.filter((x) => x.format === 'rocprof-csv').map((x) => ({ x, role: rocprofCsvRole(x.file) }));
  const traced = new Set(csv.map((c) => c.role.activity).filter((a) => a !== undefined));
  if (inputs.some((x) => x.format === 'rocprof-json' || x.format === 'rocprof-db')) for (const a of ['kernels', 'copies', 'api'] as const) traced.add(a);
  const drop = new Set(csv.filter((c) => c.role.stats !== undefined && traced.has(c.role.stats)).map((c) => c.x));
  return inputs.filter((x) => !drop.has(x));
}

/** The inputs less rocprofv2 dispatch tables (results_PID.csv) beside an hcc_ops_trace, which holds the same kernels. */
function withoutRocprofV2Dispatches<T extends { file: string; format: TraceFormat }>(inputs: T[]): T[] {
  const csv = inputs.filter((x) => x.format === 'rocprof-csv').map((x) => ({ x, kind: rocprofCsvRole(x.file).kind }));
  if (!csv.some((c) => c.kind === 'v2-ops')) return inputs;
  const drop = new Set(csv.filter((c) => c.kind === 'v2-dispatches').map((c) => c.x));
  return inputs.filter((x) => !drop.has(x));
}

/**
 * Imports trace files (or the folders a profiler wrote) into one model.
 * @throws BadInputError naming the file and what is wrong with it.
 */
export async function loadTraces(files: readonly string[], options: AnalyzeOptions = {}): Promise<TraceModel> {
  if (files.length === 0) throw new BadInputError('no trace files given');
  const model = new TraceModel();
  const { inputs, notes } = traceInputs(files, options.format);
  for (const n of notes) model.note(n);
  for (const { file, format } of inputs) {
    const total = fileSize(file);
    const progress = (n: number): void => options.progress?.(file, n, total);
    try {
      switch (format) {
        case 'kineto':
          await importKineto(file, model, progress, options.jsonReader);
          break;
        case 'rocprofv3-json':
          await importRocprofJson(file, model, progress);
          break;
        case 'rocprof-csv':
          await importRocprofCsv(file, model, progress);
          break;
        case 'nsys-sqlite':
          await importNsys(file, model, progress);
          break;
        case 'nvvp':
          await importNvvp(file, model, progress);
          break;
        case 'nvprof-csv':
          await importNvprofCsv(file, model, progress);
          break;
        case 'rocpd':
          await importRocpd(file, model, progress);
          break;
        case 'rocprof-json':
          await importRocprofV1Json(file, model, progress);
          break;
        case 'rocprof-db':
          await importRocprofDb(file, model, progress);
          break;
        case 'memory-snapshot':
          await importSnapshot(file, model, progress);
          break;
        case 'alloc-log':
          await importAllocLog(file, model);
          break;
      }
    } catch (e) {
      // a limit of the model (its event budget) names no file: name the one it was reading
      if (e instanceof BadInputError && e.file === undefined) throw new BadInputError(e.message, file, { cause: e });
      // what reading a file can throw beyond the importers' own errors: the file system's and zlib's; anything else
      // is a bug in gpumem, and goes up as it is
      if (!isFileError(e)) throw e;
      const code = (e as NodeJS.ErrnoException).code ?? '';
      const why = code.startsWith('Z_') ? 'the gzip data is corrupt or cut short' : /^E[A-Z]+$/.test(code) ? fsReason(e) : (e as Error).message;
      throw new BadInputError(`cannot read it as ${format} (${why})`, file, { cause: e });
    }
    model.files.push(file);
  }
  return model;
}

/** Runs the rules over an imported model. */
export function analyzeModel(model: TraceModel, rates: CopyRates): AnalyzeResult {
  inferHostKinds(model);
  const ctx = new AnalysisContext(model, rates);
  const results: RuleResult[] = [];
  const notApplicable: Summary['notApplicable'] = [];
  for (const rule of RULES) {
    const out = rule.run(ctx);
    if (!out) continue;
    if ('notApplicable' in out) notApplicable.push({ rule: rule.id, reason: out.notApplicable });
    else results.push(out);
  }
  const findings = settleSavings(results);
  findings.sort((a, b) => b.estimatedSavingNs - a.estimatedSavingNs || (b.bytes ?? 0) - (a.bytes ?? 0));
  return { schema: 'gpumem.analyze/1', summary: summarize(ctx, notApplicable), findings };
}

/**
 * Analyses trace files: imports, infers, applies every rule.
 * @throws BadInputError for unreadable or malformed input, naming the file.
 */
export async function analyzeFiles(files: readonly string[], options: AnalyzeOptions = {}): Promise<AnalyzeResult> {
  const rates = options.fromBench ? ratesFromBench(options.fromBench) : undefined;
  const model = await loadTraces(files, options);
  return analyzeModel(model, rates ?? ratesForModel(model));
}
