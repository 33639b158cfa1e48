/**
 * The SQLite opener both database readers use: each binding that loads here reads and writes the same rows (integers
 * as bigints, full 64-bit precision), a file that is not SQLite is refused as such, and with no binding the error
 * says how to get one.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ErrorCode, isGpuError } from '../errors.js';
import { columnsOf, openSqlite, SQLITE_DRIVERS, tablesOf, type SqliteDriver } from './sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-sqlite-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

/** Whether a binding loads on this Node (node:sqlite needs Node 22.5 or later). */
function loads(driver: SqliteDriver): string | false {
  try {
    driver(':memory:', true).close();
    return false;
  } catch (e) {
    return (e as Error).message;
  }
}

const BIG = 2n ** 62n + 7n;
for (const [name, driver] of SQLITE_DRIVERS) {
  const why = loads(driver);
  test(`${name}: a database written and read back keeps 64-bit integers, tables and columns`, {
    skip: why ? `${name} does not load here: ${why}` : false,
  }, () => {
    const file = join(dir, `${name.replace(/\W/g, '-')}.db`);
    const w = openSqlite(file, { write: true }, [[name, driver]]);
    assert.equal(w.driver, name);
    w.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, start INTEGER, name TEXT); CREATE VIEW v AS SELECT id, name FROM t');
    w.run('INSERT INTO t (id, start, name) VALUES (?, ?, ?)', 1, BIG, 'a');
    w.run('INSERT INTO t (id, start, name) VALUES (?, ?, ?)', 2, 5, 'b');
    w.close();
    const r = openSqlite(file, {}, [[name, driver]]);
    try {
      assert.deepEqual([...tablesOf(r)].sort(), ['t', 'v']);
      assert.deepEqual([...columnsOf(r, 'v')], ['id', 'name']);
      assert.deepEqual(
        [...r.iterate('SELECT id, start, name FROM t ORDER BY id')].map((x) => ({ ...x })),
        [
          { id: 1n, start: BIG, name: 'a' },
          { id: 2n, start: 5n, name: 'b' },
        ],
      );
      // opened read-only: an untrusted file is never changed
      assert.throws(() => r.exec("INSERT INTO t (id, start, name) VALUES (3, 0, 'c')"), /readonly|read-only/i);
    } finally {
      r.close();
    }
  });
}

test('a file that is not SQLite is refused as such, not taken for an empty database', () => {
  const file = join(dir, 'not.sqlite');
  writeFileSync(file, 'SQLite format 3\0'.padEnd(4096, 'x'));
  assert.throws(
    () => openSqlite(file),
    (e: unknown) => isGpuError(e, ErrorCode.BAD_INPUT) && /cannot open it as SQLite/.test((e as Error).message),
  );
});

test('with no binding, opening says which were tried and how to get one', () => {
  const missing =
    (code: string): SqliteDriver =>
    () => {
      throw Object.assign(new Error(`Cannot find module (${code})`), { code });
    };
  assert.throws(
    () =>
      openSqlite('trace.sqlite', { what: 'an Nsight Systems export' }, [
        ['better-sqlite3', missing('MODULE_NOT_FOUND')],
        ['node:sqlite', missing('ERR_UNKNOWN_BUILTIN_MODULE')],
      ]),
    (e: unknown) =>
      isGpuError(e, ErrorCode.UNSUPPORTED) &&
      /reading an Nsight Systems export needs an SQLite binding/.test((e as Error).message) &&
      /better-sqlite3: not installed/.test((e as Error).message) &&
      /npm install better-sqlite3/.test((e as Error).message) &&
      /Node 22\.5/.test((e as Error).message),
  );
});

test('a binding that does not load is passed over for the next one', (t) => {
  const working = SQLITE_DRIVERS.find(([, d]) => !loads(d));
  if (!working) return t.skip('no SQLite binding loads here');
  const missing: SqliteDriver = () => {
    throw Object.assign(new Error('Cannot find module'), { code: 'MODULE_NOT_FOUND' });
  };
  const db = openSqlite(':memory:', { write: true }, [['absent', missing], working]);
  assert.equal(db.driver, working[0]);
  db.close();
});
