// The micro-batch bookkeeping of a model chunk, one implementation for every
// backend that computes (CpuChunk on the host, the cuda backend's chunk on a
// device): which micro-batches are in flight and what each keeps, the order
// of a micro-batch's passes (forward, then the input-gradient half, then the
// weight-gradient half, or forward then the full backward), and PipeDream
// weight stashing (which weight version each micro-batch's backward must use,
// and when a version's copy is taken and freed).
//
// The ledger holds the buffers but never fills them: the chunk computes, the
// ledger decides what is in flight and which weights apply. Misuse (a
// forward twice, a W before its I, a micro-batch that is not in flight) is a
// bug in the caller and aborts with PPB_CHECK naming the call.
//
// Example (a chunk's forward, weight-gradient pass and SGD step):
//   MicrobatchLedger<TrackedBuffer> ledger(/*weight_stashing=*/true);
//   auto state = ledger.start_forward(mb, units);   // aborts if mb is in flight
//   ... compute, filling state.kept ...
//   ledger.admit(std::move(state));
//   auto& s = ledger.for_weight_gradient(mb);       // aborts before its I
//   ... compute with ledger.stash_for(s.version) ...
//   ledger.finish(mb);                              // frees s and maybe a stash
//   ledger.stash_current_if_in_use([&] { return copy_of_the_weights(); });
//   ... update the weights ...
//   ledger.next_version();
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ppb/profiling/check.hpp"

namespace ppb {

/// What a chunk keeps for one micro-batch in flight. `Buffer` is the
/// chunk's memory type (TrackedBuffer on the host and on a device).
template <typename Buffer>
struct MicrobatchState {
  int64_t mb = 0;
  /// The weight version its forward used (the ledger's version then).
  int version = 0;
  /// True once its input-gradient half (backward_input) ran.
  bool input_done = false;
  /// Per unit of the chunk: the activations its backward needs.
  std::vector<Buffer> kept;
  /// Per unit: what the weight-gradient half needs beyond `kept` (the
  /// output gradients kept from I to W).
  std::vector<Buffer> pending;
};

/// The in-flight micro-batches of one chunk, their pass order and their
/// weight versions. Not thread-safe (a chunk's calls are ordered).
template <typename Buffer>
class MicrobatchLedger {
 public:
  using State = MicrobatchState<Buffer>;
  /// Per unit of the chunk: the weights of one stashed version.
  using Stash = std::vector<Buffer>;

  /// weight_stashing: PipeDream semantics (a backward uses its forward's
  /// weights); without it every pass uses the current weights.
  explicit MicrobatchLedger(bool weight_stashing) : stashing_(weight_stashing) {}
  MicrobatchLedger(const MicrobatchLedger&) = delete;
  MicrobatchLedger& operator=(const MicrobatchLedger&) = delete;
  MicrobatchLedger(MicrobatchLedger&&) noexcept = default;
  MicrobatchLedger& operator=(MicrobatchLedger&&) noexcept = default;
  ~MicrobatchLedger() = default;

  /// The state of a forward of `mb` about to run: the current version,
  /// `units` empty kept and pending buffers. Nothing is in flight until
  /// admit(), so a forward that fails half-way leaves the ledger unchanged.
  /// REQUIRES (aborts): mb not in flight.
  State start_forward(int64_t mb, size_t units) const {
    PPB_CHECK(!inflight_.contains(mb), "forward of a micro-batch already in flight");
    State state;
    state.mb = mb;
    state.version = version_;
    state.kept.resize(units);
    state.pending.resize(units);
    return state;
  }

  /// Puts the state of a forward that ran in flight, counting its version's
  /// use. REQUIRES: `state` came from start_forward() with no admit() of the
  /// same micro-batch since.
  void admit(State state) {
    if (stashing_) ++version_users_[state.version];
    const int64_t mb = state.mb;
    const bool added = inflight_.emplace(mb, std::move(state)).second;
    PPB_CHECK(added, "forward of a micro-batch already in flight");
  }

