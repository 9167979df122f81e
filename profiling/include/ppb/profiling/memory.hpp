// Tracked memory: every byte the executor and the backends allocate is counted
// in a category, so a result can say how much of a stage's peak was
// activations, parameters, gradients, optimizer state, weight stash,
// communication buffers or workspace (docs/metrics.md, "Memory").
//
// Example:
//   ppb::MemoryTracker tracker;
//   ppb::TrackedBuffer x(tracker, ppb::MemCategory::kActivations, 4096);
//   float* p = x.as<float>();
//   tracker.peak_total();   // >= 4096
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string_view>
#include <vector>

namespace ppb {

enum class MemCategory : uint8_t {
  kActivations,
  kParameters,
  kGradients,
  kOptimizerState,
  kWeightStash,
  kCommBuffers,
  kWorkspace,
};
inline constexpr int kNumMemCategories = 7;

/// "activations", "parameters", "gradients", "optimizer_state", "weight_stash",
/// "comm_buffers", "workspace" — the names used in result files.
std::string_view mem_category_name(MemCategory category);

/// Per-category current and peak byte counts of one process (one stage).
/// on_alloc/on_free/reset_peaks may be called from several threads (the
/// executor's and a backend's compute stream); on_change runs under the
/// tracker's lock (it may read current()/peak() but not allocate). The
/// readers are for a quiet moment (no stream running). Peak per category is the
/// category's own high-water mark; peak_total() is the high-water mark of the
/// sum (not the sum of per-category peaks).
///
/// The tracker also keeps the host blocks its buffers release, for the next
/// buffer of the same size (see take_host_block): a backend that allocates
/// its activations and workspace per action would otherwise have malloc map
/// and fault in fresh pages for most of them, since glibc hands large blocks
/// back to the kernel, and the cpu backend's actions would take several
/// percent longer, more on a worker thread's arena than on the main one.
/// Cached blocks are not counted: the figures are the live buffers' bytes.
class MemoryTracker {
 public:
  /// Host blocks of at least this many bytes are cached.
  static constexpr size_t kCachedBlockBytes = size_t{64} << 10;

  MemoryTracker() = default;
  ~MemoryTracker();  // frees the cached blocks
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;

  void on_alloc(MemCategory category, int64_t bytes);
  void on_free(MemCategory category, int64_t bytes);
  /// `bytes` counted in `from` now count in `to` (the total is unchanged).
  void on_recount(MemCategory from, MemCategory to, int64_t bytes);

  int64_t current(MemCategory category) const { return current_[index(category)]; }
  int64_t peak(MemCategory category) const { return peak_[index(category)]; }
  int64_t current_total() const { return current_total_; }
  int64_t peak_total() const { return peak_total_; }
  /// Each category's bytes at the moment peak_total() was reached.
  const std::array<int64_t, kNumMemCategories>& at_peak() const { return at_peak_; }

  /// Starts a new measurement window: peaks drop to the current values.
  void reset_peaks();

  /// Called after every allocation and recount with the new total (the
  /// memory guard watches it; per-step peaks read the categories). May be
  /// empty.
  std::function<void(int64_t total)> on_change;

  /// A cached host block of exactly `bytes` (64-byte aligned, contents
  /// undefined), or null when none is cached.
  std::byte* take_host_block(size_t bytes);
  /// Caches `data` (`bytes` long, from std::aligned_alloc) and returns true,
  /// unless it is smaller than kCachedBlockBytes or caching it would hold
  /// more bytes than the largest live total so far: then false, and the
  /// caller frees it.
  bool keep_host_block(std::byte* data, size_t bytes);
  /// Bytes of the cached host blocks.
  int64_t cached_bytes() const;

 private:
  static size_t index(MemCategory c) { return static_cast<size_t>(c); }
  mutable std::mutex cache_mutex_;  // apart: on_change may run while a block is cached
  std::map<size_t, std::vector<std::byte*>> cache_;
  size_t cached_ = 0;
  int64_t live_high_ = 0;  // the largest current_total_ so far (reset_peaks keeps it)
  std::mutex mutex_;
  std::array<int64_t, kNumMemCategories> current_{};
  std::array<int64_t, kNumMemCategories> peak_{};
  std::array<int64_t, kNumMemCategories> at_peak_{};
  int64_t current_total_ = 0;
  int64_t peak_total_ = 0;
};

/// A buffer counted in a tracker for its lifetime. Move-only. The plain
/// constructor allocates host memory, 64-byte aligned and zero-filled; the
/// adopting one takes memory allocated elsewhere (device memory, pinned
/// host memory) with the function that releases it.
class TrackedBuffer {
 public:
  /// Releases adopted memory: release(context, data). Must not throw.
  using Release = void (*)(void* context, std::byte* data);

  TrackedBuffer() = default;
  TrackedBuffer(MemoryTracker& tracker, MemCategory category, int64_t bytes);
  /// Adopts `data` (`bytes` long; null: counted only, the timed backend's
  /// memory), counted in `tracker` until releaser(context, data) frees it.
  TrackedBuffer(MemoryTracker& tracker, MemCategory category, int64_t bytes, std::byte* data,
                Release releaser, void* context);
  ~TrackedBuffer();
  TrackedBuffer(TrackedBuffer&& other) noexcept;
  TrackedBuffer& operator=(TrackedBuffer&& other) noexcept;
  TrackedBuffer(const TrackedBuffer&) = delete;
  TrackedBuffer& operator=(const TrackedBuffer&) = delete;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  int64_t size() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }
  template <class T>
  T* as() {
    return reinterpret_cast<T*>(data_);
  }
  template <class T>
  const T* as() const {
    return reinterpret_cast<const T*>(data_);
  }
  MemCategory category() const { return category_; }
  /// Counts the buffer in `category` from now on (a workspace buffer that
  /// becomes kept activations, without a copy).
  void recount(MemCategory category);

 private:
  void release();
  MemoryTracker* tracker_ = nullptr;
  MemCategory category_ = MemCategory::kWorkspace;
  std::byte* data_ = nullptr;
  int64_t bytes_ = 0;
  Release release_ = nullptr;  // null: std::free
  void* context_ = nullptr;
};

/// Peak resident set size of this process in bytes (getrusage), 0 if unknown.
int64_t process_peak_rss_bytes();

}  // namespace ppb
