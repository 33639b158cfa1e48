/**
 * The transfer-program advice, read from a bench file measured on one H200 (docs/evidence): it names the list call
 * and the file call with the figures of the rows it quotes, and stays silent where those rows were not measured.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { BenchReport } from '../formats/bench-schema.js';
import { adviseDevice } from './advice.js';

const evidence = new URL('../../docs/evidence/2026-12-01-1x-h200/gpumem-transfer-1.json', import.meta.url);

test('transfer advice from a measured run: lists through rt.uploadMany, files through rt.uploadFile, each with its rows', () => {
  const bench = JSON.parse(readFileSync(evidence, 'utf8')) as BenchReport;
  const items = adviseDevice({ index: 0 }, bench);
  const list = items.find((a) => a.id === 'transfer-lists');
  assert.ok(list, 'the list advice is given');
  const many = bench.results.filter((r) => r.direction === 'HtoD-many' && r.copies === 4096);
  const uploadMany = many.find((r) => r.engine === 'uploadMany');
  const eachRow = many.find((r) => r.engine === 'await-each');
  assert.ok(uploadMany?.medianGBps && eachRow?.medianGBps);
  assert.deepEqual(
    list.evidence.map((e) => e.value).sort((a, b) => a - b),
    many.map((r) => r.medianGBps).sort((a, b) => (a ?? 0) - (b ?? 0)),
    'the three ways of the smallest arrays, as measured',
  );
  assert.match(list.title, /rt\.uploadMany/);
  const file = items.find((a) => a.id === 'files-to-device');
  assert.ok(file, 'the file advice is given');
  const cached = bench.results.find((r) => r.direction === 'FtoD' && r.srcKind === 'file-cached' && r.engine.startsWith('uploadFile ('));
  assert.equal(file.evidence[0]?.value, cached?.medianGBps);
  assert.match(file.recommendation, /no JS buffer/);
  // Without the program rows, neither rule speaks.
  const bare = { ...bench, results: bench.results.filter((r) => r.direction !== 'HtoD-many' && r.direction !== 'FtoD') };
  const none = adviseDevice({ index: 0 }, bare).map((a) => a.id);
  assert.ok(!none.includes('transfer-lists') && !none.includes('files-to-device'));
});
