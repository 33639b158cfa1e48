/**
 * The CSV reader against csv-parse (the library it replaced, with the options it was used with: bom, trim,
 * skip_empty_lines, relax_column_count, columns): for any text, the same rows or a refusal by both, read in pieces
 * of any size; and the CSV files of ../shared/traces and fixtures/ read the same.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { filesLike, SHARED_TRACES } from '../testing/fuzz.js';
import { propertyParams } from '../testing/property.js';
import { readCsv, type CsvRow } from './csv.js';

const require = createRequire(import.meta.url);
const { parse } = require('csv-parse/sync') as { parse: (text: string, options: object) => Array<Record<string, string>> };
// the column names trimmed, as the reader before this one trimmed them
const OPTIONS = { bom: true, trim: true, skip_empty_lines: true, relax_column_count: true, columns: (h: string[]) => h.map((x) => String(x).trim()) };

const dir = mkdtempSync(join(tmpdir(), 'gpumem-csv-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

/** Rows by csv-parse, or 'refused'. */
function reference(text: string): Array<Record<string, string>> | 'refused' {
  try {
    return parse(text, OPTIONS).map((r) => ({ ...r }));
  } catch {
    return 'refused';
  }
}

/** Rows by readCsv, or 'refused'. */
async function ours(text: string | Buffer): Promise<Array<Record<string, string>> | 'refused'> {
  const file = join(dir, `t${n++}.csv`);
  writeFileSync(file, text);
  const rows: CsvRow[] = [];
  try {
    await readCsv(
      file,
      () => {},
      (r) => rows.push({ ...r }),
    );
  } catch {
    return 'refused';
  }
  return rows;
}

const cell = fc.oneof(
  fc.stringMatching(/^[a-z0-9_ .:-]{0,8}$/),
  fc.string({ unit: fc.constantFrom('a', ',', '"', '""', ' ', '\t', '\n', '\r\n', '\r', 'é') }).map((s) => `"${s.replaceAll('"', '""')}"`),
  fc.constantFrom(' x ', '"x" ', ' "y"', '', '"a"b', 'a"b', '"open'),
);
const line = fc.array(cell, { minLength: 1, maxLength: 5 }).map((cs) => cs.join(','));
const text = fc
  .tuple(
    fc.boolean(),
    fc.array(fc.oneof({ weight: 6, arbitrary: line }, { weight: 1, arbitrary: fc.constantFrom('', '  ') }), { minLength: 1, maxLength: 8 }),
    fc.constantFrom('\n', '\r\n'),
    fc.boolean(),
  )
  .map(([bom, lines, eol, last]) => `${bom ? '\uFEFF' : ''}${lines.join(eol)}${last ? eol : ''}`);

test('any text reads as csv-parse reads it, or both refuse it', async () => {
  await fc.assert(
    fc.asyncProperty(text, async (t) => {
      assert.deepEqual(await ours(t), reference(t), JSON.stringify(t));
    }),
    propertyParams(400),
  );
});

test("a record cut by the reader's pieces anywhere reads the same (64 KiB pieces, a quoted field across them)", async () => {
  const field = `"${'x,"\n'.repeat(50_000).replaceAll('"', '""')}"`;
  const t = `a,b\n1,${field}\n${'2,3\n'.repeat(40_000)}`;
  assert.deepEqual(await ours(t), reference(t));
});

test('a record past the size limit is refused, not held', async () => {
  assert.equal(await ours(`a,b\n${'x'.repeat(2 << 20)}\n`), 'refused');
  assert.equal(await ours(`a,b\n"${'x'.repeat(2 << 20)}`), 'refused');
});

const FIXTURES = fileURLToPath(new URL('../../fixtures/', import.meta.url));
test('the CSV files of ../shared/traces and fixtures/ read as csv-parse reads them', {
  skip: SHARED_TRACES && existsSync(SHARED_TRACES) ? false : '../shared/traces is absent',
}, async () => {
  const files = [...filesLike(SHARED_TRACES, /\.(csv|txt)$/, 8 << 20), ...filesLike(FIXTURES, /\.csv$/, 8 << 20)];
  assert.ok(files.length >= 10, `${files.length} files`);
  for (const f of files) assert.deepEqual(await ours(readFileSync(f.name)), reference(f.bytes.toString('utf8')), f.name);
});
