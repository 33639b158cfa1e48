#!/usr/bin/env node
/**
 * How fast each SQLite binding reads a large Nsight Systems export: every row of its activity tables and strings,
 * integers kept exact (bigints where the binding can give them), in a fresh process per run.
 *
 *   python3 tools/big-nsys.py SOURCE.sqlite /tmp/big.sqlite 500
 *   node tools/sqlite-readers.mjs /tmp/big.sqlite [RUNS] [READERS]
 *
 * READERS (comma-separated, default all that load): node-sqlite3-wasm (gpumem's), better-sqlite3, node:sqlite (run
 * with the Node.js binary in $NODE22, which must be 22.5 or later), sql.js (loads the whole file into memory).
 * A binding that is not installed is named and skipped: install it where you run this (npm install --no-save NAME).
 * Prints the median seconds, the spread and the peak RSS of each.
 */
import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { cpus } from 'node:os';

const TABLES = ['CUPTI_ACTIVITY_KIND_KERNEL', 'CUPTI_ACTIVITY_KIND_MEMCPY', 'CUPTI_ACTIVITY_KIND_RUNTIME', 'CUPTI_ACTIVITY_KIND_SYNCHRONIZATION', 'StringIds'];
const READ = {
  'node-sqlite3-wasm': `const { Database } = require('node-sqlite3-wasm'); const db = new Database(file, { readOnly: true });
    for (const t of TABLES) { const s = db.prepare('SELECT * FROM "' + t + '"'); for (const r of s.iterate()) use(r); s.finalize(); }`,
  'better-sqlite3': `const db = new (require('better-sqlite3'))(file, { readonly: true });
    for (const t of TABLES) for (const r of db.prepare('SELECT * FROM "' + t + '"').safeIntegers(true).iterate()) use(r);`,
  'node:sqlite': `const { DatabaseSync } = require('node:sqlite'); const db = new DatabaseSync(file, { readOnly: true });
    for (const t of TABLES) { const s = db.prepare('SELECT * FROM "' + t + '"'); s.setReadBigInts(true); for (const r of s.iterate()) use(r); }`,
  'sql.js': `const SQL = await require('sql.js')(); const db = new SQL.Database(require('node:fs').readFileSync(file));
    for (const t of TABLES) { const s = db.prepare('SELECT * FROM "' + t + '"'); while (s.step()) use(s.getAsObject()); s.free(); }`,
};
const child = (reader) => `const { createRequire } = await import('node:module'); const require = createRequire(process.cwd() + '/');
  const file = process.argv[1]; const TABLES = ${JSON.stringify(TABLES)}; let rows = 0; const use = () => rows++;
  const t0 = performance.now(); ${READ[reader]}
  console.log(JSON.stringify({ rows, s: (performance.now() - t0) / 1000, rss: process.resourceUsage().maxRSS * 1024 }));`;

const [file, runsArg, only] = process.argv.slice(2);
if (!file) throw new Error('usage: node tools/sqlite-readers.mjs FILE.sqlite [RUNS] [READERS]');
const runs = Number(runsArg ?? 3);
const readers = only ? only.split(',') : Object.keys(READ);
console.log(
  `${file}: ${(statSync(file).size / 1e6).toFixed(0)} MB; ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown CPU'}); median of ${runs} runs, fresh processes, interleaved`,
);
const results = Object.fromEntries(readers.map((r) => [r, []]));
for (let i = 0; i < runs; i++)
  for (const reader of readers) {
    const node = reader === 'node:sqlite' ? process.env.NODE22 : process.execPath;
    if (!node) {
      results[reader].push({ error: 'set NODE22 to a Node.js 22.5+ binary' });
      continue;
    }
    try {
      const out = execFileSync(node, ['--no-warnings', '--input-type=module', '-e', child(reader), file], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      results[reader].push(JSON.parse(out.trim().split('\n').at(-1)));
    } catch (e) {
      results[reader].push({
        error:
          String(e.stderr ?? e.message)
            .split('\n')
            .find((l) => /Error|Cannot/.test(l)) ?? 'failed',
      });
    }
  }
console.log('reader               rows       seconds median (min-max)   peak RSS');
for (const [reader, rs] of Object.entries(results)) {
  const ok = rs.filter((r) => r.s !== undefined).sort((a, b) => a.s - b.s);
  if (ok.length === 0) {
    console.log(`${reader.padEnd(20)} ${rs[0]?.error}`);
    continue;
  }
  const med = ok[Math.floor(ok.length / 2)];
  console.log(
    `${reader.padEnd(20)} ${String(med.rows).padStart(8)}   ${med.s.toFixed(1).padStart(6)} (${ok[0].s.toFixed(1)}-${ok.at(-1).s.toFixed(1)})        ${(Math.max(...ok.map((r) => r.rss)) / 2 ** 20).toFixed(0)} MiB`,
  );
}
