// The managed rows of memory.cu launched two ways in one process, alternating per repeat: the kernel compiled by nvcc
// and launched with <<<>>> (as memory.cu does), and the same kernel text compiled to a CUBIN, loaded with
// cuModuleLoadData and launched with cuLaunchKernel (as gpumem loads and launches what NVRTC compiles). Everything else is memory.cu's sequence: the
// CPU fills 1 GiB of managed memory, a kernel reads it, prefetch to the host, prefetch to the device, the first
// kernel after it, four more. If the two ways differ, the way gpumem loads and launches kernels is the cause of its
// managed rows trailing memory.cu's; if not, the cause is elsewhere in the process.
//
//   nvcc -cubin -arch=sm_90 -o /tmp/k/bench-kernels.cubin -x cu /tmp/k/bench-kernels.cuh
//   nvcc -O2 -arch=sm_90 -I/tmp/k -o /tmp/ml benchmarks/native/managed-launch.cu -ldl
// (the driver functions come from libcuda.so.1 through dlopen, as gpumem finds them)
//   /tmp/ml /tmp/k/bench-kernels.cubin [MAX_BYTES] [REPEATS]
#include "check.h"
#include <cuda.h>
#include <dlfcn.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench-kernels.cuh"

typedef unsigned long long u64;

#define CU(x)                                                                \
  do {                                                                       \
    CUresult r_ = (x);                                                       \
    if (r_ != CUDA_SUCCESS) {                                                \
      fprintf(stderr, "%s:%d %s: CUresult %d\n", __FILE__, __LINE__, #x, r_); \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

typedef CUresult (*ModuleLoadData)(CUmodule*, const void*);
typedef CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char*);
typedef CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**, void**);

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: managed-launch KERNELS.cubin [MAX_BYTES] [REPEATS]\n");
    return 2;
  }
  std::ifstream f(argv[1], std::ios::binary);
  std::stringstream text;
  text << f.rdbuf();
  const std::string cubin = text.str();
  size_t bytes = argc > 2 ? strtoull(argv[2], nullptr, 10) : (1ull << 30);
  const int repeats = argc > 3 ? atoi(argv[3]) : 5;
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(0));
  int sms = 1;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  size_t freeB, totalB;
  CHECK(cudaMemGetInfo(&freeB, &totalB));
  bytes = std::min(bytes, freeB / 4 / (1 << 20) * (1 << 20));

  void* driver = dlopen("libcuda.so.1", RTLD_NOW);
  if (!driver) {
    fprintf(stderr, "managed-launch: %s\n", dlerror());
    return 1;
  }
  auto cuModuleLoadData = (ModuleLoadData)dlsym(driver, "cuModuleLoadData");
  auto cuModuleGetFunction = (ModuleGetFunction)dlsym(driver, "cuModuleGetFunction");
  auto cuLaunchKernel = (LaunchKernel)dlsym(driver, "cuLaunchKernel");
  CUmodule mod;
  CU(cuModuleLoadData(&mod, cubin.data()));  // the primary context is current (cudaFree(0) above)
  CUfunction readOnly;
  CU(cuModuleGetFunction(&readOnly, mod, "read_only"));

  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  u64* sink;
  CHECK(cudaMalloc(&sink, 8));
  u64 v = bytes / 16;
  unsigned g = (unsigned)std::max(1.0, std::min((double)sms * 16, std::ceil((double)v / 256)));

  auto prefetch = [&](void* p, int device) {
    cudaMemLocation loc{};
    loc.type = device < 0 ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    loc.id = device < 0 ? 0 : device;
    CHECK(cudaMemPrefetchAsync(p, bytes, loc, 0, stream));
  };
  const char* ways[] = {"runtime <<<>>>", "cubin + cuModuleLoadData + cuLaunchKernel"};
  std::vector<double> first[2], after[2], steady[2];
  for (int r = 0; r < repeats; r++) {
    for (int w = 0; w < 2; w++) {
      char* m;
      CHECK(cudaMallocManaged(&m, bytes, cudaMemAttachGlobal));
      std::memset(m, 0x3f, bytes);
      u64 one = 1;
      void* args[] = {&m, &v, &one, &sink};
      auto readAll = [&] {
        if (w == 0) read_only<<<g, 256, 0, stream>>>((const ulonglong2*)m, v, 1, sink);
        else CU(cuLaunchKernel(readOnly, g, 1, 1, 256, 1, 1, 0, (CUstream)stream, args, nullptr));
      };
      auto timed = [&](auto op) {
        CHECK(cudaEventRecord(a, stream));
        op();
        CHECK(cudaEventRecord(b, stream));
        CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        return bytes / (ms * 1e6);
      };
      first[w].push_back(timed(readAll));
      prefetch(m, -1);
      CHECK(cudaStreamSynchronize(stream));
      timed([&] { prefetch(m, 0); });
      after[w].push_back(timed(readAll));
      for (int k = 0; k < 4; k++) steady[w].push_back(timed(readAll));
      CHECK(cudaFree(m));
    }
  }
  for (int w = 0; w < 2; w++) {
    printf("{\"way\":\"%s\",\"bytes\":%zu,\"repeats\":%d,\"firstTouchGBps\":%.1f,\"firstKernelAfterPrefetchGBps\":%.1f,"
           "\"kernelsAfterPrefetchGBps\":%.1f,\"firstKernelAfterPrefetchRange\":[%.1f,%.1f]}\n",
           ways[w], bytes, repeats, median(first[w]), median(after[w]), median(steady[w]),
           *std::min_element(after[w].begin(), after[w].end()), *std::max_element(after[w].begin(), after[w].end()));
  }
  return 0;
}
