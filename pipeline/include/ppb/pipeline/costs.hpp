// What the simulator needs to know about each virtual stage: the time of its
// actions and the bytes it keeps and sends. Built from the cost flags
// (uniform_costs) or from a model + partition + device (see device.hpp), or
// from measured action times (the executor's theory figures).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ppb/pipeline/action.hpp"

namespace ppb {

/// Costs of one virtual stage (stage s, chunk c -> index c * P + s) for one
/// micro-batch. A full B takes bwd_input + bwd_weight.
struct ChunkCost {
  double fwd = 0;          ///< seconds (or cost units) of F
  double bwd_input = 0;    ///< of I
  double bwd_weight = 0;   ///< of W
  int64_t send_bytes = 0;  ///< bytes F sends to the next virtual stage (B/I send as many back)
  int64_t activation_bytes = 0;  ///< kept from F until the micro-batch's last backward piece
  int64_t param_bytes = 0;
};

/// Link model: one transfer takes comm_time + latency + bytes / bandwidth.
/// comm_time is the Zero Bubble paper's TC (a fixed per-transfer cost, used
/// by the cost flags); latency/bandwidth come from a device or cluster
/// description. bandwidth <= 0 means infinite. Transfers between the same
/// ordered pair of stages share that link one after another (FIFO);
/// transfers never block compute. StageCosts may hold two: one between
/// stages on one host and one between hosts (a network).
struct LinkModel {
  double comm_time = 0;
  double latency = 0;
  double bandwidth = 0;

  double transfer_time(int64_t bytes) const {
    return comm_time + latency + (bandwidth > 0 ? static_cast<double>(bytes) / bandwidth : 0.0);
  }
};

/// REQUIRES: chunks.size() == stages * virtual_chunks_per_stage.
struct StageCosts {
  int stages = 1;
  int chunks_per_stage = 1;
  std::vector<ChunkCost> chunks;  ///< indexed by virtual stage (model order)
  /// Every transfer's link; with host_of_stage set, the link between
  /// stages on one host only.
  LinkModel link;
  /// optional: the host index of each stage (empty = all on one host). A
  /// transfer between stages of different hosts takes network_link.
  std::vector<int> host_of_stage;
  LinkModel network_link;  ///< between hosts; used only with host_of_stage
  bool has_bytes = false;  ///< true when built from a model (memory is reportable)

  /// The link a transfer from `from_stage` to `to_stage` takes.
  /// Example: host_of_stage {0, 0, 1, 1}: link_between(1, 2) is network_link,
  /// link_between(0, 1) is link.
  const LinkModel& link_between(int from_stage, int to_stage) const {
    const auto n = host_of_stage.size();
    const auto f = static_cast<size_t>(from_stage);
    const auto t = static_cast<size_t>(to_stage);
    return f < n && t < n && host_of_stage[f] != host_of_stage[t] ? network_link : link;
  }

  /// The cost of local chunk `chunk` of `stage` under `placement`.
  const ChunkCost& at(const Placement& placement, int stage, int chunk) const {
    return chunks[static_cast<size_t>(placement.virtual_stage(stage, chunk))];
  }
};

/// The cost flags of `simulate` (docs/cli.md): per STAGE times TF, TB, TW, TC;
/// with V chunks each chunk's action takes a V-th of them.
/// Example: uniform_costs(4, 1, 1.0, 1.0, 1.0, 0.0) -> every F/I/W takes 1.
StageCosts uniform_costs(int stages, int chunks, double tf, double tb, double tw, double tc);

}  // namespace ppb
