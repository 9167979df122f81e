#include "ppb/pipeline/costs.hpp"

#include "ppb/profiling/check.hpp"

namespace ppb {

StageCosts uniform_costs(int stages, int chunks, double tf, double tb, double tw, double tc) {
  PPB_CHECK(stages >= 1 && chunks >= 1, "uniform_costs: stages and chunks must be >= 1");
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
