// The memory model: what one stage holds at its peak, for any schedule,
// partition, M, N, V and data-parallel degree. It is the one prediction of
// memory in pipebench: the run command's pre-check against --memory-budget,
// the `balanced` partition's memory cap, the adaptive schedule's memory
// guard, the simulator's activation peaks and the planner all call it, and
// it follows the executor's tracked accounting (docs/metrics.md, "Memory")
// category by category:
//
//   parameters       the chunks' param_bytes (the model's element width)
//   gradients        as many bytes; fp32 (4 bytes per parameter) when the
//                    model stores parameters narrower than fp32
//   optimizer_state  SGD: nothing; Adam: two fp32 moments, 8 bytes per
//                    parameter; below fp32, plus an fp32 master copy (4)
//   activations      peak over the stage's list of the activation bytes of
//                    the (micro-batch, chunk) pairs between their F and
//                    their last backward piece (B, or W after I); after
//                    I a pair keeps what W reads (ChunkCost::
//                    kept_after_input), and I itself peaks on the way
//                    (ChunkCost::peak_during_input)
//   weight_stash     schedules with weight stashing: one copy of a chunk's
//                    parameters per older weight version a micro-batch in
//                    flight still uses (a version ends at each optimizer
//                    step: after each backward, or after each batch)
//   workspace        what the running action holds on top of its
//                    activation peak: the boundaries between the chunk's
//                    units and their scratch (ChunkCost::*_workspace_bytes)
//   comm_buffers     the executor's buffer pool, as a bound: on every link
//                    into or out of the stage, min(messages, window + queue
//                    depth) of the link's largest message (the receives
//                    posted ahead, and the inputs or outputs of the actions
//                    queued on the stream), one buffer of the largest
//                    same-stage hand-over; with data-parallel replicas, the
//                    gradient all-reduce's own buffer
//   expected_comm_buffers
//                    the pool as a run typically holds it: the list replayed
//                    with the stream queue_depth actions deep, every input
//                    there in time and each send complete once the next
//                    action has finished; at each moment the receives posted
//                    ahead (window per in-link), the inputs and outputs of
//                    the queued actions, the pending send and the hand-overs
//                    not yet taken, each size's most at once (the pool keeps
//                    buffers by size)
//
// Activations and stash follow the list in order, as the executor allocates
// and frees them (the executor enqueues in list order, and a schedule with
// weight stashing runs one action at a time), so they are exact; the
// communication buffers depend on how soon messages arrive and sends
// complete, so the model gives two figures: comm_buffers bounds the pool
// (peak_bytes, what a budget is held to); expected_comm_buffers is what a run
// holds when messages keep pace (expected_peak_bytes, what `plan --validate`
// compares with measured peaks). A producer far ahead of its consumer can
// hold more sends pending than expected when messages go by rendezvous.
//
// Example:
//   Schedule s = generate_schedule("1f1b", {.stages = 4, .microbatches = 8});
//   std::vector<PredictedMemory> m = predict_memory(s, costs, {});
//   m[0].activations == 4 * costs.chunks[0].activation_bytes;   // P in flight
//   m[0].peak_bytes;   // parameters + gradients + activations + comm buffers
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/pipeline/action.hpp"
#include "ppb/pipeline/costs.hpp"

namespace ppb {

/// The optimizer whose state is counted.
enum class OptimizerKind : uint8_t {
  kSgd,   ///< plain SGD (the cpu and cuda backends): no state
  kAdam,  ///< Adam / AdamW: first and second moments in fp32
};

/// "sgd", "adam".
const char* optimizer_name(OptimizerKind kind);

/// Parses "sgd" or "adam". Throws UsageError naming `what` ("--optimizer:
/// unknown optimizer 'lamb' (optimizers: sgd, adam)").
OptimizerKind parse_optimizer(std::string_view text, const std::string& what);

struct MemoryModelOptions {
  OptimizerKind optimizer = OptimizerKind::kSgd;
  /// Bytes of one stored parameter element (ModelSpec::bytes_per_element):
  /// 4 fp32, 2 bf16. Below 4 the model trains in mixed precision: fp32
  /// gradients and an fp32 master copy in the optimizer state, as the cuda
  /// backend keeps them with --dtype bf16.
  int element_bytes = 4;
  /// The executor's receive window per link (ExecutorOptions::recv_window).
  int recv_window = 4;
  /// Actions queued on the compute stream at once (ExecutorOptions::queue_depth).
  int queue_depth = 2;
  /// Data-parallel replicas of each stage (>= 1). With more than one, the
  /// gradient all-reduce's buffer (allreduce_buffer_bytes) is added.
  int data_parallel = 1;
  /// Bytes the gradient all-reduce holds beside the gradients, per stage,
  /// with data_parallel > 1; 0 = in place on the gradients (MPI_IN_PLACE,
  /// a contiguous gradient buffer as Megatron-LM keeps it).
  int64_t allreduce_buffer_bytes = 0;
  /// Bytes the backend holds for its whole life beside the model, on every
  /// stage (backend_resident_bytes: the cuda backend's cuBLAS workspace).
  int64_t resident_bytes = 0;
};

/// The cuBLAS workspace the cuda backend gives its handle (cuBLAS's
/// recommended size on Hopper; 4 MiB suffice before it).
inline constexpr int64_t kCudaBlasWorkspaceBytes = int64_t{32} << 20;

/// What `backend` holds on each stage beside the model for as long as it
/// lives (MemoryModelOptions::resident_bytes): its BackendTraits'
/// resident_bytes (kCudaBlasWorkspaceBytes for cuda), 0 for a name without
/// a row.
int64_t backend_resident_bytes(std::string_view backend);

/// Parameters, gradients and optimizer state of `param_bytes` of parameters
/// (in the model's element width).
struct ParameterState {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer_state = 0;

