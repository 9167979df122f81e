// Discrete-event simulation of a Schedule on a cost model (the simulator of
// docs/architecture.md). It runs the SAME action lists as the executor, with the same
// rules, so predicted and measured timelines line up action for action:
//
//  * each stage runs its list in order; an action starts at
//    max(time the stage is free, arrival of its inputs);
//  * inputs follow action.hpp's communication rule: F(mb, c) on virtual stage
//    v > 0 needs the activation of F(mb, c') on v - 1; B(mb, c) / I(mb, c) on
//    v < P*V-1 needs the input gradient of B/I(mb, c') on v + 1; B/I also need
//    the stage's own F(mb, c) done, W(mb, c) its own I(mb, c);
//  * messages are the message plan's (message_plan.hpp); a transfer starts
//    when the producing action ends and its link (the ordered stage pair) is
//    free — links serve transfers first in, first out —
//    and takes costs.link_between(from, to).transfer_time(bytes) (the
//    network link between stages on different hosts; F's output: send_bytes of its
//    virtual stage v; a gradient back to v-1: send_bytes of v-1). Sends never block compute
//    (compute/communication overlap). Between virtual stages of the same
//    physical stage (P == 1) there is no transfer: the input is ready when
//    the producing action ends;
//  * an F marked `overlap` and the backward after it are one unit (PyTorch's
//    OVERLAP_F_B): the F starts only when the backward's input is there
//    too, and the backward follows it without a gap;
//  * SYNC is a barrier: every stage leaves its k-th SYNC at the latest arrival
//    at that SYNC plus costs.link.latency (plus nothing when P == 1);
//  * F takes fwd, I bwd_input, W bwd_weight, B bwd_input + bwd_weight of the
//    action's virtual stage;
//  * data parallelism (costs.allreduce.replicas > 1): after the actions
//    allreduce_points() names, the chunk's gradients (param_bytes of its
//    virtual stage) are all-reduced across the replicas, one all-reduce at
//    a time per stage (FIFO), in costs.allreduce.time(bytes); they overlap
//    the stage's later actions, except with per_backward, where the stage
//    waits for each. Every replica runs alike, so one replica is simulated.
//
// Cost: O(number of actions + number of transfers) time and memory.
//
// Example:
//   ppb::Schedule s = ppb::generate_schedule("1f1b", {.stages = 4, .microbatches = 8});
//   ppb::SimResult r = ppb::simulate(s, ppb::uniform_costs(4, 1, 1.0, 2.0, 0.0, 0.0));
//   r.step_time;     // 33 = (M + P - 1) * (TF + TB)
//   r.bubble_ratio;  // 3 / 11 = (P - 1) / (M + P - 1)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ppb/pipeline/action.hpp"
#include "ppb/pipeline/costs.hpp"
#include "ppb/profiling/trace.hpp"

