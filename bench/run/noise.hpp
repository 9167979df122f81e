// The noise of a run, for the regression gate: the figure of every timed
// step (not only the median step's) and their robust spread, so that a
// later run can be tested against this one's step-to-step variation.
#pragma once

#include <cstdint>
#include <vector>

#include "ppb/pipeline/result.hpp"
#include "run/metrics.hpp"

namespace ppb::run {

/// Bubble ratio of each step, in run order: the mean over stages of
/// (step time - compute busy) / step time, as step_figures() computes it for
/// the median step. REQUIRES: steps non-empty.
std::vector<double> bubble_ratio_per_step(const std::vector<StepMeasure>& steps);

/// Device bubble ratio of each step, in run order: device_figures' mean over
/// one pipeline's stages (replica 0's of `stages` per pipeline) of (step
/// time - device compute busy) / step time. Empty when no step has device
/// activity. REQUIRES: steps non-empty, each a multiple of `stages` ranks.
std::vector<double> device_bubble_ratio_per_step(const std::vector<StepMeasure>& steps, int stages);

/// Compute busy seconds of each stage in each step: [stage][step].
/// REQUIRES: steps non-empty, all with the same stage count.
std::vector<std::vector<double>> busy_seconds_per_stage(const std::vector<StepMeasure>& steps);

/// Spread of step time, samples/s (samples_per_step / each step's time) and
/// bubble ratio over the timed steps.
/// REQUIRES: step_seconds and bubble_ratios non-empty, step times > 0.
SpreadFigures spread_figures(const std::vector<double>& step_seconds, int64_t samples_per_step,
                             const std::vector<double>& bubble_ratios);

}  // namespace ppb::run
