// gpumem's native comparison for the copy rows of `gpumem bench`: host-to-device and device-to-host copies from
// pinned and pageable memory, and device-to-device copies, from 4 KiB to 1 GiB, timed as gpumem times them: three
// warm-up copies waited for on this thread, then per repeat one event before and one after the copy on a
// non-blocking stream, the end event waited for on this thread. GB = 1e9 bytes; device-to-device counts read + write.
// Prints one JSON object per row with every repeat's GB/s. Build and run (benchmarks/gpu-verify.sh does both):
//   nvcc -O2 -arch=sm_90 -o /tmp/gpumem-native-bandwidth benchmarks/native/bandwidth.cu && /tmp/gpumem-native-bandwidth
#include <cuda_runtime.h>
#include "check.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>


int main(int argc, char** argv) {
  const size_t maxBytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (1ull << 30);
  std::vector<size_t> sizes;
  for (size_t n = 4096; n <= maxBytes; n *= 4) sizes.push_back(n);
  char *dev, *dev2, *pinned, *pageable;
  CHECK(cudaMalloc(&dev, maxBytes));
  CHECK(cudaMalloc(&dev2, maxBytes));
  CHECK(cudaHostAlloc(&pinned, maxBytes, cudaHostAllocPortable));
  pageable = (char*)std::malloc(maxBytes);
  std::memset(pageable, 1, maxBytes);
  std::memset(pinned, 1, maxBytes);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  struct Case {
    const char* direction;
    const char* kind;
    cudaMemcpyKind copyKind;
    bool pageableHost;
  };
  const Case cases[] = {
      {"HtoD", "pinned", cudaMemcpyHostToDevice, false},
      {"DtoH", "pinned", cudaMemcpyDeviceToHost, false},
      {"HtoD", "pageable", cudaMemcpyHostToDevice, true},
      {"DtoH", "pageable", cudaMemcpyDeviceToHost, true},
      {"DtoD", "device", cudaMemcpyDeviceToDevice, false},
  };
  for (size_t n : sizes) {
    for (const Case& c : cases) {
      char* host = c.pageableHost ? pageable : pinned;
      char* dst = c.copyKind == cudaMemcpyHostToDevice ? dev : c.copyKind == cudaMemcpyDeviceToHost ? host : dev2;
      const char* src = c.copyKind == cudaMemcpyHostToDevice ? host : dev;
      const int reps = c.pageableHost ? 10 : 20;
      for (int i = 0; i < 3; i++) CHECK(cudaMemcpyAsync(dst, src, n, c.copyKind, s));
      CHECK(cudaStreamSynchronize(s));
      std::printf("{\"direction\":\"%s\",\"kind\":\"%s\",\"bytes\":%zu,\"counted\":\"%s\",\"gbps\":[", c.direction, c.kind, n,
                  c.copyKind == cudaMemcpyDeviceToDevice ? "read+write" : "one-way");
      for (int r = 0; r < reps; r++) {
        CHECK(cudaEventRecord(a, s));
        CHECK(cudaMemcpyAsync(dst, src, n, c.copyKind, s));
        CHECK(cudaEventRecord(b, s));
        CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        double counted = c.copyKind == cudaMemcpyDeviceToDevice ? 2.0 * n : (double)n;
        std::printf("%s%.4f", r ? "," : "", counted / (ms * 1e-3) / 1e9);
      }
      std::printf("]}\n");
      std::fflush(stdout);
    }
  }
  return 0;
}
