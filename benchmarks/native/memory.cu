// gpumem's native comparison for every `gpumem bench` row that runs a kernel or times an allocation: STREAM copy,
// scale, add, triad, read-only and write-only; the cache sweep; strided, aligned, misaligned and random access; the
// pointer chase; managed memory (first touch by a kernel, prefetch, the first kernel after a prefetch, the kernels
// after it, read-mostly, host read-back); zero-copy reads and writes; SM copies; allocate + free latency (driver,
// stream-ordered, pinned, managed).
//
// It measures what gpumem measures and nothing else: the same kernels (bench-kernels.cuh is the text gpumem compiles
// with NVRTC, written out of the built package by benchmarks/gpu-verify.sh), the same grids, sizes, repeats and
// warm-ups, timed as gpumem times them (per repeat one event before and one after on a non-blocking stream, the end
// event waited for on this thread; allocations and host reads with the host clock). A difference between the two is
// then the cost of gpumem's path (FFI, checks, argument packing), not of a different experiment.
//
// Prints one JSON object per row, keyed as gpumem's rows are (test, direction, srcKind, dstKind, engine, bytes), with
// every repeat's GB/s (or microseconds for latency rows). GB = 1e9 bytes; "counted" says which bytes.
//   node -e 'import("./dist/kernels/bench-kernels.js").then(m=>process.stdout.write(m.BENCH_KERNELS.source))' > /tmp/k/bench-kernels.cuh
//   nvcc -O2 -arch=sm_90 -I/tmp/k -o /tmp/gpumem-native-memory benchmarks/native/memory.cu
//   /tmp/gpumem-native-memory [MAX_BYTES] [TESTS]      TESTS: comma-separated, as `gpumem bench --only` (default all)
#include "check.h"
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench-kernels.cuh"

typedef unsigned long long u64;
static const size_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

static int sms = 1;
static cudaStream_t stream;
static cudaEvent_t evA, evB;

// As BenchContext.grid: enough blocks to fill the device, never more than the elements need.
static unsigned grid(unsigned perSm, double elements, unsigned block = 256) {
  double want = std::ceil(elements / block);
  return (unsigned)std::max(1.0, std::min((double)sms * perSm, want));
}

// Device time of one run of `op` between two events on the stream, the end event waited for on this thread. Ms.
static double eventTimed(const std::function<void()>& op) {
  CHECK(cudaEventRecord(evA, stream));
  op();
  CHECK(cudaEventRecord(evB, stream));
  CHECK(cudaEventSynchronize(evB));
  float t = 0;
  CHECK(cudaEventElapsedTime(&t, evA, evB));
  return t;
}

// As BenchContext.timeDevice (not gated): warm-up runs waited for on this thread, then per repeat an event pair.
static std::vector<double> timeDevice(const std::function<void()>& op, int reps, int warmup = 3) {
  for (int i = 0; i < warmup; i++) op();
  CHECK(cudaStreamSynchronize(stream));
  std::vector<double> ms;
  for (int i = 0; i < reps; i++) ms.push_back(eventTimed(op));
  return ms;
}

