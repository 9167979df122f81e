#include "cuda/first_fit.hpp"

#include <algorithm>
#include <iterator>

#include "ppb/profiling/check.hpp"

namespace ppb::cuda {

FirstFit::FirstFit(int64_t capacity) : capacity_(capacity) {
  PPB_CHECK(capacity >= 0, "FirstFit: negative capacity");
  if (capacity > 0) free_.emplace(0, capacity);
}

std::optional<int64_t> FirstFit::allocate(int64_t bytes) {
  PPB_CHECK(bytes >= 0, "FirstFit: negative size");
  const int64_t need = std::max<int64_t>(1, (bytes + kAlignment - 1) / kAlignment) * kAlignment;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < need) continue;
    const int64_t at = it->first;
    const int64_t rest = it->second - need;
    free_.erase(it);
    if (rest > 0) free_.emplace(at + need, rest);
    taken_.emplace(at, need);
    live_ += need;
    high_water_ = std::max(high_water_, at + need);
    return at;
  }
  return std::nullopt;
}

void FirstFit::release(int64_t offset) {
  const auto t = taken_.find(offset);
  PPB_CHECK(t != taken_.end(), "FirstFit: release of an offset not taken");
  int64_t at = t->first;
  int64_t size = t->second;
  live_ -= size;
  taken_.erase(t);
  // Merge with the free span after it, then with the one before.
  if (const auto next = free_.find(at + size); next != free_.end()) {
    size += next->second;
    free_.erase(next);
  }
  if (auto next = free_.lower_bound(at); next != free_.begin()) {
    const auto prev = std::prev(next);
    if (prev->first + prev->second == at) {
      at = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_.emplace(at, size);
}

}  // namespace ppb::cuda
