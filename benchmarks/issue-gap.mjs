// Where the time of one timed device-to-device copy goes: a 16 MiB copy timed between two events on an idle stream,
// as `gpumem bench` and the native bandwidth program time it, issued four ways, interleaved over rounds:
//   raw       the runtime's functions called straight through koffi (EventRecord, MemcpyAsync, EventRecord)
//   backend   gpumem's backend layer (its guards and status checks)
//   gpumem    Event.record, a prepared copy's run(), Event.record: the bench's own path
//   raw+Nus   raw, with the host waiting N µs between the start event and the copy (the sensitivity to that gap)
// and a kernel reading the same 16 MiB (read_only), launched three ways:
//   kernel-raw        cuLaunchKernel through koffi with the arguments as an array of Buffers (koffi builds the
//                     pointer array on every call), as gpumem's backend passes them
//   kernel-prepacked  cuLaunchKernel with the arguments and their pointer array packed once in native memory
//   kernel-gpumem     a prepared launch (kernel.prepare(...).launch())
// On an idle stream the start event completes as soon as the device sees it, so everything the host does between
// recording it and enqueuing the copy is counted as copy time. Prints one JSON line per way: the median device time
// (µs), its spread, GB/s (a copy counted as read + write, the kernel as its reads), and the median host time of the
// call that enqueues the work.
//
//   node benchmarks/issue-gap.mjs [MiB=16] [rounds=5] [reps=200]      (a built gpumem, or GPUMEM_DIST=its dist/; an NVIDIA GPU)
import { performance } from 'node:perf_hooks';
import { fromDist, koffiOfDist } from './dist.mjs';

const { openRuntime, BENCH_KERNELS } = await fromDist();
const koffi = koffiOfDist();
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
/** One timed window on the raw runtime calls: start event, `op` (its host time kept), end event, device time. */
const rawTimed = (op) => {
  fn.EventRecord(ea.handle, s.handle);
  const t = performance.now();
  op();
  const gap = performance.now() - t;
  fn.EventRecord(eb.handle, s.handle);
  fn.EventSynchronize(eb.handle);
  fn.EventElapsedTime(out, ea.handle, eb.handle);
  return [out[0], gap];
};
const rawCopy = () => fn.MemcpyAsync(b.address, a.address, bytes, D2D, s.handle);
const ways = {
  raw: () => rawTimed(rawCopy),
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
// The kernel: read_only over the same bytes, with the bench's grid.
const mod = dev.loadModule(BENCH_KERNELS);
const kernel = mod.kernel('read_only');
const sink = dev.alloc(8);
const v = bytes / 16;
const grid = Math.max(1, Math.min(dev.info().multiprocessors * 16, Math.ceil(v / 256)));
const prepared = kernel.prepare({ grid, block: 256, stream: s }, a, v, 1, sink);
const argBuffers = be.packArgs([
  { type: 'ptr', value: a.address },
  { type: 'u64', value: v },
  { type: 'u64', value: 1 },
  { type: 'ptr', value: sink.address },
]);
const launchFn = be.modules.fns.LaunchKernel;
const cu = koffi.load('libcuda.so.1');
const launchPtr = cu.func(
  'int cuLaunchKernel(uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, uintptr_t stream, void *params, void *extra)',
);
const block = koffi.alloc('uint64_t', 9); // four argument values, four pointers to them, the address of those pointers
const base = koffi.address(block);
[BigInt(a.address), BigInt(v), 1n, BigInt(sink.address)].forEach((x, i) => {
  koffi.encode(block, 8 * i, 'uint64_t', x);
  koffi.encode(block, 32 + 8 * i, 'uint64_t', base + BigInt(8 * i));
});
koffi.encode(block, 64, 'uint64_t', base + 32n);
const params = koffi.decode(block, 64, 'void *'); // the pointer array's address, as a pointer koffi passes as it is
const kernelWay = (launch) => () => rawTimed(launch);
ways['kernel-raw'] = kernelWay(() => launchFn(kernel.fn, grid, 1, 1, 256, 1, 1, 0, s.handle, argBuffers, null));
ways['kernel-prepacked'] = kernelWay(() => launchPtr(kernel.fn, grid, 1, 1, 256, 1, 1, 0, s.handle, params, null));
ways['kernel-gpumem'] = kernelWay(() => prepared.launch());
for (const us of [1, 2, 4]) {
  // The host waits `us` between the start event and the copy: its host time is reported as the gap.
  ways[`raw+${us}us`] = () =>
    rawTimed(() => {
      spin(us);
      rawCopy();
    });
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
      gbps: +(((name.startsWith('kernel') ? 1 : 2) * bytes) / (m * 1e6)).toFixed(1), // a copy reads and writes; the kernel reads
      hostGapUs: +(med(g.gap) * 1000).toFixed(2),
    }),
  );
}
rt[Symbol.dispose]();
