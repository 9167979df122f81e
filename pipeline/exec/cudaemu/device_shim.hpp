// What nvcc provides to device code, for compiling the cuda backend's
// kernels as host code (twins.cpp): the execution-space keywords vanish,
// __shared__ memory is per OS thread (the emulator runs one block at a time
// on a thread, its threads fibers of that thread), and the built-in
// variables, the barriers, the warp shuffle and the atomics come from the
// emulator. Included before any CUDA header, so that the toolkit's own host
// definitions of the keywords stand aside.
#pragma once

// NOLINTBEGIN(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,cppcoreguidelines-macro-usage,readability-identifier-naming)
#define __global__
#define __device__
#define __host__
#define __shared__ static thread_local
// Device code that differs here says so (the tensor-core mma, dynamic
// shared memory: flash_device.cuh).
#define PPB_CUDAEMU_TWINS 1

#include <cuda_runtime_api.h>

#include <atomic>

#include "emu.hpp"

#define threadIdx (::ppb::cudaemu::thread_state().thread_idx)
#define blockIdx (::ppb::cudaemu::thread_state().block_idx)
#define blockDim (::ppb::cudaemu::thread_state().block_dim)
#define gridDim (::ppb::cudaemu::thread_state().grid_dim)

inline void __syncthreads() { ::ppb::cudaemu::syncthreads(); }
inline void __syncwarp(unsigned /*mask*/ = 0xffffffffu) { ::ppb::cudaemu::syncwarp(); }
inline float __shfl_xor_sync(unsigned /*mask*/, float v, int lane_mask) {
  return ::ppb::cudaemu::shfl_xor(v, lane_mask);
}

inline float atomicAdd(float* address, float value) {
  return std::atomic_ref<float>(*address).fetch_add(value);
}
inline double atomicAdd(double* address, double value) {
  return std::atomic_ref<double>(*address).fetch_add(value);
}
// NOLINTEND(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,cppcoreguidelines-macro-usage,readability-identifier-naming)
