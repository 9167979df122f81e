// FirstFit's placements: first fit at aligned offsets, reuse and merging of
// released spans, exhaustion, and the same offsets for the same sequence
// (what lets a chunk's captured graphs replay step after step).
#include "cuda/first_fit.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
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

TEST(FirstFit, ReleasingAnOffsetNotTakenIsABrokenInvariant) {
  FirstFit f;
  (void)*f.allocate(kA);
  EXPECT_DEATH(f.release(kA), "not taken");
}

}  // namespace
}  // namespace ppb::cuda
