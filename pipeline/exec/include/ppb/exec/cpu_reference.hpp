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

/// The global batch of data parallelism (data_parallel.hpp) as D replicas
/// form it: each replica's M micro-batches (d x M .. d x M + M - 1)
/// accumulated in order, as a pipeline stage accumulates them, then the D
/// partial sums added in replica order. With D = 2 any all-reduce's sum of
/// the two partials is this one bit for bit (fp32 addition commutes); with D
/// > 2 the all-reduce may add them in another order. The loss is the mean
/// over the D x M micro-batches in order, as reference_step(). replicas == 1
/// is reference_step(). REQUIRES: microbatches, replicas >= 1.
ReferenceStep reference_step_replicas(const ModelSpec& spec, int microbatches, int replicas,
                                      const CpuModelOptions& options);

/// `steps` consecutive steps of the global batch, as a pipeline trains: the
/// first is reference_step_replicas(); each next one runs the same
/// micro-batches (their data depends on the micro-batch only) from the
/// weights plain SGD leaves, w - lr * g in fp32 with g the previous step's
/// gradients, as CpuChunk::sgd_step() and every backend's optimizer step
/// update. A pipeline whose second step differs from [1] and not its first
/// from [0] carried something over between steps (gradients not zeroed,
/// stale weights, a replayed CUDA graph reading the wrong buffers).
/// REQUIRES: microbatches, replicas, steps >= 1.
std::vector<ReferenceStep> reference_steps(const ModelSpec& spec, int microbatches, int replicas,
                                           const CpuModelOptions& options, int steps,
                                           float learning_rate);

/// The --check metric: max|a-b| / max(max|b|, 1e-30) over the elements
/// (b is the reference); infinity where an element of either is NaN or
/// infinite. 0 for two empty spans. REQUIRES: equal sizes.
double max_relative_error(std::span<const float> a, std::span<const float> b);

}  // namespace ppb
