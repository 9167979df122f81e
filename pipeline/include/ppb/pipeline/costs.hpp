// What the simulator needs to know about each virtual stage: the time of its
// actions and the bytes it keeps and sends. Built from the cost flags
// (uniform_costs) or from a model + partition + device (see device.hpp), or
// from measured action times (the executor's theory figures).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ppb/pipeline/action.hpp"
#include "ppb/pipeline/schedule.hpp"

namespace ppb {

/// Costs of one virtual stage (stage s, chunk c -> index c * P + s) for one
/// micro-batch. A full B takes bwd_input + bwd_weight.
struct ChunkCost {
  double fwd = 0;          ///< seconds (or cost units) of F
  double bwd_input = 0;    ///< of I
  double bwd_weight = 0;   ///< of W
  int64_t send_bytes = 0;  ///< bytes F sends to the next virtual stage (B/I send as many back)
  int64_t activation_bytes = 0;  ///< kept from F until the micro-batch's last backward piece
  /// A split backward's activations: kept from I until W, and the peak
  /// while I runs (it frees and keeps unit by unit: Unit::split_kept_bytes);
  /// -1: activation_bytes (costs without a model behind them).
  int64_t split_kept_bytes = -1;
  int64_t input_peak_bytes = -1;
  int64_t param_bytes = 0;
  /// The workspace an action holds on top of its own activation peak (the
  /// units' scratch, and in B and I the gradient boundaries between the
  /// chunk's units, model.hpp):
  /// while F runs, the stage holds at most what it held before plus
  /// activation_bytes + forward_workspace_bytes; B, what it held plus
  /// backward_workspace_bytes; I, what it held - activation_bytes +
  /// peak_during_input() + input_workspace_bytes; W, what it held +
  /// weight_workspace_bytes. 0: costs without a model behind them.
  int64_t forward_workspace_bytes = 0;
  int64_t backward_workspace_bytes = 0;
  int64_t input_workspace_bytes = 0;
  int64_t weight_workspace_bytes = 0;

  int64_t kept_after_input() const {
    return split_kept_bytes >= 0 ? split_kept_bytes : activation_bytes;
  }
  int64_t peak_during_input() const {
    return input_peak_bytes >= 0 ? input_peak_bytes : activation_bytes;
  }
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

/// The gradient all-reduce of data parallelism (data_parallel.hpp): each
/// stage's gradients are summed across its `replicas` copies by a ring
/// all-reduce, whose time for `bytes` is
///   2 (D-1) x latency + 2 (D-1)/D x bytes / bandwidth
/// (D = replicas: a reduce-scatter and an all-gather of D-1 steps each, every
/// step moving bytes/D per rank). bandwidth <= 0 means infinite. replicas ==
/// 1 (one pipeline) costs nothing.
struct AllReduceModel {
  int replicas = 1;
  double latency = 0;    ///< seconds per ring step
  double bandwidth = 0;  ///< bytes per second per rank
  /// The optimizer steps after every backward (a schedule whose registry
  /// entry says optimizer_per_backward): the stage waits for each
  /// all-reduce before its next action. Otherwise an all-reduce overlaps
  /// the stage's later actions and only the step's end waits for it.
  bool per_backward = false;
  /// Bytes of one stored parameter element (ModelSpec::bytes_per_element).
  /// The all-reduce moves a chunk's gradients, which the memory model
  /// counts (parameter_state): fp32 below 4 bytes (mixed precision), so a
  /// bf16 chunk's all-reduce moves twice its parameter bytes.
  int element_bytes = 4;

  /// Seconds of one all-reduce of `bytes`; 0 when replicas <= 1.
  double time(int64_t bytes) const {
    if (replicas <= 1) return 0;
    const double d = replicas;
    const double steps = 2.0 * (d - 1.0);
    return steps * latency +
           (bandwidth > 0 ? steps / d * static_cast<double>(bytes) / bandwidth : 0.0);
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
  /// Data parallelism: the all-reduce of each chunk's gradients (the
  /// gradient bytes of ChunkCost::param_bytes of its virtual stage,
  /// AllReduceModel::element_bytes) across the replicas.
  AllReduceModel allreduce;
  bool has_bytes = false;  ///< true when built from a model (memory is reportable)
  /// A fixed cost every F, B, I and W takes on top of its chunk's times
  /// (seconds an action's window holds besides its kernels: launches,
  /// synchronisation), >= 0. A full B takes it once.
  double action_seconds = 0;

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

/// The pass times a schedule that places I and W by them (zb-1p, zb-2p:
/// ScheduleInfo::uses_times) gets from modelled costs: the per-stage means
/// of F, I and W (at least 1e-9, so a free pass still orders the passes)
/// and one transfer of the mean message. The run command and the planner
/// both generate such schedules through it.
void set_pass_times(const StageCosts& costs, ScheduleParams& params);

/// Wall seconds of the timed backend's mean stage: every virtual stage's
/// F + I + W of one micro-batch, summed and divided by the stages.
inline constexpr double kTimedStageSeconds = 12e-3;

/// The timed backend's default --time-scale (wall seconds per modelled
/// second): kTimedStageSeconds / (the sum over every virtual stage of F + I
/// + W, divided by `costs.stages`), so that the mean stage's forward and
/// backward of one micro-batch sleep 12 ms. The sum is the whole model's,
/// whatever the partition, the chunks per stage or their placement, so every
/// combination of one model, device and P runs at one scale: a chunk that
/// holds half a stage's units sleeps half as long as the stage would.
/// Every rank computes the same value from the same costs. Returns 1 when
/// every cost is 0.
/// Example: uniform_costs(2, 1, 0.5, 3.0, 0, 0) -> 12e-3 / 3.5; the same
/// with 2 chunks per stage -> the same scale.
double default_time_scale(const StageCosts& costs);

/// The longest a `--time-scale` may make the mean stage's forward and
/// backward of one micro-batch sleep: beyond it a step takes hours.
inline constexpr double kMaxTimedStageSeconds = 60;

/// The mean stage's modelled F + I + W of one micro-batch (the sum over
/// every virtual stage, divided by `costs.stages`), modelled seconds: what
/// default_time_scale scales to kTimedStageSeconds.
double mean_stage_seconds(const StageCosts& costs);

/// Why `time_scale` is refused for a model whose mean stage takes
/// `mean_stage` modelled seconds: "--time-scale X: the mean stage's forward
/// and backward of one micro-batch would sleep Y s (at most 60 s)"; "" when
/// the sleep is at most kMaxTimedStageSeconds.
std::string time_scale_problem(double time_scale, double mean_stage);

}  // namespace ppb
