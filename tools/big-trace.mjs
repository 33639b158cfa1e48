#!/usr/bin/env node
/**
 * Large Kineto traces, for the speed and memory of `gpumem analyze`.
 *
 *   node tools/big-trace.mjs OUT.json SIZE_MIB     writes a trace of about SIZE_MIB: the naive fixture's events
 *                                                   repeated with shifted timestamps
 *   node tools/big-trace.mjs bench [SIZES] [RUNS]  writes 64 and 512 MiB traces (or SIZES, comma-separated) in the
 *                                                   temp folder and times, in fresh processes, RUNS times each:
 *                                                   gpumem's analysis with the chunked reader (the default), with the
 *                                                   careful token-by-token reader, and a plain readFileSync +
 *                                                   JSON.parse of the same file (the comparison: parsing only, no
 *                                                   analysis). It prints the median MB/s (1e6 bytes of file per
 *                                                   second of wall time), the spread (min-max) and peak RSS.
 * Build first (npm run build).
 */
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, statSync, writeSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

function write(out, mib) {
  const src = JSON.parse(gunzipSync(readFileSync(new URL('../fixtures/traces/pytorch-cuda-naive.pt.trace.json.gz', import.meta.url))).toString());
  const events = src.traceEvents.filter((e) => typeof e.ts === 'number');
  const t0 = Math.min(...events.map((e) => e.ts));
  const t1 = Math.max(...events.map((e) => e.ts + (e.dur ?? 0)));
  const fd = openSync(out, 'w');
  let written = writeSync(fd, `{"schemaVersion":1,"deviceProperties":${JSON.stringify(src.deviceProperties)},"traceEvents":[`);
  const target = Number(mib) * 2 ** 20;
  let round = 0;
  let first = true;
  while (written < target) {
    const shift = round++ * (t1 - t0 + 1000);
    const chunk = events.map((e) => JSON.stringify({ ...e, ts: e.ts + shift })).join(',');
    written += writeSync(fd, (first ? '' : ',') + chunk);
    first = false;
  }
  writeSync(fd, ']}');
  closeSync(fd);
  return { bytes: written + 2, events: round * events.length };
}

const dist = new URL('../dist/analyze/analyze.js', import.meta.url).pathname;
const CHILD = {
  chunked: `const { analyzeFiles } = await import(${JSON.stringify(dist)}); const t = performance.now(); await analyzeFiles([process.argv[1]], { jsonReader: 'chunked' }); console.log(JSON.stringify({ s: (performance.now() - t) / 1000, rss: process.resourceUsage().maxRSS * 1024 }));`,
  careful: `const { analyzeFiles } = await import(${JSON.stringify(dist)}); const t = performance.now(); await analyzeFiles([process.argv[1]], { jsonReader: 'careful' }); console.log(JSON.stringify({ s: (performance.now() - t) / 1000, rss: process.resourceUsage().maxRSS * 1024 }));`,
  'JSON.parse': `const fs = await import('node:fs'); const t = performance.now(); try { const j = JSON.parse(fs.readFileSync(process.argv[1], 'utf8')); if (!j.traceEvents.length) throw new Error('no events'); console.log(JSON.stringify({ s: (performance.now() - t) / 1000, rss: process.resourceUsage().maxRSS * 1024 })); } catch (e) { console.log(JSON.stringify({ error: String(e.message).slice(0, 80) })); }`,
};

function bench(sizes, runs) {
  if (!existsSync(dist)) throw new Error('build first: npm run build');
  console.log(`gpumem analyze on large Kineto traces: ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown CPU'}), Node.js ${process.version}`);
  console.log(`median of ${runs} runs in fresh processes; MB/s = 1e6 bytes of file per second of wall time; peak RSS = the process's maximum resident set\n`);
  console.log('trace      events     reader       MB/s median  (min-max)       seconds  peak RSS');
  for (const mib of sizes) {
    const file = join(tmpdir(), `gpumem-big-${mib}.json`);
    const info = existsSync(file) && Math.abs(statSync(file).size - mib * 2 ** 20) < 2 ** 20 ? { bytes: statSync(file).size, events: NaN } : write(file, mib);
    for (const [reader, code] of Object.entries(CHILD)) {
      const rows = [];
      let error;
      for (let r = 0; r < runs; r++) {
        const out = JSON.parse(
          execFileSync(process.execPath, ['--input-type=module', '-e', code, file], { encoding: 'utf8', maxBuffer: 1 << 20 })
            .trim()
            .split('\n')
            .pop(),
        );
        if (out.error) {
          error = out.error;
          break;
        }
        rows.push(out);
      }
      const label = `${String(mib).padStart(4)} MiB  ${String(Number.isNaN(info.events) ? '' : info.events).padStart(8)}  ${reader.padEnd(11)}`;
      if (error) {
        console.log(`${label}  fails: ${error}`);
        continue;
      }
      const rates = rows.map((x) => info.bytes / 1e6 / x.s).sort((a, b) => a - b);
      const med = rates[rates.length >> 1];
      const secs = rows.map((x) => x.s).sort((a, b) => a - b)[rows.length >> 1];
      const rss = Math.max(...rows.map((x) => x.rss)) / 2 ** 20;
      console.log(
        `${label}  ${med.toFixed(1).padStart(10)}  (${rates[0].toFixed(1)}-${rates[rates.length - 1].toFixed(1)})  ${secs.toFixed(1).padStart(12)}  ${rss.toFixed(0).padStart(5)} MiB`,
      );
    }
  }
}

const [a, b, c] = process.argv.slice(2);
if (a === 'bench') bench((b ?? '64,512').split(',').map(Number), Number(c ?? 3));
else if (a) {
  const { bytes, events } = write(a, b ?? '1024');
  console.log(`${a}: ${(bytes / 2 ** 20).toFixed(0)} MiB, ${events} events`);
} else throw new Error('usage: node tools/big-trace.mjs OUT.json SIZE_MIB | node tools/big-trace.mjs bench [SIZES] [RUNS]');
