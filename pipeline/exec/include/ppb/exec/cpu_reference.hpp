// The single-process reference of one training step, against which
// `pipebench run --check` compares a pipelined run.
#pragma once

#include <vector>

#include "ppb/exec/cpu_model.hpp"
#include "ppb/pipeline/model.hpp"

namespace ppb {

/// Loss and gradients of one step of the whole model in one process.
struct ReferenceStep {
  double loss = 0;  ///< mean over the micro-batches of their mean token loss
  /// Per unit of expand_units(spec), in unit order, flattened in the tensor
  /// order of CpuChunk::param_views() (empty for attention units).
  std::vector<std::vector<float>> grads;
};

/// One CpuChunk over all units; forward + backward of micro-batches
/// 0..microbatches-1 with loss_scale = 1/microbatches (options.loss_scale
/// and options.weight_stashing are ignored; the seed is used), so the
/// gradients are those of the batch-mean loss. No sgd step.
/// REQUIRES: microbatches >= 1.
ReferenceStep reference_step(const ModelSpec& spec, int microbatches,
                             const CpuModelOptions& options);

/// The --check metric: max|a-b| / max(max|b|, 1e-30) over the elements
/// (b is the reference). 0 for two empty spans. REQUIRES: equal sizes.
double max_relative_error(std::span<const float> a, std::span<const float> b);

}  // namespace ppb
