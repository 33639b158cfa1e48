// Where the time of one timed device-to-device copy goes: a 16 MiB copy timed between two events on an idle stream,
// as `gpumem bench` and the native bandwidth program time it, issued four ways, interleaved over rounds:
//   raw       the runtime's functions called straight through koffi (EventRecord, MemcpyAsync, EventRecord)
//   backend   gpumem's backend layer (its guards and status checks)
//   gpumem    Event.record, a prepared copy's run(), Event.record: the bench's own path
//   raw+Nus   raw, with the host waiting N µs between the start event and the copy (the sensitivity to that gap)
// On an idle stream the start event completes as soon as the device sees it, so everything the host does between
// recording it and enqueuing the copy is counted as copy time. Prints one JSON line per way: the median device time
// (µs), its spread, GB/s counted as read + write, and the median host time between the two calls.
//
//   node benchmarks/issue-gap.mjs [MiB=16] [rounds=5] [reps=200]      (a built gpumem, or GPUMEM_DIST=its dist/; an NVIDIA GPU)
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';

const dist = process.env.GPUMEM_DIST ? pathToFileURL(`${process.env.GPUMEM_DIST}/`) : new URL('../dist/', import.meta.url);
const { openRuntime } = await import(new URL('index.js', dist).href);
const mib = Number(process.argv[2] ?? 16);
const rounds = Number(process.argv[3] ?? 5);
const reps = Number(process.argv[4] ?? 200);
const bytes = mib * 2 ** 20;
const rt = await openRuntime({ backend: 'cuda' });
const dev = rt.device(0);
const s = dev.createStream({ nonBlocking: true });
const a = dev.alloc(bytes);
const b = dev.alloc(bytes);
const ea = dev.createEvent();
const eb = dev.createEvent();
const be = rt.backend;
const fn = be.fn; // the bound runtime functions (a protected field, read here on purpose)
const out = new Float32Array(1);
const D2D = 3; // cudaMemcpyDeviceToDevice
const copy = rt.prepareCopy(b, a, { stream: s });
const spin = (us) => {
  const end = performance.now() + us / 1000;
  while (performance.now() < end);
};
const ways = {
  raw: () => {
    fn.EventRecord(ea.handle, s.handle);
    const t = performance.now();
    fn.MemcpyAsync(b.address, a.address, bytes, D2D, s.handle);
    const gap = performance.now() - t;
    fn.EventRecord(eb.handle, s.handle);
    fn.EventSynchronize(eb.handle);
    fn.EventElapsedTime(out, ea.handle, eb.handle);
    return [out[0], gap];
  },
  backend: () => {
    be.recordEvent(ea.handle, s.handle);
    const t = performance.now();
    be.memcpyAsync(b.address, a.address, bytes, D2D, s.handle);
    const gap = performance.now() - t;
    be.recordEvent(eb.handle, s.handle);
    be.synchronizeEvent(eb.handle);
    return [be.elapsedMs(ea.handle, eb.handle), gap];
  },
  gpumem: () => {
    ea.record(s);
    const t = performance.now();
    copy.run();
    const gap = performance.now() - t;
    eb.record(s);
    eb.waitSync();
    return [eb.elapsedSince(ea), gap];
  },
};
for (const us of [1, 2, 4]) {
  ways[`raw+${us}us`] = () => {
    fn.EventRecord(ea.handle, s.handle);
    spin(us);
    fn.MemcpyAsync(b.address, a.address, bytes, D2D, s.handle);
    fn.EventRecord(eb.handle, s.handle);
    fn.EventSynchronize(eb.handle);
    fn.EventElapsedTime(out, ea.handle, eb.handle);
    return [out[0], us / 1000];
  };
}
const med = (xs) => [...xs].sort((x, y) => x - y)[xs.length >> 1];
const got = Object.fromEntries(Object.keys(ways).map((k) => [k, { ms: [], gap: [] }]));
for (let r = 0; r < rounds; r++) {
  for (const [name, op] of Object.entries(ways)) {
    for (let i = 0; i < 3; i++) op();
    const ms = [];
    const gap = [];
    for (let i = 0; i < reps; i++) {
      const [m, g] = op();
      ms.push(m);
      gap.push(g);
    }
    got[name].ms.push(med(ms));
    got[name].gap.push(med(gap));
  }
}
for (const [name, g] of Object.entries(got)) {
  const m = med(g.ms);
  console.log(
    JSON.stringify({
      way: name,
      bytes,
      rounds,
      reps,
      medianUs: +(m * 1000).toFixed(2),
      spreadUs: +((Math.max(...g.ms) - Math.min(...g.ms)) * 1000).toFixed(2),
      gbps: +((2 * bytes) / (m * 1e6)).toFixed(1),
      hostGapUs: +(med(g.gap) * 1000).toFixed(2),
    }),
  );
}
rt[Symbol.dispose]();
