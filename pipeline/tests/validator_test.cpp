// The validator on hand-made broken schedules: each problem is found and
// named (stage, action, reason); the dry run handles big schedules.
#include "ppb/pipeline/validator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <random>
#include <string>

#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/schedule_io.hpp"

namespace ppb {
namespace {

Schedule from_text(const std::string& text) { return schedule_from_text(text, "test"); }

std::string error_of(const std::string& text) { return validate_schedule(from_text(text)).error; }

TEST(Validator, AcceptsCorrectHandWrittenSchedules) {
  EXPECT_TRUE(validate_schedule(from_text("s0: F0 F1 B0 B1\ns1: F0 B0 F1 B1\n")).ok);
  EXPECT_TRUE(validate_schedule(from_text("s0: F0 I0 W0\ns1: F0 I0 W0\n")).ok);
  EXPECT_TRUE(validate_schedule(from_text("s0: F0 | B0 |\ns1: F0 | B0 |\n")).ok);
  // Mixed: B on one stage, I and W on the other.
  EXPECT_TRUE(validate_schedule(from_text("s0: F0 B0\ns1: F0 I0 W0\n")).ok);
  // Chunks: v = c*P + s; stage 0 hosts v0 and v2, stage 1 hosts v1 and v3.
  EXPECT_TRUE(
      validate_schedule(from_text("s0: F0.0 F0.1 B0.1 B0.0\ns1: F0.0 F0.1 B0.1 B0.0\n")).ok);
}

TEST(Validator, NamesMissingDuplicateAndMisorderedActions) {
  EXPECT_EQ(error_of("s0: F0 F1 B0 B1\ns1: F0 B0 B1\n"),
            "stage 1: F1 is missing (every micro-batch needs one F per chunk)");
  EXPECT_EQ(error_of("s0: F0 F1 B0 B1\ns1: F0 B0 B1 B1\n"), "stage 1: B1 appears twice");

  EXPECT_EQ(error_of("s0: F0 F0 B0\ns1: F0 B0\n"), "stage 0: F0 appears twice");
  EXPECT_EQ(error_of("s0: F0 B0 B0\ns1: F0 B0\n"), "stage 0: B0 appears twice");
  EXPECT_EQ(error_of("s0: F0 B0 I0 W0\ns1: F0 B0\n"),
            "stage 0: micro-batch 0 has both B and I (a backward is either B, or I and W)");
  EXPECT_EQ(error_of("s0: F0 I0\ns1: F0 B0\n"), "stage 0: I0 has no W0");
  EXPECT_EQ(error_of("s0: F0 B0 W0\ns1: F0 B0\n"),
            "stage 0: W0 given with a full B0 (use B, or I and W)");
  EXPECT_EQ(error_of("s0: B0 F0\ns1: F0 B0\n"), "stage 0: B0 comes before its F0");
  EXPECT_EQ(error_of("s0: F0 W0 I0\ns1: F0 B0\n"), "stage 0: W0 comes before its I0");
  EXPECT_EQ(error_of("s0: F0 | B0\ns1: F0 | B0 |\n"),
            "stage 1 has 2 SYNC barriers, stage 0 has 1 (every stage must reach every barrier)");
}

TEST(Validator, HugeDeclaredSizesAreRejectedBeforeAllocating) {
  Schedule s = from_text("s0: F0 B0\n");
  s.microbatches = 1 << 24;
  s.chunks = 1 << 24;
  EXPECT_EQ(validate_schedule(s).error.rfind("stage 0 has 2 actions, fewer than the", 0), 0u);
}

TEST(Validator, RangesAndShape) {
  Schedule s = from_text("s0: F0 B0\ns1: F0 B0\n");
  s.actions[1][1].microbatch = 5;
  EXPECT_EQ(validate_schedule(s).error, "stage 1, action 1 (B5): micro-batch 5 out of range 0..0");
  s = from_text("s0: F0 B0\ns1: F0 B0\n");
  s.actions[0][0].chunk = 1;
  EXPECT_EQ(validate_schedule(s).error, "stage 0, action 0 (F0): chunk 1 out of range 0..0");
  s.actions.pop_back();
  EXPECT_EQ(validate_schedule(s).error, "schedule has 1 stage lists, expected stages = 2");
}

TEST(Validator, DeadlocksNameStageActionAndReason) {
  // A forward waiting for an activation that comes after a backward it blocks.
  EXPECT_EQ(error_of("s0: F1 B1 F0 B0\ns1: F0 B0 F1 B1\n"),
            "deadlock: stage 0 stuck at B1: waits for the input gradient of micro-batch 1 from "
            "stage 1 (B1), which is "
            "stuck at F0 before it");
  // A barrier that one stage reaches only after waiting for the others.
  EXPECT_EQ(
      error_of("s0: | F0 B0\ns1: F0 | B0\n"),
      "deadlock: stage 0 stuck at |: waits at barrier 1 of 1 for stage 1, which is stuck at F0");
  EXPECT_EQ(error_of("s0: F0 | B0\ns1: | F0 B0\ns2: | | F0 B0\n").substr(0, 10), "stage 2 ha");
  // Chunks: stage 0's chunk 1 forward needs stage 1's chunk 0 forward.
  EXPECT_EQ(error_of("s0: F0.0 F0.1 B0.1 B0.0\ns1: F0.1 F0.0 B0.1 B0.0\n"),
            "deadlock: stage 0 stuck at F0.1: waits for the activation of micro-batch 0 from stage "
            "1 (F0.0), which "
            "is stuck at F0.1 before it");
}

TEST(Validator, OneStageWithChunksWaitsForItself) {
  EXPECT_EQ(error_of("s0: F0.1 F0.0 B0.1 B0.0\n"),
            "deadlock: stage 0 stuck at F0.1: waits for its own F0.0 (the previous chunk), which "
            "comes later in its list");
  EXPECT_EQ(error_of("s0: F0.0 F0.1 B0.0 B0.1\n"),
            "deadlock: stage 0 stuck at B0.0: waits for its own B0.1 (the next chunk's gradient), "
            "which comes later in "
            "its list");
}

TEST(Validator, ThrowsScheduleErrorWithGrid) {
  Schedule s = from_text("s0: F0 | B0\ns1: | F0 B0\ns2: F0 B0 |\n");
  try {
    validate_or_throw(s, "x.json");
    FAIL();
  } catch (const ScheduleError& e) {
    EXPECT_STREQ(e.what(),
                 "x.json: deadlock: stage 0 stuck at |: waits at barrier 1 of 1 for stage 2, which "
                 "is stuck at F0");
    EXPECT_NE(e.grid().find(">s2"), std::string::npos) << e.grid();
    EXPECT_NE(e.grid().find("*F0"), std::string::npos) << e.grid();
    EXPECT_NE(e.grid().find("*|"), std::string::npos) << e.grid();
  }
}

// Half a million actions: generate + validate must be fast (the speed goal is
// measured by a benchmark; this test checks correctness at that size and
// prints the time, it does not assert on it).
TEST(Validator, LargeInterleavedScheduleValidates) {
  ScheduleParams p;
  p.stages = 64;
  p.microbatches = 1024;
  p.chunks = 4;
  const auto t0 = std::chrono::steady_clock::now();
  const Schedule s = generate_schedule("interleaved-1f1b", p);  // generates and validates
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_EQ(s.total_actions(), 2LL * 64 * 4 * 1024);
  EXPECT_TRUE(validate_schedule(s).ok);
  const double seconds = std::chrono::duration<double>(t1 - t0).count();
  ::testing::Test::RecordProperty("generate_validate_seconds", std::to_string(seconds));
  std::cout << "interleaved-1f1b P=64 M=1024 V=4: " << s.total_actions()
            << " actions, generate+validate " << seconds * 1e3 << " ms\n";
}

}  // namespace
}  // namespace ppb

