#!/usr/bin/env node
/**
 * The many-ranks analysis on one core and on all: writes RANKS synthetic rank traces (default 64; the recorded
 * fixture trace once per rank, rank 5 made a straggler) into the temp folder, then analyses them with one worker
 * thread and with one per core, RUNS times each (default 3), and prints the median wall time, the spread and the
 * speed-up. Build first (npm run build).
 *   node tools/many-ranks.mjs [RANKS] [RUNS]
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';

const [ranks = 64, runs = 3] = process.argv.slice(2).map(Number);
const { writeRankTraces } = await import(new URL('../dist/testing/rank-traces.js', import.meta.url).href);
const { analyzeRanks } = await import(new URL('../dist/analyze/ranks.js', import.meta.url).href);
const dir = mkdtempSync(join(tmpdir(), 'gpumem-many-ranks-'));
try {
  const files = writeRankTraces(dir, ranks, { slow: [5], slowBy: 10 });
  const bytes = files.reduce((s, f) => s + statSync(f).size, 0);
  const cores = availableParallelism();
  console.log(`${ranks} rank traces, ${(bytes / 1e6).toFixed(0)} MB in all; ${cores} cores (${cpus()[0]?.model ?? 'unknown CPU'}), Node.js ${process.version}`);
  console.log(`median of ${runs} runs; wall time from the first file opened to the ranks compared\n`);
  const times = {};
  let stragglers = '';
  for (const workers of [1, cores]) {
    const t = [];
    for (let r = 0; r < runs; r++) {
      const res = await analyzeRanks(files, { format: 'kineto', workers });
      t.push(res.wallNs / 1e9);
      stragglers = res.stragglers.map((s) => `rank ${s.rank} (${s.metric})`).join(', ');
    }
    t.sort((a, b) => a - b);
    times[workers] = t[t.length >> 1];
    console.log(
      `${String(workers).padStart(2)} worker thread(s): ${times[workers].toFixed(2)} s median (${t[0].toFixed(2)}-${t[t.length - 1].toFixed(2)}), ${(bytes / 1e6 / times[workers]).toFixed(0)} MB/s`,
    );
  }
  console.log(`\nspeed-up on ${cores} cores: ${(times[1] / times[cores]).toFixed(2)}x; stragglers found: ${stragglers || 'none'}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
