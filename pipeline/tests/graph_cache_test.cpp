// GraphCache's decisions on a recording GraphOps: what is captured, when a
// graph is replayed or rebuilt, when and why actions run eagerly, and the
// counts, without a GPU.
#include "cuda/graph_cache.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ppb::cuda {
namespace {

// Records every call; graphs are numbered handles 1, 2, 3, ...
class FakeOps final : public GraphOps {
 public:
  std::string refuse_begin;  // non-empty: begin_capture refuses with it
  std::string refuse_end;    // non-empty: end_capture refuses with it
  bool capturing = false;
  int enqueued = 0;       // calls of work()'s function
  int work_captured = 0;  // enqueue calls that ran under a capture
  std::vector<intptr_t> launched;
  std::vector<intptr_t> destroyed;
  intptr_t made = 0;

  std::string begin_capture() override {
    if (!refuse_begin.empty()) return refuse_begin;
    capturing = true;
    return "";
  }
  GraphHandle end_capture(std::string* why) override {
    capturing = false;
    if (!refuse_end.empty()) {
      *why = refuse_end;
      return nullptr;
    }
    return reinterpret_cast<GraphHandle>(++made);  // NOLINT(performance-no-int-to-ptr)
  }
  void abort_capture() override { capturing = false; }
  void launch(GraphHandle g) override { launched.push_back(reinterpret_cast<intptr_t>(g)); }
  void destroy(GraphHandle g) override { destroyed.push_back(reinterpret_cast<intptr_t>(g)); }
  // An action's work that counts its calls, and those made under a capture.
  std::function<void()> work() {
    return [this] {
      ++enqueued;
      if (capturing) ++work_captured;
    };
  }
};

int g_in = 0;
int g_out = 0;
int g_other = 0;
int g_stash = 0;

GraphKey key(GraphPass pass, int64_t slot, const void* in = &g_in, const void* weights = &g_out) {
  return GraphKey{.chunk = 0, .pass = pass, .slot = slot, .pointers = {in, weights}};
}

TEST(GraphCache, FirstCallCapturesThenTheSameKeyReplaysWithoutEnqueueing) {
  FakeOps ops;
  GraphCache cache(ops, true);
  const std::function<void()> work = ops.work();
  EXPECT_EQ(cache.decide(key(GraphPass::kForward, 0)), GraphDecision::kCapture);
  EXPECT_EQ(cache.run(key(GraphPass::kForward, 0), work), GraphDecision::kCapture);
  EXPECT_EQ(ops.enqueued, 1);
  EXPECT_EQ(ops.work_captured, 1);                      // the work ran inside the capture
  EXPECT_EQ(ops.launched, (std::vector<intptr_t>{1}));  // and the graph once
  EXPECT_EQ(cache.run(key(GraphPass::kForward, 0), work), GraphDecision::kReplay);
  EXPECT_EQ(cache.run(key(GraphPass::kForward, 0), work), GraphDecision::kReplay);
  EXPECT_EQ(ops.enqueued, 1);  // a replay does not enqueue again
  EXPECT_EQ(ops.launched, (std::vector<intptr_t>{1, 1, 1}));
  EXPECT_EQ(cache.counts(), (GraphCounts{.captured = 1, .replayed = 2, .rebuilt = 0, .eager = 0}));
  EXPECT_EQ(cache.eager_reason(), "");
}

TEST(GraphCache, EachChunkPassAndSlotHasItsOwnGraph) {
  FakeOps ops;
  GraphCache cache(ops, true);
  auto work = [] {};
  EXPECT_EQ(cache.run(key(GraphPass::kForward, 0), work), GraphDecision::kCapture);
  EXPECT_EQ(cache.run(key(GraphPass::kForward, 1), work), GraphDecision::kCapture);
  EXPECT_EQ(cache.run(key(GraphPass::kBackward, 0), work), GraphDecision::kCapture);
  GraphKey other_chunk = key(GraphPass::kForward, 0);
  other_chunk.chunk = 1;
  EXPECT_EQ(cache.run(other_chunk, work), GraphDecision::kCapture);
  EXPECT_EQ(cache.size(), 4u);
  EXPECT_EQ(cache.run(key(GraphPass::kForward, 1), work), GraphDecision::kReplay);
  EXPECT_EQ(ops.launched.back(), 2);  // slot 1's graph, not slot 0's
  EXPECT_EQ(cache.counts().captured, 4);
}

TEST(GraphCache, AnyMovedPointerRebuildsAndDestroysTheOldGraph) {
  FakeOps ops;
  GraphCache cache(ops, true);
  int enqueued = 0;
  auto work = [&] { ++enqueued; };
  (void)cache.run(key(GraphPass::kBackwardWeight, 0), work);
  // The weights it reads moved (a stashed version).
  EXPECT_EQ(cache.decide(key(GraphPass::kBackwardWeight, 0, &g_in, &g_stash)),
            GraphDecision::kRebuild);
  EXPECT_EQ(cache.run(key(GraphPass::kBackwardWeight, 0, &g_in, &g_stash), work),
            GraphDecision::kRebuild);
  EXPECT_EQ(ops.destroyed, (std::vector<intptr_t>{1}));
  // Its input moved.
  EXPECT_EQ(cache.run(key(GraphPass::kBackwardWeight, 0, &g_other, &g_stash), work),
            GraphDecision::kRebuild);
  EXPECT_EQ(ops.destroyed, (std::vector<intptr_t>{1, 2}));
  EXPECT_EQ(cache.run(key(GraphPass::kBackwardWeight, 0, &g_other, &g_stash), work),
            GraphDecision::kReplay);
  EXPECT_EQ(ops.launched.back(), 3);  // the rebuilt graph
  EXPECT_EQ(enqueued, 3);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.counts(), (GraphCounts{.captured = 1, .replayed = 1, .rebuilt = 2, .eager = 0}));
}

