/**
 * The kernels that `gpumem bench` needs, as one CUDA C++ source (compiled at run time by nvrtc or hiprtc; the
 * same text is valid HIP) and as JavaScript for the host backend. Every loop is grid-stride, so any grid size is
 * correct; sizes are element counts.
 */
import type { HostKernel, KernelSource } from '../backend/backend.js';

const SOURCE = String.raw`
typedef unsigned long long u64;
typedef unsigned int u32;
#define GRID_STRIDE(i, n) for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (u64)gridDim.x * blockDim.x)

// STREAM (McCalpin) on doubles.
extern "C" __global__ void stream_copy(double* __restrict__ c, const double* __restrict__ a, u64 n) { GRID_STRIDE(i, n) c[i] = a[i]; }
extern "C" __global__ void stream_scale(double* __restrict__ b, const double* __restrict__ c, double s, u64 n) { GRID_STRIDE(i, n) b[i] = s * c[i]; }
extern "C" __global__ void stream_add(double* __restrict__ c, const double* __restrict__ a, const double* __restrict__ b, u64 n) { GRID_STRIDE(i, n) c[i] = a[i] + b[i]; }
extern "C" __global__ void stream_triad(double* __restrict__ a, const double* __restrict__ b, const double* __restrict__ c, double s, u64 n) { GRID_STRIDE(i, n) a[i] = b[i] + s * c[i]; }

// Read-only: 16-byte loads over n vectors, 'reps' times (small working sets stay in cache). The result is written
// only when it equals an unlikely constant, so the loads cannot be optimised away and nothing is stored.
extern "C" __global__ void read_only(const ulonglong2* __restrict__ a, u64 n, u64 reps, u64* sink) {
  u64 acc = 0;
  for (u64 r = 0; r < reps; r++) { GRID_STRIDE(i, n) { ulonglong2 v = a[i]; acc ^= v.x ^ (v.y + r); } }
  if (acc == 0x9E3779B97F4A7C15ull) sink[0] = acc;
}
// Every block reads the whole working set 'reps' times, each starting at its own offset so that blocks do not
// read the same lines at the same moment: the aggregate bandwidth shows the cache level the set fits in.
extern "C" __global__ void read_blocks(const ulonglong2* __restrict__ a, u64 n, u64 reps, u64* sink) {
  u64 acc = 0;
  u64 start = (n / gridDim.x) * blockIdx.x;
  for (u64 r = 0; r < reps; r++) {
    for (u64 i = threadIdx.x; i < n; i += blockDim.x) { u64 j = i + start; if (j >= n) j -= n; ulonglong2 v = a[j]; acc ^= v.x ^ (v.y + r); }
  }
  if (acc == 0x9E3779B97F4A7C15ull) sink[0] = acc;
}
// Write-only: 16-byte stores.
extern "C" __global__ void write_only(ulonglong2* __restrict__ a, u64 n, u64 value) { GRID_STRIDE(i, n) a[i] = make_ulonglong2(value, value ^ i); }
// Copy with 16-byte vectors: an SM copy between any two device-reachable buffers (device, peer, mapped host).
extern "C" __global__ void copy_v16(ulonglong2* __restrict__ dst, const ulonglong2* __restrict__ src, u64 n) { GRID_STRIDE(i, n) dst[i] = src[i]; }
// Copy of 4-byte words: with pointers offset by 4 bytes it measures what breaking 128-byte alignment costs.
extern "C" __global__ void copy_u32(u32* __restrict__ dst, const u32* __restrict__ src, u64 n) { GRID_STRIDE(i, n) dst[i] = src[i]; }
// Strided read of 4-byte words: element i*stride for i < n.
extern "C" __global__ void strided_read(const u32* __restrict__ a, u64 n, u64 stride, u64* sink) {
  u32 acc = 0;
  GRID_STRIDE(i, n) acc ^= a[i * stride];
  if (acc == 0xDEADBEEFu) sink[0] = acc;
}
// Random access: out[i] = a[idx[i]].
extern "C" __global__ void gather(u32* __restrict__ out, const u32* __restrict__ a, const u32* __restrict__ idx, u64 n) { GRID_STRIDE(i, n) out[i] = a[idx[i]]; }
// Pointer chase: one thread follows next[] for 'steps' hops; each load depends on the one before.
extern "C" __global__ void pointer_chase(const u64* next, u64 steps, u64* out) {
  u64 p = 0;
  for (u64 s = 0; s < steps; s++) p = next[p];
  out[0] = p;
}
// Holds its stream until the host writes a non-zero word into mapped memory, so that the work queued behind it
// starts only once all of it has been enqueued: timing then measures the device, not the host's submission speed.
// It gives up after 2^31 clock cycles (about a second), so that a host that never writes cannot hang the device.
extern "C" __global__ void wait_flag(const volatile u32* flag) {
  long long start = clock64();
  while (*flag == 0 && clock64() - start < (1ll << 31)) { }
}
// A pattern that differs per word and per seed, and the check that counts words that do not match it.
extern "C" __global__ void fill_pattern(u32* a, u64 n, u32 seed) { GRID_STRIDE(i, n) a[i] = (u32)(i * 2654435761ull) ^ seed; }
extern "C" __global__ void verify_pattern(const u32* a, u64 n, u32 seed, u64* errors) {
  u64 bad = 0;
  GRID_STRIDE(i, n) if (a[i] != ((u32)(i * 2654435761ull) ^ seed)) bad++;
  if (bad) atomicAdd(errors, bad);
}
`;

