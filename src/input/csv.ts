/**
 * CSV for untrusted profiler output, read as a stream: quoted fields (kernel names hold commas, quotes doubled, line
 * ends inside), a byte-order mark, CRLF, whitespace around fields trimmed, empty lines skipped, rows shorter or
 * longer than the header accepted (what is missing is absent, what is more is dropped), and a bound on the size of
 * one record, so that a gigabyte of one line is an error, not a crash. The rules are those csv-parse applies with
 * bom, trim, skip_empty_lines and relax_column_count (which this reader replaced: it read 3 MB/s); a line without a
 * quote, nearly every line of a profiler's CSV, is split in one call.
 * Some tools wrote a name column unquoted (legacy rocprof before 2022 wrote C++ names with their commas bare), or
 * left a column out of rows that had nothing for it (rocprofv2's Kernel_Name): such a column is elastic, and the
 * others are matched from both ends of the record.
 */
import { StringDecoder } from 'node:string_decoder';
import { BadInputError } from '../errors.js';
import { openInput, readFailure } from './files.js';

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

/**
 * The most a gzip CSV may inflate to by default: rows cost more to read than JSON events (about 13 MB/s with the
 * importer on two cores), and a gzip CSV may hold no more than a plain one of the size the readers are held to.
 */
export const CSV_MAX_INFLATED_BYTES = 96 * 2 ** 20;

/** A parsed CSV row: the header's names (trimmed) to the cells' text. */
export type CsvRow = Record<string, string>;

/** A malformed record: the reason, in csv-parse's words. */
class CsvSyntaxError extends Error {}

/** A record's cells as a row of the header's columns, the elastic column (index `k`, or -1) taking what is left. */
export function rowOf(columns: readonly string[], cells: readonly string[], k: number): CsvRow {
  // no prototype: a column named "__proto__" is a column
  const row = Object.create(null) as CsvRow;
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
  const maxRecord = options.maxRecord ?? 1 << 20;
  let records = 0;
  let bytes = 0;
  let columns: string[] | undefined;
  let elastic = -1;
  const emit = (fields: string[]): void => {
    if (!columns) {
      columns = fields.map((h) => h.trim());
      onHeader(columns);
      const name = options.elastic?.(columns);
      elastic = name === undefined ? -1 : columns.indexOf(name);
      return;
    }
    records++;
    onRow(rowOf(columns, fields, elastic), records);
  };
  const decoder = new StringDecoder('utf8');
  let pending = '';
  let first = true;
  const input = openInput(file, 1 << 20, CSV_MAX_INFLATED_BYTES);
  try {
    for await (const chunk of input) {
      bytes += (chunk as Buffer).length;
      options.progress?.(bytes);
      pending += decoder.write(chunk as Buffer);
      if (first && pending.length > 0) {
        if (pending.charCodeAt(0) === 0xfeff) pending = pending.slice(1);
        first = false;
      }
      pending = pending.slice(parseRecords(pending, false, emit, maxRecord));
    }
    pending += decoder.end();
    if (first && pending.charCodeAt(0) === 0xfeff) pending = pending.slice(1);
    parseRecords(pending, true, emit, maxRecord);
  } catch (e) {
    if (e instanceof CsvSyntaxError) throw new BadInputError(`not valid CSV near record ${records + 1}: ${e.message}`, file);
    throw readFailure(e, file);
  } finally {
    input.destroy();
  }
  return records;
}

/**
 * Hands every whole record of `s` to `emit`; answers how many characters it consumed (the rest waits for more
 * input, unless `final`).
 */
function parseRecords(s: string, final: boolean, emit: (fields: string[]) => void, maxRecord: number): number {
  let at = 0;
  const n = s.length;
  // the next quote, found once and again only when passed: searching from each line would rescan the text's rest
  let q = s.indexOf('"');
  while (at < n) {
    const nl = s.indexOf('\n', at);
    if (nl < 0 && !final) {
      if (n - at > maxRecord) throw new CsvSyntaxError(`a record is longer than ${maxRecord} characters`);
      return at;
    }
    const end = nl < 0 ? n : nl;
    if (q >= 0 && q < at) q = s.indexOf('"', at);
    if (q < 0 || q >= end) {
      if (end - at > maxRecord) throw new CsvSyntaxError(`a record is longer than ${maxRecord} characters`);
      const line = s.slice(at, end);
      if (line.trim() !== '') emit(line.split(',').map((f) => f.trim()));
      at = end + 1;
      continue;
    }
    const r = quotedRecord(s, at, final, maxRecord);
    if (!r) return at;
    emit(r.fields);
    at = r.next;
  }
  return at;
}

const isBlank = (c: string | undefined): boolean => c === ' ' || c === '\t';

/** One record holding a quote, from `at`: its fields and where the next starts; undefined when it is not all here. */
function quotedRecord(s: string, at: number, final: boolean, maxRecord: number): { fields: string[]; next: number } | undefined {
  const fields: string[] = [];
  let i = at;
  const n = s.length;
  for (;;) {
    if (i - at > maxRecord) throw new CsvSyntaxError(`a record is longer than ${maxRecord} characters`);
    while (isBlank(s[i])) i++;
    let field: string;
    if (s[i] === '"') {
      let j = i + 1;
      field = '';
      for (;;) {
        const k = s.indexOf('"', j);
        if (k < 0 || k + 1 >= n) {
          // the field may go on (or a doubled quote be cut) in the input still to come
          if (!final) {
            if (n - at > maxRecord) throw new CsvSyntaxError(`a record is longer than ${maxRecord} characters`);
            return undefined;
          }
          if (k < 0) throw new CsvSyntaxError('a quote is not closed');
        }
        if (k - at > maxRecord) throw new CsvSyntaxError(`a record is longer than ${maxRecord} characters`);
        field += s.slice(j, k);
        if (s[k + 1] === '"') {
          field += '"';
          j = k + 2;
          continue;
        }
        i = k + 1;
        break;
      }
      while (isBlank(s[i])) i++;
      if (s[i] === '\r' && s[i + 1] === '\n') i++;
      if (i < n && s[i] !== ',' && s[i] !== '\n') throw new CsvSyntaxError(`got ${JSON.stringify(s[i])} after a closing quote instead of a delimiter`);
    } else {
      let j = i;
      while (j < n && s[j] !== ',' && s[j] !== '\n') {
        if (s[j] === '"') throw new CsvSyntaxError(`a quote inside the unquoted field ${JSON.stringify(s.slice(i, Math.min(j, i + 40)))}`);
        j++;
      }
      if (j >= n && !final) return undefined;
      field = s.slice(i, j).trim();
      i = j;
    }
    fields.push(field);
    if (i >= n) return { fields, next: n };
    if (s[i] === '\n') return { fields, next: i + 1 };
    i++; // the comma
  }
}
