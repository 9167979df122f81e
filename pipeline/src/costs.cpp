#include "ppb/pipeline/costs.hpp"

#include <cmath>
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

}  // namespace ppb