const num = (v: number | bigint): number => Number(v);
const f64 = (mem: Parameters<HostKernel>[0], address: number | bigint, n: number): Float64Array => {
  const b = mem.bytes(num(address), n * 8);
  return new Float64Array(b.buffer, b.byteOffset, n);
};
const u32 = (mem: Parameters<HostKernel>[0], address: number | bigint, n: number): Uint32Array => {
  const b = mem.bytes(num(address), n * 4);
  return new Uint32Array(b.buffer, b.byteOffset, n);
};
const u64 = (mem: Parameters<HostKernel>[0], address: number | bigint, n: number): BigUint64Array => {
  const b = mem.bytes(num(address), n * 8);
  return new BigUint64Array(b.buffer, b.byteOffset, n);
};
/** (u32)(i * 2654435761) ^ seed, as the device computes it. */
export const patternWord = (i: number, seed: number): number => (Math.imul(i >>> 0, 2654435761 | 0) ^ seed) >>> 0;

const HOST: Record<string, HostKernel> = {
  stream_copy: (m, _c, [c, a, n]) => f64(m, c!, num(n!)).set(f64(m, a!, num(n!))),
  stream_scale: (m, _c, [b, c, s, n]) => {
    const B = f64(m, b!, num(n!));
    const C = f64(m, c!, num(n!));
    const k = num(s!);
    for (let i = 0; i < B.length; i++) B[i] = k * C[i]!;
  },
  stream_add: (m, _c, [c, a, b, n]) => {
    const C = f64(m, c!, num(n!));
    const A = f64(m, a!, num(n!));
    const B = f64(m, b!, num(n!));
    for (let i = 0; i < C.length; i++) C[i] = A[i]! + B[i]!;
  },
  stream_triad: (m, _c, [a, b, c, s, n]) => {
    const A = f64(m, a!, num(n!));
    const B = f64(m, b!, num(n!));
    const C = f64(m, c!, num(n!));
    const k = num(s!);
    for (let i = 0; i < A.length; i++) A[i] = B[i]! + k * C[i]!;
  },
  read_only: (m, _c, [a, n, reps, sink]) => {
    const A = u32(m, a!, num(n!) * 4);
    let acc = 0;
    for (let r = 0; r < num(reps!); r++) for (let i = 0; i < A.length; i++) acc ^= A[i]! + r;
    if (acc === 0x7f4a7c15) u32(m, sink!, 1)[0] = acc;
  },
  read_blocks: (m, c, [a, n, reps, sink]) => {
    const A = u32(m, a!, num(n!) * 4);
    let acc = 0;
    const blocks = c.grid[0] * c.grid[1] * c.grid[2];
    for (let b = 0; b < blocks; b++) for (let r = 0; r < num(reps!); r++) for (let i = 0; i < A.length; i++) acc ^= A[i]! + r;
    if (acc === 0x7f4a7c15) u32(m, sink!, 1)[0] = acc;
  },
  write_only: (m, _c, [a, n, value]) => {
    const A = u64(m, a!, num(n!) * 2);
    const v = BigInt.asUintN(64, BigInt(value!));
    for (let i = 0; i < A.length; i += 2) {
      A[i] = v;
      A[i + 1] = v ^ BigInt(i >> 1);
    }
  },
  copy_v16: (m, _c, [dst, src, n]) => m.bytes(num(dst!), num(n!) * 16).set(m.bytes(num(src!), num(n!) * 16)),
  copy_u32: (m, _c, [dst, src, n]) => m.bytes(num(dst!), num(n!) * 4).set(m.bytes(num(src!), num(n!) * 4)),
  strided_read: (m, _c, [a, n, stride, sink]) => {
    const count = num(n!);
    const s = num(stride!);
    const A = u32(m, a!, (count - 1) * s + 1);
    let acc = 0;
    for (let i = 0; i < count; i++) acc ^= A[i * s]!;
    if (acc === 0xdeadbeef) u64(m, sink!, 1)[0] = BigInt(acc);
  },
  gather: (m, _c, [out, a, idx, n]) => {
    const count = num(n!);
    const O = u32(m, out!, count);
    const I = u32(m, idx!, count);
    let max = 0;
    for (let i = 0; i < count; i++) max = Math.max(max, I[i]!);
    const A = u32(m, a!, max + 1);
    for (let i = 0; i < count; i++) O[i] = A[I[i]!]!;
  },
  pointer_chase: (m, _c, [next, steps, out]) => {
    let p = 0n;
    for (let s = 0; s < num(steps!); s++) p = u64(m, num(next!) + Number(p) * 8, 1)[0]!;
    u64(m, out!, 1)[0] = p;
  },
  wait_flag: () => {
    // The host backend runs queued work only after the host has finished enqueuing it: nothing to wait for.
  },
  fill_pattern: (m, _c, [a, n, seed]) => {
    const A = u32(m, a!, num(n!));
    const sd = num(seed!) >>> 0;
    for (let i = 0; i < A.length; i++) A[i] = patternWord(i, sd);
  },
  verify_pattern: (m, _c, [a, n, seed, errors]) => {
    const A = u32(m, a!, num(n!));
    const sd = num(seed!) >>> 0;
    let bad = 0;
    for (let i = 0; i < A.length; i++) if (A[i] !== patternWord(i, sd)) bad++;
    if (bad) u64(m, errors!, 1)[0]! += BigInt(bad);
  },
};

