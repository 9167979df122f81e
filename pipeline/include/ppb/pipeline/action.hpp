// A schedule is data (docs/architecture.md, "One idea"): for each
// stage an ordered list of actions. Generators produce it, the validator
// proves it complete and deadlock-free, the executor runs it over MPI and the
// simulator runs it on a cost model.
//
// Communication is not written in the schedule; it is derived:
//  * the placement says which stage holds each virtual stage v (the model's
//    P*V pieces in model order); chunk c of stage s is the c-th virtual stage
//    s holds, counted in model order. Looping by default, v = c * P + s
//    (Megatron-LM's interleaving; with one chunk v = s); V-shaped for
//    zb-v and dualpipe-v (0..P-1 down the stages, P..2P-1 back up);
//  * after F(mb, c) on virtual stage v < P*V-1, its output goes to v + 1;
//  * after B(mb, c) or I(mb, c) on v > 0, the input gradient goes to v - 1;
//    between two virtual stages of the same stage that is a local hand-over;
//  * W is local; SYNC is a barrier across all stages.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ppb {

enum class ActionKind : uint8_t {
  kForward,         ///< "F": forward of one micro-batch through one chunk
  kBackward,        ///< "B": full backward (input and weight gradients)
  kBackwardInput,   ///< "I": backward for the input gradient only (zero bubble)
  kBackwardWeight,  ///< "W": backward for the weight gradient only (zero bubble)
  kSync,            ///< "SYNC": barrier across all stages (mb and chunk are -1)
};

/// "F", "B", "I", "W", "SYNC".
const char* action_kind_name(ActionKind kind);

/// One action of one stage: a small value (STYLE.md rule 7).
struct Action {
  ActionKind kind = ActionKind::kForward;
  int32_t microbatch = 0;  ///< 0..M*batches-1; -1 for SYNC
  int32_t chunk = 0;       ///< 0..V-1; -1 for SYNC
  /// F only: this F and the next action of the list (a B or I) run as one
  /// scheduling unit, PyTorch's OVERLAP_F_B (DualPipeV): the unit starts
  /// when the inputs of both are there, and runs F then the backward.
  bool overlap = false;

  friend bool operator==(const Action&, const Action&) = default;
};

// The schedule notation's own letters (F3, B3, I3, W3), so generators read
// like the papers' pictures. NOLINTBEGIN(readability-identifier-naming)
inline Action F(int32_t mb, int32_t chunk = 0) { return {ActionKind::kForward, mb, chunk}; }
inline Action B(int32_t mb, int32_t chunk = 0) { return {ActionKind::kBackward, mb, chunk}; }
inline Action I(int32_t mb, int32_t chunk = 0) { return {ActionKind::kBackwardInput, mb, chunk}; }
inline Action W(int32_t mb, int32_t chunk = 0) { return {ActionKind::kBackwardWeight, mb, chunk}; }
inline Action Sync() { return {ActionKind::kSync, -1, -1}; }
// NOLINTEND(readability-identifier-naming)

/// Per-stage action lists. `actions.size() == stages`. Micro-batches of batch
/// b are b*M .. b*M+M-1 (only `pipedream` uses batches > 1: no flush between
/// batches). Flush schedules end each batch with an optimizer step on every
/// stage; that step is implied, not listed.
struct Schedule {
  std::string name;
  int stages = 1;        ///< P
  int microbatches = 1;  ///< M, per batch
  int chunks = 1;        ///< V, model chunks per stage
  int batches = 1;       ///< batches covered without a flush
  std::vector<std::vector<Action>> actions;
  /// placement[v] = the stage that holds virtual stage v (P*V entries, each
  /// stage V times); empty = looping (v = c * P + s). See Placement.
  std::vector<int32_t> placement;

  int total_microbatches() const { return microbatches * batches; }
  int virtual_stages() const { return stages * chunks; }
  int64_t total_actions() const;
};

/// The name of an action's range in NVTX and in Chrome/Perfetto traces, the
/// same for measured and simulated timelines (docs/instrumentation.md, "Names
/// and categories"): "F s2 mb3", "B s2 mb3 c1" (the chunk only when the schedule
/// has chunks > 1), "SYNC s2".
std::string action_range_name(const Action& action, int stage, int chunks);

/// A message's range name: "send act s2->s3 mb3", "recv grad s3->s2 mb3".
std::string message_range_name(bool send, bool gradient, int from_stage, int to_stage,
                               int64_t microbatch);

/// The category (phase) of an action's range: "forward" (F), "backward" (B
/// and I), "wgrad" (W), "sync" (SYNC).
const char* action_category(ActionKind kind);

/// Where the virtual stages live: the two-way map between virtual stage v
/// and (stage, chunk), chunk c of stage s being the c-th virtual stage s
/// holds in model order. O(1) look-ups (tables of P*V entries).
/// Example (P = 2, V-shaped): Placement(2, 2, v_shape_placement(2))
///   stage_of(0..3) = 0, 1, 1, 0; virtual_stage(0, 1) == 3; chunk_of(2) == 1.
class Placement {
 public:
  /// One stage, one chunk.
  Placement() : Placement(1, 1) {}
  /// Looping: v = chunk * stages + stage. REQUIRES: stages, chunks >= 1.
  Placement(int stages, int chunks);
  /// From a map stage_of[v]. REQUIRES: placement_error(...) is empty (else
  /// PPB_CHECK aborts; readers check it first and report bad input).
  Placement(int stages, int chunks, std::span<const int32_t> stage_of);

  int stages() const { return stages_; }
  int chunks() const { return chunks_; }
  int virtual_stages() const { return stages_ * chunks_; }
  int virtual_stage(int stage, int chunk) const {
    return virtual_of_[static_cast<size_t>(stage) * static_cast<size_t>(chunks_) +
                       static_cast<size_t>(chunk)];
  }
  int stage_of(int v) const { return stage_of_[static_cast<size_t>(v)]; }
  int chunk_of(int v) const { return chunk_of_[static_cast<size_t>(v)]; }
  /// The virtual stages of `stage`, by chunk.
  std::vector<int> virtual_stages_of(int stage) const;
  /// True for the looping map (v = c * P + s).
  bool looping() const;
  /// The map stage_of[v], P*V entries.
  const std::vector<int32_t>& map() const { return stage_of_; }

 private:
  int stages_ = 1;
  int chunks_ = 1;
  std::vector<int32_t> stage_of_, chunk_of_, virtual_of_;
};

/// The schedule's placement: Schedule::placement, or looping when empty.
/// REQUIRES: an empty or valid placement (placement_error).
Placement placement_of(const Schedule& s);

/// "" when `stage_of` is a placement of `stages` x `chunks` (P*V entries,
/// each in 0..P-1, each stage exactly V times), else the problem in words:
/// "stage 1 holds 3 virtual stages, expected 2".
std::string placement_error(std::span<const int32_t> stage_of, int stages, int chunks);

/// The V-shaped map of 2 chunks: virtual stages 0..P-1 on stages 0..P-1,
/// P..2P-1 back up on P-1..0 (the first and last virtual stage share stage 0).
std::vector<int32_t> v_shape_placement(int stages);

}  // namespace ppb