// prepare() captures ahead of the launch (the backend's host work before
// the action's timing opens): nothing launched until run(), which counts
// the first launch as the capture (rebuild) it was; a cached graph needs
// no preparing; a refused capture enqueues nothing until run() runs the
// work eagerly.
TEST(GraphCache, PrepareCapturesWithoutLaunchingAndRunLaunchesWhatItMade) {
  FakeOps ops;
  GraphCache cache(ops, true);
  const std::function<void()> work = ops.work();
  EXPECT_EQ(cache.prepare(key(GraphPass::kForward, 0), work), GraphDecision::kReplay);
  EXPECT_EQ(ops.work_captured, 1);
  EXPECT_TRUE(ops.launched.empty());
  EXPECT_EQ(cache.counts(), GraphCounts{});
  EXPECT_EQ(cache.run(key(GraphPass::kForward, 0), work), GraphDecision::kCapture);
  EXPECT_EQ(ops.enqueued, 1);  // captured once, not again at the launch
  EXPECT_EQ(ops.launched, (std::vector<intptr_t>{1}));
  EXPECT_EQ(cache.prepare(key(GraphPass::kForward, 0), work), GraphDecision::kReplay);
  EXPECT_EQ(cache.run(key(GraphPass::kForward, 0), work), GraphDecision::kReplay);
  // Moved weights: rebuilt by prepare, counted rebuilt at its launch.
  EXPECT_EQ(cache.prepare(key(GraphPass::kForward, 0, &g_in, &g_stash), work),
            GraphDecision::kReplay);
  EXPECT_EQ(ops.destroyed, (std::vector<intptr_t>{1}));
  EXPECT_EQ(ops.launched, (std::vector<intptr_t>{1, 1}));
  EXPECT_EQ(cache.run(key(GraphPass::kForward, 0, &g_in, &g_stash), work), GraphDecision::kRebuild);
  EXPECT_EQ(ops.launched, (std::vector<intptr_t>{1, 1, 2}));
  EXPECT_EQ(ops.enqueued, 2);
  EXPECT_EQ(cache.counts(), (GraphCounts{.captured = 1, .replayed = 1, .rebuilt = 1, .eager = 0}));
  ops.refuse_begin = "cudaStreamBeginCapture: operation not supported";
  EXPECT_EQ(cache.prepare(key(GraphPass::kBackward, 0), work), GraphDecision::kEager);
  EXPECT_EQ(ops.enqueued, 2);  // nothing enqueued before the action's window
  EXPECT_EQ(cache.run(key(GraphPass::kBackward, 0), work), GraphDecision::kEager);
  EXPECT_EQ(ops.enqueued, 3);
  EXPECT_EQ(cache.eager_reason(), ops.refuse_begin);
}

