// What a device backend's cuBLASLt GEMM epilogues did: the GEMMs that ran
// with their bias, bias + GeLU or bias gradient folded in, and those
// cuBLASLt refused (computed by separate kernels instead), as the result
// file's metrics.gemm_epilogues records them (docs/result-schema.md).
#pragma once

#include <cstdint>
#include <string>

namespace ppb {

/// A device backend's fused GEMMs over a combination (every step: --check,
/// warm-up and timed, as CudaGraphFigures), summed over the ranks.
struct GemmEpilogueFigures {
  int64_t fused = 0;    ///< GEMMs that ran with their epilogue in cuBLASLt (JSON epilogue_gemms)
  int64_t refused = 0;  ///< GEMMs cuBLASLt refused: their epilogue ran as separate kernels
  /// The first refusal of the lowest rank that had one ("" when none was
  /// refused): "rank R: <epilogue> GEMM m x n x k <dtype>: <cuBLASLt's answer>".
  std::string first_refusal;

  friend bool operator==(const GemmEpilogueFigures&, const GemmEpilogueFigures&) = default;
};

}  // namespace ppb
