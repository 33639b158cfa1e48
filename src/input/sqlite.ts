/**
 * SQLite databases (Nsight Systems exports, rocprofv3's rocpd, legacy rocprof results.db) through SQLite compiled to
 * WebAssembly (the npm package node-sqlite3-wasm): the same on every Node.js version, nothing compiled at install,
 * and the file read through Node's fs a page at a time, never loaded whole (docs/analyze.md has the comparison with
 * better-sqlite3 and node:sqlite that chose it). Loaded on first use: importing this module loads no WebAssembly.
 *
 * An untrusted file is opened read-only and every query on it is bounded before it runs: SQLite's own query plan
 * must be one scan of a table with lookups by unique key (what a read of a table, or of the views rocprofiler-sdk
 * writes, compiles to), so a view holding a recursive or row-multiplying query is refused instead of run; and a
 * query stops with a clear error past a number of rows the file could hold or past a time budget.
 */
import { mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { BadInputError, ErrorCode, GpuError } from '../errors.js';
import { fsReason } from './fs-errors.js';

const require = createRequire(import.meta.url);

/** A row: column name to value (integers as numbers where exact, as bigints beyond 2^53, so no digit is lost). */
export type SqlRow = Record<string, unknown>;
export type SqlParam = null | number | bigint | string | Uint8Array;

/** An open database. */
export interface SqliteDb {
  /** Which binding opened it. */
  readonly driver: string;
  /** Every row of a query. */
  all(sql: string, ...params: SqlParam[]): SqlRow[];
  /** The rows of a query one at a time. */
  iterate(sql: string, ...params: SqlParam[]): Iterable<SqlRow>;
  /** Runs statements that return nothing (only on a database opened for writing). */
  exec(sql: string): void;
  /** Runs one statement with parameters (only on a database opened for writing). */
  run(sql: string, ...params: SqlParam[]): void;
  close(): void;
}

/** What kind of schema object a name is. */
export type SqliteObject = 'table' | 'view';

/** Names of the tables and views of a database (only those of `kinds` when given). */
export function tablesOf(db: SqliteDb, kinds: readonly SqliteObject[] = ['table', 'view']): Set<string> {
  const out = new Set<string>();
  for (const [name, kind] of objectsOf(db)) if (kinds.includes(kind)) out.add(name);
  return out;
}

/** Every table and view of a database with its kind; a virtual table counts as neither (its module runs code). */
export function objectsOf(db: SqliteDb): Map<string, SqliteObject> {
  const out = new Map<string, SqliteObject>();
  for (const r of db.all("SELECT name, type, sql FROM sqlite_master WHERE type IN ('table', 'view')")) {
    if (typeof r.name !== 'string') continue;
    if (r.type === 'table' && typeof r.sql === 'string' && /^\s*CREATE\s+VIRTUAL\b/i.test(r.sql)) continue;
    out.set(r.name, r.type === 'view' ? 'view' : 'table');
  }
  return out;
}

/**
 * Refuses a database where a name the format writes as a table is something else (a view, a virtual table): the
 * file was not written by the program it claims, and a view can hold a query that never ends.
 * @throws BadInputError naming the object and what it is.
 */
export function expectTables(db: SqliteDb, file: string, names: readonly string[], writer: string): void {
  const objects = objectsOf(db);
  const kinds = new Map(db.all('SELECT name, type FROM sqlite_master WHERE name IS NOT NULL').map((r) => [r.name, r.type] as const));
  for (const name of names) {
    const kind = kinds.get(name);
    if (kind === undefined || objects.get(name) === 'table') continue;
    const what = kind === 'table' ? 'a virtual table' : `a ${String(kind)}`;
    throw new BadInputError(
      `${name} is ${what} here, not a table: ${writer} writes it as a table, so this file was not written by ${writer} (or was altered), and it is not read`,
      file,
    );
  }
}

/** Names of the columns of a table or view. */
export function columnsOf(db: SqliteDb, table: string): Set<string> {
  return new Set(
    db
      .all(`PRAGMA table_info(${JSON.stringify(table)})`)
      .map((r) => r.name)
      .filter((n): n is string => typeof n === 'string'),
  );
}

/** How to open a database with one binding, with no bounds of its own; throws when the binding is not available. */
export type SqliteDriver = (file: string, write: boolean) => SqliteDb;

interface WasmStatement {
  iterate(values?: SqlParam[]): IterableIterator<SqlRow>;
  run(values?: SqlParam[]): unknown;
  finalize(): void;
}
interface WasmDb {
  prepare(sql: string): WasmStatement;
  exec(sql: string): void;
  close(): void;
}

/**
 * node-sqlite3-wasm. Its file system layer locks a file by making a folder beside it (FILE.lock), which fails in a
 * folder the reader cannot write and, left by a killed process, locks the file for every later reader: a file opened
 * read-only is opened through a symbolic link in a private temporary folder, where the lock folder then goes.
 */
const wasmSqlite: SqliteDriver = (file, write) => {
  const { Database } = require('node-sqlite3-wasm') as { Database: new (f: string, o: object) => WasmDb };
  const link = write || file === ':memory:' ? undefined : mkdtempSync(join(tmpdir(), 'gpumem-sqlite-'));
  const forget = (): void => {
    if (link) rmSync(link, { recursive: true, force: true });
  };
  let db: WasmDb;
  try {
    const path = link ? join(link, 'db') : file;
    if (link) symlinkSync(resolve(file), path);
    db = new Database(path, write ? {} : { readOnly: true, fileMustExist: true });
  } catch (e) {
    forget();
    throw e;
  }
  const each = function* (sql: string, params: SqlParam[]): Generator<SqlRow> {
    const s = db.prepare(sql);
    try {
      yield* s.iterate(params);
    } finally {
      s.finalize();
    }
  };
  return {
    driver: 'node-sqlite3-wasm',
    all: (sql, ...p) => [...each(sql, p)],
    iterate: (sql, ...p) => each(sql, p),
    exec: (sql) => db.exec(sql),
    run: (sql, ...p) => {
      const s = db.prepare(sql);
      try {
        s.run(p);
      } finally {
        s.finalize();
      }
    },
    close: () => {
      try {
        db.close();
      } finally {
        forget();
      }
    },
  };
};

/** The bindings tried, in order. */
export const SQLITE_DRIVERS: ReadonlyArray<readonly [string, SqliteDriver]> = [['node-sqlite3-wasm', wasmSqlite]];

/** The bounds put on every query of a database opened read-only. */
export interface SqliteLimits {
  /** Rows one query may give (default: a quarter of the file's bytes, more than a table of the file can hold). */
  maxRows?: number;
  /** Seconds all the queries on the database may take together (default: 120 plus 1 per MB of file). */
  maxSeconds?: number;
}

/**
 * Opens an SQLite database, read-only unless `write` (for tests and tools that build one), with the first binding
 * that loads; read-only, every query is bounded (see the module's comment and `SqliteLimits`).
 * @throws GpuError (UNSUPPORTED) when no binding loads; BadInputError when the file cannot be read or opened as
 *   SQLite, and later from a query whose plan is not bounded or that passes a limit.
 */
export function openSqlite(file: string, options: { write?: boolean; what?: string; limits?: SqliteLimits } = {}, drivers = SQLITE_DRIVERS): SqliteDb {
  const write = options.write === true;
  let bytes = 0;
  if (!write && file !== ':memory:') {
    try {
      const st = statSync(file);
      if (!st.isFile()) throw new BadInputError('not a regular file, so not an SQLite database', file);
      bytes = st.size;
    } catch (e) {
      if (e instanceof GpuError) throw e;
      throw new BadInputError(`cannot read it: ${fsReason(e)}`, file, { cause: e });
    }
  }
  const missing: string[] = [];
  for (const [name, open] of drivers) {
    let db: SqliteDb | undefined;
    try {
      db = open(file, write);
    } catch (e) {
      if (isLoadError(e)) {
        missing.push(`${name}: ${loadFailure(e)}`);
        continue;
      }
      throw new BadInputError(`cannot open it as SQLite: ${(e as Error).message.replaceAll(/"[^"]*gpumem-sqlite-[^"]*"/g, 'it')}`, file, { cause: e });
    }
    try {
      // a binding may open any file lazily: read its schema now, so that a file that is not SQLite fails here
      db.all('SELECT count(*) AS n FROM sqlite_master');
    } catch (e) {
      db.close();
      throw new BadInputError(`cannot open it as SQLite: ${(e as Error).message}`, file, { cause: e });
    }
    return write ? db : bounded(db, file, bytes, options.limits ?? {});
  }
  throw new GpuError(
    ErrorCode.UNSUPPORTED,
    `${file}: reading ${options.what ?? 'an SQLite database'} needs an SQLite binding, and none loads here (${missing.join('; ')}). Reinstall gpumem's dependencies (\`npm install\`): node-sqlite3-wasm is one of them and needs no compiler`,
  );
}

/** The text of the error a binding gave when it could not be loaded. */
const loadFailure = (e: unknown): string => ((e as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' ? 'not installed' : (e as Error).message);
/** True for an error that says the binding itself is missing or broken (not that the file is bad). */
const isLoadError = (e: unknown): boolean => {
  const code = (e as NodeJS.ErrnoException).code;
  return code === 'MODULE_NOT_FOUND' || code === 'ERR_UNKNOWN_BUILTIN_MODULE' || code === 'ERR_DLOPEN_FAILED' || (e as Error)?.name === 'CompileError';
};

/** A read-only database whose queries are checked before they run and stopped at the limits. */
function bounded(db: SqliteDb, file: string, bytes: number, limits: SqliteLimits): SqliteDb {
  const maxRows = limits.maxRows ?? Math.max(10_000, Math.ceil(bytes / 4));
  const deadline = performance.now() + 1000 * (limits.maxSeconds ?? 120 + bytes / 1e6);
  const plans = new PlanCheck(db, file);
  const rows = function* (sql: string, params: SqlParam[]): Generator<SqlRow> {
    if (/^\s*SELECT\b/i.test(sql)) plans.check(sql, params);
    let n = 0;
    for (const r of db.iterate(sql, ...params)) {
      if (++n > maxRows)
        throw new BadInputError(`a query gave more than ${maxRows} rows, more than a table of this ${bytes}-byte file can hold: stopped (${brief(sql)})`, file);
      if ((n & 4095) === 0 && performance.now() > deadline) throw overTime(file, limits, sql);
      yield r;
    }
    if (performance.now() > deadline) throw overTime(file, limits, sql);
  };
  return { ...db, driver: db.driver, all: (sql, ...p) => [...rows(sql, p)], iterate: (sql, ...p) => rows(sql, p), close: () => db.close() };
}

const overTime = (file: string, limits: SqliteLimits, sql: string): BadInputError =>
  new BadInputError(
    `reading it took longer than its time budget (${limits.maxSeconds === undefined ? '120 s + 1 s per MB of file' : `${limits.maxSeconds} s`}): stopped (${brief(sql)})`,
    file,
  );
const brief = (sql: string): string => (sql.length > 120 ? `${sql.slice(0, 117)}...` : sql);

/**
 * The shapes of query plan whose work is bounded by the file: at most one full scan, every other table reached by
 * a unique key (one row per lookup), scalar subqueries of the same shape, sorts. Anything else (a recursive CTE, a
 * co-routine or materialised subquery, a join through a non-unique index or a second scan, a virtual table) is
 * refused: those are how a 4 KB file holds a query that never ends.
 */
class PlanCheck {
  #unique: Map<string, number> | undefined;
  constructor(
    private readonly db: SqliteDb,
    private readonly file: string,
  ) {}

  /** @throws BadInputError naming the step of the plan that is not bounded. */
  check(sql: string, params: SqlParam[]): void {
    let scans = 0;
    for (const r of this.db.iterate(`EXPLAIN QUERY PLAN ${sql}`, ...params)) {
      const step = String(r.detail);
      if (/^SCAN \S+( USING (COVERING )?INDEX \S+)?$/.test(step) && !/^SCAN CONSTANT ROW$/.test(step)) {
        if (++scans === 1) continue;
      } else if (this.#bounded(step)) continue;
      throw new BadInputError(
        `a query on it compiles to a plan that is not a plain read of a table (step "${step.slice(0, 80)}"${scans > 1 ? ', a second full scan inside the first' : ''}): a view or schema that can run without end, refused before running (${brief(sql)})`,
        this.file,
      );
    }
  }

  #bounded(step: string): boolean {
    if (/^(CORRELATED )?SCALAR SUBQUERY \d+$/.test(step) || /^USE TEMP B-TREE FOR [A-Z0-9 ]+$/.test(step)) return true;
    const m = /^SEARCH \S+ USING (INTEGER PRIMARY KEY \(rowid=\?\)|PRIMARY KEY \(([^)]*)\)|(COVERING )?INDEX (\S+) \(([^)]*)\))( LEFT-JOIN)?$/.exec(step);
    if (!m) return false;
    if (m[1]?.startsWith('INTEGER')) return true;
    const terms = (m[2] ?? m[5] ?? '').split(' AND ');
    if (!terms.every((t) => /^\S+=\?$/.test(t))) return false;
    if (m[2] !== undefined) return true; // a WITHOUT ROWID table's whole key (SQLite names a prefix as an index)
    return this.#uniqueIndexes().get(m[4] ?? '') === terms.length;
  }

  /** Unique indexes of the database and their column counts. */
  #uniqueIndexes(): Map<string, number> {
    if (this.#unique) return this.#unique;
    this.#unique = new Map();
    for (const t of tablesOf(this.db, ['table']))
      for (const ix of this.db.all(`PRAGMA index_list(${JSON.stringify(t)})`))
        if (Number(ix.unique) === 1 && typeof ix.name === 'string')
          this.#unique.set(ix.name, this.db.all(`PRAGMA index_info(${JSON.stringify(ix.name)})`).length);
    return this.#unique;
  }
}
