// The cuda backend's CUDA-graph bookkeeping, host-side only: for each
// (chunk, pass, micro-batch slot) it decides whether an action's work is
// captured into a graph, replayed from the graph captured before, rebuilt,
// or run eagerly, and counts each. The graphs themselves are opaque handles
// made and launched through GraphOps, so that the decisions are testable on
// a CPU without a GPU (backend_cuda.cpp holds the CUDA side).
//
// A graph is valid for replay only with what it was captured with: the
// key's pointers (input, output, and any buffer the action reads or writes
// that is not owned by the graph) and the weight version whose weights its
// kernels read. A key whose identity (chunk, pass, slot) matches a cached
// graph but whose pointers or version differ rebuilds that graph.
//
// Eager fallback is sticky: once capture is refused (a runtime that cannot
// capture, an unsupported call, a capture error), every later action runs
// eagerly and eager_reason() says why, so that one run's actions are not
// half graphs, half eager for reasons that change mid-run.
//
// Memory rule. A capture would record stream-ordered allocations as graph
// memory nodes, owned by the graph, invisible to the tracker and freed
// outside it by a later action. So the work captured allocates nothing:
// the backend records an action's device work after its host bookkeeping
// placed every buffer it uses in the chunk's static region (cuda_chunk.hpp),
// and the key names every address that work reads or writes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace ppb::cuda {

/// Work being captured met something a capture cannot hold (a CUDA call
/// that fails only under capture, a library that refuses to run captured):
/// thrown by the work instead of ending the job, so that the cache can run
/// it eagerly instead.
class CaptureRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An instantiated graph (cudaGraphExec_t behind GraphOps); null = none.
using GraphHandle = void*;

/// What makes and runs graphs: CUDA's stream capture on the backend's
/// compute stream, a recording fake in the tests.
class GraphOps {
 public:
  virtual ~GraphOps() = default;
  /// Starts capturing the work enqueued on the stream. Returns "" on
  /// success, else one line saying why no capture is possible (nothing was
  /// started; the work must run eagerly).
  virtual std::string begin_capture() = 0;
  /// Ends the capture begun by begin_capture and instantiates it. Returns
  /// the graph, or null with *why set (the captured work did not run).
  virtual GraphHandle end_capture(std::string* why) = 0;
  /// Abandons a capture after the work being captured failed.
  virtual void abort_capture() = 0;
  /// Enqueues one launch of `graph` on the stream.
  virtual void launch(GraphHandle graph) = 0;
  /// Destroys `graph` (no launch of it may be pending on the host's side).
  virtual void destroy(GraphHandle graph) = 0;
};

/// The pass of an action a graph holds (ActionKind without SYNC, plus the
/// optimizer step).
enum class GraphPass : uint8_t { kForward, kBackward, kBackwardInput, kBackwardWeight, kSgd };

/// What a graph was captured for and with.
struct GraphKey {
  int chunk = 0;
  GraphPass pass = GraphPass::kForward;
  int64_t slot = 0;  ///< the micro-batch (its kept buffers are its own); 0 for kSgd
  /// Every buffer outside the graph it reads or writes (input, output, ...).
  /// The weights' buffers are among them: a weight stash lives elsewhere.
  std::vector<const void*> pointers;

  friend bool operator==(const GraphKey&, const GraphKey&) = default;
};

/// What the cache did, over its life.
struct GraphCounts {
  int64_t captured = 0;  ///< first captures of a (chunk, pass, slot)
  int64_t replayed = 0;  ///< launches of a graph captured earlier
  int64_t rebuilt = 0;   ///< captures replacing a graph whose key changed
  int64_t eager = 0;     ///< actions that ran without a graph

  friend bool operator==(const GraphCounts&, const GraphCounts&) = default;
};

/// What run() did with one action.
enum class GraphDecision : uint8_t { kCapture, kReplay, kRebuild, kEager };

class GraphCache {
 public:
  /// `ops` must outlive the cache. `enabled` false (--cuda-graphs off): every
  /// action eager with the reason "--cuda-graphs off".
  GraphCache(GraphOps& ops, bool enabled);
  ~GraphCache();  // destroys every graph it holds
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  /// What run(key, ...) would do now.
  GraphDecision decide(const GraphKey& key) const;
  /// Captures (or rebuilds) the graph of `key` now, without launching it,
  /// so that the host's capture and instantiation come before the action's
  /// timing and its planted work begin; run(key, ...) then launches it and
  /// counts it as captured (rebuilt). Nothing is enqueued eagerly: where
  /// the capture is refused graphs turn off (sticky, as in run) and run
  /// runs the work eagerly. Returns what run(key, ...) will do: kReplay
  /// once the graph is ready (also when it was cached), kEager when graphs
  /// are off.
  GraphDecision prepare(const GraphKey& key, const std::function<void()>& enqueue);
  /// Runs one action: `enqueue` enqueues its work on the stream (eagerly,
  /// or under capture, then the graph is launched once), or the cached
  /// graph of `key` is launched without calling it. Returns what it did.
  /// `enqueue` only enqueues device work (no host effects), so that it can
  /// run again: a capture that begin_capture or end_capture refuses, or
  /// work that throws CaptureRefused while captured, falls back to eager
  /// (sticky), its work enqueued eagerly. Anything else the work throws
  /// abandons the capture and passes on.
  GraphDecision run(const GraphKey& key, const std::function<void()>& enqueue);
  /// Runs one action eagerly for `reason` (its work is not replay-safe),
  /// without turning graphs off for other actions. With graphs off, the
  /// reason recorded is why they are off.
  GraphDecision run_eager(const std::string& reason, const std::function<void()>& enqueue);
  /// Runs one action of the step that sizes the static buffers graphs need
  /// (cuda_chunk.hpp) eagerly: counted eager, but no fallback, so it gives
  /// no eager reason (with graphs off, that is the reason, as above).
  GraphDecision run_sizing(const std::function<void()>& enqueue);
  /// Turns graphs off for the rest of the cache's life (every later action
  /// eager) with `reason`; keeps the first reason given.
  void disable(const std::string& reason);

  const GraphCounts& counts() const { return counts_; }
  /// Why the first action that ran eagerly did ("" while none did, or
  /// only the sizing step's did).
  const std::string& eager_reason() const { return eager_reason_; }
  /// Graphs held (one per (chunk, pass, slot) captured).
  size_t size() const { return graphs_.size(); }

 private:
  using Identity = std::tuple<int, GraphPass, int64_t>;
  struct Entry {
    GraphKey key;
    GraphHandle graph = nullptr;
    /// What its next launch counts as: kCapture or kRebuild until the
    /// graph prepare() made is first launched, then kReplay.
    GraphDecision next = GraphDecision::kReplay;
  };
  static Identity identity(const GraphKey& key) { return {key.chunk, key.pass, key.slot}; }
  // A capture refused: graphs off for good, none of them kept.
  void turn_off(const std::string& why);
  GraphOps* ops_;
  std::string disabled_;      // non-empty: graphs are off, for this reason
  std::string eager_reason_;  // the first eager action's reason
  std::map<Identity, Entry> graphs_;
  GraphCounts counts_;
};

}  // namespace ppb::cuda
