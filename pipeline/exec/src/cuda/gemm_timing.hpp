// The timing of the cuda backend's GEMMs on one stream, shared by
// ppb_gemm_bench (src/tools/gemm_bench.cpp) and the GPU health probe
// (gpu_probe.hpp): one measurement, so that their figures agree.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/blas.hpp"
#include "ppb/exec/gemm_calls.hpp"

namespace ppb::cuda {

/// CUDA events on one stream: seconds per call of a piece of issued work.
class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  /// Seconds per call of `issue` (which enqueues work on the stream): the
  /// best of three rounds of `iters` calls, after two warm-up calls.
  /// REQUIRES: iters >= 1.
  template <class F>
  double per_call(int iters, F&& issue) {
    issue();
    issue();
    double best = 0;
    for (int round = 0; round < 3; ++round) {
      start();
      for (int i = 0; i < iters; ++i) issue();
      const double s = stop() / iters;
      best = round == 0 ? s : (s < best ? s : best);
    }
    return best;
  }

 private:
  void start();
  double stop();  ///< seconds since start(), after the stream reached it

  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

/// Device operands of one GemmCall in a dtype, filled with a fixed sequence
/// of values in [-1, 1) (the seed picks it); C zeroed. Freed on destruction.
class GemmOperands {
 public:
  GemmOperands(const GemmCall& call, Dtype dtype, uint32_t seed);
  ~GemmOperands();
  GemmOperands(const GemmOperands&) = delete;
  GemmOperands& operator=(const GemmOperands&) = delete;

  void* a() const { return a_; }
  void* b() const { return b_; }
  void* c() const { return c_; }

 private:
  void* a_ = nullptr;
  void* b_ = nullptr;
  void* c_ = nullptr;
};

/// Issues `call` once the way the backend does (Blas::gemm, or its
/// strided batched form when call.count > 1).
void issue_backend_gemm(Blas& blas, const GemmCall& call, Dtype dtype, const GemmOperands& ops);

/// Seconds per call of the backend's `call`: EventTimer::per_call of
/// issue_backend_gemm with `iters` calls a round.
double time_backend_gemm(Blas& blas, EventTimer& timer, const GemmCall& call, Dtype dtype,
                         const GemmOperands& ops, int iters);

}  // namespace ppb::cuda
