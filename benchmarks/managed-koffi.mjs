// The managed rows' sequence from Node.js without gpumem: libcudart and libcuda called straight through koffi, the
// kernel loaded from a CUBIN (gpumem's own compiled read_only, from its compile cache, or nvcc's). The same
// sequence as memory.cu and the bench: the CPU fills 1 GiB of managed memory (libc memset), a kernel reads it,
// prefetch to the host, prefetch to the device, the first kernel after it, four more. If this trails the C program
// too, the cause of the managed rows' gap is the Node.js process, not gpumem's runtime.
//
// With GPUMEM_OPEN=1 the process first opens gpumem's CUDA runtime and device 0 (and uses neither); with
// GPUMEM_OPEN=2 it also asks the device for its facts and free memory and loads the bench kernels, as the bench
// does before its managed rows: which of these steps makes the kernels after a prefetch slower. With
// GPUMEM_ASYNC_SYNC=1 the wait for the prefetch to the host runs on one of koffi's worker threads (as gpumem's
// `await stream.synchronize()` does) instead of this thread.
//
// GPUMEM_STEPS=N replaces the first N steps of the sequence, cumulatively, by gpumem's API (the runtime opened as
// with GPUMEM_OPEN=2): 1 the allocation and free (dev.allocManaged, free()), 2 the stream and the prefetches
// (dev.createStream, m.prefetch), 3 the timing events (dev.createEvent, record, waitSync, elapsedSince), 4 the
// kernel launch (the bench kernels loaded by gpumem, kernel.launch), 5 the CPU fill (m.view().fill instead of
// memset). The step after which the kernels slow down is where the difference lies. Step 4 in parts, with
// GPUMEM_STEPS=3 and GPUMEM_PART: `sink` the kernel's sink word allocated by gpumem (dev.alloc), `function` also the
// kernel function from gpumem's loaded module, launched here with this script's own arguments.
//
//   node -e 'import("./dist/kernels/bench-kernels.js").then((m) => process.stdout.write(m.BENCH_KERNELS.source))' > /tmp/k.cuh
//   nvcc -cubin -arch=sm_90 -o /tmp/k.cubin -x cu /tmp/k.cuh
//   GPUMEM_STEPS=3 GPUMEM_PART=function node benchmarks/managed-koffi.mjs /tmp/k.cubin 1024 3
//   node benchmarks/managed-koffi.mjs KERNELS.cubin [MiB=1024] [repeats=5]     (koffi from GPUMEM_DIST's install)
import { readFileSync } from 'node:fs';
import { fromDist, koffiOfDist } from './dist.mjs';

