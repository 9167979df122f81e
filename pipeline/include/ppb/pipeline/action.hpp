// A schedule is data (docs/architecture.md, "One idea"): for each
// stage an ordered list of actions. Generators produce it, the validator
// proves it complete and deadlock-free, the executor runs it over MPI and the
// simulator runs it on a cost model.
//
// Communication is not written in the schedule; it is derived:
//  * virtual stage of (stage s, chunk c) is v = c * P + s (Megatron-LM's
//    interleaving; with one chunk v = s);
//  * after F(mb, c) on virtual stage v < P*V-1, its output goes to v + 1;
//  * after B(mb, c) or I(mb, c) on v > 0, the input gradient goes to v - 1;
//  * W is local; SYNC is a barrier across all stages.
#pragma once

#include <cstdint>
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

/// Virtual stage index of (stage, chunk): chunk * P + stage.
inline int virtual_stage(int stage, int chunk, int stages) { return chunk * stages + stage; }

}  // namespace ppb
