// gpumem's native comparison for the transfer engine: the same transfers as `gpumem bench --only transfer`, written
// directly against the CUDA runtime in C++, timed the same way (host clock from the call until the data has arrived).
//   pageable upload / download: cudaMemcpy from pageable memory; register + copy + unregister; staged through a ring
//     of pinned chunks filled (drained) by T OpenMP threads while the copy engine moves the chunk before
//   host copies alone: pageable into pinned memory on T threads
//   1000 copies of 64 KiB from pinned memory: one by one, one CUDA graph, one cudaMemcpyBatchAsync, one large copy
//   a chain of 100 small operations: one by one and as one graph (microseconds per operation)
//   programs (transfer-programs.h): 256 x 4 MiB, 4096 x 64 KiB and 16384 x 16 KiB separate arrays staged (up, and
//     down as one list), the first staged upload of the process, a file to the device through the ring (pread,
//     buffered and O_DIRECT) and through cuFile
// Prints one JSON object per measurement and repeat. Build and run (benchmarks/gpu-verify.sh does both; add
// -DHAVE_CUFILE -lcufile where cufile.h is installed):
//   nvcc -O2 -arch=sm_90 -Xcompiler -fopenmp -o /tmp/gpumem-native-transfer benchmarks/native/transfer.cu
//   /tmp/gpumem-native-transfer [bytes] [repeats] [parts: all, or a comma list of first,shapes,many,file,host,batch,chain]
// "first" measures the process's first staged upload: run it alone, in a fresh process.
#include <cuda_runtime.h>
#include "check.h"
#include <omp.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>


static double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

static void emit(const char* row, size_t bytes, double secs, int threads = 0, size_t chunk = 0) {
  std::printf("{\"row\":\"%s\",\"bytes\":%zu,\"threads\":%d,\"chunkBytes\":%zu,\"gbps\":%.4f}\n", row, bytes, threads, chunk, bytes / secs / 1e9);
  std::fflush(stdout);
}

static void emit_us(const char* row, double us_per_op) {
  std::printf("{\"row\":\"%s\",\"us\":%.4f}\n", row, us_per_op);
  std::fflush(stdout);
}

// memcpy split into page-aligned parts over `threads` OpenMP threads.
static void parallel_copy(char* dst, const char* src, size_t n, int threads) {
  if (threads <= 1) {
    std::memcpy(dst, src, n);
    return;
  }
  size_t per = ((n + threads - 1) / threads + 4095) / 4096 * 4096;
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int t = 0; t < threads; t++) {
    size_t off = (size_t)t * per;
    if (off < n) std::memcpy(dst + off, src + off, off + per > n ? n - off : per);
  }
}

