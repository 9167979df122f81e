// The GEMMs the cuda backend issues for one micro-batch of one unit, as
// cuBLAS sees them: shapes, transposes, leading dimensions, batch strides,
// scaling and the output's type. `ppb_gemm_bench` times them through the
// backend's own call and against cuBLAS alone on the same shapes; the
// tests tie their flops (2 m n k x batch x repeat) to the cost model's GEMM
// flops of every unit and pass (model.hpp), so the benchmark measures the
// shapes the pipeline runs. Host-only: no CUDA needed to list them.
//
// Example:
//   for (const ppb::GemmCall& g : ppb::cuda_gemm_calls(spec, ppb::UnitKind::kQkv))
//     std::printf("%s %d x %d x %d\n", g.name.c_str(), g.m, g.n, g.k);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ppb/pipeline/model.hpp"

namespace ppb {

/// Which pass of a unit issues the GEMM.
enum class GemmPass : uint8_t {
  kForward,     ///< F
  kInputGrad,   ///< B or I: the unit's input gradient
  kWeightGrad,  ///< B or W: the unit's weight gradient
};

/// "F", "I", "W".
const char* gemm_pass_name(GemmPass pass);

/// One row-major GEMM (cuda::Blas semantics): C[m,n] = alpha op(A) op(B) +
/// beta C, A and B in the storage dtype, C in it or fp32.
struct GemmCall {
  std::string name;  ///< "qkv.F", "attention.I.dq"
  UnitKind unit = UnitKind::kQkv;
  GemmPass pass = GemmPass::kForward;
  bool trans_a = false;
  bool trans_b = false;
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;  ///< row-major leading dimensions
  /// Batched (count > 1): elements between consecutive matrices.
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int count = 1;   ///< matrices per call (cublasGemmStridedBatchedEx when > 1)
  int repeat = 1;  ///< calls per micro-batch (attention: one per sample)
  float alpha = 1;
  float beta = 0;
  bool c_fp32 = false;  ///< C is fp32 whatever the storage dtype (weight gradients)

  /// Flops per micro-batch: 2 m n k x count x repeat.
  double flops() const;
  /// Elements each operand spans from its first element (for allocation).
  int64_t a_elements() const;
  int64_t b_elements() const;
  int64_t c_elements() const;
};

/// The GEMMs of `unit` for one micro-batch, in issue order (empty for the
/// units without one: embedding, LayerNorms).
std::vector<GemmCall> cuda_gemm_calls(const ModelSpec& spec, UnitKind unit);

/// Those of one transformer layer and the head: every distinct GEMM shape a
/// pipeline of `spec` runs (the layers repeat the same ones).
std::vector<GemmCall> cuda_gemm_calls(const ModelSpec& spec);

}  // namespace ppb
