/**
 * A hostile "Nsight Systems export" of 4 KB (made here): its CUPTI_ACTIVITY_KIND_KERNEL, or its StringIds, is a
 * view over an endless recursive query. Read, it ran without end, its memory growing; `gpumem analyze` must say
 * what the file is and exit 2 at once, without running the view.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { openSqlite } from '../../input/sqlite.js';
import { runCli } from '../../testing/harness.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-nsys-hostile-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

const ENDLESS = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)';
const HOSTILE: Record<string, string> = {
  kernel: `CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
    CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS ${ENDLESS} SELECT x AS start, x + 1 AS "end", 0 AS shortName, 0 AS demangledName, 0 AS streamId, 0 AS deviceId FROM c`,
  strings: `CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, nameId INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER);
    CREATE VIEW StringIds AS ${ENDLESS} SELECT x AS id, 'cudaMemcpy' AS value FROM c`,
};

for (const [name, sql] of Object.entries(HOSTILE))
  test(`an nsys export whose ${name === 'kernel' ? 'CUPTI_ACTIVITY_KIND_KERNEL' : 'StringIds'} is an endless recursive view is refused, saying what the file is`, async () => {
    const file = join(dir, `${name}.sqlite`);
    const w = openSqlite(file, { write: true });
    w.exec(`PRAGMA page_size = 1024; ${sql}`);
    w.close();
    assert.ok(statSync(file).size <= 4096, `${statSync(file).size} bytes`);
    const r = await runCli(['analyze', file]);
    assert.equal(r.code, 2, r.out + r.err);
    assert.match(r.err, /is a view here, not a table: Nsight Systems writes it as a table, so this file was not written by Nsight Systems/);
  });