struct Ring {
  char* pinned;
  std::vector<cudaEvent_t> ev;
  size_t chunk;
  int depth;
  Ring(size_t c, int d) : chunk(c), depth(d), ev(d) {
    CHECK(cudaHostAlloc(&pinned, c * d, cudaHostAllocDefault));
    for (auto& e : ev) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  ~Ring() {
    for (auto& e : ev) cudaEventDestroy(e);
    cudaFreeHost(pinned);
  }
};

// Upload: fill chunk k on the threads once its slot's previous copy has finished, then enqueue its copy.
static void staged_upload(char* dev, const char* host, size_t n, Ring& r, int threads, cudaStream_t s) {
  size_t chunks = (n + r.chunk - 1) / r.chunk;
  for (size_t k = 0; k < chunks; k++) {
    int slot = k % r.depth;
    size_t off = k * r.chunk, len = off + r.chunk > n ? n - off : r.chunk;
    if (k >= (size_t)r.depth) CHECK(cudaEventSynchronize(r.ev[slot]));
    parallel_copy(r.pinned + slot * r.chunk, host + off, len, threads);
    CHECK(cudaMemcpyAsync(dev + off, r.pinned + slot * r.chunk, len, cudaMemcpyHostToDevice, s));
    CHECK(cudaEventRecord(r.ev[slot], s));
  }
  CHECK(cudaStreamSynchronize(s));
}

// Download: enqueue chunk copies up to the ring's depth ahead, drain each on the threads once it has arrived.
static void staged_download(char* host, const char* dev, size_t n, Ring& r, int threads, cudaStream_t s) {
  size_t chunks = (n + r.chunk - 1) / r.chunk;
  size_t issued = 0;
  for (size_t k = 0; k < chunks; k++) {
    while (issued < chunks && issued < k + r.depth) {
      int slot = issued % r.depth;
      size_t off = issued * r.chunk, len = off + r.chunk > n ? n - off : r.chunk;
      CHECK(cudaMemcpyAsync(r.pinned + slot * r.chunk, dev + off, len, cudaMemcpyDeviceToHost, s));
      CHECK(cudaEventRecord(r.ev[slot], s));
      issued++;
    }
    int slot = k % r.depth;
    size_t off = k * r.chunk, len = off + r.chunk > n ? n - off : r.chunk;
    CHECK(cudaEventSynchronize(r.ev[slot]));
    parallel_copy(host + off, r.pinned + slot * r.chunk, len, threads);
  }
}

#include "transfer-programs.h"

static void shape_rows(char* dev, char* host, char* back, size_t N, int reps, int depth, int cores, int dflt, cudaStream_t s);
static void host_rows(char* host, size_t N, int reps, int cores);
static void batch_rows(char* dev, int reps, cudaStream_t s);
static void chain_rows(int reps, cudaStream_t s);

int main(int argc, char** argv) {
  size_t N = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (1ull << 30);
  int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  std::string parts = argc > 3 ? argv[3] : "all";
  auto want = [&](const char* p) { return parts == "all" || ("," + parts + ",").find(std::string(",") + p + ",") != std::string::npos; };
  const int depth = 8;  // as gpumem's default ring
  char* host = (char*)std::malloc(N);
  char* back = (char*)std::malloc(N);
  for (size_t i = 0; i < N; i += 4096) host[i] = (char)i;
  std::memset(back, 0, N);
  char* dev;
  CHECK(cudaMalloc(&dev, N));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int cores = omp_get_num_procs();
  // gpumem's default thread count: all cores but a quarter, at most 12.
  int dflt = cores - (cores / 4 > 1 ? cores / 4 : 1);
  if (dflt > 12) dflt = 12;
  if (dflt < 1) dflt = 1;
  if (want("first")) first_row(dev, host, N, dflt, s);  // before anything else has warmed the process
  CHECK(cudaMemcpy(dev, host, N, cudaMemcpyHostToDevice));
  if (want("many")) {
    many_rows(dev, N / (4 << 20), 4 << 20, dflt, reps, s);
    many_rows(dev, N / (256 << 10), 64 << 10, dflt, reps, s);
    many_rows(dev, N / (64 << 10), 16 << 10, dflt, reps, s, false);  // 16384 x 16 KiB: the lists only
  }
  if (want("file")) file_rows(dev, host, N, dflt, reps, s);
  if (want("shapes")) shape_rows(dev, host, back, N, reps, depth, cores, dflt, s);
  if (want("host")) host_rows(host, N, reps, cores);
  if (want("batch")) batch_rows(dev, reps, s);
  if (want("chain")) chain_rows(reps, s);
  return 0;
}

static void shape_rows(char* dev, char* host, char* back, size_t N, int reps, int depth, int cores, int dflt, cudaStream_t s) {
  for (int r = 0; r <= reps; r++) {  // the first run of each measurement is a warm-up, not printed
    double t = seconds();
    CHECK(cudaMemcpy(dev, host, N, cudaMemcpyHostToDevice));
    if (r) emit("HtoD pageable runtime-direct", N, seconds() - t);
  }
  for (int r = 0; r <= reps; r++) {
    double t = seconds();
    CHECK(cudaHostRegister(host, N, cudaHostRegisterDefault));
    CHECK(cudaMemcpy(dev, host, N, cudaMemcpyHostToDevice));
    CHECK(cudaHostUnregister(host));
    if (r) emit("HtoD pageable register+copy+unregister", N, seconds() - t);
  }
  const size_t MiB = 1ull << 20;
  struct Shape { int threads; size_t chunk; };
  std::vector<Shape> shapes;
  for (int t : {1, 2, 4, 8, 12, 16}) if (t <= cores) shapes.push_back({t, 8 * MiB});
  for (size_t c : {4 * MiB, 16 * MiB, 32 * MiB}) shapes.push_back({dflt, c});
  for (auto sh : shapes) {
    Ring ring(sh.chunk, depth);
    for (int r = 0; r <= reps; r++) {
      double t = seconds();
      staged_upload(dev, host, N, ring, sh.threads, s);
      if (r) emit("HtoD pageable staged", N, seconds() - t, sh.threads, sh.chunk);
    }
    for (int r = 0; r <= reps; r++) {
      double t = seconds();
      staged_download(back, dev, N, ring, sh.threads, s);
      if (r) emit("DtoH pageable staged", N, seconds() - t, sh.threads, sh.chunk);
    }
  }
  if (std::memcmp(back, host, N) != 0) std::fprintf(stderr, "staged download: data differs\n");
  for (int r = 0; r <= reps; r++) {
    double t = seconds();
    CHECK(cudaMemcpy(back, dev, N, cudaMemcpyDeviceToHost));
    if (r) emit("DtoH pageable runtime-direct", N, seconds() - t);
  }
}

static void host_rows(char* host, size_t N, int reps, int cores) {
  const size_t MiB = 1ull << 20;
  {
    size_t n = N < 256 * MiB ? N : 256 * MiB;
    char* pinned;
    CHECK(cudaHostAlloc(&pinned, n, cudaHostAllocDefault));
    for (int t : {1, 2, 4, 8, 12}) {
      if (t > cores) continue;
      for (int r = 0; r <= reps; r++) {
        double t0 = seconds();
        parallel_copy(pinned, host, n, t);
        if (r) emit("HtoH pageable->pinned host-threads", n, seconds() - t0, t);
      }
    }
    cudaFreeHost(pinned);
  }
}

static void batch_rows(char* dev, int reps, cudaStream_t s) {
  // 1000 copies of 64 KiB from pinned memory.
  const int K = 1000;
  const size_t S = 64 << 10;
  char* pin;
  CHECK(cudaHostAlloc(&pin, K * S, cudaHostAllocDefault));
  std::memset(pin, 7, K * S);
  auto timed = [&](const char* row, auto op) {
    for (int r = 0; r < reps + 2; r++) {
      double t = seconds();
      op();
      CHECK(cudaStreamSynchronize(s));
      if (r >= 2) emit(row, K * S, seconds() - t);
    }
  };
  timed("HtoD-small pinned one-by-one", [&] {
    for (int i = 0; i < K; i++) CHECK(cudaMemcpyAsync(dev + i * S, pin + i * S, S, cudaMemcpyHostToDevice, s));
  });
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < K; i++) CHECK(cudaMemcpyAsync(dev + i * S, pin + i * S, S, cudaMemcpyHostToDevice, s));
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiateWithFlags(&ge, g, 0));
  timed("HtoD-small pinned graph", [&] { CHECK(cudaGraphLaunch(ge, s)); });
