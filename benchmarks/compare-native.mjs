// Side by side: the native yardstick (../shared/reference/native-bandwidth.cu) against gpumem bench, from one command.
// Usage: node tools/gpu/compare-native.mjs native-1.txt [native-2.txt ...] bench-1.json [bench-2.json ...]
// Files ending in .json are gpumem bench outputs; the others the yardstick's output. With several runs of each (run
// interleaved: C, gpumem, C, gpumem, ...), each cell compares the median over runs of each run's figure (itself the
// median of that run's timed copies), and shows both sides' run-to-run range, so that the gap can be read against
// the yardstick's own variation between two runs of the same binary. JSON files named port-*.json (the yardstick's
// Node port, tools/gpu/port-to-json.mjs) given beside gpumem's form a third column, judged against the same bar.
import { readFileSync } from 'node:fs';

const files = process.argv.slice(2);
const nativeFiles = files.filter((f) => !f.endsWith('.json'));
const jsonFiles = files.filter((f) => f.endsWith('.json'));
const isPort = (f) => /(^|\/)port-[^/]*\.json$/.test(f);
const portFiles = jsonFiles.some((f) => !isPort(f)) ? jsonFiles.filter(isPort) : [];
const benchFiles = jsonFiles.filter((f) => !portFiles.includes(f));
if (!nativeFiles.length || !benchFiles.length) {
  console.error('usage: compare-native.mjs native.txt... bench.json...');
  process.exit(2);
}
const natives = nativeFiles.map((f) => readFileSync(f, 'utf8').split('\n'));
const benches = benchFiles.map((f) => JSON.parse(readFileSync(f, 'utf8')));
const ports = portFiles.map((f) => JSON.parse(readFileSync(f, 'utf8')));
const cols = ['H2D_pinned', 'D2H_pinned', 'H2D_pageable', 'D2H_pageable', 'D2D'];
const pick = {
  H2D_pinned: (r) => r.test === 'copy' && r.direction === 'HtoD' && r.srcKind === 'pinned' && r.engine === 'copy-engine',
  D2H_pinned: (r) => r.test === 'copy' && r.direction === 'DtoH' && r.dstKind === 'pinned' && r.engine === 'copy-engine',
  H2D_pageable: (r) => r.test === 'copy' && r.direction === 'HtoD' && r.srcKind === 'pageable' && r.engine === 'copy-engine',
  D2H_pageable: (r) => r.test === 'copy' && r.direction === 'DtoH' && r.dstKind === 'pageable' && r.engine === 'copy-engine',
  D2D: (r) => r.test === 'copy' && r.direction === 'DtoD' && r.engine === 'copy-engine',
};
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
/** bytes -> column -> figures, one per native run. */
const nativeCells = new Map();
for (const lines of natives) {
  for (const line of lines) {
    const cells = line.trim().split(/\t+/);
    if (cells.length !== 6 || !/^\d+$/.test(cells[0])) continue;
    const bytes = Number(cells[0]);
    if (!nativeCells.has(bytes)) nativeCells.set(bytes, new Map());
    cols.forEach((c, i) => {
      const m = nativeCells.get(bytes);
      if (!m.has(c)) m.set(c, []);
      m.get(c).push(Number(cells[i + 1]));
    });
  }
}
const fmt = (b) => (b >= 1 << 30 ? `${b / 2 ** 30} GiB` : b >= 1 << 20 ? `${b / 2 ** 20} MiB` : `${b / 1024} KiB`);
const g2 = (x) => (x >= 100 ? x.toFixed(0) : x.toFixed(2));
const range = (xs) => (xs.length > 1 ? ` (${g2(Math.min(...xs))}–${g2(Math.max(...xs))})` : '');
const spread = (xs) => (xs.length > 1 ? `${(((Math.max(...xs) - Math.min(...xs)) / median(xs)) * 100).toFixed(1)}%` : '–');
const withPort = ports.length > 0;
console.log(
  `${nativeFiles.length} run(s) of the C yardstick${withPort ? `, ${portFiles.length} of its Node port` : ''} and ${benchFiles.length} of gpumem bench, interleaved; a cell is the median over runs (range in brackets).`,
);
console.log('');
console.log(
  `| size | copy | native CUDA C (GB/s) |${withPort ? ' Node port of C (GB/s) | port difference | port bar |' : ''} gpumem (GB/s) | difference | C run-to-run spread | bar |`,
);
console.log(`|---:|---|---:|${withPort ? '---:|---:|---|' : ''}---:|---:|---:|---|`);
const count = { gpumem: [0, 0], port: [0, 0] };
/** One series' cell: the median of its figures with their range, its difference from C and the bar's verdict. */
const judge = (series, who, c, bytes, n) => {
  const xs = series
    .map((b) => b.results.find((r) => pick[c](r) && r.bytes === bytes))
    .filter(Boolean)
    .map((r) => r.medianGBps);
  if (!xs.length) return undefined;
  const diff = ((median(xs) - n) / n) * 100;
  const bar = bytes >= 16 << 20 ? 3 : bytes >= 64 << 10 ? 10 : null;
  if (bar !== null) count[who][Math.abs(diff) <= bar ? 0 : 1]++;
  return {
    fig: `${g2(median(xs))}${range(xs)}`,
    diff: `${diff >= 0 ? '+' : ''}${diff.toFixed(1)}%`,
    ok: bar === null ? 'n/a' : Math.abs(diff) <= bar ? `within ${bar}%` : `OUTSIDE ${bar}%`,
  };
};
for (const [bytes, m] of [...nativeCells].sort((a, b) => a[0] - b[0])) {
  for (const c of cols) {
    const nat = m.get(c);
    const n = median(nat);
    const ours = judge(benches, 'gpumem', c, bytes, n);
    if (!ours) continue;
    const p = withPort ? (judge(ports, 'port', c, bytes, n) ?? { fig: '–', diff: '–', ok: '–' }) : undefined;
    const port = p ? `${p.fig} | ${p.diff} | ${p.ok} | ` : '';
    console.log(`| ${fmt(bytes)} | ${c} | ${g2(n)}${range(nat)} | ${port}${ours.fig} | ${ours.diff} | ${spread(nat)} | ${ours.ok} |`);
  }
}
console.log(`\n${count.gpumem[0]} cells within their bar, ${count.gpumem[1]} outside (bars: 3% from 16 MiB, 10% from 64 KiB).`);
if (withPort) console.log(`The Node port: ${count.port[0]} cells within their bar, ${count.port[1]} outside.`);
const all = benches.flatMap((b) => b.results);
const triad = all.find((r) => r.test === 'stream' && r.direction === 'triad');
if (triad) {
  const d2d = Math.max(...all.filter((r) => r.test === 'copy' && r.direction === 'DtoD').map((r) => r.medianGBps));
  console.log(
    `STREAM triad ${triad.medianGBps.toFixed(0)} GB/s = ${((triad.medianGBps / d2d) * 100).toFixed(1)}% of the best device-to-device copy (${d2d.toFixed(0)} GB/s, read+write)`,
  );
}
for (const l of natives[0]) if (/us per allocate\+free|managed prefetch/.test(l)) console.log(`native: ${l.trim()}`);
for (const r of all.filter((x) => x.test === 'alloc'))
  console.log(`gpumem: ${r.direction} ${r.srcKind} ${r.engine} ${r.bytes} bytes: ${r.medianUs} us (median)`);
