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
