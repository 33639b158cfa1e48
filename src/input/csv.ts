/**
 * CSV for untrusted profiler output, parsed by csv-parse as a stream: quoted fields (kernel names hold commas),
 * a byte-order mark, CRLF, and a bound on the size of one record, so a gigabyte of one line is an error, not a crash.
 * Some tools wrote a name column unquoted (legacy rocprof before 2022 wrote C++ names with their commas bare), or
 * left a column out of rows that had nothing for it (rocprofv2's Kernel_Name): such a column is elastic, and the
 * others are matched from both ends of the record.
 */
import { parse } from 'csv-parse';
import { BadInputError } from '../errors.js';
import { openInput } from './files.js';

export interface CsvOptions {
  /** Largest record accepted, in characters (default 1 MiB). */
  maxRecord?: number;
  progress?: (bytes: number) => void;
  /**
   * The column, given the header, whose cell may spread over several cells (its commas unquoted) or be missing from
   * a record: the columns before it are matched from the start of a record, those after it from the end, and what is
   * left between is its text, the pieces joined with ", " (how demanglers separate template and call arguments).
   */
  elastic?: (columns: readonly string[]) => string | undefined;
}

/** A parsed CSV row: the header's names (trimmed) to the cells' text. */
export type CsvRow = Record<string, string>;

/** A record's cells as a row of the header's columns, the elastic column (index `k`, or -1) taking what is left. */
export function rowOf(columns: readonly string[], cells: readonly string[], k: number): CsvRow {
  const row: CsvRow = {};
  if (k < 0 || cells.length === columns.length) {
    // a short record leaves its last columns out, a long one's surplus cells are dropped (csv-parse's relax mode)
    for (let i = 0; i < columns.length && i < cells.length; i++) row[columns[i]!] = cells[i]!;
    return row;
  }
  const after = columns.length - k - 1;
  for (let i = 0; i < k && i < cells.length; i++) row[columns[i]!] = cells[i]!;
  for (let j = 0; j < after && cells.length - 1 - j >= k; j++) row[columns[columns.length - 1 - j]!] = cells[cells.length - 1 - j]!;
  const middle = cells.slice(k, Math.max(k, cells.length - after));
  if (middle.length > 0) row[columns[k]!] = middle.join(', ');
  return row;
}

/**
 * Calls `onHeader` with the header's column names (it may throw to reject the file), then `onRow` for every row
 * with its 1-based record number.
 * @throws BadInputError for malformed CSV, an oversized record, or what the callbacks throw.
 */
export async function readCsv(
  file: string,
  onHeader: (columns: string[]) => void,
  onRow: (row: CsvRow, record: number) => void,
  options: CsvOptions = {},
): Promise<number> {
  let records = 0;
  let bytes = 0;
  let columns: string[] | undefined;
  let elastic = -1;
  const input = openInput(file);
  const parser = parse({
    bom: true,
    trim: true,
    skip_empty_lines: true,
    relax_column_count: true,
    max_record_size: options.maxRecord ?? 1 << 20,
  });
  input.on('data', (c: Buffer) => {
    bytes += c.length;
    options.progress?.(bytes);
  });
  input.on('error', (e) => parser.destroy(e));
  try {
    for await (const cells of input.pipe(parser)) {
      const record = (cells as unknown[]).map((c) => String(c));
      if (!columns) {
        columns = record.map((h) => h.trim());
        onHeader(columns);
        const name = options.elastic?.(columns);
        elastic = name === undefined ? -1 : columns.indexOf(name);
        continue;
      }
      records++;
      onRow(rowOf(columns, record, elastic), records);
    }
  } catch (e) {
    input.destroy();
    if (e instanceof BadInputError) throw e;
    throw new BadInputError(`not valid CSV near record ${records + 1}: ${(e as Error).message}`, file, { cause: e });
  }
  return records;
}
