#include "ppb/exec/cpu_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "ppb/profiling/check.hpp"

namespace ppb {

namespace {

using Weights = std::vector<std::vector<float>>;

/// One step of the global batch (D x M micro-batches) from `weights`, per
/// unit; empty: the seeded initial weights, which it then holds.
ReferenceStep one_step(const ModelSpec& spec, const std::vector<Unit>& units, int microbatches,
                       int replicas, const CpuModelOptions& options, Weights& weights) {
  CpuModelOptions opts = options;
  opts.loss_scale = 1.0f / static_cast<float>(microbatches * replicas);
  opts.weight_stashing = false;
  const UnitRange all{0, static_cast<int>(units.size())};
  // A model of the whole at `weights` (recording them when still empty).
  auto model_at = [&](MemoryTracker& tracker) {
    auto model = std::make_unique<CpuChunk>(spec, units, all, tracker, opts);
    if (weights.empty()) {
      for (const std::span<const float> w : model->param_views())
        weights.emplace_back(w.begin(), w.end());
    } else {
      const std::vector<std::span<float>> views = model->mutable_param_views();
      for (size_t u = 0; u < views.size(); ++u) std::ranges::copy(weights[u], views[u].begin());
    }
    return model;
  };
  // Replica d runs micro-batches d*M .. d*M+M-1, so the loss sums in the
  // global batch's order; the gradients are replica 0's plus the others'.
  ReferenceStep step;
  for (int d = 0; d < replicas; ++d) {
    MemoryTracker tracker;
    const std::unique_ptr<CpuChunk> model = model_at(tracker);
    for (int m = 0; m < microbatches; ++m) {
      const int64_t mb = int64_t{d} * microbatches + m;
      model->forward(mb, nullptr, nullptr);
      model->backward(mb, nullptr, nullptr);
      step.loss += model->loss(mb);
    }
    const std::vector<std::span<const float>> grads = model->grad_views();
    if (d == 0) {
      for (const std::span<const float> g : grads) step.grads.emplace_back(g.begin(), g.end());
      continue;
    }
    for (size_t u = 0; u < grads.size(); ++u) {
      std::vector<float>& sum = step.grads[u];
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += grads[u][i];
    }
  }
  step.loss /= microbatches * replicas;
  return step;
}

}  // namespace

ReferenceStep reference_step(const ModelSpec& spec, int microbatches,
                             const CpuModelOptions& options) {
  return reference_steps(spec, microbatches, 1, options, 1, 0.0f).front();
}

ReferenceStep reference_step_replicas(const ModelSpec& spec, int microbatches, int replicas,
                                      const CpuModelOptions& options) {
  return reference_steps(spec, microbatches, replicas, options, 1, 0.0f).front();
}

std::vector<ReferenceStep> reference_steps(const ModelSpec& spec, int microbatches, int replicas,
                                           const CpuModelOptions& options, int steps,
                                           float learning_rate) {
  PPB_CHECK(microbatches >= 1 && replicas >= 1 && steps >= 1,
            "reference_steps: M, D and the steps must be >= 1");
  const std::vector<Unit> units = expand_units(spec);
  Weights weights;
  std::vector<ReferenceStep> out;
  for (int s = 0; s < steps; ++s) {
    out.push_back(one_step(spec, units, microbatches, replicas, options, weights));
    if (s + 1 == steps) break;
    // Plain SGD in fp32, as CpuChunk::sgd_step() and every backend's step.
    for (size_t u = 0; u < weights.size(); ++u) {
      const std::vector<float>& g = out.back().grads[u];
      for (size_t i = 0; i < g.size(); ++i) weights[u][i] -= learning_rate * g[i];
    }
  }
  return out;
}

double max_relative_error(std::span<const float> a, std::span<const float> b) {
  PPB_CHECK(a.size() == b.size(), "max_relative_error of spans of different sizes");
  double diff = 0;
  double scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - b[i]);
    // A NaN or an infinity is as far off as can be (max() would drop a NaN).
    if (!std::isfinite(d)) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, d);
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

}  // namespace ppb
