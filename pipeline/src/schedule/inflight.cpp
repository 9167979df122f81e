// Peak in-flight micro-batches per stage, counted along each stage's list.
#include <algorithm>

#include "ppb/pipeline/schedule.hpp"

namespace ppb {
namespace {

// Counts +1 at F and -1 at the actions for which `leaves` is true.
template <typename Leaves>
std::vector<int> peak_count(const Schedule& s, Leaves leaves) {
  std::vector<int> peaks;
  peaks.reserve(s.actions.size());
  for (const auto& list : s.actions) {
    int current = 0;
    int peak = 0;
    for (const Action& a : list) {
      if (a.kind == ActionKind::kForward) {
        peak = std::max(peak, ++current);
      } else if (leaves(a.kind)) {
        --current;
      }
    }
    peaks.push_back(peak);
  }
  return peaks;
}

}  // namespace

std::vector<int> peak_inflight(const Schedule& s) {
  return peak_count(s, [](ActionKind k) {
    return k == ActionKind::kBackward || k == ActionKind::kBackwardWeight;
  });
}

std::vector<int> peak_inflight_until_input_grad(const Schedule& s) {
  return peak_count(s, [](ActionKind k) {
    return k == ActionKind::kBackward || k == ActionKind::kBackwardInput;
  });
}

std::vector<char> optimizer_steps_after(const Schedule& s, const std::vector<Action>& list,
                                        bool per_backward) {
  std::vector<char> after(list.size(), 0);
  if (per_backward) {
    for (size_t k = 0; k < list.size(); ++k) {
      const ActionKind kind = list[k].kind;
      if (kind == ActionKind::kBackward || kind == ActionKind::kBackwardWeight) after[k] = 1;
    }
    return after;
  }
  std::vector<int> last_of_batch(static_cast<size_t>(std::max(s.batches, 1)), -1);
  for (size_t k = 0; k < list.size(); ++k) {
    if (list[k].kind == ActionKind::kSync) continue;
    const int b = std::min(list[k].microbatch / std::max(s.microbatches, 1), s.batches - 1);
    last_of_batch[static_cast<size_t>(b)] = static_cast<int>(k);
  }
  for (int k : last_of_batch) {
    if (k >= 0) after[static_cast<size_t>(k)] = 1;
  }
  return after;
}

}  // namespace ppb
