#!/usr/bin/env node
/**
 * Writes a large Kineto trace for checking that gpumem analyze streams its input: the naive fixture's events
 * repeated with shifted timestamps until the file reaches the requested size.
 * Run: node tools/big-trace.mjs OUT.json SIZE_MIB   then   /usr/bin/time -v gpumem analyze OUT.json
 */
import { openSync, readFileSync, writeSync, closeSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';

const [out, mib = '1024'] = process.argv.slice(2);
if (!out) throw new Error('usage: node tools/big-trace.mjs OUT.json SIZE_MIB');
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
console.log(`${out}: ${(written / 2 ** 20).toFixed(0)} MiB, ${round} copies of ${events.length} events (${round * events.length} events)`);
