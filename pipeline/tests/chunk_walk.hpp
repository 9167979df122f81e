// Test helper: what the memory model's chunk walk says for one chunk, and
// what a pass peaked at, for the per-pass exact-memory tests of the cpu and
// the cuda chunk.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/profiling/memory.hpp"

namespace ppb::test {

/// The model's ChunkCost of units `r` of `units`, cut from the rest of the
/// model (one chunk per stage before and after it).
inline ChunkCost chunk_cost(const std::vector<Unit>& units, const std::vector<UnitTime>& times,
                            UnitRange r) {
  std::vector<UnitRange> parts;
  if (r.begin > 0) parts.push_back({0, r.begin});
  parts.push_back(r);
  if (r.end < static_cast<int>(units.size()))
    parts.push_back({r.end, static_cast<int>(units.size())});
  const StageCosts costs = model_costs(units, times, parts, static_cast<int>(parts.size()), 1, {});
  return costs.chunks[r.begin > 0 ? 1 : 0];
}

/// The bytes `tracker` peaked at above what it held when `pass` began.
inline int64_t pass_peak(MemoryTracker& tracker, const std::function<void()>& pass) {
  tracker.reset_peaks();
  const int64_t before = tracker.current_total();
  pass();
  return tracker.peak_total() - before;
}

}  // namespace ppb::test
