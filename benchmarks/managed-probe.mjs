// The managed-memory rows of `gpumem bench` under one change at a time, to find what moves them: the same sequence
// as the bench (the CPU fills 1 GiB of managed memory, a kernel reads it, prefetch to the host, prefetch to the
// device, the first kernel, four more), with the host waiting for each timed step
//   async   with `await event.synchronize()` (the wait runs on a worker thread; the bench's way before 2026-12-01)
//   sync    with `event.waitSync()` on the JavaScript thread (as a native program and the bench's other rows wait)
//   idle    as sync, and the host then waits 200 us before each kernel after the prefetch (the device left idle)
//   memset  as sync, the CPU filling the memory with libc's memset (through koffi) instead of TypedArray.fill
// interleaved over repeats, each on a fresh allocation. Prints one JSON line per way and row: median GB/s and range.
// Every way launches with kernel.launch(...), checked and packed inside the timed window, as the bench did before
// 2026-12-01 (docs/performance.md: that JavaScript is the likely cause of the managed rows' gap).
//
//   node benchmarks/managed-probe.mjs [MiB=1024] [repeats=5]     (a built gpumem, or GPUMEM_DIST=its dist/; a GPU)
import { performance } from 'node:perf_hooks';
import { fromDist, koffiOfDist } from './dist.mjs';

const { openRuntime, BENCH_KERNELS } = await fromDist();
const mib = Number(process.argv[2] ?? 1024);
const repeats = Number(process.argv[3] ?? 5);
const bytes = mib * 2 ** 20;
const v = bytes / 16;
const koffi = koffiOfDist();
const memset = koffi.load('libc.so.6').func('void *memset(uintptr_t s, int c, size_t n)');
const rt = await openRuntime({ backend: process.env.GPUMEM_BACKEND ?? 'cuda' });
const dev = rt.device(0);
const s = dev.createStream({ nonBlocking: true });
const mod = dev.loadModule(BENCH_KERNELS);
const sink = dev.alloc(8);
const grid = Math.max(1, Math.min(dev.info().multiprocessors * 16, Math.ceil(v / 256)));
const a = dev.createEvent();
const b = dev.createEvent();
const rows = {};
const add = (way, row, ms) => (rows[`${way} ${row}`] ??= []).push(bytes / (ms * 1e6));
for (let r = 0; r < repeats; r++) {
  // On the host backend an address is not a pointer this process can write through: no memset way there.
  for (const way of rt.backend.name === 'host' ? ['async', 'sync', 'idle'] : ['async', 'sync', 'idle', 'memset']) {
    const m = dev.allocManaged(bytes);
    if (way === 'memset') memset(m.address, 0x3f, bytes);
    else m.view().fill(0x3f);
    const timed = async (op) => {
      a.record(s);
      op();
      b.record(s);
      if (way === 'async') await b.synchronize();
      else b.waitSync();
      return b.elapsedSince(a);
    };
    const readAll = () => mod.kernel('read_only').launch({ grid, block: 256, stream: s }, m, v, 1, sink);
    add(way, 'first-touch-by-kernel', await timed(readAll));
    m.prefetch('host', s);
    await s.synchronize();
    add(way, 'prefetch-to-device', await timed(() => m.prefetch(dev.index, s)));
    const idle = () => {
      if (way !== 'idle') return;
      const end = performance.now() + 0.2;
      while (performance.now() < end);
    };
    idle();
    add(way, 'first-kernel-after-prefetch', await timed(readAll));
    for (let k = 0; k < 4; k++) {
      idle();
      add(way, 'kernels-after-prefetch', await timed(readAll));
    }
    m.free();
  }
}
const med = (xs) => [...xs].sort((x, y) => x - y)[xs.length >> 1];
for (const [k, xs] of Object.entries(rows)) {
  const [way, row] = k.split(' ');
  console.log(JSON.stringify({ way, row, bytes, gbps: +med(xs).toFixed(1), min: +Math.min(...xs).toFixed(1), max: +Math.max(...xs).toFixed(1), n: xs.length }));
}
rt[Symbol.dispose]();