namespace ppb {

struct SimOptions {
  /// Keep every action's start/end (SimStage::events) and every transfer
  /// (SimResult::transfers). Off, only the figures are computed.
  bool record_events = true;
};

/// One executed action of one stage, times from the step's start.
struct SimEvent {
  Action action;
  double start = 0;
  double end = 0;
};

/// One stage-to-stage message: an activation (gradient = false) from
/// virtual stage v to v + 1, or an input gradient (gradient = true) from v to
/// v - 1. `chunk` is the chunk of the PRODUCING action. start is when the
/// link began sending it (>= the producing action's end), end its arrival.
struct SimTransfer {
  int from_stage = 0;
  int to_stage = 0;
  int32_t microbatch = 0;
  int32_t chunk = 0;
  bool gradient = false;
  double start = 0;
  double end = 0;
  int64_t flow_id = 0;  ///< the message plan's id (PlannedMessage::flow_id)
};

/// One gradient all-reduce of a stage (data parallelism).
struct SimAllReduce {
  int32_t chunk = 0;
  int64_t bytes = 0;
  double start = 0;
  double end = 0;
};

struct SimStage {
  double busy = 0;  ///< summed durations of its F/B/I/W actions
  double idle = 0;  ///< step_time - busy
  /// Data parallelism: summed all-reduce seconds, and when the last ended.
  double allreduce = 0;
  double allreduce_end = 0;
  std::vector<SimAllReduce> allreduces;  ///< in order (empty without record_events)
  /// Max number of (micro-batch, chunk) pairs held between the start of their
  /// F and the end of their last backward piece (B, or W after I).
  int peak_inflight = 0;
  /// Overlapped forward/backward pairs run as one unit (Action::overlap).
  int overlapped = 0;
  /// Peak of the summed ChunkCost::activation_bytes of those pairs; 0 unless
  /// costs.has_bytes.
  int64_t peak_activation_bytes = 0;
  /// Start of the stage's first and end of its last F/B/I/W action (0, 0
  /// when it has none). span() is the time the stage is occupied; without a
  /// flush between steps (the Zero Bubble paper's optimizer post-validation)
  /// consecutive steps overlap and only the span repeats.
  double first_start = 0;
  double last_end = 0;
  double span() const { return last_end - first_start; }
  std::vector<SimEvent> events;  ///< in list order (empty without record_events)
};

struct SimResult {
  /// Makespan: end of the last action on any stage (all batches together for
  /// schedules with batches > 1).
  double step_time = 0;
  /// Max over stages of SimStage::span(): the step time when steps follow
  /// each other without a flush, which is how the Zero Bubble paper counts
  /// (ZB-H2 with TF=TB=TW=1, P=4, M=8: step_time 27, stage_span 24).
  double stage_span = 0;
  /// End of the last action on any stage: step_time without the gradient
  /// all-reduce's tail (equal to step_time without data parallelism).
  double pipeline_time = 0;
  /// Mean over stages of (step_time - busy) / step_time; 0 when step_time is 0.
  double bubble_ratio = 0;
  /// The same over pipeline_time: the bubble without the all-reduce.
  double bubble_ratio_pipeline = 0;
  /// Sum of idle / sum of busy (Megatron-LM's normalisation); 0 when busy is 0.
  double bubble_overhead = 0;
  /// batch_end[b] = end of the last action of a micro-batch of batch b (for
  /// pipedream with batches > 1 the batches overlap; the per-batch time in
  /// steady state is batch_end[b] - batch_end[b-1]). One entry per batch.
  std::vector<double> batch_end;
  std::vector<SimStage> stages;
  std::vector<SimTransfer> transfers;  ///< in order of issue per link (empty without record_events)

  /// step_time / batches: the mean time per batch.
  double time_per_batch() const {
    return batch_end.empty() ? step_time : step_time / static_cast<double>(batch_end.size());
  }
};

/// Simulates `schedule` on `costs`.
/// REQUIRES (else throws UsageError naming the mismatch): costs.stages ==
/// schedule.stages, costs.chunks_per_stage == schedule.chunks, costs.chunks has
/// P*V entries, schedule.actions has P lists, every action's micro-batch in
/// [0, M*batches) and chunk in [0, V) (SYNC: -1, -1), and no negative cost.
/// Throws UsageError("simulate: not progressing at ...") naming each stuck
/// stage, its position and the action it waits at, when the lists deadlock
/// (a schedule that would not pass the validator).
SimResult simulate(const Schedule& schedule, const StageCosts& costs,
                   const SimOptions& options = {});

/// The simulated timeline as traces in the format of measured runs
/// (trace.hpp): one TraceWriter per stage (pid = stage, "distributedInfo"
/// rank = stage), threads "compute" and, per neighbour stage t, "send to
/// s<t>" and "recv from s<t>" (one link each, so slices never overlap on a
/// track); compute events named
/// like the NVTX ranges, "F s2 mb3" (" c1" appended when V > 1), categories
/// forward (F), backward (B, I), wgrad (W), sync (SYNC waits); each transfer
/// a "send act s2->s3 mb3" / "recv act s2->s3 mb3" ("grad" for gradients)
/// pair of events spanning the transfer, categories send / recv, joined by a
/// flow arrow (name "act"/"grad", category "p2p", id flow_id(from stage,
/// the message plan's flow id), as the measured trace of a single step
/// names it; both ends at the middle of their slices). Times: the result's
/// units read as seconds (so cost-flag units show as 1 s = 1e6 us).
/// REQUIRES: `result` from simulate(schedule, ..) with record_events
/// (else UsageError).
std::vector<std::unique_ptr<trace::TraceWriter>> sim_trace_writers(const Schedule& schedule,
                                                                   const SimResult& result);

/// Writes sim_trace_writers(...) merged into one file at `path`
/// (trace::write_merged: one timeline, pid = stage), atomically. Throws
/// UsageError when the file cannot be written.
void write_sim_trace(const Schedule& schedule, const SimResult& result, const std::string& path);

}  // namespace ppb