TEST(GraphCache, ARefusedCaptureRunsEagerAndStaysEagerWithTheReason) {
  FakeOps ops;
  GraphCache cache(ops, true);
  int enqueued = 0;
  auto work = [&] { ++enqueued; };
  (void)cache.run(key(GraphPass::kForward, 0), work);  // captured before the refusal
  ops.refuse_begin = "cudaStreamBeginCapture: operation not supported";
  EXPECT_EQ(cache.run(key(GraphPass::kForward, 1), work), GraphDecision::kEager);
  EXPECT_EQ(enqueued, 2);  // the refused action still ran, eagerly
  EXPECT_EQ(cache.eager_reason(), "cudaStreamBeginCapture: operation not supported");
  EXPECT_EQ(ops.destroyed, (std::vector<intptr_t>{1}));  // no half graphs, half eager
  ops.refuse_begin.clear();  // a later capture would work: the cache stays eager
  EXPECT_EQ(cache.decide(key(GraphPass::kForward, 0)), GraphDecision::kEager);
  EXPECT_EQ(cache.run(key(GraphPass::kForward, 0), work), GraphDecision::kEager);
  EXPECT_EQ(cache.run(key(GraphPass::kBackward, 0), work), GraphDecision::kEager);
  EXPECT_EQ(enqueued, 4);
  EXPECT_EQ(cache.counts(), (GraphCounts{.captured = 1, .replayed = 0, .rebuilt = 0, .eager = 3}));
  EXPECT_EQ(ops.launched, (std::vector<intptr_t>{1}));
}

TEST(GraphCache, OffRunsEverythingEagerAndSaysSo) {
  FakeOps ops;
  GraphCache cache(ops, false);
  int enqueued = 0;
  EXPECT_EQ(cache.run(key(GraphPass::kSgd, 0), [&] { ++enqueued; }), GraphDecision::kEager);
  EXPECT_EQ(enqueued, 1);
  EXPECT_EQ(cache.eager_reason(), "--cuda-graphs off");
  EXPECT_EQ(cache.counts().eager, 1);
  GraphCache later(ops, false);  // an action eager for its own reason: graphs being off is why
  (void)later.run_eager("not replay-safe", [] {});
  EXPECT_EQ(later.eager_reason(), "--cuda-graphs off");
  EXPECT_TRUE(ops.launched.empty());
}

TEST(GraphCache, TheSizingStepsEagerActionsGiveNoReasonUnlessGraphsAreOff) {
  FakeOps ops;
  GraphCache cache(ops, true);
  int enqueued = 0;
  auto work = [&] { ++enqueued; };
  EXPECT_EQ(cache.run_sizing(work), GraphDecision::kEager);
  EXPECT_EQ(cache.run(key(GraphPass::kForward, 0), work), GraphDecision::kCapture);
  EXPECT_EQ(enqueued, 2);
  EXPECT_EQ(cache.eager_reason(), "");  // sizing is not a fallback
  EXPECT_EQ(cache.run_eager("a buffer did not fit", work), GraphDecision::kEager);
  EXPECT_EQ(cache.eager_reason(), "a buffer did not fit");
  EXPECT_EQ(cache.counts(), (GraphCounts{.captured = 1, .replayed = 0, .rebuilt = 0, .eager = 2}));
  GraphCache off(ops, false);
  (void)off.run_sizing(work);
  EXPECT_EQ(off.eager_reason(), "--cuda-graphs off");
}

