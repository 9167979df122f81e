// What a device backend's CUDA graphs did: the cuda backend's count of its
// units of work (each action, and each chunk's optimizer step) by how they
// ran, and the result file's metrics.cuda_graphs (docs/results.md).
#pragma once

#include <cstdint>
#include <string>

namespace ppb {

/// Units of work (actions and optimizer steps) by how they reached the
/// device, over a combination (every step: --check, warm-up and timed).
struct CudaGraphFigures {
  int64_t captured = 0;  ///< captured into a new graph (the first of its key) and launched
  int64_t replayed = 0;  ///< a graph captured earlier launched again
  int64_t rebuilt = 0;   ///< captured again because what the graph reads changed
  int64_t eager = 0;     ///< launched kernel by kernel, without a graph
  /// Why the first eager one ran eagerly ("" when none did): "--cuda-graphs
  /// off", the runtime's refusal to capture ("cudaStreamBeginCapture: <the
  /// runtime's error string>"), or what keeps the work from replaying.
  std::string eager_reason;

  friend bool operator==(const CudaGraphFigures&, const CudaGraphFigures&) = default;
};

}  // namespace ppb
