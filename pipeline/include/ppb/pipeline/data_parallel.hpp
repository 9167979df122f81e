// Data parallel x pipeline: W = P x D ranks run D replicas of a P-stage
// pipeline. Every replica runs the same schedule on its own micro-batches;
// after the batch's last backward of a chunk, the gradients of that chunk
// are summed across the D replicas of its stage by an all-reduce, which
// overlaps the stage's remaining actions; the optimizer step waits for it.
//
// The rules below are the one implementation the executor, the simulator,
// the backends and the --check reference share:
//  * rank layout (RankGrid): which world rank is (stage, replica);
//  * data (data_microbatch): which global micro-batch of the step's D x M a
//    replica's micro-batch is;
//  * when each all-reduce starts (allreduce_points).
//
// Example, 8 ranks as 2 stages x 4 replicas in Megatron-LM's default order
// (data-parallel ranks of a stage adjacent, the pipeline outermost):
//   RankGrid g{2, 4, RankOrder::kDpPp};
//   g.rank(1, 0) == 4;  g.stage_of(5) == 1;  g.replica_of(5) == 1;
//   data_microbatch(3, 4, 1, 4) == 7;   // replica 1's micro-batch 3 of M = 4
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/pipeline/action.hpp"

namespace ppb {

/// How world ranks map to (stage, replica), named as Megatron-LM names its
/// parallel orders: the first dimension varies fastest.
enum class RankOrder : uint8_t {
  /// "dp-pp" (the default, Megatron-LM's): rank = stage x D + replica; the D
  /// ranks of one stage are adjacent (on one node, their all-reduce stays
  /// inside it), the pipeline is the outermost dimension.
  kDpPp,
  /// "pp-dp": rank = replica x P + stage; the P stages of one replica are
  /// adjacent (their point-to-point messages stay on one node).
  kPpDp,
};

/// "dp-pp", "pp-dp".
const char* rank_order_name(RankOrder order);
/// Parses "dp-pp" | "pp-dp"; throws UsageError naming `flag` otherwise.
RankOrder parse_rank_order(std::string_view text, std::string_view flag);

/// The ranks of a data-parallel pipeline. REQUIRES: stages, replicas >= 1.
struct RankGrid {
  int stages = 1;    ///< P
  int replicas = 1;  ///< D
  RankOrder order = RankOrder::kDpPp;

  int ranks() const { return stages * replicas; }
  /// World rank of (stage, replica).
  int rank(int stage, int replica) const {
    return order == RankOrder::kDpPp ? stage * replicas + replica : replica * stages + stage;
  }
  int stage_of(int rank) const {
    return order == RankOrder::kDpPp ? rank / replicas : rank % stages;
  }
  int replica_of(int rank) const {
    return order == RankOrder::kDpPp ? rank % replicas : rank / stages;
  }
};

/// The global micro-batch (the data) of micro-batch `mb` of the schedule on
/// `replica`: within each batch of M x D micro-batches, replica d takes
/// d x M .. d x M + M - 1, so the step's D x M micro-batches of batch b are
/// b x D x M .. (b+1) x D x M - 1, the single-process reference's order.
/// With one replica it is `mb`. REQUIRES: 0 <= replica < replicas.
inline int64_t data_microbatch(int64_t mb, int microbatches, int replica, int replicas) {
  const int64_t m = microbatches;
  return (mb / m) * m * replicas + int64_t{replica} * m + mb % m;
}

/// After which actions of `stage`'s list the gradients of that action's
/// chunk are complete for an optimizer step, so their all-reduce can start
/// (1) or not (0): with `per_backward` (the optimizer steps after each
/// backward, pipedream) after every B and W; otherwise after the last B or
/// W of each chunk within each batch (micro-batches b x M .. b x M + M-1).
/// One entry per action of the list.
std::vector<char> allreduce_points(const Schedule& schedule, int stage, bool per_backward);

}  // namespace ppb
