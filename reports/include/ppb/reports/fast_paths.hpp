// The fast paths of a device backend as its result records them: the
// attention (cuDNN's fused or the naive kernels), CUDA graphs and cuBLASLt
// GEMM epilogues; whether each ran and, where its work fell back to the
// slow way, why. One model for `run`'s summary and every report writer: a
// benchmark that fell back to slow kernels measures another machine, so the
// fallback is shown, never left out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ppb/pipeline/result.hpp"

namespace ppb::reports {

enum class FastPathKind : uint8_t { kAttention, kCudaGraphs, kGemmEpilogues };

/// How one fast path fared over a combination.
enum class FastPathOutcome : uint8_t {
  kRan,          ///< all of its work took the fast path
  kFellBack,     ///< some or all of its work ran the slow way
  kNotRecorded,  ///< the result file predates the field
};

/// One fast path of one result.
struct FastPath {
  FastPathKind kind = FastPathKind::kAttention;
  FastPathOutcome outcome = FastPathOutcome::kRan;
  /// What ran, with the reason where it fell back: "fused", "naive (fp32:
  /// ...)", "18 replayed, 2 captured", "2 captured, 18 replayed, 40 eager
  /// (--cuda-graphs off)", "96 fused, 8 refused (rank 1: ...)", "not recorded".
  std::string text;
};

/// "attention", "CUDA graphs", "GEMM epilogues".
const char* fast_path_name(FastPathKind kind);

/// The fast paths of a result of a device backend (its backend's traits
/// say `device`) with status ok, one per FastPathKind in order; empty for
/// other backends and other statuses.
std::vector<FastPath> fast_paths(const Result& result);

/// The same as one line for people, each fallback marked "FELL BACK":
/// "attention FELL BACK: naive (fp32: ...); CUDA graphs: 2 captured, 18
/// replayed; GEMM epilogues: 96 fused"; "" where fast_paths is empty.
std::string fast_paths_line(const Result& result);

}  // namespace ppb::reports
