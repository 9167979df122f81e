// Kernels for cupti_collector_test: one that keeps an SM busy for a given
// number of clock cycles, and one named like NCCL's (so the collector's
// classification by demangled name is tested on a real CUDA symbol).
#include "cupti_test_kernels.hpp"

// At global scope: CUPTI reports "ncclDevKernel_TestFake(int)", where an
// anonymous namespace would prefix "(anonymous namespace)::".
static __global__ void ppb_test_spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

static __global__ void ncclDevKernel_TestFake(int /*unused*/) {}

void ppb_test_launch_spin(cudaStream_t stream, long long cycles) {
  ppb_test_spin<<<1, 1, 0, stream>>>(cycles);
}

void ppb_test_launch_fake_nccl(cudaStream_t stream) {
  ncclDevKernel_TestFake<<<1, 1, 0, stream>>>(0);
}