  /// The state of `mb` for its input-gradient half: `pass` is "backward_input"
  /// (the split form) or "backward" (the full backward, which finish()es
  /// after). The caller sets input_done once the half ran.
  /// REQUIRES (aborts): mb in flight and its input-gradient half not done.
  State& for_input_gradient(int64_t mb, const char* pass) {
    State& state = find(mb, pass);
    PPB_CHECK(!state.input_done, "backward of a micro-batch whose input gradient is already done");
    return state;
  }

  /// The state of `mb` for backward_weight, which finish()es after.
  /// REQUIRES (aborts): mb in flight and its input-gradient half done.
  State& for_weight_gradient(int64_t mb) {
    State& state = find(mb, "backward_weight");
    PPB_CHECK(state.input_done, "backward_weight before backward_input");
    return state;
  }

  /// Ends `mb`: frees its state (its kept and pending buffers) and, when it
  /// was the last micro-batch in flight on a stashed version, that stash.
  /// REQUIRES (aborts): mb in flight.
  void finish(int64_t mb) {
    const auto it = inflight_.find(mb);
    PPB_CHECK(it != inflight_.end(), "finish of a micro-batch not in flight");
    const int version = it->second.version;
    inflight_.erase(it);
    if (!stashing_) return;
    const auto users = version_users_.find(version);
    PPB_CHECK(users != version_users_.end() && users->second > 0,
              "weight version use count broken");
    if (--users->second == 0) {
      version_users_.erase(users);
      stashes_.erase(version);  // none when it is the current version
    }
  }

  /// The weights `version` must compute with: null for the current weights
  /// (always so without weight stashing), else that version's stash.
  /// REQUIRES (aborts): an older version is stashed, i.e. a micro-batch in
  /// flight uses it.
  const Stash* stash_for(int version) const {
    if (!stashing_ || version == version_) return nullptr;
    const auto it = stashes_.find(version);
    PPB_CHECK(it != stashes_.end(), "weight version of an in-flight micro-batch is not stashed");
    return &it->second;
  }

  /// Before an optimizer step: with weight stashing, when a micro-batch in
  /// flight uses the current version, keeps copy() (a Stash of the current
  /// weights) as that version's. One copy per version, however many
  /// micro-batches use it. copy() may throw; the ledger is then unchanged.
  template <typename Copy>
  void stash_current_if_in_use(Copy&& copy) {
    if (!stashing_ || !version_users_.contains(version_)) return;
    Stash stash = std::forward<Copy>(copy)();
    stashes_.emplace(version_, std::move(stash));
  }

  /// After an optimizer step: the weights are the next version.
  void next_version() { ++version_; }

  /// The current weight version: 0, plus one per next_version().
  int version() const { return version_; }
  /// The weight version `mb`'s forward used. REQUIRES (aborts): mb in flight.
  int version_of(int64_t mb) const {
    const auto it = inflight_.find(mb);
    PPB_CHECK(it != inflight_.end(), "weight_version_of a micro-batch not in flight");
    return it->second.version;
  }

  bool in_flight(int64_t mb) const { return inflight_.contains(mb); }
  size_t inflight_count() const { return inflight_.size(); }
  /// Number of versions whose copy is held (weight stashing only).
  size_t stashed_versions() const { return stashes_.size(); }

 private:
  State& find(int64_t mb, const char* pass) {
    const auto it = inflight_.find(mb);
    PPB_CHECK(it != inflight_.end(), std::string(pass) + " of a micro-batch not in flight");
    return it->second;
  }

  bool stashing_;
  int version_ = 0;
  std::map<int64_t, State> inflight_;  // mb -> state; nodes are stable
  std::map<int, Stash> stashes_;       // version -> its weights, while in use
  std::map<int, int> version_users_;   // version -> micro-batches in flight on it
};

}  // namespace ppb
