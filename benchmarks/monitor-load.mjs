#!/usr/bin/env node
/**
 * A steady load for benchmarks/monitor-vs-smi.sh, one direction at a time, so that a monitor sampling PCIe over a
 * short window and nvidia-smi averaging over a second see the same traffic: idle, then host-to-device copies of a
 * 256 MiB pinned buffer back to back, then device-to-host, then idle again, SECONDS each. Writes the phases (start,
 * end, bytes moved, the rate the copies themselves measured) as JSON to OUT_FILE.
 *
 *   node benchmarks/monitor-load.mjs OUT_FILE [SECONDS]     # default 10 s a phase
 */
import { writeFileSync } from 'node:fs';
import { fromDist } from './dist.mjs';

const [file, secondsArg] = process.argv.slice(2);
if (!file) throw new Error('usage: node benchmarks/monitor-load.mjs OUT_FILE [SECONDS]');
const seconds = Number(secondsArg ?? 10);
const { openRuntime } = await fromDist();
const rt = openRuntime();
const bytes = 256 * 2 ** 20;
const host = rt.allocPinned(bytes);
const dev = rt.device(0).alloc(bytes);
const phases = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function phase(name, copy) {
  const start = Date.now();
  let moved = 0;
  while (Date.now() - start < seconds * 1000) {
    if (copy) {
      copy();
      moved += bytes;
    } else await sleep(100);
    if (copy && moved % (8 * bytes) === 0) await sleep(0); // let the timers run between batches of copies
  }
  const end = Date.now();
  phases.push({ name, start: new Date(start).toISOString(), end: new Date(end).toISOString(), bytes: moved, bytesPerSecond: moved / ((end - start) / 1e3) });
}

try {
  await phase('idle-before');
  await phase('HtoD', () => rt.copy(dev, host));
  await phase('DtoH', () => rt.copy(host, dev));
  await phase('idle-after');
} finally {
  dev.free();
  host.free();
  rt[Symbol.dispose]();
}
writeFileSync(file, `${JSON.stringify({ backend: rt.backend.name, bufferBytes: bytes, phases }, null, 1)}\n`);
