#include "ppb/profiling/memory.hpp"

#include <gtest/gtest.h>

namespace ppb {
namespace {

TEST(MemoryTracker, CountsCategoriesAndPeakOfTheSum) {
  MemoryTracker t;
  {
    TrackedBuffer a(t, MemCategory::kActivations, 1000);
    TrackedBuffer p(t, MemCategory::kParameters, 500);
    EXPECT_EQ(t.current(MemCategory::kActivations), 1000);
    EXPECT_EQ(t.current_total(), 1500);
  }
  EXPECT_EQ(t.current_total(), 0);
  EXPECT_EQ(t.peak_total(), 1500);
  TrackedBuffer w(t, MemCategory::kWorkspace, 1200);
  // 1200 < 1500: the peak of the sum stays, the category split at peak too.
  EXPECT_EQ(t.peak_total(), 1500);
  EXPECT_EQ(t.at_peak()[0], 1000);
  EXPECT_EQ(t.peak(MemCategory::kWorkspace), 1200);
  t.reset_peaks();
  EXPECT_EQ(t.peak_total(), 1200);
}

TEST(TrackedBuffer, MoveTransfersOwnershipAndZeroFills) {
  MemoryTracker t;
  TrackedBuffer a(t, MemCategory::kCommBuffers, 256);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(a.as<float>()[i], 0.0f);
  TrackedBuffer b = std::move(a);
  EXPECT_EQ(a.size(), 0);  // NOLINT(bugprone-use-after-move): the moved-from state is the point
  EXPECT_EQ(b.size(), 256);
  EXPECT_EQ(t.current(MemCategory::kCommBuffers), 256);
  b = TrackedBuffer();
  EXPECT_EQ(t.current_total(), 0);
}

// A buffer recounted in another category: the total stays, the categories
// move, the new category's peak follows, and the buffer is freed from it.
TEST(TrackedBuffer, RecountMovesItsBytesToAnotherCategory) {
  MemoryTracker t;
  TrackedBuffer kept(t, MemCategory::kActivations, 300);
  TrackedBuffer b(t, MemCategory::kWorkspace, 200);
  int64_t seen_activations = 0;  // what a per-step peak reads in on_change
  t.on_change = [&](int64_t) { seen_activations = t.current(MemCategory::kActivations); };
  b.recount(MemCategory::kActivations);
  EXPECT_EQ(seen_activations, 500);
  t.on_change = nullptr;
  EXPECT_EQ(b.category(), MemCategory::kActivations);
  EXPECT_EQ(t.current(MemCategory::kWorkspace), 0);
  EXPECT_EQ(t.current(MemCategory::kActivations), 500);
  EXPECT_EQ(t.peak(MemCategory::kActivations), 500);
  EXPECT_EQ(t.current_total(), 500);
  EXPECT_EQ(t.peak_total(), 500);
  b = TrackedBuffer();
  EXPECT_EQ(t.current(MemCategory::kActivations), 300);
  EXPECT_EQ(t.current(MemCategory::kWorkspace), 0);
}

// Device and pinned memory are adopted with their own release function: it
// runs exactly once, after a move only from the final owner.
TEST(TrackedBuffer, AdoptedMemoryIsReleasedOnceByItsOwnFunction) {
  MemoryTracker t;
  static int released = 0;
  static std::byte* last = nullptr;
  released = 0;
  alignas(16) static std::byte storage[128];
  const TrackedBuffer::Release release = [](void* context, std::byte* data) {
    ++*static_cast<int*>(context);
    last = data;
  };
  {
    TrackedBuffer a(t, MemCategory::kActivations, 128, storage, release, &released);
    EXPECT_EQ(t.current(MemCategory::kActivations), 128);
    TrackedBuffer b = std::move(a);
    TrackedBuffer c;
    c = std::move(b);
    EXPECT_EQ(released, 0);
    EXPECT_EQ(c.data(), storage);
  }
  EXPECT_EQ(released, 1);
  EXPECT_EQ(last, storage);
  EXPECT_EQ(t.current_total(), 0);
  EXPECT_EQ(t.peak(MemCategory::kActivations), 128);
}

TEST(MemoryTracker, OnChangeSeesEveryAllocation) {
  MemoryTracker t;
  int64_t last = -1;
  t.on_change = [&](int64_t total) { last = total; };
  TrackedBuffer a(t, MemCategory::kActivations, 10);
  EXPECT_EQ(last, 10);
}

// A released block of at least kCachedBlockBytes serves the next buffer of
// its size, zero-filled again; the counts are the live buffers' alone.
TEST(MemoryTracker, ReusesReleasedHostBlocksOfTheSameSize) {
  MemoryTracker t;
  constexpr int64_t kBytes = 1 << 20;
  const std::byte* first = nullptr;
  {
    TrackedBuffer a(t, MemCategory::kActivations, kBytes);
    first = a.data();
    for (int64_t i = 0; i < kBytes / 4; ++i) a.as<float>()[i] = 1.5f;
  }
  EXPECT_EQ(t.current_total(), 0);
  EXPECT_EQ(t.cached_bytes(), kBytes);
  TrackedBuffer b(t, MemCategory::kWorkspace, kBytes);
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(t.cached_bytes(), 0);
  EXPECT_EQ(t.current(MemCategory::kWorkspace), kBytes);
  for (int64_t i = 0; i < kBytes / 4; ++i) ASSERT_EQ(b.as<float>()[i], 0.0f) << "float " << i;
  // Another size is not served from it.
  TrackedBuffer c(t, MemCategory::kWorkspace, kBytes + 64);
  EXPECT_NE(c.data(), first);
}

TEST(MemoryTracker, CachesNeitherSmallBlocksNorMoreThanTheLargestLiveTotal) {
  MemoryTracker t;
  constexpr int64_t kBig = 1 << 20;
  {
    TrackedBuffer small(t, MemCategory::kWorkspace,
                        static_cast<int64_t>(MemoryTracker::kCachedBlockBytes) - 64);
  }
  EXPECT_EQ(t.cached_bytes(), 0);
  {
    TrackedBuffer a(t, MemCategory::kActivations, kBig);
    TrackedBuffer b(t, MemCategory::kActivations, kBig);
  }
  EXPECT_EQ(t.cached_bytes(), 2 * kBig);  // the live total reached 2 MiB
  {
    TrackedBuffer c(t, MemCategory::kActivations, 3 * kBig);  // live high: 3 MiB
  }
  EXPECT_EQ(t.cached_bytes(), 2 * kBig);  // 5 MiB cached would be more than 3
}

}  // namespace
}  // namespace ppb
