// A first-fit placement of buffers in one region of known or unbounded
// size, host-side only: where the cuda backend's static buffers for CUDA
// graphs go. Offsets are a pure function of the sequence of allocate and
// release calls since construction, so a chunk that repeats a step's
// sequence gets the same addresses every step, which is what makes a
// captured graph of its actions valid for replay (graph_cache.hpp).
//
// With an unbounded capacity it is the sizing pass: high_water() after a
// step is the region the same sequence needs.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace ppb::cuda {

class FirstFit {
 public:
  /// Every offset is a multiple of this (the pool's allocation granularity
  /// for the kernels' vector loads and cuBLAS's alignment preferences).
  static constexpr int64_t kAlignment = 256;
  static constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max() / 2;

  explicit FirstFit(int64_t capacity = kUnbounded);

  /// The lowest offset at which `bytes` (rounded up to kAlignment; at least
  /// one unit) fit, now taken; none where no free span is large enough.
  std::optional<int64_t> allocate(int64_t bytes);
  /// Gives back the span allocate() returned at `offset` (merged with its
  /// free neighbours). REQUIRES: `offset` is taken.
  void release(int64_t offset);

  int64_t capacity() const { return capacity_; }
  /// The highest end of a span ever taken: the region this sequence needs.
  int64_t high_water() const { return high_water_; }
  /// Bytes taken now (rounded sizes).
  int64_t live() const { return live_; }
  /// Spans taken now.
  size_t count() const { return taken_.size(); }

 private:
  struct Span {
    int64_t offset;
    int64_t size;
  };
  // Both sorted by offset. Flat vectors, not maps: a replayed action places
  // and frees a hundred buffers on the host before its graph launches, and
  // these reuse their storage instead of allocating a node per call.
  int64_t capacity_;
  std::vector<Span> free_;  // disjoint, merged
  std::vector<Span> taken_;
  int64_t high_water_ = 0;
  int64_t live_ = 0;
};

}  // namespace ppb::cuda