/** The bench kernels: STREAM, read-only, write-only, copies, strided and random access, pointer chase, fill and verify. */
export const BENCH_KERNELS: KernelSource = {
  name: 'gpumem_bench',
  source: SOURCE,
  kernels: {
    stream_copy: ['ptr', 'ptr', 'u64'],
    stream_scale: ['ptr', 'ptr', 'f64', 'u64'],
    stream_add: ['ptr', 'ptr', 'ptr', 'u64'],
    stream_triad: ['ptr', 'ptr', 'ptr', 'f64', 'u64'],
    read_only: ['ptr', 'u64', 'u64', 'ptr'],
    read_blocks: ['ptr', 'u64', 'u64', 'ptr'],
    write_only: ['ptr', 'u64', 'u64'],
    copy_v16: ['ptr', 'ptr', 'u64'],
    copy_u32: ['ptr', 'ptr', 'u64'],
    strided_read: ['ptr', 'u64', 'u64', 'ptr'],
    gather: ['ptr', 'ptr', 'ptr', 'u64'],
    pointer_chase: ['ptr', 'u64', 'ptr'],
    wait_flag: ['ptr'],
    fill_pattern: ['ptr', 'u64', 'u32'],
    verify_pattern: ['ptr', 'u64', 'u32', 'ptr'],
  },
  host: HOST,
};
