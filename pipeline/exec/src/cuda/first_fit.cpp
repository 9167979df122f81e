#include "cuda/first_fit.hpp"

#include <algorithm>
#include <iterator>

#include "ppb/profiling/check.hpp"

namespace ppb::cuda {

FirstFit::FirstFit(int64_t capacity) : capacity_(capacity) {
  PPB_CHECK(capacity >= 0, "FirstFit: negative capacity");
  if (capacity > 0) free_.push_back({0, capacity});
}

std::optional<int64_t> FirstFit::allocate(int64_t bytes) {
  PPB_CHECK(bytes >= 0, "FirstFit: negative size");
  const int64_t need = std::max<int64_t>(1, (bytes + kAlignment - 1) / kAlignment) * kAlignment;
  const auto it = std::ranges::find_if(free_, [need](const Span& s) { return s.size >= need; });
  if (it == free_.end()) return std::nullopt;
  const int64_t at = it->offset;
  if (it->size == need) {
    free_.erase(it);
  } else {
    it->offset += need;
    it->size -= need;
  }
  const auto after = std::ranges::upper_bound(taken_, at, {}, &Span::offset);
  taken_.insert(after, {at, need});
  live_ += need;
  high_water_ = std::max(high_water_, at + need);
  return at;
}

void FirstFit::release(int64_t offset) {
  const auto t = std::ranges::lower_bound(taken_, offset, {}, &Span::offset);
  PPB_CHECK(t != taken_.end() && t->offset == offset, "FirstFit: release of an offset not taken");
  const int64_t size = t->size;
  live_ -= size;
  taken_.erase(t);
  // Merge with the free span after it and the one before.
  const auto next = std::ranges::lower_bound(free_, offset, {}, &Span::offset);
  const bool joins_next = next != free_.end() && next->offset == offset + size;
  const bool joins_prev =
      next != free_.begin() && std::prev(next)->offset + std::prev(next)->size == offset;
  if (joins_prev && joins_next) {
    std::prev(next)->size += size + next->size;
    free_.erase(next);
  } else if (joins_prev) {
    std::prev(next)->size += size;
  } else if (joins_next) {
    next->offset = offset;
    next->size += size;
  } else {
    free_.insert(next, {offset, size});
  }
}

}  // namespace ppb::cuda
