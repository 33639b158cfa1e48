import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fitTable, outputWidth, wrapLine, wrapText } from './width.js';

test('outputWidth: the terminal, else $COLUMNS, else 80, never below 40', () => {
  assert.equal(outputWidth({ isTTY: true, columns: 132 }, {}), 132);
  assert.equal(outputWidth({ isTTY: false }, { COLUMNS: '100' }), 100);
  assert.equal(outputWidth({ isTTY: false }, {}), 80);
  assert.equal(outputWidth({ isTTY: true, columns: 20 }, {}), 40);
  assert.equal(outputWidth({ isTTY: false }, { COLUMNS: 'wide' }), 80, 'a $COLUMNS that is not a number is ignored');
});

test('wrapLine wraps at spaces, keeps list indentation, and leaves a word longer than the line whole', () => {
  assert.deepEqual(wrapLine('short', 10), ['short']);
  assert.deepEqual(wrapLine('  - one two three four', 12), ['  - one two', '    three', '    four']);
  assert.deepEqual(wrapLine('a verylongwordthatdoesnotfit b', 10), ['a', 'verylongwordthatdoesnotfit', 'b']);
  assert.deepEqual(wrapLine('x y z', 3, '>'), ['x y', '>z']);
  const text = wrapText('the first paragraph is long enough to wrap\n\nsecond', 20);
  for (const l of text.split('\n')) assert.ok(l.length <= 20, l);
  assert.equal(text.split('\n').filter((l) => l === '').length, 1, 'empty lines stay');
});

test('fitTable drops the lowest-priority columns first, never those without a priority', () => {
  const cols = [{ header: 'name' }, { header: 'a', priority: 2 }, { header: 'b', priority: 1 }, { header: 'value', right: true }];
  const rows = [['alpha', 'xxxxxxxx', 'yyyyyyyy', '12']];
  const wide = fitTable(cols, rows, 200);
  assert.deepEqual(wide.dropped, []);
  assert.equal(wide.lines[2], 'alpha  xxxxxxxx  yyyyyyyy     12');
  const mid = fitTable(cols, rows, 26);
  assert.deepEqual(mid.dropped, ['b']);
  assert.equal(mid.lines[2], 'alpha  xxxxxxxx     12');
  const narrow = fitTable(cols, rows, 5);
  assert.deepEqual(narrow.dropped, ['b', 'a'], 'the columns without a priority stay even when the table cannot fit');
  assert.equal(narrow.lines[2], 'alpha     12');
});

test('plan text fits 80 columns: the lines keep their figures, each "how" follows the table, wrapped', async () => {
  const { runCli } = await import('../testing/harness.js');
  const r = await runCli(['plan', '--model', 'llama-3.1-8b', '--lora', '16', '--base-weights', 'nf4', '--gpu', 'rtx-4090']);
  assert.equal(r.code, 0, r.err);
  assert.deepEqual(
    r.out.split('\n').filter((l) => l.length > 80),
    [],
  );
  assert.match(r.out, /^parameters: frozen base \(nf4\) +\d+\.\d\d +\d+\.\d\d$/m);
  // each line's "how" in the section after the table, wrapped under its name
  const how = r.out.slice(r.out.indexOf('how each line is counted:\n'));
  assert.ok(how.length > 0 && r.out.indexOf('how each line is counted:') > r.out.indexOf('capacity'), 'the section follows the table');
  assert.match(how, /^ {2}parameters: frozen base \(nf4\): .*\n {6}\S/m);
});
