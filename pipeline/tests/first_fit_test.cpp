// FirstFit's placements: first fit at aligned offsets, reuse and merging of
// released spans, exhaustion, and the same offsets for the same sequence
// (what lets a chunk's captured graphs replay step after step).
#include "cuda/first_fit.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace ppb::cuda {
namespace {

constexpr int64_t kA = FirstFit::kAlignment;

TEST(FirstFit, PlacesAtTheLowestAlignedOffsetThatFits) {
  FirstFit f;
  EXPECT_EQ(f.allocate(1), 0);
  EXPECT_EQ(f.allocate(kA), kA);          // sizes round up to the alignment
  EXPECT_EQ(f.allocate(kA + 1), 2 * kA);  // two units
  EXPECT_EQ(f.allocate(0), 4 * kA);       // an empty buffer still has its own address
  EXPECT_EQ(f.high_water(), 5 * kA);
  EXPECT_EQ(f.live(), 5 * kA);
  EXPECT_EQ(f.count(), 4u);
}

TEST(FirstFit, AReleasedSpanIsReusedByTheFirstRequestThatFits) {
  FirstFit f;
  const int64_t a = *f.allocate(2 * kA);
  const int64_t b = *f.allocate(kA);
  (void)*f.allocate(kA);
  f.release(a);
  EXPECT_EQ(f.allocate(3 * kA), 4 * kA);  // does not fit the hole: after the end
  EXPECT_EQ(f.allocate(kA), a);           // fits: the first hole
  EXPECT_EQ(f.allocate(kA), a + kA);      // the rest of it
  f.release(b);
  EXPECT_EQ(f.allocate(kA), b);
  EXPECT_EQ(f.high_water(), 7 * kA);
}

TEST(FirstFit, NeighbouringReleasedSpansMergeIntoOne) {
  FirstFit f;
  const int64_t a = *f.allocate(kA);
  const int64_t b = *f.allocate(kA);
  const int64_t c = *f.allocate(kA);
  (void)*f.allocate(kA);  // keeps the three from merging with the end
  f.release(a);
  f.release(c);
  f.release(b);  // merges with both sides
  EXPECT_EQ(f.allocate(3 * kA), a);
  EXPECT_EQ(f.high_water(), 4 * kA);
}

TEST(FirstFit, ABoundedRegionRefusesWhatDoesNotFitAndStaysUsable) {
  FirstFit f(4 * kA);
  EXPECT_EQ(f.allocate(3 * kA), 0);
  EXPECT_EQ(f.allocate(2 * kA), std::nullopt);
  EXPECT_EQ(f.allocate(kA), 3 * kA);
  EXPECT_EQ(f.allocate(1), std::nullopt);
  f.release(0);
  EXPECT_EQ(f.allocate(2 * kA), 0);
  EXPECT_EQ(f.live(), 3 * kA);
}

TEST(FirstFit, TheSameSequenceGetsTheSameOffsetsAndTheSizingPassBoundsIt) {
  // A step's allocations and releases, interleaved as a chunk's actions do.
  const std::vector<int64_t> sizes{5000, 300, 70000, 256, 9000, 1, 40000};
  const auto step = [&](FirstFit& f) {
    std::vector<int64_t> at;
    std::vector<int64_t> held;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const std::optional<int64_t> o = f.allocate(sizes[i]);
      EXPECT_TRUE(o.has_value());
      at.push_back(o.value_or(-1));
      held.push_back(o.value_or(-1));
      if (i % 2 == 1) {  // every other step frees the one before
        f.release(held[held.size() - 2]);
        held.erase(held.end() - 2);
      }
    }
    for (const int64_t o : held) f.release(o);
    return at;
  };
  FirstFit sizing;
  const std::vector<int64_t> first = step(sizing);
  EXPECT_EQ(sizing.live(), 0);
  FirstFit region(sizing.high_water());  // exactly what the sizing pass saw
  EXPECT_EQ(step(region), first);
  EXPECT_EQ(step(region), first);  // and again, step after step
  EXPECT_EQ(region.high_water(), sizing.high_water());
}

// Against the plainest first fit there is, a map of the region's units:
// the lowest run of free units that holds the request. 4000 random
// requests and releases in a region of 64 units, bounded and unbounded.
TEST(FirstFit, AgreesWithAUnitMapOnARandomSequence) {
  constexpr int kUnits = 64;
  for (const bool bounded : {true, false}) {
    SCOPED_TRACE(bounded ? "bounded" : "unbounded");
    FirstFit f(bounded ? kUnits * kA : FirstFit::kUnbounded);
    std::vector<int> owner(bounded ? kUnits : 8192, -1);  // unit -> allocation, -1 free
    std::vector<std::pair<int64_t, int>> held;            // offset, units
    uint64_t x = 88172645463325252ULL;                    // xorshift64: a fixed sequence
    const auto next = [&x] {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      return x;
    };
    for (int op = 0; op < 4000; ++op) {
      if (!held.empty() && next() % 2 == 0) {
        const size_t i = next() % held.size();
        f.release(held[i].first);
        for (int u = 0; u < held[i].second; ++u)
          owner[static_cast<size_t>((held[i].first / kA) + u)] = -1;
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      const int units = 1 + static_cast<int>(next() % 8);
      std::optional<int64_t> want;
      for (int at = 0, run = 0; at < static_cast<int>(owner.size()); ++at) {
        run = owner[static_cast<size_t>(at)] < 0 ? run + 1 : 0;
        if (run == units) {
          want = int64_t{at - units + 1} * kA;
          break;
        }
      }
      const std::optional<int64_t> got = f.allocate((units * kA) - (next() % kA));
      ASSERT_EQ(got, want) << "op " << op;
      if (!got) continue;
      for (int u = 0; u < units; ++u) owner[static_cast<size_t>((*got / kA) + u)] = op;
      held.emplace_back(*got, units);
    }
    int64_t live = 0;
    for (const auto& h : held) live += h.second * kA;
    EXPECT_EQ(f.live(), live);
    EXPECT_EQ(f.count(), held.size());
  }
}

TEST(FirstFit, ReleasingAnOffsetNotTakenIsABrokenInvariant) {
  FirstFit f;
  (void)*f.allocate(kA);
  EXPECT_DEATH(f.release(kA), "not taken");
}

}  // namespace
}  // namespace ppb::cuda
