#!/usr/bin/env node
/**
 * Pairs what `gpumem monitor` reported with what nvidia-smi reported over the same seconds, from the folder
 * benchmarks/monitor-vs-smi.sh wrote, and prints (as Markdown) what matched: device UUIDs, memory used, utilisation
 * and PCIe throughput, from the JSON lines and from the /metrics scrapes.
 *
 *   node benchmarks/monitor-compare.mjs OUT_DIR
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2];
if (!dir) throw new Error('usage: node benchmarks/monitor-compare.mjs OUT_DIR');
const read = (f) => (existsSync(join(dir, f)) ? readFileSync(join(dir, f), 'utf8') : '');
const run = JSON.parse(read('run.json') || '{}');
const median = (xs) => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : Number.NaN;
};
const fmt = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');

// gpumem: one JSON sample a line
const samples = read('monitor.jsonl')
  .split('\n')
  .filter((l) => l.startsWith('{'))
  .map((l) => JSON.parse(l));
const gp = samples.flatMap((s) => s.devices.map((d) => ({ t: Date.parse(s.time), ...d })));
// nvidia-smi --query-gpu, CSV with a header
const q = read('smi-query.csv').trim().split('\n');
const head = (q[0] ?? '').split(',').map((h) => h.trim().replace(/ \[.*\]$/, ''));
const smi = q.slice(1).map((l) => Object.fromEntries(l.split(',').map((v, i) => [head[i], v.trim()])));
for (const r of smi) r.t = Date.parse(r.timestamp?.replace(/\//g, '-').replace(' ', 'T'));
// nvidia-smi dmon -s ut -o T: time, gpu, sm %, mem %, ..., rxpci MB/s, txpci MB/s
const dmonLines = read('smi-dmon.txt').split('\n');
const dmonHead = (dmonLines.find((l) => l.startsWith('#') && /gpu/i.test(l)) ?? '').replace(/^#\s*/, '').split(/\s+/);
const day = new Date(run.date ?? Date.now()).toISOString().slice(0, 10);
// dmon and --query-gpu print the local time, as the machine keeps it
const dmon = dmonLines
  .filter((l) => l.trim() && !l.startsWith('#'))
  .map((l) =>
    Object.fromEntries(
      l
        .trim()
        .split(/\s+/)
        .map((v, i) => [dmonHead[i], v]),
    ),
  )
  .map((r) => ({ ...r, t: Date.parse(`${day}T${r.Time ?? r.time}`) }));
const scrapes = read('metrics.txt').split('# scrape ').slice(1);

