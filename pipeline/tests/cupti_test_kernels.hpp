// Test kernels of cupti_collector_test (cupti_test_kernels.cu).
#pragma once

#include <cuda_runtime_api.h>

/// A 1-thread kernel named ppb_test_spin that spins `cycles` SM clock cycles.
void ppb_test_launch_spin(cudaStream_t stream, long long cycles);
/// An empty kernel whose name starts with "ncclDevKernel_".
void ppb_test_launch_fake_nccl(cudaStream_t stream);
