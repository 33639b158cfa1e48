/**
 * The SQLite opener every database reader uses: a database written and read back keeps its rows (integers exact
 * to 64 bits), a file that is not SQLite is refused as such, with no binding the error says how to get one, and a
 * file opened read-only gets bounded queries: views whose plans can run without end are refused before they run,
 * and rows and time are capped.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ErrorCode, isGpuError } from '../errors.js';
import { columnsOf, expectTables, openSqlite, SQLITE_DRIVERS, type SqliteDriver, tablesOf } from './sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-sqlite-test-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

/** A database built by the test: `sql` run on a new file. */
function build(name: string, sql: string): string {
  const file = join(dir, name);
  const w = openSqlite(file, { write: true });
  w.exec(sql);
  w.close();
  return file;
}
const badInput = (re: RegExp) => (e: unknown) => isGpuError(e, ErrorCode.BAD_INPUT) && re.test((e as Error).message);

const BIG = 2n ** 62n + 7n;
test('a database written and read back keeps 64-bit integers, tables, views and columns', () => {
  const file = join(dir, 'round-trip.db');
  const w = openSqlite(file, { write: true });
  assert.equal(w.driver, 'node-sqlite3-wasm');
  w.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, start INTEGER, name TEXT); CREATE VIEW v AS SELECT id, name FROM t');
  w.run('INSERT INTO t (id, start, name) VALUES (?, ?, ?)', 1, BIG, 'a');
  w.run('INSERT INTO t (id, start, name) VALUES (?, ?, ?)', 2, 5, 'b');
  w.close();
  const r = openSqlite(file);
  try {
    assert.deepEqual([...tablesOf(r)].sort(), ['t', 'v']);
    assert.deepEqual([...tablesOf(r, ['table'])], ['t']);
    assert.deepEqual([...columnsOf(r, 'v')], ['id', 'name']);
    const rows = [...r.iterate('SELECT id, start, name FROM t ORDER BY id')].map((x) => ({ ...x }));
    // exact integers as numbers, a value past 2^53 as a bigint: every digit kept
    assert.deepEqual(rows, [
      { id: 1, start: BIG, name: 'a' },
      { id: 2, start: 5, name: 'b' },
    ]);
    // read-only: an untrusted file is never changed, and no lock folder is made beside it (a reader may not be
    // able to write there, and one left by a killed process would lock the file for every later reader)
    const it = r.iterate('SELECT id FROM t')[Symbol.iterator]();
    it.next();
    assert.equal(existsSync(`${file}.lock`), false);
    it.return?.();
    assert.throws(() => r.exec("INSERT INTO t (id, start, name) VALUES (3, 0, 'c')"), /readonly|read-only/i);
  } finally {
    r.close();
  }
});

test('a file that is not SQLite, a folder or a missing file is refused as such', () => {
  const file = join(dir, 'not.sqlite');
  writeFileSync(file, 'SQLite format 3\0'.padEnd(4096, 'x'));
  assert.throws(() => openSqlite(file), badInput(/cannot open it as SQLite/));
  assert.throws(() => openSqlite(dir), badInput(/not a regular file/));
  assert.throws(() => openSqlite(join(dir, 'absent.sqlite')), badInput(/cannot read it: no such file/));
});

test('with no binding, opening says which were tried and how to get one', () => {
  const missing: SqliteDriver = () => {
    throw Object.assign(new Error('Cannot find module'), { code: 'MODULE_NOT_FOUND' });
  };
  const file = build('any.db', 'CREATE TABLE t (x)');
  assert.throws(
    () => openSqlite(file, { what: 'an Nsight Systems export' }, [['node-sqlite3-wasm', missing]]),
    (e: unknown) =>
      isGpuError(e, ErrorCode.UNSUPPORTED) &&
      /reading an Nsight Systems export needs an SQLite binding/.test((e as Error).message) &&
      /node-sqlite3-wasm: not installed/.test((e as Error).message) &&
      /npm install/.test((e as Error).message),
  );
  const db = openSqlite(file, {}, [['absent', missing], ...SQLITE_DRIVERS]);
  assert.equal(db.driver, 'node-sqlite3-wasm');
  db.close();
});

// A 4 KB file whose "table" is a view over an endless recursive query that yields nothing: run, it never returns.
const ENDLESS = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x AS start, x AS "end" FROM c WHERE x < 0';

test('a view with an endless recursive query is refused before it runs, and so is one that multiplies rows', () => {
  const file = build(
    'hostile.db',
    `CREATE TABLE t (id INTEGER PRIMARY KEY, x INTEGER, name TEXT UNIQUE); CREATE INDEX tx ON t (x);
     INSERT INTO t (x, name) VALUES (1, 'a'), (1, 'b'), (1, 'c');
     CREATE VIEW endless AS ${ENDLESS};
     CREATE VIEW fan AS SELECT a.id FROM t a JOIN t b ON b.x = a.x JOIN t c ON c.x = b.x WHERE c.id < 0;
     CREATE VIEW twice AS SELECT a.id FROM t a, t b;
     CREATE VIEW lookup AS SELECT a.id, b.name, (SELECT name FROM t WHERE t.id = a.x) AS first FROM t a LEFT JOIN t b ON b.name = a.name ORDER BY a.x`,
  );
  const db = openSqlite(file);
  try {
    assert.deepEqual([...tablesOf(db, ['view'])].sort(), ['endless', 'fan', 'lookup', 'twice']);
    for (const v of ['endless', 'fan', 'twice'])
      assert.throws(() => db.all(`SELECT * FROM "${v}"`), badInput(/not a plain read of a table.*refused before running/), v);
    // the shape rocprofiler-sdk's views have: one scan, every other table reached by a unique key
    assert.equal(db.all('SELECT * FROM lookup').length, 3);
  } finally {
    db.close();
  }
});

test('rows and time are capped, with an error that says so', () => {
  const file = build('rows.db', 'CREATE TABLE t (x); INSERT INTO t VALUES (1), (2), (3), (4), (5), (6)');
  const few = openSqlite(file, { limits: { maxRows: 5 } });
  assert.throws(() => few.all('SELECT x FROM t'), badInput(/more than 5 rows.*stopped/));
  few.close();
  const none = openSqlite(file, { limits: { maxSeconds: 0 } });
  assert.throws(() => none.all('SELECT x FROM t'), badInput(/longer than its time budget \(0 s\)/));
  none.close();
});

test('a name a format writes as a table is refused when the file has a view of that name', () => {
  const file = build('not-nsys.db', `CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT); CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS ${ENDLESS}`);
  const db = openSqlite(file);
  try {
    expectTables(db, file, ['StringIds'], 'Nsight Systems');
    assert.throws(
      () => expectTables(db, file, ['StringIds', 'CUPTI_ACTIVITY_KIND_KERNEL'], 'Nsight Systems'),
      badInput(/CUPTI_ACTIVITY_KIND_KERNEL is a view here, not a table: Nsight Systems writes it as a table/),
    );
  } finally {
    db.close();
  }
});