const out = [];
out.push(`# gpumem monitor against nvidia-smi (${run.date ?? '?'}, ${run.host ?? '?'}, ${run.seconds ?? '?'} s of load)`, '');
out.push(
  `gpumem samples: ${samples.length} (${gp.length} device samples); /metrics scrapes: ${scrapes.length}, of which failed: ${scrapes.filter((s) => s.startsWith('failed')).length}`,
);
if (!run.nvidiaSmi || smi.length === 0) {
  out.push(
    '',
    `nvidia-smi: ${run.nvidiaSmi ? 'ran but wrote nothing' : 'absent on this machine'}: nothing to compare with (backend ${samples[0]?.backend ?? '?'}).`,
  );
  out.push(
    '',
    `gpumem side: UUIDs ${[...new Set(gp.map((d) => d.uuid))].join(', ') || 'none'}; utilisation read in ${gp.filter((d) => d.utilizationPercent !== undefined).length} samples; PCIe in ${gp.filter((d) => d.pcieRxBytesPerSecond !== undefined).length}.`,
  );
  console.log(out.join('\n'));
  process.exit(0);
}
/** The sample of `rows` nearest to time t (within 1.5 s) on the same device, or undefined. */
const near = (rows, t, match) => {
  let best;
  for (const r of rows) if (match(r) && Number.isFinite(r.t) && Math.abs(r.t - t) <= 1500 && (!best || Math.abs(r.t - t) < Math.abs(best.t - t))) best = r;
  return best;
};
const uuidsG = [...new Set(gp.map((d) => d.uuid))].sort();
const uuidsS = [...new Set(smi.map((r) => r.uuid))].sort();
out.push('', '| what | gpumem | nvidia-smi | matched |', '|---|---|---|---|');
out.push(`| device UUIDs | ${uuidsG.join(' ')} | ${uuidsS.join(' ')} | ${JSON.stringify(uuidsG) === JSON.stringify(uuidsS) ? 'yes' : 'NO'} |`);
const mem = [];
const util = [];
for (const d of gp) {
  const s = near(smi, d.t, (r) => Number(r.index) === d.index);
  if (!s) continue;
  if (d.usedBytes !== undefined) mem.push(Math.abs(d.usedBytes / 2 ** 20 - Number(s['memory.used'])));
  if (d.utilizationPercent !== undefined) util.push([d.utilizationPercent, Number(s['utilization.gpu'])]);
}
out.push(
  `| memory used (MiB), median absolute difference over ${mem.length} paired samples | | | ${fmt(median(mem), 0)} MiB ${median(mem) <= 64 ? '(yes: within 64 MiB)' : '(NO: over 64 MiB)'} |`,
);
const du = util.map(([a, b]) => Math.abs(a - b));
out.push(
  `| utilisation (%), median over ${util.length} pairs: gpumem / smi; median absolute difference | ${fmt(median(util.map((u) => u[0])))} | ${fmt(median(util.map((u) => u[1])))} | ${fmt(median(du))} points ${median(du) <= 10 ? '(yes: within 10)' : '(NO)'} |`,
);
// PCIe: per phase of benchmarks/monitor-load.mjs (one direction at a time, steady), where it ran; else over the
// whole load, the samples where either side saw traffic
const loadPhases = JSON.parse(read('load-phases.json') || '{"phases":[]}').phases;
const within = (t, ph) => t >= Date.parse(ph.start) + 1000 && t <= Date.parse(ph.end) - 1000;
const pcieRows = (ph) => {
  const rows = [];
  for (const [dir2, key, col] of [
    ['rx (to the device)', 'pcieRxBytesPerSecond', 'rxpci'],
    ['tx (from the device)', 'pcieTxBytesPerSecond', 'txpci'],
  ]) {
    const g = gp.filter((d) => d[key] !== undefined && (!ph || within(d.t, ph))).map((d) => d[key] / 1e6);
    const m = dmon.filter((r) => Number.isFinite(Number(r[col])) && (!ph || within(r.t, ph))).map((r) => Number(r[col]));
    rows.push({ dir2, g: median(g), m: median(m), n: [g.length, m.length] });
  }
  return rows;
};
if (loadPhases.length) {
  out.push(
    '',
    '| phase (steady copies of a 256 MiB pinned buffer) | the copies measured (MB/s) | PCIe | gpumem (MB/s, median) | nvidia-smi dmon (MB/s, median) | gpumem / smi |',
    '|---|---:|---|---:|---:|---:|',
  );
  for (const ph of loadPhases)
    for (const r of pcieRows(ph)) {
      const ratio = r.g / Math.max(r.m, 1);
      const busy = r.g > 100 || r.m > 100;
      out.push(
        `| ${ph.name} (${r.n[0]} / ${r.n[1]} samples) | ${fmt(ph.bytesPerSecond / 1e6, 0)} | ${r.dir2} | ${fmt(r.g, 0)} | ${fmt(r.m, 0)} | ${busy ? `${fmt(ratio, 2)} ${ratio > 0.8 && ratio < 1.25 ? '(yes: within 20%)' : '(NO)'}` : 'idle on both'} |`,
      );
    }
} else
  for (const r of pcieRows(undefined))
    out.push(`| PCIe ${r.dir2}, MB/s, median of ${r.n[0]} / ${r.n[1]} samples | ${fmt(r.g, 0)} | ${fmt(r.m, 0)} | ratio ${fmt(r.g / Math.max(r.m, 1), 2)} |`);
const promUuids = new Set([...read('metrics.txt').matchAll(/gpumem_device_memory_used_bytes\{[^}]*uuid="([^"]+)"/g)].map((m) => m[1]));
const promUtil = [...read('metrics.txt').matchAll(/gpumem_device_utilization_ratio\{[^}]*\} ([\d.e+-]+)/g)].map((m) => Number(m[1]) * 100);
const promRx = [...read('metrics.txt').matchAll(/gpumem_device_pcie_rx_bytes_per_second\{[^}]*\} ([\d.e+-]+)/g)].length;
out.push(
  `| /metrics: UUID labels, utilisation and PCIe series | ${[...promUuids].sort().join(' ')}; utilisation median ${fmt(median(promUtil))}% over ${promUtil.length}; ${promRx} PCIe rx values | | ${JSON.stringify([...promUuids].sort()) === JSON.stringify(uuidsS) && promUtil.length > 0 && promRx > 0 ? 'yes' : 'NO'} |`,
);
out.push('', 'Pairs are samples of the same device within 1.5 s of each other. nvidia-smi dmon gives PCIe in MB/s (1e6), gpumem in bytes/s.');
console.log(out.join('\n'));
