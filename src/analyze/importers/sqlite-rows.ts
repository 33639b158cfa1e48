/**
 * Reading a profiler's SQLite tables row by row, as the Nsight Systems and nvprof readers both do: only the columns
 * wanted (a missing optional one reads as NULL, a missing needed one is an error naming it), integers checked,
 * timestamps onto the model's clock, rows counted for progress.
 */
import { BadInputError, isGpuError } from '../../errors.js';
import { columnsOf, openSqlite, type SqliteDb } from '../../input/sqlite.js';
import type { TraceModel } from '../model.js';

export interface SqliteRows {
  /** Rows of a table with the wanted columns; nothing where the table is absent. */
  each(t: string, need: string[], optional?: string[]): Generator<Record<string, unknown>>;
  /** An integer cell (NaN for NULL). */
  int(t: string, c: string, v: unknown): number;
  /** A timestamp cell on the model's clock. */
  stamp(t: string, c: string, v: unknown): number;
  /** A row's start and end on the model's clock. */
  span(t: string, r: Record<string, unknown>): [number, number];
  /** Rows read so far. */
  readonly rows: number;
}

/**
 * Row readers over `db` for `file`'s tables.
 * @throws BadInputError (from the readers) for a missing column, a cell of the wrong type, or a row ending before it starts.
 */
export function sqliteRows(db: SqliteDb, tables: Set<string>, file: string, model: TraceModel, progress?: (rows: number) => void): SqliteRows {
  let rows = 0;
  const stamp = (t: string, c: string, v: unknown): number => {
    if (typeof v === 'bigint' || (typeof v === 'number' && Number.isFinite(v))) return model.time(v);
    throw new BadInputError(`table ${t} column ${c} holds ${String(v).slice(0, 30)}, not a timestamp`, file);
  };
  return {
    get rows() {
      return rows;
    },
    *each(t, need, optional = []) {
      if (!tables.has(t)) return;
      const have = columnsOf(db, t);
      for (const c of need) if (!have.has(c)) throw new BadInputError(`table ${t} has no ${c} column`, file);
      const cols = [...need, ...optional].map((c) => (have.has(c) ? `"${c}"` : `NULL AS "${c}"`)).join(', ');
      for (const r of db.iterate(`SELECT ${cols} FROM "${t}"`)) {
        if (++rows % 200_000 === 0) progress?.(rows);
        yield r;
      }
    },
    int(t, c, v) {
      if (v === null || v === undefined) return Number.NaN;
      // signed: nvprof stores thread and stream ids as signed 32-bit integers (-1 for none)
      if (typeof v === 'bigint' && v >= -(2n ** 63n) && v <= 2n ** 63n) return Number(v);
      if (typeof v === 'number' && Number.isFinite(v)) return v;
      throw new BadInputError(`table ${t} column ${c} holds ${typeof v === 'string' ? JSON.stringify(v.slice(0, 30)) : String(v)}, not an integer`, file);
    },
    stamp,
    span(t, r) {
      const s = stamp(t, 'start', r.start);
      const e = stamp(t, 'end', r.end);
      if (e < s) throw new BadInputError(`table ${t}: a row ends before it starts`, file);
      return [s, e];
    },
  };
}

/**
 * Opens a database read-only, hands it to `read` and closes it; an error that is not gpumem's own (the binding's, on
 * a damaged file) becomes a BadInputError saying what the file was read as.
 * @throws BadInputError, or GpuError (UNSUPPORTED) where no SQLite binding loads.
 */
export function readDatabase(file: string, what: string, read: (db: SqliteDb) => void): void {
  const db = openSqlite(file, { what });
  try {
    read(db);
  } catch (e) {
    if (isGpuError(e)) throw e;
    throw new BadInputError(`cannot read it as ${what}: ${(e as Error).message}`, file, { cause: e });
  } finally {
    db.close();
  }
}