// As BenchContext.timeHost: `warmup` runs, then per repeat the host clock around one run. Milliseconds.
static std::vector<double> timeHost(const std::function<void()>& op, int reps, int warmup = 1) {
  for (int i = 0; i < warmup; i++) op();
  std::vector<double> ms;
  for (int i = 0; i < reps; i++) {
    auto t0 = std::chrono::steady_clock::now();
    op();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return ms;
}

static void launchCheck() { CHECK(cudaGetLastError()); }

static void row(const char* test, const std::string& direction, const char* src, const char* dst, const char* engine, size_t bytes,
                const char* counted, const std::vector<double>& ms, double countedBytes, bool verified) {
  std::printf("{\"test\":\"%s\",\"direction\":\"%s\",\"srcKind\":\"%s\",\"dstKind\":\"%s\",\"engine\":\"%s\",\"bytes\":%zu,\"counted\":\"%s\",\"verified\":%s,\"gbps\":[",
              test, direction.c_str(), src, dst, engine, bytes, counted, verified ? "true" : "false");
  for (size_t i = 0; i < ms.size(); i++) std::printf("%s%.4f", i ? "," : "", countedBytes / (ms[i] * 1e-3) / 1e9);
  std::printf("]}\n");
  std::fflush(stdout);
}

static void latencyRow(const char* test, const std::string& direction, const char* src, const char* engine, size_t bytes, const std::vector<double>& us,
                       bool verified) {
  std::printf("{\"test\":\"%s\",\"direction\":\"%s\",\"srcKind\":\"%s\",\"dstKind\":\"%s\",\"engine\":\"%s\",\"bytes\":%zu,\"counted\":\"latency\",\"verified\":%s,\"us\":[",
              test, direction.c_str(), src, src, engine, bytes, verified ? "true" : "false");
  for (size_t i = 0; i < us.size(); i++) std::printf("%s%.4f", i ? "," : "", us[i]);
  std::printf("]}\n");
  std::fflush(stdout);
}

static double firstDouble(const void* dev) {
  double v = 0;
  CHECK(cudaMemcpy(&v, dev, 8, cudaMemcpyDeviceToHost));
  return v;
}

static double bytesAsDouble(unsigned char b) {
  double d;
  std::memset(&d, b, 8);
  return d;
}

// ---- STREAM, read-only, write-only (device-memory.ts streamTests) -----------------------------------------------
static void streamTests(size_t max) {
  size_t bytes = std::max(MiB, std::min(GiB, max / MiB * MiB));
  u64 n = bytes / 8;
  double *x, *y, *z;
  u64* sink;
  CHECK(cudaMalloc(&x, bytes));
  CHECK(cudaMalloc(&y, bytes));
  CHECK(cudaMalloc(&z, bytes));
  CHECK(cudaMalloc(&sink, 8));
  CHECK(cudaMemsetAsync(x, 0x3f, bytes, stream));
  CHECK(cudaMemsetAsync(y, 0x40, bytes, stream));
  const double X = bytesAsDouble(0x3f), Y = bytesAsDouble(0x40), s = 3;
  unsigned g = grid(16, (double)n);
  const int reps = 20;
  struct K {
    const char* name;
    std::function<void()> run;
    int arrays;
    double expect;
  } ks[] = {
      {"copy", [&] { stream_copy<<<g, 256, 0, stream>>>(z, x, n); }, 2, X},
      {"scale", [&] { stream_scale<<<g, 256, 0, stream>>>(z, x, s, n); }, 2, s * X},
      {"add", [&] { stream_add<<<g, 256, 0, stream>>>(z, x, y, n); }, 3, X + Y},
      {"triad", [&] { stream_triad<<<g, 256, 0, stream>>>(z, x, y, s, n); }, 3, X + s * Y},
  };
  for (auto& k : ks) {
    CHECK(cudaMemsetAsync(z, 0, bytes, stream));
    auto ms = timeDevice(k.run, reps);
    launchCheck();
    row("stream", k.name, "device", "device", "sm", bytes, "read+write", ms, (double)k.arrays * bytes, firstDouble(z) == k.expect);
  }
  u64 v = bytes / 16;
  auto ro = timeDevice([&] { read_only<<<grid(16, (double)v), 256, 0, stream>>>((const ulonglong2*)x, v, 1, sink); }, reps);
  launchCheck();
  row("stream", "read-only", "device", "device", "sm", bytes, "one-way", ro, (double)bytes, firstDouble(x) == X);
  auto wo = timeDevice([&] { write_only<<<grid(16, (double)v), 256, 0, stream>>>((ulonglong2*)z, v, 0x0123456789abcdefull); }, reps);
  launchCheck();
  u64 w[2];
  CHECK(cudaMemcpy(w, (char*)z + 16 * 5, 16, cudaMemcpyDeviceToHost));
  row("stream", "write-only", "device", "device", "sm", bytes, "one-way", wo, (double)bytes, w[0] == 0x0123456789abcdefull && w[1] == (0x0123456789abcdefull ^ 5));
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  CHECK(cudaFree(z));
  CHECK(cudaFree(sink));
}

// ---- cache sweep (device-memory.ts cacheSweep) ------------------------------------------------------------------
static void cacheSweep(size_t max, size_t l2) {
  size_t top = std::min(max, std::max(16 * l2, 256 * MiB));
  std::vector<size_t> sets;
  for (size_t w = 4 * KiB; w <= top; w *= 2) sets.push_back(w);
  ulonglong2* buf;
  u64* sink;
  CHECK(cudaMalloc(&buf, sets.back()));
  CHECK(cudaMalloc(&sink, 8));
  CHECK(cudaMemsetAsync(buf, 0x3f, sets.back(), stream));
  const double perLaunch = 8.0 * GiB;
  const unsigned g = sms * 2;
  for (size_t w : sets) {
    u64 v = w / 16;
    u64 reps = (u64)std::max(1.0, std::min((double)(1 << 20), std::round(perLaunch / ((double)w * g))));
    auto ms = timeDevice([&] { read_blocks<<<g, 512, 0, stream>>>(buf, v, reps, sink); }, 10, 1);
    launchCheck();
    row("cache", "read", "device", "device", "sm", w, "one-way", ms, (double)w * reps * g, firstDouble(buf) == bytesAsDouble(0x3f));
  }
  CHECK(cudaFree(buf));
  CHECK(cudaFree(sink));
}

// The permutation device-memory.ts draws (Fisher-Yates with the same LCG), so both read the same addresses.
static std::vector<uint32_t> permutation(uint32_t n, uint32_t seed) {
  std::vector<uint32_t> p(n);
  for (uint32_t i = 0; i < n; i++) p[i] = i;
  uint32_t r = seed;
  for (uint32_t i = n - 1; i > 0; i--) {
    r = r * 1664525u + 1013904223u;
    uint32_t j = r % (i + 1);
    std::swap(p[i], p[j]);
  }
  return p;
}

// ---- access patterns (device-memory.ts accessTests) -------------------------------------------------------------
static void accessTests(size_t max) {
  size_t bytes = std::min(max, 256 * MiB);
  const int reps = 10;
  unsigned *a, *b;
  u64* sink;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMalloc(&sink, 8));
  CHECK(cudaMemsetAsync(a, 0x3f, bytes, stream));
  for (u64 stride : {1, 2, 4, 8, 16, 32}) {
    u64 n = bytes / 4 / stride;
    auto ms = timeDevice([&] { strided_read<<<grid(16, (double)n), 256, 0, stream>>>(a, n, stride, sink); }, reps);
    launchCheck();
    row("access", "stride-" + std::to_string(stride * 4) + "B", "device", "device", "sm", n * 4, "useful-bytes", ms, (double)n * 4, true);
  }
  u64 words = bytes / 4 - 1;
  for (int off : {0, 4}) {
    unsigned seed = 0x5eed + off;
    fill_pattern<<<grid(8, (double)(bytes / 4)), 256, 0, stream>>>(a, bytes / 4, seed);
    CHECK(cudaMemsetAsync(b, 0, bytes, stream));
    unsigned* dst = (unsigned*)((char*)b + off);
    const unsigned* src = (const unsigned*)((char*)a + off);
    auto ms = timeDevice([&] { copy_u32<<<grid(16, (double)words), 256, 0, stream>>>(dst, src, words); }, reps);
    launchCheck();
    std::vector<unsigned> ha(1024), hb(1024);
    CHECK(cudaMemcpy(ha.data(), a, 4096, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hb.data(), b, 4096, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int i = off / 4; i < 1024; i++) ok = ok && ha[i] == hb[i];
    row("access", off ? "misaligned-4B" : "aligned", "device", "device", "sm", words * 4, "read+write", ms, 2.0 * words * 4, ok);
  }
  uint32_t n = (uint32_t)std::min<size_t>(bytes / 4, 1 << 24);
  auto perm = permutation(n, 0x12345678u);
  unsigned *idx, *out;
  CHECK(cudaMalloc(&idx, n * 4));
  CHECK(cudaMalloc(&out, n * 4));
  CHECK(cudaMemcpy(idx, perm.data(), n * 4, cudaMemcpyHostToDevice));
  fill_pattern<<<grid(8, n), 256, 0, stream>>>(a, n, 77);
  auto ms = timeDevice([&] { gather<<<grid(16, n), 256, 0, stream>>>(out, a, idx, n); }, reps);
  launchCheck();
  std::vector<unsigned> ho(1024);
  CHECK(cudaMemcpy(ho.data(), out, 4096, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < 1024; i++) ok = ok && ho[i] == ((unsigned)(perm[i] * 2654435761ull) ^ 77u);
  row("access", "random-gather", "device", "device", "sm", (size_t)n * 4, "read+write+index", ms, 3.0 * n * 4, ok);
  CHECK(cudaFree(idx));
  CHECK(cudaFree(out));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(sink));
}

// ---- pointer chase (device-memory.ts latencyTests) --------------------------------------------------------------
static void latencyTests(size_t max, size_t l2) {
  const size_t LINE = 128, per = LINE / 8;
  size_t sets[] = {32 * KiB, std::max(64 * KiB, l2 / 4 / 128 * 128), std::min(max, std::max(4 * l2, 256 * MiB))};
  const u64 steps = 1000000;
  for (size_t w : sets) {
    uint32_t lines = (uint32_t)(w / LINE);
    auto order = permutation(lines, 0x9e3779b9u);
    std::vector<u64> h(lines * per, 0);
    for (uint32_t i = 0; i < lines; i++) h[(size_t)order[i] * per] = (u64)order[(i + 1) % lines] * per;
    u64 *next, *out;
    CHECK(cudaMalloc(&next, lines * LINE));
    CHECK(cudaMalloc(&out, 8));
    CHECK(cudaMemcpy(next, h.data(), lines * LINE, cudaMemcpyHostToDevice));
    auto ms = timeDevice([&] { pointer_chase<<<1, 1, 0, stream>>>(next, steps, out); }, 10, 1);
    launchCheck();
    std::vector<uint32_t> pos(lines);
    for (uint32_t i = 0; i < lines; i++) pos[order[i]] = i;
    u64 expect = (u64)order[(pos[0] + steps) % lines] * per, got = 0;
    CHECK(cudaMemcpy(&got, out, 8, cudaMemcpyDeviceToHost));
    std::vector<double> us;
    for (double t : ms) us.push_back(t * 1000 / steps);
    latencyRow("latency", "pointer-chase", "device", "sm", w, us, got == expect);
    CHECK(cudaFree(next));
    CHECK(cudaFree(out));
  }
}

// ---- managed memory (host-visible.ts managedTests) --------------------------------------------------------------
static void prefetch(void* p, size_t n, int device) {
#if CUDART_VERSION >= 13000
  cudaMemLocation loc{};
  loc.type = device < 0 ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
  loc.id = device < 0 ? 0 : device;
  CHECK(cudaMemPrefetchAsync(p, n, loc, 0, stream));
#else
  CHECK(cudaMemPrefetchAsync(p, n, device < 0 ? cudaCpuDeviceId : device, stream));
#endif
}

static void advise(void* p, size_t n, cudaMemoryAdvise a) {
#if CUDART_VERSION >= 13000
  cudaMemLocation loc{};
  loc.type = cudaMemLocationTypeDevice;
  loc.id = 0;
  CHECK(cudaMemAdvise(p, n, a, loc));
#else
  CHECK(cudaMemAdvise(p, n, a, 0));
#endif
}

static void managedTests(size_t max) {
  size_t freeB, totalB;
  CHECK(cudaMemGetInfo(&freeB, &totalB));
  size_t bytes = std::min({max, GiB, freeB / 4 / MiB * MiB});
  u64 v = bytes / 16;
  u64* sink;
  CHECK(cudaMalloc(&sink, 8));
  const int reps = 5;
  std::vector<double> firstTouch, pf, afterPrefetch, steady, readMostly, hostRead;
  bool intact = true;
  unsigned g = grid(16, (double)v);
  for (int r = 0; r < reps; r++) {
    char* m;
    CHECK(cudaMallocManaged(&m, bytes, cudaMemAttachGlobal));
    std::memset(m, 0x3f, bytes);
    const auto timed = eventTimed;
    auto readAll = [&] { read_only<<<g, 256, 0, stream>>>((const ulonglong2*)m, v, 1, sink); };
    firstTouch.push_back(timed(readAll));
    prefetch(m, bytes, -1);
    CHECK(cudaStreamSynchronize(stream));
    pf.push_back(timed([&] { prefetch(m, bytes, 0); }));
    afterPrefetch.push_back(timed(readAll));
    for (int k = 0; k < 4; k++) steady.push_back(timed(readAll));
    prefetch(m, bytes, -1);
    CHECK(cudaStreamSynchronize(stream));
    advise(m, bytes, cudaMemAdviseSetReadMostly);
    readMostly.push_back(timed(readAll));
    advise(m, bytes, cudaMemAdviseUnsetReadMostly);
    write_only<<<g, 256, 0, stream>>>((ulonglong2*)m, v, 0x3f3f3f3f3f3f3f3full);
    CHECK(cudaStreamSynchronize(stream));
    launchCheck();
    auto t0 = std::chrono::steady_clock::now();
    const volatile double* u = (const double*)m;
    double acc = 0;
    for (size_t i = 0; i < bytes / 8; i += 512) acc += u[i];
    hostRead.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    intact = intact && *(const u64*)m == 0x3f3f3f3f3f3f3f3full && std::isfinite(acc);
    CHECK(cudaFree(m));
  }
  row("managed", "first-touch-by-kernel", "managed", "device", "sm", bytes, "one-way", firstTouch, (double)bytes, intact);
  row("managed", "prefetch-to-device", "managed", "device", "driver", bytes, "one-way", pf, (double)bytes, intact);
  row("managed", "first-kernel-after-prefetch", "managed", "device", "sm", bytes, "one-way", afterPrefetch, (double)bytes, intact);
  row("managed", "kernels-after-prefetch", "managed", "device", "sm", bytes, "one-way", steady, (double)bytes, intact);
  row("managed", "kernel-read-mostly", "managed", "device", "sm", bytes, "one-way", readMostly, (double)bytes, intact);
  row("managed", "host-read-back", "managed", "host", "host", bytes, "one-way", hostRead, (double)bytes, intact);
  CHECK(cudaFree(sink));
}

// ---- zero-copy (host-visible.ts zeroCopyTests) ------------------------------------------------------------------
static void zeroCopyTests(size_t max) {
  size_t bytes = std::min(max, 256 * MiB);
  u64 v = bytes / 16;
  unsigned char* m;
  CHECK(cudaHostAlloc(&m, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
  void* dm;
  CHECK(cudaHostGetDevicePointer(&dm, m, 0));
  u64* sink;
  CHECK(cudaMalloc(&sink, 8));
  std::memset(m, 0x3f, bytes);
  unsigned g = grid(16, (double)v);
  auto rd = timeDevice([&] { read_only<<<g, 256, 0, stream>>>((const ulonglong2*)dm, v, 1, sink); }, 10);
  launchCheck();
  row("zero-copy", "kernel-read", "mapped", "device", "sm", bytes, "one-way", rd, (double)bytes, m[bytes - 1] == 0x3f);
  auto wr = timeDevice([&] { write_only<<<g, 256, 0, stream>>>((ulonglong2*)dm, v, 0x4242424242424242ull); }, 10);
  launchCheck();
  CHECK(cudaStreamSynchronize(stream));
  const u64* w = (const u64*)m;
  row("zero-copy", "kernel-write", "device", "mapped", "sm", bytes, "one-way", wr, (double)bytes,
      w[0] == 0x4242424242424242ull && w[bytes / 8 - 2] == 0x4242424242424242ull);
  CHECK(cudaFreeHost(m));
  CHECK(cudaFree(sink));
}

// ---- SM copies (copies.ts, the sm-copy rows) --------------------------------------------------------------------
static void smCopyTests(size_t max) {
  std::vector<size_t> list;
  for (size_t s = 4 * KiB; s <= GiB; s *= 4)
    if (s <= max) list.push_back(s);
  if (list.empty()) return;
  size_t top = list.back();
  char *a, *b, *pinned, *mapped;
  CHECK(cudaMalloc(&a, top));
  CHECK(cudaMalloc(&b, top));
  CHECK(cudaHostAlloc(&pinned, top, cudaHostAllocPortable));
  CHECK(cudaHostAlloc(&mapped, top, cudaHostAllocPortable | cudaHostAllocMapped));
  unsigned seed = 1;
  for (size_t bytes : list) {
    u64 v = bytes / 16;
    unsigned g = grid(16, (double)v, 512);
    struct C {
      const char* direction;
      const char* src;
      const char* dst;
      char* from;
      char* to;
      bool readWrite;
    } cs[] = {
        {"HtoD", "pinned", "device", pinned, a, false},
        {"DtoH", "device", "pinned", a, pinned, false},
        {"HtoD", "mapped", "device", mapped, a, false},
        {"DtoD", "device", "device", a, b, true},
    };
    for (auto& c : cs) {
      seed = seed * 1103515245u + 12345u;
      fill_pattern<<<grid(8, (double)(bytes / 4)), 256, 0, stream>>>((unsigned*)b, bytes / 4, seed);
      CHECK(cudaMemcpyAsync(c.from, b, bytes, cudaMemcpyDefault, stream));
      CHECK(cudaMemsetAsync(c.to, 0, bytes, stream));
      auto ms = timeDevice([&] { copy_v16<<<g, 512, 0, stream>>>((ulonglong2*)c.to, (const ulonglong2*)c.from, v); }, 20);
      launchCheck();
      u64* errors;
      CHECK(cudaMalloc(&errors, 8));
      CHECK(cudaMemsetAsync(errors, 0, 8, stream));
      char* on = c.to;
      if (c.to == pinned) {
        CHECK(cudaMemcpyAsync(b, pinned, bytes, cudaMemcpyDefault, stream));
        on = b;
      }
      verify_pattern<<<grid(8, (double)(bytes / 4)), 256, 0, stream>>>((const unsigned*)on, bytes / 4, seed, errors);
      u64 bad = 1;
      CHECK(cudaMemcpy(&bad, errors, 8, cudaMemcpyDeviceToHost));
      CHECK(cudaFree(errors));
      row("sm-copy", c.direction, c.src, c.dst, "sm", bytes, c.readWrite ? "read+write" : "one-way", ms, (c.readWrite ? 2.0 : 1.0) * bytes, bad == 0);
    }
  }
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaFreeHost(mapped));
}

// ---- allocate + free latency (peer-alloc.ts allocTests; gpumem's own pool has no native counterpart) ------------
static void allocTests() {
  // gpumem's bench holds a few small allocations while it times these (a device error counter, an 8-byte pinned
  // word, a 64-byte mapped word): this does too, because a process whose only small allocation of a kind comes and
  // goes pays far more per pair (the driver maps and unmaps the chunk holding it: about 750 us against 5 us for a
  // pinned pair on an H200).
  void* held;
  CHECK(cudaMalloc(&held, 8));
  void* heldHost;
  CHECK(cudaHostAlloc(&heldHost, 8, cudaHostAllocPortable));
  void* heldMapped;
  CHECK(cudaHostAlloc(&heldMapped, 64, cudaHostAllocMapped | cudaHostAllocPortable));
  for (size_t bytes : {(size_t)512, MiB, 64 * MiB}) {
    // One row: `reps` timed runs of `pairs` allocate + free pairs each (as gpumem's loops), microseconds per pair.
    auto row = [&](const char* kind, const char* engine, int pairs, int reps, auto pair) {
      const auto ms = timeHost(
          [&] {
            for (int i = 0; i < pairs; i++) pair();
          },
          reps);
      std::vector<double> us;
      for (double t : ms) us.push_back(t * 1000 / pairs);
      latencyRow("alloc", "allocate+free", kind, engine, bytes, us, true);
    };
    row("device", "driver", 200, 10, [&] {
      void* p;
      CHECK(cudaMalloc(&p, bytes));
      CHECK(cudaFree(p));
    });
    row("device", "stream-ordered", 20000, 10, [&] {
      void* p;
      CHECK(cudaMallocAsync(&p, bytes, stream));
      CHECK(cudaFreeAsync(p, stream));
    });
    CHECK(cudaStreamSynchronize(stream));
    row("pinned", "driver", 20, 5, [&] {
      void* p;
      CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
      CHECK(cudaFreeHost(p));
    });
    row("managed", "driver", 100, 5, [&] {
      void* p;
      CHECK(cudaMallocManaged(&p, bytes, cudaMemAttachGlobal));
      CHECK(cudaFree(p));
    });
  }
  CHECK(cudaFree(held));
  CHECK(cudaFreeHost(heldHost));
  CHECK(cudaFreeHost(heldMapped));
}

int main(int argc, char** argv) {
  const size_t max = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : GiB;
  const std::string only = argc > 2 ? std::string(",") + argv[2] + "," : ",stream,cache,access,latency,managed,zero-copy,sm-copy,alloc,";
  auto want = [&](const char* t) { return only.find(std::string(",") + t + ",") != std::string::npos; };
  CHECK(cudaSetDevice(0));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int l2 = 0;
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK(cudaEventCreate(&evA));
  CHECK(cudaEventCreate(&evB));
  size_t l2b = l2 > 0 ? (size_t)l2 : 4 * MiB;
  if (want("managed")) managedTests(max);
  if (want("zero-copy")) zeroCopyTests(max);
  if (want("stream")) streamTests(max);
  if (want("cache")) cacheSweep(max, l2b);
  if (want("access")) accessTests(max);
  if (want("latency")) latencyTests(max, l2b);
  if (want("sm-copy")) smCopyTests(max);
  if (want("alloc")) allocTests();
  return 0;
}
