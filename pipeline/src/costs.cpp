#include "ppb/pipeline/costs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

// The cost flags come from the command line: a bad one is the user's input,
// named by its flag (docs/cli.md: --fwd TF --bwd TB --wgrad TW --comm TC).
void check_flag(const char* flag, double value) {
  if (!std::isfinite(value) || value < 0) {
    throw UsageError(std::string(flag) + ": expected a time >= 0, got " + std::to_string(value));
  }
}

}  // namespace

StageCosts uniform_costs(int stages, int chunks, double tf, double tb, double tw, double tc) {
  if (stages < 1) throw UsageError("--stages: expected >= 1, got " + std::to_string(stages));
  if (chunks < 1) throw UsageError("--chunks: expected >= 1, got " + std::to_string(chunks));
  check_flag("--fwd", tf);
  check_flag("--bwd", tb);
  check_flag("--wgrad", tw);
  check_flag("--comm", tc);
  StageCosts costs;
  costs.stages = stages;
  costs.chunks_per_stage = chunks;
  ChunkCost c;
  c.fwd = tf / chunks;
  c.bwd_input = tb / chunks;
  c.bwd_weight = tw / chunks;
  costs.chunks.assign(static_cast<size_t>(stages) * chunks, c);
  costs.link.comm_time = tc;
  return costs;
}

void set_pass_times(const StageCosts& costs, ScheduleParams& params) {
  double f = 0, b = 0, w = 0;
  int64_t bytes = 0;
  for (const ChunkCost& c : costs.chunks) {
    f += c.fwd;
    b += c.bwd_input;
    w += c.bwd_weight;
    bytes += c.send_bytes;
  }
  const double stages = costs.stages;
  const auto n = static_cast<double>(std::max<size_t>(costs.chunks.size(), 1));
  // Positive, so that a model with a free pass still orders the passes.
  constexpr double kLeast = 1e-9;
  params.tf = std::max(f / stages, kLeast);
  params.tb = std::max(b / stages, kLeast);
  params.tw = std::max(w / stages, kLeast);
  params.tc = costs.link.transfer_time(static_cast<int64_t>(static_cast<double>(bytes) / n));
}

double mean_stage_seconds(const StageCosts& costs) {
  double total = 0;
  for (const ChunkCost& c : costs.chunks) total += c.fwd + c.bwd_input + c.bwd_weight;
  return total / std::max(costs.stages, 1);
}

std::string time_scale_problem(double time_scale, double mean_stage) {
  const double sleep = time_scale * mean_stage;
  if (sleep <= kMaxTimedStageSeconds) return "";
  char text[200];
  std::snprintf(text, sizeof text,
                "--time-scale %g: the mean stage's forward and backward of one micro-batch "
                "would sleep %g s (at most %g s)",
                time_scale, sleep, kMaxTimedStageSeconds);
  return text;
}

double default_time_scale(const StageCosts& costs) {
  // The whole model's time, not the shortest action's: a scale taken from
  // the combination's own actions would differ between partitions and chunk
  // counts, and a chunk would then sleep as long as a whole stage.
  const double stage = mean_stage_seconds(costs);
  if (!(stage > 0) || !std::isfinite(stage)) return 1.0;
  return kTimedStageSeconds / stage;
}

}  // namespace ppb
