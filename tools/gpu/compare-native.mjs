// Side by side: the native yardstick (../shared/reference/native-bandwidth.cu) against gpumem bench, from one run.
// Usage: node tools/gpu/compare-native.mjs native.txt bench.json
import { readFileSync } from 'node:fs';
const [nativeFile, benchFile] = process.argv.slice(2);
const native = readFileSync(nativeFile, 'utf8').split('\n');
const bench = JSON.parse(readFileSync(benchFile, 'utf8'));
const cols = ['H2D_pinned', 'D2H_pinned', 'H2D_pageable', 'D2H_pageable', 'D2D'];
const pick = {
  H2D_pinned: (r) => r.test === 'copy' && r.direction === 'HtoD' && r.srcKind === 'pinned' && r.engine === 'copy-engine',
  D2H_pinned: (r) => r.test === 'copy' && r.direction === 'DtoH' && r.dstKind === 'pinned' && r.engine === 'copy-engine',
  H2D_pageable: (r) => r.test === 'copy' && r.direction === 'HtoD' && r.srcKind === 'pageable' && r.engine === 'copy-engine',
  D2H_pageable: (r) => r.test === 'copy' && r.direction === 'DtoH' && r.dstKind === 'pageable' && r.engine === 'copy-engine',
  D2D: (r) => r.test === 'copy' && r.direction === 'DtoD' && r.engine === 'copy-engine',
};
const rows = [];
for (const line of native) {
  const cells = line.trim().split(/\t+/);
  if (cells.length !== 6 || !/^\d+$/.test(cells[0])) continue;
  const bytes = Number(cells[0]);
  cols.forEach((c, i) => {
    const nat = Number(cells[i + 1]);
    const g = bench.results.find((r) => pick[c](r) && r.bytes === bytes);
    if (!g) return;
    const diff = ((g.medianGBps - nat) / nat) * 100;
    const bar = bytes >= 16 << 20 ? 3 : bytes >= 64 << 10 ? 10 : null;
    rows.push({ bytes, c, nat, g: g.medianGBps, diff, ok: bar === null ? 'n/a' : Math.abs(diff) <= bar ? `within ${bar}%` : `OUTSIDE ${bar}%` });
  });
}
const fmt = (b) => (b >= 1 << 30 ? `${b / 2 ** 30} GiB` : b >= 1 << 20 ? `${b / 2 ** 20} MiB` : `${b / 1024} KiB`);
console.log('| size | copy | native CUDA C (GB/s) | gpumem (GB/s) | difference | bar |');
console.log('|---:|---|---:|---:|---:|---|');
for (const r of rows) console.log(`| ${fmt(r.bytes)} | ${r.c} | ${r.nat.toFixed(2)} | ${r.g.toFixed(2)} | ${r.diff >= 0 ? '+' : ''}${r.diff.toFixed(1)}% | ${r.ok} |`);
const triad = bench.results.find((r) => r.test === 'stream' && r.direction === 'triad');
const d2d = Math.max(...bench.results.filter((r) => r.test === 'copy' && r.direction === 'DtoD').map((r) => r.medianGBps));
if (triad) console.log(`\nSTREAM triad ${triad.medianGBps.toFixed(0)} GB/s = ${((triad.medianGBps / d2d) * 100).toFixed(1)}% of the best device-to-device copy (${d2d.toFixed(0)} GB/s, read+write)`);
for (const l of native) if (/us per allocate\+free|managed prefetch/.test(l)) console.log(`native: ${l.trim()}`);
for (const r of bench.results.filter((x) => x.test === 'alloc')) console.log(`gpumem: ${r.direction} ${r.srcKind} ${r.engine} ${r.bytes} bytes: ${r.medianUs} us (median)`);
