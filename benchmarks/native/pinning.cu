// What pinning costs in a fresh process, the floor under the first staged upload (gpu-verify, transfer group, part
// "first"). Prints one JSON line per measurement: cudaHostAlloc of the ring's 8 chunks of 8 MiB one after another and
// on 8 threads at once (is the driver's pinning serial?), single allocations of 1-8 MiB, cudaHostRegister of 64 MiB of
// memory the program has already touched, and pageable cudaMemcpyAsync of 1 GiB split over 1-8 threads. Then what
// pinning is made of: faulting in 64 MiB of fresh memory (4 KiB pages, and 2 MiB pages where transparent huge pages
// are allowed on request) and cudaHostRegister of that memory once it is touched.
#include <cuda_runtime.h>
#include <sys/mman.h>
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
  for (int huge = 0; huge < 2; huge++) {
    const size_t n = 64 * MiB, align = 2 * MiB;
    char* raw = (char*)mmap(nullptr, n + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) continue;
    char* q = (char*)(((unsigned long)raw + align - 1) & ~(unsigned long)(align - 1));
    madvise(q, n, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    t = now();
    memset(q, 1, n);
    double touch = now() - t;
    emit(huge ? "touch 64 MiB of fresh memory, MADV_HUGEPAGE" : "touch 64 MiB of fresh memory, 4 KiB pages", touch * 1e3, n / touch / 1e9);
    t = now();
    cudaError_t e = cudaHostRegister(q, n, cudaHostRegisterPortable);
    double r = now() - t;
    if (e == cudaSuccess) emit(huge ? "cudaHostRegister of those 64 MiB (MADV_HUGEPAGE)" : "cudaHostRegister of those 64 MiB (4 KiB pages)", r * 1e3, n / r / 1e9);
    if (e == cudaSuccess) cudaHostUnregister(q);
    munmap(raw, n + align);
  }
  for (void* q : p) cudaFreeHost(q);
  cudaFree(dev);
  free(src);
  return 0;
}
