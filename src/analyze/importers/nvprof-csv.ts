/**
 * nvprof's CSV output (`nvprof --csv --print-gpu-trace`, `--print-api-trace`, or the summary `nvprof --csv`),
 * as its log holds it: "==PID==" lines, then per table a header, a line of units and the rows. The GPU trace names
 * copies "[CUDA memcpy HtoD]" (with the host side's kind in SrcMemType / DstMemType from CUDA 9 on), fills
 * "[CUDA memset]", unified-memory migrations "[Unified Memory Memcpy HtoD]", and kernels by name with nvprof's
 * correlation id appended ("kernel(float*) [1073]"); its devices "GeForce GTX 1080 Ti (0)". Times are in the unit
 * the units line names (s, ms, us, ns); sizes in B, KB, MB or GB of 1024. The summary's totals per name are read as
 * statistics, as rocprof's --stats are.
 */
import { BadInputError } from '../../errors.js';
import { readLines } from '../../input/lines.js';
import { classifyApi, Direction, DIRECTIONS, MemKind, MigrationCause, type TraceModel } from '../model.js';
import { directionCode, memKindOf } from './fields.js';

const TIME_UNIT: Record<string, number> = { s: 1e9, ms: 1e6, us: 1e3, ns: 1 };
const SIZE_UNIT: Record<string, number> = { B: 1, KB: 1024, MB: 1024 ** 2, GB: 1024 ** 3 };

/** Splits one CSV line of nvprof's (fields quoted with ", a quote inside doubled). */
export function splitCsvLine(line: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quoted) {
      if (c === '"' && line[i + 1] === '"') {
        cur += '"';
        i++;
      } else if (c === '"') quoted = false;
      else cur += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      out.push(cur);
      cur = '';
    } else cur += c;
  }
  out.push(cur);
  return out.map((s) => s.trim());
}

type TableKind = 'gpu-trace' | 'api-trace' | 'summary' | 'other';

/** What a header line of nvprof's CSV starts: its GPU trace, API trace, summary, or a table gpumem does not read. */
export function nvprofTableKind(columns: readonly string[]): TableKind {
  const has = (c: string): boolean => columns.includes(c);
  if (has('Start') && has('Duration') && has('Name')) return has('Size') || has('Grid X') || has('Device') ? 'gpu-trace' : 'api-trace';
  if (has('Type') && has('Time(%)') && has('Calls') && has('Name')) return 'summary';
  return 'other';
}

/** True for a line nvprof's CSV log starts with ("==1234== NVPROF is profiling", "======== Profiling result:"). */
export const isNvprofLogLine = (line: string): boolean => /^==(\d+|=+)==/.test(line);

interface Table {
  kind: TableKind;
  columns: string[];
  units: string[] | undefined;
}

/**
 * Reads an nvprof CSV log into the model.
 * @throws BadInputError when it holds no CSV table gpumem reads (nvprof's text output, metrics), or bad values.
 */
export async function importNvprofCsv(file: string, model: TraceModel, progress?: (bytes: number) => void): Promise<void> {
  let table: Table | undefined;
  const seen = new Set<TableKind>();
  const summary: string[][] = [];
  let summaryUnits: string[] = [];
  const reader = new RowReader(file, model);
  for await (const [line, n] of readLines(file, { progress })) {
    if (isNvprofLogLine(line) || line.trim() === '') {
      if (line.trim() === '' || /Profiling result|API calls|Unified Memory profiling result|Metric result|Event result/i.test(line)) table = undefined;
      continue;
    }
    if (!table) {
      // nvprof quotes every header cell; a line that does not start with one is its text output
      if (!line.startsWith('"')) continue;
      const columns = splitCsvLine(line);
      table = { kind: nvprofTableKind(columns), columns, units: undefined };
      seen.add(table.kind);
      continue;
    }
    const cells = splitCsvLine(line);
    // the line after a header names the units of its columns ("ms,ms,,,,KB,B,KB,MB/s")
    if (!table.units && !/^-?\d/.test(cells[0] ?? '') && !/^"?(GPU activities|API calls)"?$/.test(cells[0] ?? '')) {
      table.units = cells;
      if (table.kind === 'summary') summaryUnits = cells;
      continue;
    }
    if (table.kind === 'gpu-trace') reader.gpuRow(table, cells, n);
    else if (table.kind === 'api-trace') reader.apiRow(table, cells, n);
    else if (table.kind === 'summary') summary.push(cells);
  }
  if (!seen.has('gpu-trace') && !seen.has('api-trace') && !seen.has('summary'))
    throw new BadInputError(
      seen.has('other')
        ? "nvprof CSV of metrics or events (per-kernel counters, no timeline): gpumem reads nvprof's --print-gpu-trace / --print-api-trace CSV, its summary CSV, or its .nvvp database"
        : "nvprof's text output (tables for reading, not CSV): record with nvprof --csv --print-gpu-trace --print-api-trace --log-file FILE.csv, or -o FILE.nvvp",
      file,
    );
  if (seen.has('gpu-trace') || seen.has('api-trace')) {
    model.traced('kernels', 'copies', ...(seen.has('api-trace') ? (['runtime'] as const) : []));
    if (summary.length > 0) model.note(`${file}: the summary table is left out beside the trace of the same run, so that nothing is counted twice`);
  } else readSummary(file, model, summary, summaryUnits);
  model.formats.add('nvprof-csv');
}

/** The rows of the trace tables, with the columns' units. */
class RowReader {
  constructor(
    private readonly file: string,
    private readonly model: TraceModel,
  ) {}

  private cell(t: Table, cells: string[], name: string): string | undefined {
    const i = t.columns.indexOf(name);
    return i < 0 ? undefined : cells[i];
  }

