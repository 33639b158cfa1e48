// A first look at copies and a kernel through gpumem on a GPU machine, to check the bindings before bench exists.
// Run there from the bundle:  bash .gpu/run.sh node /path/to/tools/gpu/probe.mjs
import { pathToFileURL } from 'node:url';
const { openRuntime, BENCH_KERNELS, GiB } = await import(pathToFileURL(`${process.cwd()}/dist/index.js`).href);

const rt = openRuntime({ backend: process.env.GPUMEM_BACKEND ?? 'cuda' });
const d = rt.device(0);
console.log(JSON.stringify({ backend: rt.backend.name, device: d.info().name }));
const n = Number(process.env.PROBE_BYTES ?? GiB);
const pinned = rt.allocPinned(n);
const pageable = rt.allocPageable(n);
const a = d.alloc(n);
const b = d.alloc(n);
const s = d.createStream();
const e0 = d.createEvent();
const e1 = d.createEvent();
pinned.view().fill(1);
pageable.view().fill(2);
async function timeCopy(label, dst, src, bytes, counted = 1) {
  const times = [];
  for (let i = 0; i < 8; i++) {
    e0.record(s);
    rt.copy(dst, src, { stream: s, bytes });
    e1.record(s);
    await e1.synchronize();
    times.push(e1.elapsedSince(e0));
  }
  times.sort((x, y) => x - y);
  const ms = times[times.length >> 1];
  console.log(`${label.padEnd(18)} ${String(bytes).padStart(11)} B  median ${ms.toFixed(3)} ms  ${((counted * bytes) / ms / 1e6).toFixed(1)} GB/s`);
}
for (const bytes of [1 << 20, 64 << 20, n]) {
  await timeCopy('H2D pinned', a, pinned, bytes);
  await timeCopy('D2H pinned', pinned, a, bytes);
  await timeCopy('H2D pageable', a, pageable, bytes);
  await timeCopy('D2D (r+w)', b, a, bytes, 2);
}
const m = d.loadModule(BENCH_KERNELS);
console.log('module', JSON.stringify(m.compile));
const c = d.alloc(n);
const words = n / 8;
const triad = m.kernel('stream_triad').prepare({ grid: 132 * 16, block: 256, stream: s }, a, b, c, 3, words);
for (let i = 0; i < 3; i++) triad.launch();
const t = [];
for (let i = 0; i < 10; i++) {
  e0.record(s);
  triad.launch();
  e1.record(s);
  await e1.synchronize();
  t.push(e1.elapsedSince(e0));
}
t.sort((x, y) => x - y);
console.log(`triad 3 GiB moved: median ${t[5].toFixed(3)} ms = ${((3 * n) / t[5] / 1e6).toFixed(0)} GB/s`);
const verify = m.kernel('verify_pattern');
m.kernel('fill_pattern').launch({ grid: 1024, block: 256, stream: s }, a, n / 4, 7);
const errs = d.alloc(8);
rt.fill(errs, 0);
verify.launch({ grid: 1024, block: 256, stream: s }, a, n / 4, 7, errs);
const eh = rt.allocPinned(8);
rt.copy(eh, errs, { stream: s });
await s.synchronize();
console.log('verify errors', eh.typed(BigUint64Array)[0]);
// koffi overhead: stream-ordered alloc/free pairs
const b0 = rt.backend;
const t0 = performance.now();
for (let i = 0; i < 20000; i++) b0.freeAsync(b0.mallocAsync(0, 1 << 20, s.handle), s.handle);
console.log(`mallocAsync+freeAsync through koffi: ${(((performance.now() - t0) * 1000) / 20000).toFixed(2)} us per pair`);
await s.synchronize();
rt[Symbol.dispose]();
