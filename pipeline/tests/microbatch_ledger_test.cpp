// MicrobatchLedger, the micro-batch bookkeeping the cpu and cuda chunks
// share: pass order, weight versions and stashes (with real tracked buffers,
// so that what is freed when is measured), and the abort on each misuse.
#include "ppb/exec/microbatch_ledger.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <utility>

#include "ppb/profiling/memory.hpp"

namespace ppb {
namespace {

using Ledger = MicrobatchLedger<TrackedBuffer>;

constexpr int64_t kUnits = 3;
constexpr size_t kUnitCount = kUnits;
constexpr int64_t kKept = 100;  // activation bytes per unit
constexpr int64_t kParam = 40;  // weight bytes per unit

// A forward as a chunk runs it: kKept activation bytes per unit, then admitted.
void forward(Ledger& ledger, MemoryTracker& mem, int64_t mb) {
  Ledger::State state = ledger.start_forward(mb, kUnitCount);
  for (TrackedBuffer& b : state.kept) b = TrackedBuffer(mem, MemCategory::kActivations, kKept);
  ledger.admit(std::move(state));
}

// A copy of the weights, as sgd_step takes it; counts the copies made.
Ledger::Stash weights_copy(MemoryTracker& mem, int& copies) {
  ++copies;
  Ledger::Stash stash;
  for (int64_t u = 0; u < kUnits; ++u) stash.emplace_back(mem, MemCategory::kWeightStash, kParam);
  return stash;
}

TEST(MicrobatchLedger, SplitBackwardRunsForwardThenInputThenWeight) {
  MemoryTracker mem;
  Ledger ledger(/*weight_stashing=*/false);
  forward(ledger, mem, 7);
  forward(ledger, mem, 8);
  EXPECT_EQ(ledger.inflight_count(), 2u);
  EXPECT_EQ(mem.current(MemCategory::kActivations), 2 * kUnits * kKept);

  Ledger::State& s = ledger.for_input_gradient(7, "backward_input");
  EXPECT_EQ(s.mb, 7);
  EXPECT_EQ(s.kept.size(), kUnitCount);
  EXPECT_EQ(s.pending.size(), kUnitCount);
  EXPECT_FALSE(s.input_done);
  s.pending[0] = TrackedBuffer(mem, MemCategory::kActivations, 12);  // kept from I to W
  s.input_done = true;
  EXPECT_TRUE(ledger.in_flight(7));  // I frees nothing by itself

  Ledger::State& w = ledger.for_weight_gradient(7);
  EXPECT_EQ(&w, &s);  // the same state, not a copy
  ledger.finish(7);
  EXPECT_FALSE(ledger.in_flight(7));
  // Everything mb 7 kept is gone, pending included; mb 8's is untouched.
  EXPECT_EQ(mem.current(MemCategory::kActivations), kUnits * kKept);

  ledger.for_input_gradient(8, "backward");  // the full backward, then finish
  ledger.finish(8);
  EXPECT_EQ(ledger.inflight_count(), 0u);
  EXPECT_EQ(mem.current(MemCategory::kActivations), 0);
  // The micro-batch may run again (the next step).
  forward(ledger, mem, 7);
  EXPECT_TRUE(ledger.in_flight(7));
}

TEST(MicrobatchLedger, AForwardNotAdmittedLeavesNothingInFlight) {
  MemoryTracker mem;
  Ledger ledger(/*weight_stashing=*/true);
  {
    Ledger::State state = ledger.start_forward(3, kUnitCount);
    state.kept[0] = TrackedBuffer(mem, MemCategory::kActivations, kKept);
  }  // a forward that failed half-way (a device out of memory) drops its state
  EXPECT_FALSE(ledger.in_flight(3));
  EXPECT_EQ(mem.current(MemCategory::kActivations), 0);
  // No use counted: an optimizer step stashes nothing.
  int copies = 0;
  ledger.stash_current_if_in_use([&] { return weights_copy(mem, copies); });
  EXPECT_EQ(copies, 0);
}

TEST(MicrobatchLedger, StashesOneCopyPerVersionInUseUntilItsLastUserEnds) {
  MemoryTracker mem;
  Ledger ledger(/*weight_stashing=*/true);
  int copies = 0;
  auto step = [&] {
    ledger.stash_current_if_in_use([&] { return weights_copy(mem, copies); });
    ledger.next_version();
  };
  EXPECT_EQ(ledger.version(), 0);
  forward(ledger, mem, 0);
  forward(ledger, mem, 1);
  step();  // version 0 in use by mb 0 and 1: one copy
  EXPECT_EQ(ledger.version(), 1);
  EXPECT_EQ(copies, 1);
  EXPECT_EQ(mem.current(MemCategory::kWeightStash), kUnits * kParam);
  EXPECT_EQ(ledger.version_of(0), 0);
  EXPECT_EQ(ledger.version_of(1), 0);

  forward(ledger, mem, 2);  // on version 1
  EXPECT_EQ(ledger.version_of(2), 1);
  EXPECT_EQ(ledger.stash_for(1), nullptr);  // the current weights
  const Ledger::Stash* v0 = ledger.stash_for(0);
  ASSERT_NE(v0, nullptr);
  EXPECT_EQ(v0->size(), kUnitCount);

  step();  // version 1 in use by mb 2: a second copy
  EXPECT_EQ(copies, 2);
  EXPECT_EQ(ledger.stashed_versions(), 2u);
  EXPECT_EQ(mem.current(MemCategory::kWeightStash), 2 * kUnits * kParam);
  EXPECT_EQ(ledger.stash_for(0), v0);  // stashes do not move

  ledger.for_input_gradient(0, "backward");
  ledger.finish(0);  // version 0 still has mb 1
  EXPECT_EQ(ledger.stashed_versions(), 2u);
  ledger.for_input_gradient(1, "backward_input").input_done = true;
  ledger.for_weight_gradient(1);
  ledger.finish(1);  // version 0's last user: its copy goes
  EXPECT_EQ(ledger.stashed_versions(), 1u);
  EXPECT_EQ(mem.current(MemCategory::kWeightStash), kUnits * kParam);
  ledger.for_input_gradient(2, "backward");
  ledger.finish(2);
  EXPECT_EQ(ledger.stashed_versions(), 0u);
  EXPECT_EQ(mem.current(MemCategory::kWeightStash), 0);

  step();  // nothing in flight: no copy
  EXPECT_EQ(copies, 2);
  EXPECT_EQ(ledger.version(), 3);
}

TEST(MicrobatchLedger, AMicroBatchOnTheCurrentVersionNeedsNoStash) {
  MemoryTracker mem;
  Ledger ledger(/*weight_stashing=*/true);
  int copies = 0;
  ledger.next_version();
  forward(ledger, mem, 4);
  ledger.for_input_gradient(4, "backward");
  ledger.finish(4);  // ends before any step: nothing was ever copied
  ledger.stash_current_if_in_use([&] { return weights_copy(mem, copies); });
  EXPECT_EQ(copies, 0);
  EXPECT_EQ(ledger.stashed_versions(), 0u);
}

TEST(MicrobatchLedger, WithoutStashingEveryPassUsesTheCurrentWeights) {
  MemoryTracker mem;
  Ledger ledger(/*weight_stashing=*/false);
  int copies = 0;
  forward(ledger, mem, 0);
  ledger.stash_current_if_in_use([&] { return weights_copy(mem, copies); });
  ledger.next_version();
  EXPECT_EQ(copies, 0);
  EXPECT_EQ(ledger.version_of(0), 0);       // recorded all the same
  EXPECT_EQ(ledger.stash_for(0), nullptr);  // but computed with the current weights
  EXPECT_EQ(mem.current(MemCategory::kWeightStash), 0);
}

TEST(MicrobatchLedger, ACopyThatThrowsLeavesTheLedgerUnchanged) {
  MemoryTracker mem;
  Ledger ledger(/*weight_stashing=*/true);
  forward(ledger, mem, 0);
  EXPECT_THROW(ledger.stash_current_if_in_use(
                   []() -> Ledger::Stash { throw std::runtime_error("out of device memory"); }),
               std::runtime_error);
  EXPECT_EQ(ledger.stashed_versions(), 0u);
  EXPECT_EQ(ledger.version(), 0);
  EXPECT_EQ(ledger.stash_for(0), nullptr);  // still the current version
}

// gtest runs *DeathTest suites first, before other tests start threads.
TEST(MicrobatchLedgerDeathTest, EachMisuseAbortsNamingTheCall) {
  MemoryTracker mem;
  Ledger ledger(/*weight_stashing=*/true);
  forward(ledger, mem, 0);
  EXPECT_DEATH(ledger.start_forward(0, kUnitCount), "forward of a micro-batch already in flight");
  EXPECT_DEATH(ledger.for_weight_gradient(0), "backward_weight before backward_input");
  EXPECT_DEATH(ledger.for_input_gradient(5, "backward_input"),
               "backward_input of a micro-batch not in flight");
  EXPECT_DEATH(ledger.for_input_gradient(5, "backward"), "backward of a micro-batch not in flight");
  EXPECT_DEATH(ledger.for_weight_gradient(5), "backward_weight of a micro-batch not in flight");
  EXPECT_DEATH(ledger.finish(5), "finish of a micro-batch not in flight");
  EXPECT_DEATH(ledger.version_of(5), "weight_version_of a micro-batch not in flight");

  ledger.for_input_gradient(0, "backward_input").input_done = true;
  // A second I, or a full backward after the I.
  EXPECT_DEATH(ledger.for_input_gradient(0, "backward_input"),
               "backward of a micro-batch whose input gradient is already done");
  EXPECT_DEATH(ledger.for_input_gradient(0, "backward"),
               "backward of a micro-batch whose input gradient is already done");

  // An older version nobody in flight uses has no stash to compute with.
  ledger.for_weight_gradient(0);
  ledger.finish(0);
  ledger.next_version();
  EXPECT_DEATH(ledger.stash_for(0), "weight version of an in-flight micro-batch is not stashed");
}

}  // namespace
}  // namespace ppb