const koffi = koffiOfDist();
const cubin = readFileSync(process.argv[2]);
const steps = Number(process.env.GPUMEM_STEPS ?? 0);
const open = steps > 0 ? 2 : Number(process.env.GPUMEM_OPEN ?? 0);
const asyncSync = process.env.GPUMEM_ASYNC_SYNC === '1';
let gdev;
let gmod;
if (open >= 1) {
  const { openRuntime, BENCH_KERNELS } = await fromDist();
  const grt = await openRuntime({ backend: 'cuda' });
  gdev = grt.device(0);
  if (open >= 2) {
    gdev.info();
    gdev.memGetInfo();
    gmod = gdev.loadModule(BENCH_KERNELS);
  }
}
const bytes = Number(process.argv[3] ?? 1024) * 2 ** 20;
const repeats = Number(process.argv[4] ?? 5);
const load = (name, dirs) => {
  for (const p of [...dirs.map((d) => `${d}/${name}`), name]) {
    try {
      return koffi.load(p);
    } catch {}
  }
  throw new Error(`${name} not found`);
};
const cudaDirs = ['/usr/local/cuda/targets/x86_64-linux/lib', '/usr/local/cuda/lib64', '/usr/local/nvidia/lib64', '/usr/lib/x86_64-linux-gnu'];
const rt = load('libcudart.so.13', cudaDirs);
const cu = load('libcuda.so.1', cudaDirs);
const libc = koffi.load('libc.so.6');
const f = (lib, proto) => lib.func(proto);
const cudaFree = f(rt, 'int cudaFree(uintptr_t p)');
const cudaMallocManaged = f(rt, 'int cudaMallocManaged(_Out_ uint64_t *p, size_t n, unsigned int flags)');
const cudaMalloc = f(rt, 'int cudaMalloc(_Out_ uint64_t *p, size_t n)');
const cudaStreamCreateWithFlags = f(rt, 'int cudaStreamCreateWithFlags(_Out_ uint64_t *s, unsigned int flags)');
const cudaEventCreate = f(rt, 'int cudaEventCreate(_Out_ uint64_t *e)');
const cudaEventRecord = f(rt, 'int cudaEventRecord(uintptr_t e, uintptr_t s)');
const cudaEventSynchronize = f(rt, 'int cudaEventSynchronize(uintptr_t e)');
const cudaEventElapsedTime = f(rt, 'int cudaEventElapsedTime(_Out_ float *ms, uintptr_t a, uintptr_t b)');
const cudaStreamSynchronize = f(rt, 'int cudaStreamSynchronize(uintptr_t s)');
const cudaDeviceGetAttribute = f(rt, 'int cudaDeviceGetAttribute(_Out_ int *v, int attr, int dev)');
koffi.struct('MemLoc', { type: 'int', id: 'int' });
const cudaMemPrefetchAsync = f(rt, 'int cudaMemPrefetchAsync(uintptr_t p, size_t n, MemLoc loc, unsigned int flags, uintptr_t s)');
const cuModuleLoadData = f(cu, 'int cuModuleLoadData(_Out_ uint64_t *m, const void *image)');
const cuModuleGetFunction = f(cu, 'int cuModuleGetFunction(_Out_ uint64_t *fn, uintptr_t m, const char *name)');
const cuLaunchKernel = f(
  cu,
  'int cuLaunchKernel(uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, uintptr_t stream, void *params, void *extra)',
);
const memset = f(libc, 'void *memset(uintptr_t s, int c, size_t n)');
const ok = (status, what) => {
  if (status !== 0) throw new Error(`${what}: status ${status}`);
};
const out = [0n];
ok(cudaFree(0), 'cudaFree(0)');
const sms = [0];
ok(cudaDeviceGetAttribute(sms, 16, 0), 'multiprocessors'); // cudaDevAttrMultiProcessorCount
ok(cuModuleLoadData(out, cubin), 'cuModuleLoadData');
const mod = out[0];
ok(cuModuleGetFunction(out, mod, 'read_only'), 'cuModuleGetFunction');
const fn = out[0];
ok(cudaStreamCreateWithFlags(out, 1), 'stream');
const gs = steps >= 2 ? gdev.createStream({ nonBlocking: true }) : undefined;
const s = gs ? gs.handle : out[0];
const ga = steps >= 3 ? gdev.createEvent() : undefined;
const gb = steps >= 3 ? gdev.createEvent() : undefined;
ok(cudaEventCreate(out), 'event');
const a = out[0];
ok(cudaEventCreate(out), 'event');
const b = out[0];
const part = process.env.GPUMEM_PART ?? '';
const sinkAllocation = steps >= 4 || part ? gdev.alloc(8) : undefined;
if (!sinkAllocation) ok(cudaMalloc(out, 8), 'sink');
const sink = sinkAllocation ? sinkAllocation.address : out[0];
const v = bytes / 16;
const grid = Math.max(1, Math.min(sms[0] * 16, Math.ceil(v / 256)));
const ms = [0];
const timed = (op) => {
  if (ga) {
    ga.record(gs);
    op();
    gb.record(gs);
    gb.waitSync();
    return bytes / (gb.elapsedSince(ga) * 1e6);
  }
  ok(cudaEventRecord(a, s), 'record');
  op();
  ok(cudaEventRecord(b, s), 'record');
  ok(cudaEventSynchronize(b), 'sync');
  ok(cudaEventElapsedTime(ms, a, b), 'elapsed');
  return bytes / (ms[0] * 1e6);
};
const first = [];
const after = [];
const steady = [];
for (let r = 0; r < repeats; r++) {
  let gm;
  if (steps >= 1) gm = gdev.allocManaged(bytes);
  else ok(cudaMallocManaged(out, bytes, 1), 'cudaMallocManaged');
  const m = gm ? gm.address : out[0];
  if (steps >= 5) gm.view().fill(0x3f);
  else memset(Number(m), 0x3f, bytes);
  const args = new ArrayBuffer(64);
  const d = new DataView(args);
  const base = koffi.address(args);
  [m, BigInt(v), 1n, sink].forEach((x, i) => {
    d.setBigUint64(8 * i, BigInt(x), true);
    d.setBigUint64(32 + 8 * i, base + BigInt(8 * i), true);
  });
  const params = new Uint8Array(args, 32, 32);
  const readAll =
    steps >= 4
      ? () => gmod.kernel('read_only').launch({ grid, block: 256, stream: gs }, gm, v, 1, sinkAllocation)
      : () => ok(cuLaunchKernel(part === 'function' ? gmod.kernel('read_only').fn : fn, grid, 1, 1, 256, 1, 1, 0, s, params, null), 'launch');
  first.push(timed(readAll));
  if (steps >= 2) gm.prefetch('host', gs);
  else ok(cudaMemPrefetchAsync(m, bytes, { type: 2, id: 0 }, 0, s), 'prefetch host'); // cudaMemLocationTypeHost
  if (asyncSync)
    await new Promise((resolve, reject) => cudaStreamSynchronize.async(s, (e, st) => (e || st ? reject(e ?? new Error(`status ${st}`)) : resolve())));
  else ok(cudaStreamSynchronize(s), 'sync');
  timed(() => (steps >= 2 ? gm.prefetch(0, gs) : ok(cudaMemPrefetchAsync(m, bytes, { type: 1, id: 0 }, 0, s), 'prefetch device')));
  after.push(timed(readAll));
  for (let k = 0; k < 4; k++) steady.push(timed(readAll));
  if (gm) gm.free();
  else ok(cudaFree(m), 'free');
}
const med = (xs) => [...xs].sort((x, y) => x - y)[xs.length >> 1];
const thp = readFileSync('/proc/self/status', 'utf8').match(/THP_enabled:\s*(\d)/)?.[1];
console.log(
  JSON.stringify({
    steps,
    part,
    asyncSync,
    way:
      open === 0
        ? 'node + koffi, no gpumem'
        : open === 1
          ? 'node + koffi, gpumem runtime opened'
          : 'node + koffi, gpumem runtime opened, device facts, kernels loaded',
    bytes,
    repeats,
    firstTouchGBps: +med(first).toFixed(1),
    firstKernelAfterPrefetchGBps: +med(after).toFixed(1),
    firstKernelAfterPrefetchRange: [+Math.min(...after).toFixed(1), +Math.max(...after).toFixed(1)],
    kernelsAfterPrefetchGBps: +med(steady).toFixed(1),
    processThpEnabled: thp,
  }),
);
