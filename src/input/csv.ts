/**
 * CSV for untrusted profiler output, parsed by csv-parse as a stream: quoted fields (kernel names hold commas),
 * a byte-order mark, CRLF, and a bound on the size of one record, so a gigabyte of one line is an error, not a crash.
 */
import { parse } from 'csv-parse';
import { BadInputError } from '../errors.js';
import { openInput } from './files.js';

export interface CsvOptions {
  /** Largest record accepted, in characters (default 1 MiB). */
  maxRecord?: number;
  progress?: (bytes: number) => void;
}

/** A parsed CSV row: the header's names (trimmed) to the cells' text. */
export type CsvRow = Record<string, string>;

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
  const input = openInput(file);
  const parser = parse({
    bom: true,
    trim: true,
    skip_empty_lines: true,
    relax_column_count: true,
    max_record_size: options.maxRecord ?? 1 << 20,
    columns: (header: string[]) => {
      const cols = header.map((h) => String(h).trim());
      onHeader(cols);
      return cols;
    },
  });
  input.on('data', (c: Buffer) => {
    bytes += c.length;
    options.progress?.(bytes);
  });
  input.on('error', (e) => parser.destroy(e));
  try {
    for await (const row of input.pipe(parser)) {
      records++;
      onRow(row as CsvRow, records);
    }
  } catch (e) {
    input.destroy();
    if (e instanceof BadInputError) throw e;
    throw new BadInputError(`not valid CSV near record ${records + 1}: ${(e as Error).message}`, file, { cause: e });
  }
  return records;
}
