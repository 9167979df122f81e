// The sweep of `pipebench run`: every schedule x partition x micro-batch
// count, in a fixed order, each with the name of its result file.
#pragma once

#include <string>
#include <vector>

namespace ppb::run {

/// One combination of the sweep and the schedule parameters it runs with.
struct Combination {
  int index = 0;  ///< 0-based position in the sweep
  std::string schedule;
  std::string partition;
  int stages = 1;         ///< P
  int microbatches = 1;   ///< M
  int chunks = 1;         ///< V (only interleaved-1f1b has V > 1)
  int inflight = 0;       ///< N (async-1f1b, adaptive; 0 otherwise)
  int sync_warmup = 0;    ///< K (hybrid; 0 otherwise)
  int batches = 1;        ///< B (pipedream; 1 otherwise)
  int data_parallel = 1;  ///< D: replicas of the pipeline (W = P x D ranks)
};

/// Schedule parameters each schedule takes; the others stay at their
/// neutral value so that a file name and a config say only what applies.
struct SweepParams {
  int stages = 1;
  int chunks = 2;
  int inflight = 1;
  int sync_warmup = 1;
  int batches = 2;
  int data_parallel = 1;
};

/// Schedules outermost, then partitions, then micro-batch counts:
/// enumerate({"1f1b","gpipe"}, {"layer"}, {4, 8}, p) gives
/// 1f1b/layer/4, 1f1b/layer/8, gpipe/layer/4, gpipe/layer/8.
std::vector<Combination> enumerate_sweep(const std::vector<std::string>& schedules,
                                         const std::vector<std::string>& partitions,
                                         const std::vector<int>& microbatches,
                                         const SweepParams& params);

/// The result file's name:
/// "<schedule>__<partition>__P<P>[_D<D>]_M<M>[_V<V>][_N<N>][_K<K>][_B<B>].json" (D only when > 1),
/// with every character outside [A-Za-z0-9.-] of the names replaced by '_'
/// (a manual partition "manual:0-9,10-58" becomes "manual_0-9_10-58").
/// Distinct combinations of one sweep have distinct names, and the same
/// combination always has the same name, which is how --resume finds it.
std::string result_file_name(const Combination& combination);
/// result_file_name without ".json" (the traces' stem).
std::string result_stem(const Combination& combination);

/// "1f1b x balanced M=8" (with " V=2", " N=3", ..., " D=4" where they apply).
std::string combination_label(const Combination& combination);

}  // namespace ppb::run