  int64_t total() const { return parameters + gradients + optimizer_state; }
};

/// Example: parameter_state(400, {}) == {400, 400, 0};
///          with Adam: {400, 400, 800}; with element_bytes 2: {200, 400, 400}.
/// REQUIRES: param_bytes >= 0, element_bytes in {1, 2, 4, 8}.
ParameterState parameter_state(int64_t param_bytes, const MemoryModelOptions& options);

/// What one stage's list keeps alive, walked in list order.
struct ListPeaks {
  int peak_inflight = 0;     ///< (micro-batch, chunk) pairs between F and last backward piece
  int64_t activations = 0;   ///< peak of their summed activation bytes
  int64_t weight_stash = 0;  ///< peak of the stashed weight copies
  int64_t activations_and_stash = 0;  ///< peak of the two together (at one moment)
  /// The largest workspace an action of the list holds on top of its
  /// activation peak (ActivationProfile's *_workspace).
  int64_t workspace = 0;
  /// Peak of activations, stash and the running action's workspace together.
  int64_t with_workspace = 0;
};

/// The activation bytes one (micro-batch, chunk) pair holds: from F; the
/// peak while a split backward's I runs; from I until W
/// (ChunkCost::kept_after_input); and the workspace its F, B, I and W hold on
/// top of their activation peaks (ChunkCost::*_workspace_bytes). A plain
/// byte count holds the same throughout, with no workspace.
struct ActivationProfile {
  int64_t held = 0;
  int64_t input_peak = 0;
  int64_t after_input = 0;
  int64_t forward_workspace = 0;
  int64_t backward_workspace = 0;
  int64_t input_workspace = 0;
  int64_t weight_workspace = 0;

  ActivationProfile() = default;
  // NOLINTNEXTLINE(google-explicit-constructor,hicpp-explicit-conversions): a byte count is a flat
  // profile
  ActivationProfile(int64_t bytes) : held(bytes), input_peak(bytes), after_input(bytes) {}
  static ActivationProfile of(const ChunkCost& c) {
    ActivationProfile p;
    p.held = c.activation_bytes;
    p.input_peak = c.peak_during_input();
    p.after_input = c.kept_after_input();
    p.forward_workspace = c.forward_workspace_bytes;
    p.backward_workspace = c.backward_workspace_bytes;
    p.input_workspace = c.input_workspace_bytes;
    p.weight_workspace = c.weight_workspace_bytes;
    return p;
  }
};

/// Walks `stage`'s list: activation_bytes[c] and param_bytes[c] per pair of
/// chunk c (a pair holds `held` from F, peaks at `input_peak` during I and
/// keeps `after_input` until W). Stashing (weight_stashing) counts older
/// weight versions still in use; a version ends after each backward
/// (optimizer_per_backward) or after the last action of each batch.
/// REQUIRES: stage in [0, P), one entry per chunk in both vectors (param_bytes
/// may be empty without stashing).
ListPeaks list_peaks(const Schedule& schedule, int stage,
                     const std::vector<ActivationProfile>& activation_bytes,
                     const std::vector<int64_t>& param_bytes = {}, bool weight_stashing = false,
                     bool optimizer_per_backward = false);

/// One stage's predicted memory by category (peaks of activations and stash,
/// the rest constant through the step) and its predicted high-water mark.
struct PredictedMemory {
  ParameterState state;
  int64_t activations = 0;   ///< the category's own peak
  int64_t weight_stash = 0;  ///< the category's own peak
  /// The most workspace an action holds on top of its activation peak.
  int64_t workspace = 0;
  /// What the backend holds throughout (MemoryModelOptions::resident_bytes).
  int64_t resident = 0;
  /// The pool's bound: what the executor can hold however late messages go.
  int64_t comm_buffers = 0;
  /// The pool as the executor typically holds it (inputs in time, sends
  /// complete within an action): what a run measures, give or take a buffer.
  int64_t expected_comm_buffers = 0;
  int peak_inflight = 0;
  /// state.total() + the peak of activations, stash and workspace together
  /// + resident + comm_buffers: the bound a budget is held to.
  int64_t peak_bytes = 0;
  /// The same with expected_comm_buffers: the figure to compare with a run.
  int64_t expected_peak_bytes = 0;
};

/// The memory of every stage of `schedule` on `costs` (param_bytes,
/// activation_bytes and send_bytes per virtual stage). Weight stashing and
/// the optimizer's steps come from the schedule's registry entry (none for
/// a schedule file's own name).
/// REQUIRES: costs.stages == schedule.stages, costs.chunks_per_stage ==
/// schedule.chunks, P*V chunks (else UsageError).
std::vector<PredictedMemory> predict_memory(const Schedule& schedule, const StageCosts& costs,
                                            const MemoryModelOptions& options = {});

/// The index of the stage with the largest peak_bytes (the first on ties).
/// REQUIRES: !stages.empty().
int worst_stage(const std::vector<PredictedMemory>& stages);

}  // namespace ppb