  /** A number of a column in base units (ns, bytes) by the units line; NaN where the cell is empty. */
  private value(t: Table, cells: string[], name: string, units: Record<string, number>, line: number): number {
    const i = t.columns.indexOf(name);
    const text = i < 0 ? '' : (cells[i] ?? '');
    if (text === '') return Number.NaN;
    const v = Number(text);
    if (!Number.isFinite(v)) throw new BadInputError(`line ${line}: ${name} is ${JSON.stringify(text.slice(0, 30))}, not a number`, this.file);
    const unit = t.units?.[i] ?? '';
    const f = units[unit];
    if (f === undefined) throw new BadInputError(`line ${line}: ${name} is in ${JSON.stringify(unit)}, a unit gpumem does not know`, this.file);
    return v * f;
  }

  private span(t: Table, cells: string[], line: number): [number, number] {
    const start = this.value(t, cells, 'Start', TIME_UNIT, line);
    const dur = this.value(t, cells, 'Duration', TIME_UNIT, line);
    if (Number.isNaN(start) || Number.isNaN(dur) || dur < 0) throw new BadInputError(`line ${line}: a row without a start and a duration`, this.file);
    const s = this.model.time(Math.round(start));
    return [s, s + Math.round(dur)];
  }

  gpuRow(t: Table, cells: string[], line: number): void {
    const m = this.model;
    const name = this.cell(t, cells, 'Name') ?? '';
    const [start, end] = this.span(t, cells, line);
    const deviceText = this.cell(t, cells, 'Device') ?? '';
    const dm = /^(.*) \((\d+)\)$/.exec(deviceText);
    const device = dm ? Number(dm[2]) : 0;
    if (dm && !m.devices.has(device)) m.devices.set(device, dm[1]!);
    const stream = Number(this.cell(t, cells, 'Stream')) || 0;
    const bytes = Math.round(this.value(t, cells, 'Size', SIZE_UNIT, line));
    const copy = /^\[CUDA memcpy (\w+)\]$/.exec(name);
    const unified = /^\[Unified Memory Memcpy (\w+)\]$/.exec(name);
    if (copy) {
      const dir = directionCode(copy[1]!);
      const src = memKindOf((this.cell(t, cells, 'SrcMemType') ?? '').toLowerCase());
      const dst = memKindOf((this.cell(t, cells, 'DstMemType') ?? '').toLowerCase());
      const kinds = {
        src: dir === Direction.HtoD || dir === Direction.HtoH ? src : MemKind.device,
        dst: dir === Direction.DtoH || dir === Direction.HtoH ? dst : MemKind.device,
      };
      if ((dir === Direction.HtoD && kinds.src === MemKind.unknown) || (dir === Direction.DtoH && kinds.dst === MemKind.unknown)) m.hostKindUnknown++;
      const correlation = Number(this.cell(t, cells, 'Correlation_ID') ?? Number.NaN);
      m.copies.push({ start, end, dir, ...kinds, bytes, stream, device, correlation, hostAddr: Number.NaN, op: -1 });
    } else if (name === '[CUDA memset]') m.memsets.push({ start, end, bytes, stream, device });
    else if (unified) m.migrations.push({ start, end, bytes, dir: directionCode(unified[1]!), cause: MigrationCause.unknown, device });
    else if (/^\[Unified Memory GPU page faults?\]$/.test(name)) {
      m.faults.push({ time: start, duration: end - start, bytes: Number.NaN, kind: 1, address: Number.NaN });
      m.traced('faults');
    } else if (/^\[Unified Memory CPU page faults?\]$/.test(name)) {
      m.faults.push({ time: start, duration: 0, bytes: Number.NaN, kind: 0, address: Number.NaN });
      m.traced('faults');
    } else if (!/^\[.*\]$/.test(name)) {
      m.kernels.push({ start, end, stream, device });
      // nvprof appends the launch's correlation id to the kernel's name
      m.addKernelName(name.replace(/ \[\d+\]$/, ''), end - start);
    }
  }

  apiRow(t: Table, cells: string[], line: number): void {
    const [start, end] = this.span(t, cells, line);
    const correlation = Number(this.cell(t, cells, 'Correlation_ID') ?? Number.NaN);
    this.model.runtime.push({ start, end, api: classifyApi(this.cell(t, cells, 'Name') ?? ''), thread: 0, correlation });
  }
}

/** The summary's rows (GPU activities and API calls, totals per name) as statistics. */
function readSummary(file: string, model: TraceModel, rows: string[][], units: string[]): void {
  const ns = (v: string, unit: string | undefined, line: string): number => {
    const x = Number(v);
    const f = TIME_UNIT[unit ?? ''];
    if (!Number.isFinite(x) || f === undefined)
      throw new BadInputError(`summary row ${JSON.stringify(line.slice(0, 60))}: time ${JSON.stringify(v)} in ${JSON.stringify(unit)}`, file);
    return Math.round(x * f);
  };
  for (const cells of rows) {
    const [type, , time, calls, , , , name = ''] = cells;
    const totalNs = ns(time ?? '', units[2], cells.join(','));
    const n = Number(calls);
    if (!Number.isFinite(n)) continue;
    const copy = /^\[CUDA memcpy (\w+)\]$/.exec(name);
    if (type === 'API calls') model.aggregateApis.push({ name, calls: n, totalNs });
    else if (copy) model.aggregateCopies.push({ direction: DIRECTIONS[directionCode(copy[1]!)] ?? 'unknown', calls: n, totalNs, bytes: undefined });
    else if (/^\[.*\]$/.test(name)) model.aggregateApis.push({ name, calls: n, totalNs });
    else model.aggregateKernels.push({ name, calls: n, totalNs });
  }
}
