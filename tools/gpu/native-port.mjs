// The copy part of ../shared/reference/native-bandwidth.cu, line for line, from Node through koffi (no gpumem code
// on the path): tells whether a gap between gpumem's bench and the C yardstick comes from the process (Node) or from
// gpumem. Variants (argument): "as-c" = the C program's buffers and stream (cudaMallocHost 1 GiB, malloc'd pageable
// via libc, cudaStreamCreate); "as-gpumem" = gpumem bench's (cudaHostAlloc portable, an ArrayBuffer for pageable,
// a non-blocking stream); either followed by steps ("+open", "+cuinit", ... below) done before timing.
// Prints the C program's table format, after the GPU libraries mapped into the process.
import koffi from 'koffi';

const variant = process.argv[2] ?? 'as-c';
// Steps after the base ("as-c" or "as-gpumem"), each "+name", done in order before timing:
//   async    after the warm-up copies, wait for the stream on koffi's worker thread (as gpumem's bench does with
//            `await stream.synchronize()`) instead of on this thread;
//   libcuda  load libcuda by the path gpumem uses (GPUMEM_LIBCUDA, else the soname) and call nothing;
//   cuinit   load libcuda and call cuInit(0);
//   nvrtc    load libnvrtc (GPUMEM_LIBNVRTC); nvml: load libnvidia-ml (GPUMEM_LIBNVML); call nothing;
//   import   import gpumem only;
//   loadcuda gpumem's loadCuda(): its library search, the loads and the function declarations, nothing called
//            beyond the version queries;
//   backend  gpumem's createCudaBackend() (loadCuda, then the backend object: driver version, nvrtc version, cuInit);
//   open     openRuntime({ backend: 'cuda' }); auto: openRuntime() with detection (HIP first, as the CLI does);
//   rt       open, then touch device 0 (cudaSetDevice, cudaFree(0), memGetInfo);
//   nbstream (as-c only) a non-blocking stream, as gpumem bench's, instead of cudaStreamCreate's.
const steps = variant.split('+').slice(1);
const asyncSync = steps.includes('async');
const keep = [];
for (const step of steps) {
  if (step === 'libcuda' || step === 'cuinit') {
    const cuda = koffi.load(process.env.GPUMEM_LIBCUDA ?? 'libcuda.so.1');
    if (step === 'cuinit') {
      const r = cuda.func('int cuInit(unsigned int flags)')(0);
      if (r !== 0) throw new Error(`cuInit -> ${r}`);
    }
  } else if (step === 'nvrtc') koffi.load(process.env.GPUMEM_LIBNVRTC ?? 'libnvrtc.so.13');
  else if (step === 'nvml') koffi.load(process.env.GPUMEM_LIBNVML ?? 'libnvidia-ml.so.1');
  else if (step === 'import') await import('../../dist/index.js');
  else if (step === 'loadcuda') keep.push((await import('../../dist/backend/cuda/ffi.js')).loadCuda());
  else if (step === 'backend') keep.push((await import('../../dist/backend/cuda/cuda-backend.js')).createCudaBackend());
  else if (step === 'open' || step === 'auto' || step === 'rt') {
    const g = await import('../../dist/index.js');
    const rt = g.openRuntime(step === 'auto' ? {} : { backend: 'cuda' });
    if (step === 'rt') rt.device(0).memGetInfo();
    keep.push(rt);
  } else if (step !== 'async' && step !== 'nbstream') throw new Error(`unknown step "${step}" in variant ${variant}`);
}
globalThis.keep = keep;
// The GPU libraries mapped into this process, with their inode: two copies of one library would show here.
const mapped = new Map();
for (const line of (await import('node:fs')).readFileSync('/proc/self/maps', 'utf8').split('\n')) {
  const f = line.split(/\s+/);
  if (f[5] && /lib(cuda|cudart|nvrtc|nvidia-ml|amdhip64|hsa-runtime64|rocm_smi64)[.-]/.test(f[5])) mapped.set(f[5], f[4]);
}
const cudart = koffi.load(process.env.CUDART ?? 'libcudart.so.13');
const libc = koffi.load('libc.so.6');
const C = {
  malloc: cudart.func('int cudaMalloc(_Out_ uintptr_t *p, size_t n)'),
  mallocHost: cudart.func('int cudaMallocHost(_Out_ uintptr_t *p, size_t n)'),
  hostAlloc: cudart.func('int cudaHostAlloc(_Out_ uintptr_t *p, size_t n, unsigned int flags)'),
  streamCreate: cudart.func('int cudaStreamCreate(_Out_ uintptr_t *s)'),
  streamCreateFlags: cudart.func('int cudaStreamCreateWithFlags(_Out_ uintptr_t *s, unsigned int flags)'),
  eventCreate: cudart.func('int cudaEventCreate(_Out_ uintptr_t *e)'),
  rec: cudart.func('int cudaEventRecord(uintptr_t e, uintptr_t s)'),
  cpy: cudart.func('int cudaMemcpyAsync(uintptr_t d, uintptr_t s, size_t n, int kind, uintptr_t st)'),
  sync: cudart.func('int cudaEventSynchronize(uintptr_t e)'),
  ssync: cudart.func('int cudaStreamSynchronize(uintptr_t s)'),
  el: cudart.func('int cudaEventElapsedTime(_Out_ float *ms, uintptr_t a, uintptr_t b)'),
  cmalloc: libc.func('uintptr_t malloc(size_t n)'),
  memset: libc.func('uintptr_t memset(uintptr_t p, int c, size_t n)'),
};
const ck = (r, what) => {
  if (r !== 0) throw new Error(`${what} -> ${r}`);
};
// PORT_ALLOC=1: the yardstick's cudaMalloc+cudaFree loop (100 warm-up, 2000 timed, mean) at each stage: before
// anything else, after the buffers, stream and events exist, after the copies (as in the C program), after freeing
// the two device buffers, and after freeing the pinned one too.
const cudaFree = cudart.func('int cudaFree(uintptr_t p)');
const allocLoop = (state) => {
  if (process.env.PORT_ALLOC !== '1') return;
  const p = [0];
  for (const n of [512, 2 ** 20, 2 ** 26]) {
    const once = () => {
      ck(C.malloc(p, n), 'cudaMalloc');
      ck(cudaFree(p[0]), 'cudaFree');
    };
    for (let i = 0; i < 100; i++) once();
    const t0 = performance.now();
    for (let i = 0; i < 2000; i++) once();
    console.log(`port: cudaMalloc+cudaFree ${n} bytes: ${(((performance.now() - t0) * 1000) / 2000).toFixed(2)} us per allocate+free (${state})`);
  }
};
// PORT_ANCHOR=1: one small allocation made first and kept (a bench process has several), so that the driver's
// chunk holding small allocations never empties during the loop.
if (process.env.PORT_ANCHOR === '1') ck(C.malloc([0], 512), 'cudaMalloc(anchor)');
allocLoop(process.env.PORT_ANCHOR === '1' ? 'first, one 512-byte allocation kept' : 'first, nothing else done');
const out = () => [0];
const big = 2 ** 30;
const o1 = out(), o2 = out(), o3 = out(), os = out(), oa = out(), ob = out();
ck(C.malloc(o1, big), 'cudaMalloc');
ck(C.malloc(o2, big), 'cudaMalloc');
let pageable;
if (variant.startsWith('as-c')) {
  ck(C.mallocHost(o3, big), 'cudaMallocHost');
  pageable = C.cmalloc(big);
  C.memset(pageable, 7, big);
  C.memset(o3[0], 7, big);
  if (steps.includes('nbstream')) ck(C.streamCreateFlags(os, 1), 'cudaStreamCreateWithFlags(nonBlocking)');
  else ck(C.streamCreate(os), 'cudaStreamCreate');
} else {
  ck(C.hostAlloc(o3, big, 1), 'cudaHostAlloc(portable)');
  const ab = new ArrayBuffer(big);
  new Uint8Array(ab).fill(7);
  new Uint8Array(koffi.view(BigInt(o3[0]), big)).fill(7);
  keep.push(ab);
  pageable = Number(koffi.address(ab));
  ck(C.streamCreateFlags(os, 1), 'cudaStreamCreateWithFlags(nonBlocking)');
}
const [dev, dev2, pinned, st] = [o1[0], o2[0], o3[0], os[0]];
ck(C.eventCreate(oa), 'event');
ck(C.eventCreate(ob), 'event');
const [a, b] = [oa[0], ob[0]];
allocLoop('buffers, stream and events made, no copy yet');
const ms = [0];
const syncOnWorker = () => new Promise((resolve, reject) => C.ssync.async(st, (err, r) => (err || r !== 0 ? reject(err ?? new Error(`sync ${r}`)) : resolve())));
const medianMs = async (dst, src, n, k, reps) => {
  for (let i = 0; i < 3; i++) ck(C.cpy(dst, src, n, k, st), 'copy');
  if (asyncSync) await syncOnWorker();
  else ck(C.ssync(st), 'sync');
  const r = [];
  for (let i = 0; i < reps; i++) {
    ck(C.rec(a, st), 'rec');
    ck(C.cpy(dst, src, n, k, st), 'copy');
    ck(C.rec(b, st), 'rec');
    ck(C.sync(b), 'sync');
    ck(C.el(ms, a, b), 'elapsed');
    r.push(ms[0]);
  }
  r.sort((x, y) => x - y);
  return r[r.length >> 1];
};
console.log(`# node port of native-bandwidth.cu, variant ${variant}`);
for (const [file, inode] of mapped) console.log(`# mapped ${file} inode ${inode}`);
console.log('bytes\tH2D_pinned\tD2H_pinned\tH2D_pageable\tD2H_pageable\tD2D_read+write  (GB/s)');
// PORT_SIZES=small: 64 KiB and 1 MiB only; PORT_SIZES=mid: 1 MiB and 16 MiB (short runs).
const portSizes = { small: [2 ** 16, 2 ** 20], mid: [2 ** 20, 2 ** 24] }[process.env.PORT_SIZES ?? ''];
for (const n of portSizes ?? [2 ** 12, 2 ** 16, 2 ** 20, 2 ** 24, 2 ** 28, 2 ** 30]) {
  const h2d = await medianMs(dev, pinned, n, 1, 20), d2h = await medianMs(pinned, dev, n, 2, 20);
  const h2dp = await medianMs(dev, pageable, n, 1, 10), d2hp = await medianMs(pageable, dev, n, 2, 10);
  const d2d = await medianMs(dev2, dev, n, 3, 20);
  const g = (t, m = 1) => ((m * n) / t / 1e6).toFixed(2);
  console.log(`${n}\t${g(h2d)}\t${g(d2h)}\t${g(h2dp)}\t${g(d2hp)}\t${((2 * n) / d2d / 1e6).toFixed(1)}`);
}
if (process.env.PORT_ALLOC === '1') {
  allocLoop('after the copies, 2 GiB device + 1 GiB pinned held');
  ck(cudaFree(dev), 'cudaFree');
  ck(cudaFree(dev2), 'cudaFree');
  allocLoop('1 GiB pinned held');
  ck(cudart.func('int cudaFreeHost(uintptr_t p)')(pinned), 'cudaFreeHost');
  allocLoop('nothing held');
}
