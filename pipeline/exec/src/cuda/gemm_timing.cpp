#include "cuda/gemm_timing.hpp"

#include <cstring>
#include <vector>

#include "ppb/exec/cuda_device.hpp"

namespace ppb::cuda {

EventTimer::EventTimer(cudaStream_t stream) : stream_(stream) {
  PPB_CUDA_CHECK(cudaEventCreate(&start_));
  PPB_CUDA_CHECK(cudaEventCreate(&stop_));
}

EventTimer::~EventTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}

void EventTimer::start() { PPB_CUDA_CHECK(cudaEventRecord(start_, stream_)); }

double EventTimer::stop() {
  PPB_CUDA_CHECK(cudaEventRecord(stop_, stream_));
  PPB_CUDA_CHECK(cudaEventSynchronize(stop_));
  float ms = 0;
  PPB_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return static_cast<double>(ms) * 1e-3;
}

namespace {

// Values in [-1, 1) (a fixed sequence), in the dtype, copied to `device`.
void fill(void* device, int64_t elements, Dtype dtype, uint32_t seed) {
  std::vector<float> host(static_cast<size_t>(elements));
  uint32_t x = seed * 2654435761U + 1;
  for (float& v : host) {
    x = x * 1664525U + 1013904223U;
    v = static_cast<float>(x >> 8) / static_cast<float>(1U << 23) - 1.0f;
  }
  if (dtype == Dtype::kFp32) {
    PPB_CUDA_CHECK(cudaMemcpy(device, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
    return;
  }
  std::vector<uint16_t> bf(host.size());
  for (size_t i = 0; i < host.size(); ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &host[i], 4);
    bf[i] = static_cast<uint16_t>((bits + 0x7FFFU + ((bits >> 16) & 1U)) >> 16);  // nearest even
  }
  PPB_CUDA_CHECK(cudaMemcpy(device, bf.data(), bf.size() * 2, cudaMemcpyHostToDevice));
}

}  // namespace

GemmOperands::GemmOperands(const GemmCall& g, Dtype dtype, uint32_t seed) {
  const int64_t eb = dtype_bytes(dtype);
  const int64_t cb = g.c_fp32 ? 4 : eb;
  PPB_CUDA_CHECK(cudaMalloc(&a_, static_cast<size_t>(g.a_elements() * eb)));
  PPB_CUDA_CHECK(cudaMalloc(&b_, static_cast<size_t>(g.b_elements() * eb)));
  PPB_CUDA_CHECK(cudaMalloc(&c_, static_cast<size_t>(g.c_elements() * cb)));
  fill(a_, g.a_elements(), dtype, seed);
  fill(b_, g.b_elements(), dtype, seed + 1);
  PPB_CUDA_CHECK(cudaMemset(c_, 0, static_cast<size_t>(g.c_elements() * cb)));
  // The copies and the memset ran on the legacy default stream, which a
  // non-blocking stream timing the GEMMs does not wait for (and a pageable
  // copy may return before its DMA lands): done before any is timed.
  PPB_CUDA_CHECK(cudaDeviceSynchronize());
}

GemmOperands::~GemmOperands() {
  cudaFree(c_);
  cudaFree(b_);
  cudaFree(a_);
}

void issue_backend_gemm(Blas& blas, const GemmCall& g, Dtype dtype, const GemmOperands& ops) {
  const Dtype ct = g.c_fp32 ? Dtype::kFp32 : dtype;
  const Operand oa{ops.a(), g.lda, g.stride_a};
  const Operand ob{ops.b(), g.ldb, g.stride_b};
  if (g.count > 1) {
    blas.gemm_batched(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, oa, ob, dtype, g.beta, ops.c(),
                      g.ldc, g.stride_c, ct, g.count);
  } else {
    blas.gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, oa, ob, dtype, g.beta, ops.c(), g.ldc,
              ct);
  }
}

double time_backend_gemm(Blas& blas, EventTimer& timer, const GemmCall& g, Dtype dtype,
                         const GemmOperands& ops, int iters) {
  return timer.per_call(iters, [&] { issue_backend_gemm(blas, g, dtype, ops); });
}

}  // namespace ppb::cuda
