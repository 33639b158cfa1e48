// What gpumem's native comparison programs share: stop at the first failed CUDA call, naming it and the line.
#pragma once
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                                   \
  do {                                                                                                \
    cudaError_t e_ = (call);                                                                          \
    if (e_ != cudaSuccess) {                                                                          \
      std::fprintf(stderr, "%s failed: %s (line %d)\n", #call, cudaGetErrorString(e_), __LINE__);    \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)
