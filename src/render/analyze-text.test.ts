/**
 * analyze's text fits the terminal: no line wider than stdout's columns, or $COLUMNS, or 80 when output is not a
 * terminal, on traces whose names run to hundreds of characters; narrower widths are honoured too, and nothing a
 * finding says is dropped to fit.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { analyzeFiles } from '../analyze/analyze.js';
import { runCli } from '../testing/harness.js';
import { naiveRun, writeRocprofV1Stats } from '../testing/trace-fixtures.js';
import { renderAnalyze } from './analyze-text.js';
import { fitLines } from './width.js';

const fixture = (p: string): string => new URL(`../../fixtures/${p}`, import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'gpumem-analyze-width-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));
const widest = (text: string): number => Math.max(...text.split('\n').map((l) => l.length));

test('gpumem analyze output is no wider than 80 columns when stdout is not a terminal and $COLUMNS is unset', async () => {
  const columns = process.env.COLUMNS;
  delete process.env.COLUMNS;
  try {
    const stats = writeRocprofV1Stats(join(dir, 'results'), naiveRun());
    for (const files of [[fixture('traces/pytorch-cuda-naive.pt.trace.json.gz')], [fixture('traces/nsys-naive.sqlite')], Object.values(stats)]) {
      const r = await runCli(['analyze', ...files]);
      assert.equal(r.code, 0, r.err);
      assert.ok(widest(r.out) <= 80, `${files[0]}: a line of ${widest(r.out)} characters`);
      assert.match(r.out, /findings/);
    }
    process.env.COLUMNS = '100';
    const wide = await runCli(['analyze', stats.kernels, stats.hip, stats.copies]);
    assert.ok(widest(wide.out) <= 100 && widest(wide.out) > 80, `$COLUMNS=100 gives up to 100 columns (widest ${widest(wide.out)})`);
  } finally {
    if (columns === undefined) delete process.env.COLUMNS;
    else process.env.COLUMNS = columns;
  }
});

test('a narrow width is honoured and every finding keeps its rule, saving and change', async () => {
  const r = await analyzeFiles([fixture('traces/pytorch-cuda-naive.pt.trace.json.gz')]);
  const text = renderAnalyze(r, { width: 50 });
  assert.ok(widest(text) <= 50, `widest ${widest(text)}`);
  const flat = text.replace(/\s+/g, ' ');
  for (const f of r.findings) {
    assert.ok(flat.includes(`${f.rule}:`), f.rule);
    // the change, word by word (wrapping moves line breaks, not words)
    for (const word of f.change.split(' ').slice(0, 8)) assert.ok(flat.includes(word), `${f.rule}: "${word}"`);
  }
});

test("fitLines breaks a word longer than the line, keeping the line's indent", () => {
  const path = `/very/long/${'x'.repeat(120)}/trace.json`;
  const out = fitLines(`   - ${path}`, 40).split('\n');
  assert.ok(out.every((l) => l.length <= 40));
  assert.equal(
    out
      .map((l, i) => (i === 0 ? l : l.trimStart()))
      .join('')
      .replace('   - ', ''),
    path,
  );
});
