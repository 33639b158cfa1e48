/**
 * The bench table read at 80 columns (a terminal, or piped to a file): rows that differ only by their engine or API
 * keep it, wrapped if need be, so no two rows read the same; columns that do not tell rows apart go first.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BenchReport, BenchResult } from '../formats/bench-schema.js';
import { renderBench } from './bench-text.js';

const MiB = 2 ** 20;
const bw = (engine: string, gbps: number, extra: Partial<BenchResult> = {}): BenchResult => ({
  test: 'transfer',
  direction: 'HtoD-first',
  srcKind: 'pageable',
  dstKind: 'device',
  engine,
  bytes: 256 * MiB,
  device: 0,
  counted: 'one-way',
  medianGBps: gbps,
  minGBps: gbps * 0.9,
  maxGBps: gbps * 1.1,
  cv: 0.05,
  repeats: 5,
  verified: true,
  threads: 12,
  chunkBytes: 8 * MiB,
  ...extra,
});
const lat = (engine: string, us: number): BenchResult => ({
  test: 'alloc',
  direction: 'allocate+free',
  srcKind: 'device',
  dstKind: 'device',
  engine,
  bytes: 512,
  device: 0,
  counted: 'latency',
  medianUs: us,
  minUs: us * 0.9,
  maxUs: us * 1.2,
  cv: 0.1,
  repeats: 5,
  verified: true,
});

// the rows issue 35 found indistinguishable at 80 columns, with the engine names the suites give them
const RESULTS = [
  bw('gpumem-upload (first call)', 12.1),
  bw('gpumem-upload (first call), then the second call', 41.3),
  bw('gpumem-upload (first call, runtime opened first)', 19.6),
  bw('gpumem-upload (first call, runtime opened first), then the second call', 37.9),
  lat('driver', 7.3),
  lat('stream-ordered', 2.3),
  lat('gpumem-pool', 0.5),
];
const REPORT = {
  environment: {
    backend: 'cuda',
    gpumemVersion: '0.1.0',
    node: 'v20',
    host: 'h',
    cpu: 'c',
    date: '2026-12-02',
    mode: 'quick',
    timing: 'as-native',
    hostNumaNodes: [0],
    failures: [],
    seconds: 12,
    devices: [{ index: 0, name: 'NVIDIA H200', arch: 'sm_90', peaks: { how: 'from the link' } }],
  },
  results: RESULTS,
} as unknown as BenchReport;

/**
 * The cells of the table row that holds `figure`, each column's lines put back together: the columns are read off
 * the table's dash line, and a row goes on while its figure columns stay empty.
 */
function rowCells(text: string, figure: string): string[] {
  const lines = text.split('\n');
  const at = lines.findIndex((l) => l.endsWith(` ${figure}`));
  assert.ok(at >= 0, `${figure} is printed`);
  let dash = at;
  while (dash > 0 && !/^-+( +-+)*$/.test(lines[dash] ?? '')) dash--;
  const spans = [...(lines[dash] ?? '').matchAll(/-+/g)].map((m) => [m.index ?? 0, (m.index ?? 0) + m[0].length] as const);
  const cells = spans.map(() => '');
  for (let k = at; k < lines.length; k++) {
    const line = lines[k] ?? '';
    // the next row starts where the columns past the three that name a row (the size, the figures) have text again
    if (k > at && (line.trim() === '' || line.startsWith('(') || line.slice(spans[3]?.[0] ?? line.length).trim() !== '')) break;
    spans.forEach(([a, b], j) => {
      cells[j] += line.slice(a, b + (j === spans.length - 1 ? 0 : 1)).trim();
    });
  }
  return cells;
}

for (const width of [80, 60]) {
  test(`at ${width} columns every row names its engine, no two rows read the same, and no line is wider`, () => {
    const text = renderBench(REPORT, { width });
    assert.deepEqual(
      text.split('\n').filter((l) => l.length > width),
      [],
    );
    const rows = RESULTS.map((r) => rowCells(text, r.medianGBps !== undefined ? r.medianGBps.toFixed(1) : r.medianUs!.toFixed(3)));
    // the columns that name a row (measure, memory, engine), put back together, differ between every two rows
    assert.equal(new Set(rows.map((c) => c.slice(0, 3).join('|'))).size, RESULTS.length, rows.map((c) => c.join('|')).join('\n'));
    const squash = (s: string): string => s.replace(/\s+/g, '');
    for (const [i, r] of RESULTS.entries()) {
      const cells = rows[i]!;
      assert.equal(squash(cells[0]!), squash(`${r.test} ${r.direction}`));
      assert.equal(squash(cells[1]!), squash(`${r.srcKind}->${r.dstKind}`));
      assert.ok(squash(cells[2]!).startsWith(squash(r.engine)), `${r.engine} in: ${cells[2]}`);
    }
    assert.match(text, /left out to fit \d+ columns: .*cv/);
    assert.doesNotMatch(text, /left out.*engine/);
  });
}

test('without a width (--wide) every column is printed on one line per row', () => {
  const text = renderBench(REPORT);
  assert.doesNotMatch(text, /left out/);
  for (const r of RESULTS)
    assert.ok(
      text.split('\n').some((l) => l.includes(r.engine)),
      r.engine,
    );
});
