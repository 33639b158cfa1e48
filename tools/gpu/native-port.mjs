// The copy part of ../shared/reference/native-bandwidth.cu, line for line, from Node through koffi (no gpumem code
// on the path): tells whether a gap between gpumem's bench and the C yardstick comes from the process (Node) or from
// gpumem. Variants (argument): "as-c" = the C program's buffers and stream (cudaMallocHost 1 GiB, malloc'd pageable
// via libc, cudaStreamCreate); "as-gpumem" = gpumem bench's (cudaHostAlloc portable, an ArrayBuffer for pageable,
// a non-blocking stream); either with "+async" waits for the stream on koffi's worker thread after each warm-up,
// or with "+import" / "+open" / "+rt" imports gpumem / opens its cuda runtime / touches device 0 first.
// Prints the C program's table format.
import koffi from 'koffi';

const variant = process.argv[2] ?? 'as-c';
// "+async": after the warm-up copies, wait for the stream on koffi's worker thread (as gpumem's bench does with
// `await stream.synchronize()`) instead of on this thread.
const asyncSync = variant.endsWith('+async');
// "+import": import gpumem only; "+open": also open its cuda backend (libraries, cuInit); "+rt": also touch device 0
// (cudaSetDevice, cudaFree(0), memGetInfo). Then time as the port does.
// "+libs": load libcuda, libnvrtc and libnvidia-ml by the paths gpumem uses (GPUMEM_LIBCUDA, GPUMEM_LIBNVRTC,
// GPUMEM_LIBNVML, else their sonames) and call nothing; "+cuinit": load libcuda and call cuInit(0) only.
if (/\+(libs|cuinit)$/.test(variant)) {
  const cuda = koffi.load(process.env.GPUMEM_LIBCUDA ?? 'libcuda.so.1');
  if (variant.endsWith('+cuinit')) {
    const r = cuda.func('int cuInit(unsigned int flags)')(0);
    if (r !== 0) throw new Error(`cuInit -> ${r}`);
  } else {
    koffi.load(process.env.GPUMEM_LIBNVRTC ?? 'libnvrtc.so.13');
    koffi.load(process.env.GPUMEM_LIBNVML ?? 'libnvidia-ml.so.1');
  }
}
if (/\+(import|open|rt)$/.test(variant)) {
  const g = await import('../../dist/index.js');
  if (!variant.endsWith('+import')) {
    const rt = g.openRuntime({ backend: 'cuda' });
    if (variant.endsWith('+rt')) rt.device(0).memGetInfo();
    globalThis.keepRuntime = rt;
  }
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
  ck(C.streamCreate(os), 'cudaStreamCreate');
} else {
  ck(C.hostAlloc(o3, big, 1), 'cudaHostAlloc(portable)');
  const ab = new ArrayBuffer(big);
  new Uint8Array(ab).fill(7);
  new Uint8Array(koffi.view(BigInt(o3[0]), big)).fill(7);
  globalThis.keep = ab;
  pageable = Number(koffi.address(ab));
  ck(C.streamCreateFlags(os, 1), 'cudaStreamCreateWithFlags(nonBlocking)');
}
const [dev, dev2, pinned, st] = [o1[0], o2[0], o3[0], os[0]];
ck(C.eventCreate(oa), 'event');
ck(C.eventCreate(ob), 'event');
const [a, b] = [oa[0], ob[0]];
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
console.log('bytes\tH2D_pinned\tD2H_pinned\tH2D_pageable\tD2H_pageable\tD2D_read+write  (GB/s)');
// PORT_SIZES=small: 64 KiB and 1 MiB only (a short run).
for (const n of process.env.PORT_SIZES === 'small' ? [2 ** 16, 2 ** 20] : [2 ** 12, 2 ** 16, 2 ** 20, 2 ** 24, 2 ** 28, 2 ** 30]) {
  const h2d = await medianMs(dev, pinned, n, 1, 20), d2h = await medianMs(pinned, dev, n, 2, 20);
  const h2dp = await medianMs(dev, pageable, n, 1, 10), d2hp = await medianMs(pageable, dev, n, 2, 10);
  const d2d = await medianMs(dev2, dev, n, 3, 20);
  const g = (t, m = 1) => ((m * n) / t / 1e6).toFixed(2);
  console.log(`${n}\t${g(h2d)}\t${g(d2h)}\t${g(h2dp)}\t${g(d2hp)}\t${((2 * n) / d2d / 1e6).toFixed(1)}`);
}
