// The functions a V8 CPU profile (node --cpu-prof) spent its samples in, by self time, heaviest first.
//   node benchmarks/cpu-profile-top.mjs FILE.cpuprofile [--top 40]
// Self time of a node = its samples x the mean sampling interval; nodes of one function (name, file, line) are summed.
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

const args = process.argv.slice(2);
const file = args.find((a) => !a.startsWith('--'));
if (!file) {
  console.error('cpu-profile-top: FILE.cpuprofile [--top N]');
  process.exit(2);
}
const ti = args.indexOf('--top');
const top = ti >= 0 ? Number(args[ti + 1]) : 40;
const p = JSON.parse(readFileSync(file, 'utf8'));
const counts = new Map();
for (const id of p.samples) counts.set(id, (counts.get(id) ?? 0) + 1);
const usPerSample = (p.endTime - p.startTime) / Math.max(1, p.samples.length);
const byFn = new Map();
for (const n of p.nodes) {
  const c = counts.get(n.id) ?? 0;
  if (!c) continue;
  const f = n.callFrame;
  const key = `${f.functionName || '(anonymous)'} ${f.url ? basename(f.url) : ''}:${f.lineNumber + 1}`;
  byFn.set(key, (byFn.get(key) ?? 0) + c);
}
const total = p.samples.length;
console.log(`${file}: ${total} samples, ${((usPerSample * total) / 1e6).toFixed(2)} s`);
for (const [k, c] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, top))
  console.log(`${((100 * c) / total).toFixed(1).padStart(5)}%  ${((c * usPerSample) / 1e3).toFixed(1).padStart(9)} ms  ${k}`);
