#include "ppb/profiling/memory.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "ppb/profiling/check.hpp"

namespace ppb {

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
    size_t rounded = (static_cast<size_t>(bytes) + 63) / 64 * 64;
    data_ = static_cast<std::byte*>(std::aligned_alloc(64, rounded));
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

void TrackedBuffer::release() {
  if (tracker_ != nullptr) tracker_->on_free(category_, bytes_);
  if (release_ != nullptr) {
    if (data_ != nullptr) release_(context_, data_);
  } else {
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