namespace ppb {
namespace {

// Random damage to valid schedules (swaps, deletions, duplicates, wrong ids,
// SYNC inserted on one stage): the validator always answers, with a one-line
// reason when the result is not valid, and a swap of two actions of the same
// stage that keeps it valid is accepted.
TEST(ValidatorFuzz, DamagedSchedulesGiveReasonsNeverCrashes) {
  std::mt19937 rng(12345);
  int rejected = 0;
  for (int round = 0; round < 3000; ++round) {
    const auto& list = schedule_list();
    const ScheduleInfo& info = list[rng() % list.size()];
    ScheduleParams p;
    p.stages = 1 + static_cast<int>(rng() % 5);
    p.microbatches = p.stages * (1 + static_cast<int>(rng() % 3));
    if (info.name == "dualpipe-v") p.microbatches = std::max(p.microbatches, 2 * p.stages);
    p.chunks = info.uses_chunks ? 1 + static_cast<int>(rng() % 3) : 1;
    Schedule s = generate_schedule(info.name, p);
    auto& victim = s.actions[rng() % s.actions.size()];
    if (victim.empty()) continue;
    const size_t k = rng() % victim.size();
    switch (rng() % 5) {
      case 0:
        std::swap(victim[k], victim[rng() % victim.size()]);
        break;
      case 1:
        victim.erase(victim.begin() + static_cast<std::ptrdiff_t>(k));
        break;
      case 2:
        victim.push_back(victim[k]);
        break;
      case 3:
        victim[k].microbatch += static_cast<int32_t>(rng() % 3) - 1;
        break;
      case 4:
        victim.insert(victim.begin() + static_cast<std::ptrdiff_t>(k), Sync());
        break;
    }
    const ValidationResult r = validate_schedule(s);
    if (!r.ok) {
      ++rejected;
      ASSERT_FALSE(r.error.empty());
      ASSERT_EQ(r.error.find('\n'), std::string::npos) << r.error;
    }
  }
  EXPECT_GT(rejected, 1000);
}

// Every prefix of a valid JSON document is rejected with a UsageError.
TEST(ScheduleJsonFuzz, TruncatedDocumentsAreUsageErrors) {
  ScheduleParams p;
  p.stages = 2;
  p.microbatches = 2;
  const std::string doc = schedule_to_json(generate_schedule("zb-h1", p));
  for (size_t n = 0; n < doc.size(); ++n) {
    EXPECT_THROW(schedule_from_json(doc.substr(0, n), "cut.json"), UsageError) << n;
  }
  EXPECT_NO_THROW(schedule_from_json(doc, "whole.json"));
}

TEST(ValidatorOverlap, APairWaitsForBothInputsAndMayDeadlock) {
  // Stage 0 pairs F1 with B0. Fine while stage 1 sends B0's gradient before
  // it needs F1's activation; a deadlock when stage 1 needs F1 first.
  Schedule ok = schedule_from_text("s0: F0 F1+ B0 B1\ns1: F0 B0 F1 B1\n", "t");
  EXPECT_TRUE(ok.actions[0][1].overlap);
  EXPECT_TRUE(validate_schedule(ok).ok) << validate_schedule(ok).error;
  const Schedule bad = schedule_from_text("s0: F0 F1+ B0 B1\ns1: F0 F1 B0 B1\n", "t");
  const ValidationResult r = validate_schedule(bad);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.error.find("stage 0 stuck at F1+: is one unit (OVERLAP_F_B) with B0"),
            std::string::npos)
      << r.error;
}

TEST(ValidatorOverlap, APairIsAnFThenABackward) {
  const Schedule s = schedule_from_text("s0: F0 B0+ F1 B1\n", "t");
  const ValidationResult r = validate_schedule(s);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.error.find("an overlapped pair (OVERLAP_F_B) is an F followed by a B or I"),
            std::string::npos)
      << r.error;
}

TEST(ValidatorPlacement, ABadPlacementIsNamed) {
  Schedule s = schedule_from_text("s0: F0 B0\ns1: F0 B0\n", "t");
  s.placement = {0, 0};
  const ValidationResult r = validate_schedule(s);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.error, "placement: stage 0 holds 2 virtual stages, expected 1 (one per chunk)");
}

}  // namespace
}  // namespace ppb
