// The JavaScript cost of checking and packing one kernel launch (kernel.prepare), call by call from a fresh process:
// what a timed window pays when it launches through `kernel.launch(...)` instead of a launch prepared beforehand.
// No native launch is made, so it runs on any backend (the host backend by default).
//
//   node benchmarks/launch-prepare.mjs [backend=host] [calls=2000]
import { fromDist } from './dist.mjs';

const { openRuntime, BENCH_KERNELS } = await fromDist();
const rt = await openRuntime({ backend: process.argv[2] ?? 'host' });
const calls = Number(process.argv[3] ?? 2000);
const dev = rt.device(0);
const stream = dev.createStream({ nonBlocking: true });
const kernel = dev.loadModule(BENCH_KERNELS).kernel('read_only');
const m = dev.allocManaged(1 << 20);
const sink = dev.alloc(8);
const us = [];
for (let i = 0; i < calls; i++) {
  const t = process.hrtime.bigint();
  kernel.prepare({ grid: 2112, block: 256, stream }, m, 65536, 1, sink);
  us.push(Number(process.hrtime.bigint() - t) / 1000);
}
const warm = us.slice(100).sort((a, b) => a - b);
console.log(
  JSON.stringify({
    backend: rt.backend.name,
    firstCallsUs: us.slice(0, 8).map((x) => +x.toFixed(1)),
    medianAfter100Us: +warm[warm.length >> 1].toFixed(2),
    p99After100Us: +warm[Math.floor(warm.length * 0.99)].toFixed(2),
  }),
);
rt[Symbol.dispose]();
