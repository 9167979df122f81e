#include "ppb/exec/cpu_reference.hpp"

#include <algorithm>
#include <cmath>

#include "ppb/profiling/check.hpp"

namespace ppb {

ReferenceStep reference_step(const ModelSpec& spec, int microbatches,
                             const CpuModelOptions& options) {
  PPB_CHECK(microbatches >= 1, "reference_step needs at least one micro-batch");
  const std::vector<Unit> units = expand_units(spec);
  CpuModelOptions opts = options;
  opts.loss_scale = 1.0f / static_cast<float>(microbatches);
  opts.weight_stashing = false;
  MemoryTracker tracker;
  CpuChunk model(spec, units, UnitRange{0, static_cast<int>(units.size())}, tracker, opts);
  ReferenceStep step;
  for (int mb = 0; mb < microbatches; ++mb) {
    model.forward(mb, nullptr, nullptr);
    model.backward(mb, nullptr, nullptr);
    step.loss += model.loss(mb);
  }
  step.loss /= microbatches;
  for (const std::span<const float> g : model.grad_views()) {
    step.grads.emplace_back(g.begin(), g.end());
  }
  return step;
}

ReferenceStep reference_step_replicas(const ModelSpec& spec, int microbatches, int replicas,
                                      const CpuModelOptions& options) {
  PPB_CHECK(microbatches >= 1 && replicas >= 1, "reference_step_replicas: M and D must be >= 1");
  if (replicas == 1) return reference_step(spec, microbatches, options);
  const std::vector<Unit> units = expand_units(spec);
  CpuModelOptions opts = options;
  opts.loss_scale = 1.0f / static_cast<float>(microbatches * replicas);
  opts.weight_stashing = false;
  ReferenceStep step;
  for (int d = 0; d < replicas; ++d) {
    MemoryTracker tracker;
    CpuChunk model(spec, units, UnitRange{0, static_cast<int>(units.size())}, tracker, opts);
    for (int m = 0; m < microbatches; ++m) {
      const int64_t mb = int64_t{d} * microbatches + m;
      model.forward(mb, nullptr, nullptr);
      model.backward(mb, nullptr, nullptr);
    }
    const std::vector<std::span<const float>> grads = model.grad_views();
    if (d == 0) {
      for (const std::span<const float> g : grads) step.grads.emplace_back(g.begin(), g.end());
      continue;
    }
    for (size_t u = 0; u < grads.size(); ++u) {
      std::vector<float>& sum = step.grads[u];
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += grads[u][i];
    }
  }
  // The loss in the global batch's order, as reference_step() sums it.
  MemoryTracker tracker;
  CpuChunk model(spec, units, UnitRange{0, static_cast<int>(units.size())}, tracker, opts);
  for (int mb = 0; mb < microbatches * replicas; ++mb) {
    model.forward(mb, nullptr, nullptr);
    step.loss += model.loss(mb);
  }
  step.loss /= microbatches * replicas;
  return step;
}

double max_relative_error(std::span<const float> a, std::span<const float> b) {
  PPB_CHECK(a.size() == b.size(), "max_relative_error of spans of different sizes");
  double diff = 0;
  double scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

}  // namespace ppb
