#include "ppb/profiling/memory.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

// What a host buffer of `bytes` allocates: whole 64-byte lines.
size_t rounded_bytes(int64_t bytes) { return (static_cast<size_t>(bytes) + 63) / 64 * 64; }

}  // namespace

std::string_view mem_category_name(MemCategory category) {
  switch (category) {
    case MemCategory::kActivations:
      return "activations";
    case MemCategory::kParameters:
      return "parameters";
    case MemCategory::kGradients:
      return "gradients";
    case MemCategory::kOptimizerState:
      return "optimizer_state";
    case MemCategory::kWeightStash:
      return "weight_stash";
    case MemCategory::kCommBuffers:
      return "comm_buffers";
    case MemCategory::kWorkspace:
      return "workspace";
  }
  return "unknown";
}

void MemoryTracker::on_alloc(MemCategory category, int64_t bytes) {
  PPB_CHECK(bytes >= 0, "negative allocation");
  std::lock_guard lock(mutex_);
  size_t i = index(category);
  current_[i] += bytes;
  peak_[i] = std::max(peak_[i], current_[i]);
  current_total_ += bytes;
  live_high_ = std::max(live_high_, current_total_);
  if (current_total_ > peak_total_) {
    peak_total_ = current_total_;
    at_peak_ = current_;
  }
  if (on_change) on_change(current_total_);
}

void MemoryTracker::on_free(MemCategory category, int64_t bytes) {
  std::lock_guard lock(mutex_);
  size_t i = index(category);
  PPB_CHECK(current_[i] >= bytes, "freeing more than was allocated");
  current_[i] -= bytes;
  current_total_ -= bytes;
}

void MemoryTracker::on_recount(MemCategory from, MemCategory to, int64_t bytes) {
  std::lock_guard lock(mutex_);
  PPB_CHECK(current_[index(from)] >= bytes, "recounting more than was allocated");
  current_[index(from)] -= bytes;
  current_[index(to)] += bytes;
  peak_[index(to)] = std::max(peak_[index(to)], current_[index(to)]);
  if (on_change) on_change(current_total_);  // a category's own peak may have moved
}

MemoryTracker::~MemoryTracker() {
  for (auto& [bytes, blocks] : cache_) {
    for (std::byte* b : blocks) std::free(b);
  }
}

std::byte* MemoryTracker::take_host_block(size_t bytes) {
  std::lock_guard lock(cache_mutex_);
  auto it = cache_.find(bytes);
  if (it == cache_.end() || it->second.empty()) return nullptr;
  std::byte* b = it->second.back();  // the latest released: likely still in cache
  it->second.pop_back();
  cached_ -= bytes;
  return b;
}

bool MemoryTracker::keep_host_block(std::byte* data, size_t bytes) {
  if (bytes < kCachedBlockBytes) return false;
  int64_t high = 0;
  {
    std::lock_guard lock(mutex_);
    high = live_high_;
  }
  std::lock_guard lock(cache_mutex_);
  if (static_cast<int64_t>(cached_ + bytes) > high) return false;
  cache_[bytes].push_back(data);
  cached_ += bytes;
  return true;
}

int64_t MemoryTracker::cached_bytes() const {
  std::lock_guard lock(cache_mutex_);
  return static_cast<int64_t>(cached_);
}

void MemoryTracker::reset_peaks() {
  std::lock_guard lock(mutex_);
  peak_ = current_;
  at_peak_ = current_;
  peak_total_ = current_total_;
}

TrackedBuffer::TrackedBuffer(MemoryTracker& tracker, MemCategory category, int64_t bytes)
    : tracker_(&tracker), category_(category), bytes_(bytes) {
  PPB_CHECK(bytes >= 0, "negative buffer size");
  if (bytes > 0) {
    const size_t rounded = rounded_bytes(bytes);
    data_ = tracker.take_host_block(rounded);
    if (data_ == nullptr) data_ = static_cast<std::byte*>(std::aligned_alloc(64, rounded));
    if (data_ == nullptr) throw std::bad_alloc();
    std::memset(data_, 0, rounded);
  }
  tracker_->on_alloc(category_, bytes_);
}

TrackedBuffer::TrackedBuffer(MemoryTracker& tracker, MemCategory category, int64_t bytes,
                             std::byte* data, Release releaser, void* context)
    : tracker_(&tracker),
      category_(category),
      data_(data),
      bytes_(bytes),
      release_(releaser),
      context_(context) {
  PPB_CHECK(bytes >= 0 && releaser != nullptr, "adopted buffer needs a size and a release");
  tracker_->on_alloc(category_, bytes_);
}

TrackedBuffer::~TrackedBuffer() { release(); }

TrackedBuffer::TrackedBuffer(TrackedBuffer&& other) noexcept
    : tracker_(std::exchange(other.tracker_, nullptr)),
      category_(other.category_),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      release_(std::exchange(other.release_, nullptr)),
      context_(std::exchange(other.context_, nullptr)) {}

TrackedBuffer& TrackedBuffer::operator=(TrackedBuffer&& other) noexcept {
  if (this != &other) {
    release();
    tracker_ = std::exchange(other.tracker_, nullptr);
    category_ = other.category_;
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    release_ = std::exchange(other.release_, nullptr);
    context_ = std::exchange(other.context_, nullptr);
  }
  return *this;
}

void TrackedBuffer::recount(MemCategory category) {
  if (tracker_ != nullptr && category != category_)
    tracker_->on_recount(category_, category, bytes_);
  category_ = category;
}

void TrackedBuffer::release() {
  if (tracker_ != nullptr) tracker_->on_free(category_, bytes_);
  if (release_ != nullptr) {
    if (data_ != nullptr) release_(context_, data_);
  } else if (data_ != nullptr &&
             (tracker_ == nullptr || !tracker_->keep_host_block(data_, rounded_bytes(bytes_)))) {
    std::free(data_);
  }
  tracker_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
  release_ = nullptr;
  context_ = nullptr;
}

int64_t process_peak_rss_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace ppb
