/**
 * SQLite databases (Nsight Systems exports, rocprofv3's rocpd) through whichever binding this Node has: better-sqlite3
 * where it is installed (an optional dependency: `npm install` goes on without it where it cannot be built), else
 * Node's own `node:sqlite` (Node 22.5 and later). Both are opened read-only for untrusted files and give integers
 * as bigints, so that a 64-bit timestamp or address keeps every digit. Loaded on first use: importing this module
 * loads no native addon.
 */
import { createRequire } from 'node:module';
import { BadInputError, ErrorCode, GpuError } from '../errors.js';

const require = createRequire(import.meta.url);

/** A row as the binding gives it: column name to value (integers as bigint). */
export type SqlRow = Record<string, unknown>;
export type SqlParam = null | number | bigint | string | Uint8Array;

/** An open database. */
export interface SqliteDb {
  /** Which binding opened it. */
  readonly driver: 'better-sqlite3' | 'node:sqlite';
  /** Every row of a query. */
  all(sql: string, ...params: SqlParam[]): SqlRow[];
  /** The rows of a query one at a time (node:sqlite before 22.13 reads them all first). */
  iterate(sql: string, ...params: SqlParam[]): Iterable<SqlRow>;
  /** Runs statements that return nothing (only on a database opened for writing). */
  exec(sql: string): void;
  /** Runs one statement with parameters (only on a database opened for writing). */
  run(sql: string, ...params: SqlParam[]): void;
  close(): void;
}

/** Names of the tables and views of a database. */
export function tablesOf(db: SqliteDb): Set<string> {
  return new Set(
    db
      .all("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
      .map((r) => r.name)
      .filter((n): n is string => typeof n === 'string'),
  );
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

/** How to open a database with one binding; throws when the binding is not available. */
export type SqliteDriver = (file: string, write: boolean) => SqliteDb;

interface BetterStatement {
  safeIntegers(on: boolean): BetterStatement;
  all(...p: SqlParam[]): SqlRow[];
  iterate(...p: SqlParam[]): IterableIterator<SqlRow>;
  run(...p: SqlParam[]): unknown;
}
interface BetterDb {
  prepare(sql: string): BetterStatement;
  exec(sql: string): void;
  close(): void;
}

const betterSqlite3: SqliteDriver = (file, write) => {
  const Database = require('better-sqlite3') as new (f: string, o: object) => BetterDb;
  const db = new Database(file, write ? {} : { readonly: true, fileMustExist: true });
  return {
    driver: 'better-sqlite3',
    all: (sql, ...p) =>
      db
        .prepare(sql)
        .safeIntegers(true)
        .all(...p),
    iterate: (sql, ...p) =>
      db
        .prepare(sql)
        .safeIntegers(true)
        .iterate(...p),
    exec: (sql) => db.exec(sql),
    run: (sql, ...p) => void db.prepare(sql).run(...p),
    close: () => db.close(),
  };
};

interface NodeStatement {
  setReadBigInts(on: boolean): void;
  all(...p: SqlParam[]): SqlRow[];
  iterate?(...p: SqlParam[]): IterableIterator<SqlRow>;
  run(...p: SqlParam[]): unknown;
}
interface NodeDb {
  prepare(sql: string): NodeStatement;
  exec(sql: string): void;
  close(): void;
}

const nodeSqlite: SqliteDriver = (file, write) => {
  const { DatabaseSync } = require('node:sqlite') as { DatabaseSync: new (f: string, o: object) => NodeDb };
  const db = new DatabaseSync(file, write ? {} : { readOnly: true });
  const prepare = (sql: string): NodeStatement => {
    const s = db.prepare(sql);
    s.setReadBigInts(true);
    return s;
  };
  return {
    driver: 'node:sqlite',
    all: (sql, ...p) => prepare(sql).all(...p),
    iterate: (sql, ...p) => {
      const s = prepare(sql);
      return s.iterate ? s.iterate(...p) : s.all(...p);
    },
    exec: (sql) => db.exec(sql),
    run: (sql, ...p) => void prepare(sql).run(...p),
    close: () => db.close(),
  };
};

/** The bindings tried, in order: better-sqlite3 first (no experimental warning on Node 22), then node:sqlite. */
export const SQLITE_DRIVERS: ReadonlyArray<readonly [string, SqliteDriver]> = [
  ['better-sqlite3', betterSqlite3],
  ['node:sqlite', nodeSqlite],
];

/** The text of the error a binding gave when it could not be loaded. */
const loadFailure = (e: unknown): string => ((e as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' ? 'not installed' : (e as Error).message);
/** True for an error that says the binding itself is missing or broken (not that the file is bad). */
const isLoadError = (e: unknown): boolean => {
  const code = (e as NodeJS.ErrnoException).code;
  return (
    code === 'MODULE_NOT_FOUND' ||
    code === 'ERR_UNKNOWN_BUILTIN_MODULE' ||
    code === 'ERR_DLOPEN_FAILED' ||
    /NODE_MODULE_VERSION|invalid ELF|bindings file/.test(String((e as Error).message))
  );
};

/**
 * Opens an SQLite database, read-only unless `write` (for tests that build one), with the first binding that loads.
 * @throws GpuError (UNSUPPORTED) when no binding is available, saying how to get one; BadInputError when the file
 *   cannot be opened as SQLite.
 */
export function openSqlite(file: string, options: { write?: boolean; what?: string } = {}, drivers = SQLITE_DRIVERS): SqliteDb {
  const missing: string[] = [];
  for (const [name, open] of drivers) {
    let db: SqliteDb | undefined;
    try {
      db = open(file, options.write === true);
      // a binding may open any file lazily: read its schema now, so that a file that is not SQLite fails here
      db.all('SELECT count(*) AS n FROM sqlite_master');
      return db;
    } catch (e) {
      db?.close();
      if (isLoadError(e)) {
        missing.push(`${name}: ${loadFailure(e)}`);
        continue;
      }
      throw new BadInputError(`cannot open it as SQLite: ${(e as Error).message}`, file, { cause: e });
    }
  }
  throw new GpuError(
    ErrorCode.UNSUPPORTED,
    `${file}: reading ${options.what ?? 'an SQLite database'} needs an SQLite binding, and none loads here (${missing.join('; ')}). Install one: \`npm install better-sqlite3\` (a prebuilt binary, or a C++ toolchain to build it), or run on Node 22.5 or later, which has node:sqlite built in`,
  );
}