TEST(GraphCache, DisableKeepsTheFirstReason) {
  FakeOps ops;
  GraphCache cache(ops, true);
  cache.disable("first");
  cache.disable("second");
  EXPECT_EQ(cache.eager_reason(), "");  // no action ran yet
  EXPECT_EQ(cache.decide(key(GraphPass::kForward, 0)), GraphDecision::kEager);
  (void)cache.run(key(GraphPass::kForward, 0), [] {});
  EXPECT_EQ(cache.eager_reason(), "first");
}

TEST(GraphCache, OneEagerActionLeavesGraphsOnForTheOthers) {
  FakeOps ops;
  GraphCache cache(ops, true);
  int enqueued = 0;
  auto work = [&] { ++enqueued; };
  EXPECT_EQ(cache.run_eager("kept activations are not static per slot", work),
            GraphDecision::kEager);
  EXPECT_EQ(cache.run(key(GraphPass::kSgd, 0), work), GraphDecision::kCapture);
  EXPECT_EQ(cache.run(key(GraphPass::kSgd, 0), work), GraphDecision::kReplay);
  EXPECT_EQ(cache.run_eager("another reason", work), GraphDecision::kEager);
  EXPECT_EQ(enqueued, 3);
  EXPECT_EQ(cache.eager_reason(), "kept activations are not static per slot");
  EXPECT_EQ(cache.counts(), (GraphCounts{.captured = 1, .replayed = 1, .rebuilt = 0, .eager = 2}));
}

TEST(GraphCache, ARefusedEndOfCaptureRunsTheWorkEagerAndStaysEager) {
  FakeOps ops;
  GraphCache cache(ops, true);
  int enqueued = 0;
  auto work = [&] { ++enqueued; };
  (void)cache.run(key(GraphPass::kForward, 0), work);  // captured before the refusal
  ops.refuse_end = "cudaStreamEndCapture: operation not permitted when stream is capturing";
  EXPECT_EQ(cache.run(key(GraphPass::kForward, 1), work), GraphDecision::kEager);
  EXPECT_EQ(enqueued, 3);  // recorded into the refused capture, then enqueued eagerly
  EXPECT_FALSE(ops.capturing);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(ops.destroyed, (std::vector<intptr_t>{1}));
  EXPECT_EQ(cache.eager_reason(), ops.refuse_end);
  EXPECT_EQ(cache.decide(key(GraphPass::kForward, 0)), GraphDecision::kEager);
  EXPECT_EQ(cache.counts(), (GraphCounts{.captured = 1, .replayed = 0, .rebuilt = 0, .eager = 1}));
  ops.refuse_end.clear();
  // Work that a capture cannot hold throws CaptureRefused: it runs eagerly
  // instead, and graphs are off from then on.
  GraphCache refused(ops, true);
  int runs = 0;
  bool captured_once = false;
  EXPECT_EQ(refused.run(key(GraphPass::kForward, 0),
                        [&] {
                          ++runs;
                          if (ops.capturing && !captured_once) {
                            captured_once = true;
                            throw CaptureRefused("cudnn execute: not supported while capturing");
                          }
                        }),
            GraphDecision::kEager);
  EXPECT_EQ(runs, 2);  // captured (refused), then eagerly
  EXPECT_FALSE(ops.capturing);
  EXPECT_EQ(refused.eager_reason(), "cudnn execute: not supported while capturing");
  EXPECT_EQ(refused.decide(key(GraphPass::kForward, 1)), GraphDecision::kEager);
  // Anything else the work throws abandons the capture and passes on.
  GraphCache other(ops, true);
  EXPECT_THROW((void)other.run(key(GraphPass::kForward, 0),
                               [] { throw std::runtime_error("out of memory"); }),
               std::runtime_error);
  EXPECT_FALSE(ops.capturing);
  EXPECT_EQ(other.decide(key(GraphPass::kForward, 0)), GraphDecision::kCapture);
}

}  // namespace
}  // namespace ppb::cuda