#if CUDART_VERSION >= 12080
  std::vector<void*> dsts(K), srcs(K);
  std::vector<size_t> sizes(K, S);
  for (int i = 0; i < K; i++) {
    dsts[i] = dev + i * S;
    srcs[i] = pin + i * S;
  }
  cudaMemcpyAttributes attr;
  std::memset(&attr, 0, sizeof attr);
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attr.srcLocHint.type = cudaMemLocationTypeHost;
  attr.dstLocHint.type = cudaMemLocationTypeDevice;
  size_t first = 0;
  timed("HtoD-small pinned batch", [&] {
#if CUDART_VERSION >= 13000
    CHECK(cudaMemcpyBatchAsync(dsts.data(), (const void**)srcs.data(), sizes.data(), K, &attr, &first, 1, s));
#else
    size_t fail = 0;
    CHECK(cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), K, &attr, &first, 1, &fail, s));
#endif
  });
#endif
  timed("HtoD-small pinned single-copy", [&] { CHECK(cudaMemcpyAsync(dev, pin, K * S, cudaMemcpyHostToDevice, s)); });
}

static void chain_rows(int reps, cudaStream_t s) {
  // A chain of 100 small operations: fills and copies of 4 KiB, alternating.
  const int C = 100;
  char *a, *b;
  CHECK(cudaMalloc(&a, 4096));
  CHECK(cudaMalloc(&b, 4096));
  auto chain = [&](cudaStream_t on) {
    for (int i = 0; i < C; i++) {
      if (i % 2 == 0) CHECK(cudaMemsetAsync(a, i & 0xff, 4096, on));
      else CHECK(cudaMemcpyAsync(b, a, 4096, cudaMemcpyDeviceToDevice, on));
    }
  };
  int chainReps = reps * 6;
  for (int r = 0; r < chainReps + 3; r++) {
    double t = seconds();
    chain(s);
    CHECK(cudaStreamSynchronize(s));
    if (r >= 3) emit_us("chain-100 one-by-one", (seconds() - t) * 1e6 / C);
  }
  cudaGraph_t cg;
  cudaGraphExec_t cge;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  chain(s);
  CHECK(cudaStreamEndCapture(s, &cg));
  CHECK(cudaGraphInstantiateWithFlags(&cge, cg, 0));
  for (int r = 0; r < chainReps + 3; r++) {
    double t = seconds();
    CHECK(cudaGraphLaunch(cge, s));
    CHECK(cudaStreamSynchronize(s));
    if (r >= 3) emit_us("chain-100 graph", (seconds() - t) * 1e6 / C);
  }
}
