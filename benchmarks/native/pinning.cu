// What pinning costs in a fresh process, the floor under the first staged upload (gpu-verify, transfer group, part
// "first"). Prints one JSON line per measurement: cudaHostAlloc of the ring's 8 chunks of 8 MiB one after another and
// on 8 threads at once (is the driver's pinning serial?), single allocations of 1-8 MiB, cudaHostRegister of 64 MiB of
// memory the program has already touched, and pageable cudaMemcpyAsync of 1 GiB split over 1-8 threads.
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
static void emit(const char* what, double ms, double gbps) { printf("{\"row\":\"%s\",\"ms\":%.2f,\"gbps\":%.2f}\n", what, ms, gbps); }
int main() {
  const size_t MiB = 1 << 20, chunk = 8 * MiB, total = 1024 * MiB;
  double t = now();
  cudaFree(0);
  emit("context creation (cudaFree(0))", (now() - t) * 1e3, 0);
  char* src = (char*)malloc(total);
  memset(src, 1, total);
  char* dev = nullptr;
  if (cudaMalloc(&dev, total) != cudaSuccess) return 1;
  std::vector<void*> p(16, nullptr);
  t = now();
  for (int i = 0; i < 8; i++) cudaHostAlloc(&p[i], chunk, cudaHostAllocPortable);
  double serial = now() - t;
  emit("cudaHostAlloc 8 x 8 MiB, one after another", serial * 1e3, 64.0 * MiB / serial / 1e9);
  t = now();
  {
    std::vector<std::thread> th;
    for (int i = 8; i < 16; i++) th.emplace_back([&, i] { cudaHostAlloc(&p[i], chunk, cudaHostAllocPortable); });
    for (auto& x : th) x.join();
  }
  double par = now() - t;
  emit("cudaHostAlloc 8 x 8 MiB on 8 threads at once", par * 1e3, 64.0 * MiB / par / 1e9);
  for (int s : {1, 2, 4, 8}) {
    void* q = nullptr;
    t = now();
    cudaHostAlloc(&q, s * MiB, cudaHostAllocPortable);
    double d = now() - t;
    char what[64];
    snprintf(what, sizeof what, "cudaHostAlloc %d MiB", s);
    emit(what, d * 1e3, s * MiB / d / 1e9);
    cudaFreeHost(q);
  }
  t = now();
  cudaHostRegister(src, 64 * MiB, cudaHostRegisterPortable);
  double reg = now() - t;
  emit("cudaHostRegister 64 MiB already touched", reg * 1e3, 64.0 * MiB / reg / 1e9);
  cudaHostUnregister(src);
  for (int n : {1, 2, 4, 8}) {
    t = now();
    std::vector<std::thread> th;
    for (int i = 0; i < n; i++)
      th.emplace_back([&, i] {
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        size_t part = total / n;
        cudaMemcpyAsync(dev + i * part, src + i * part, part, cudaMemcpyHostToDevice, s);
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
      });
    for (auto& x : th) x.join();
    double d = now() - t;
    char what[64];
    snprintf(what, sizeof what, "pageable 1 GiB HtoD on %d thread(s)", n);
    emit(what, d * 1e3, total / d / 1e9);
  }
  for (void* q : p) cudaFreeHost(q);
  cudaFree(dev);
  free(src);
  return 0;
}
