#include "run/noise.hpp"

#include <optional>

#include "ppb/profiling/check.hpp"
#include "ppb/reports/stats.hpp"

namespace ppb::run {

namespace {

SampleSpread to_sample_spread(const std::vector<double>& values) {
  const reports::Spread s = reports::spread(values);
  return {static_cast<int>(s.n), s.median, s.mad, s.q1, s.q3, s.min, s.max};
}

}  // namespace

std::vector<double> bubble_ratio_per_step(const std::vector<StepMeasure>& steps) {
  PPB_CHECK(!steps.empty(), "bubble_ratio_per_step without steps");
  std::vector<double> out;
  out.reserve(steps.size());
  for (const StepMeasure& step : steps) {
    const double total = step_time(step);
    double sum = 0;
    for (const StageStep& s : step) sum += stage_bubble_ratio(s, total);
    out.push_back(step.empty() ? 0 : sum / static_cast<double>(step.size()));
  }
  return out;
}

std::vector<double> device_bubble_ratio_per_step(const std::vector<StepMeasure>& steps,
                                                 int stages) {
  PPB_CHECK(!steps.empty(), "device_bubble_ratio_per_step without steps");
  std::vector<double> out;
  for (const StepMeasure& step : steps) {
    const std::optional<DeviceFigures> d = device_figures(split_replicas(step, stages).front(), "");
    if (!d) return {};
    out.push_back(d->bubble_ratio);
  }
  return out;
}

std::vector<std::vector<double>> busy_seconds_per_stage(const std::vector<StepMeasure>& steps) {
  PPB_CHECK(!steps.empty(), "busy_seconds_per_stage without steps");
  std::vector<std::vector<double>> out(steps.front().size());
  for (const StepMeasure& step : steps) {
    PPB_CHECK(step.size() == out.size(), "steps with different stage counts");
    for (size_t s = 0; s < step.size(); ++s) out[s].push_back(compute_busy(step[s]));
  }
  return out;
}

SpreadFigures spread_figures(const std::vector<double>& step_seconds, int64_t samples_per_step,
                             const std::vector<double>& bubble_ratios) {
  PPB_CHECK(!step_seconds.empty() && !bubble_ratios.empty(), "spread of no steps");
  std::vector<double> rates;
  rates.reserve(step_seconds.size());
  for (double t : step_seconds) {
    PPB_CHECK(t > 0, "a step time must be > 0");
    rates.push_back(static_cast<double>(samples_per_step) / t);
  }
  return {to_sample_spread(step_seconds), to_sample_spread(rates), to_sample_spread(bubble_ratios)};
}

}  // namespace ppb::run
