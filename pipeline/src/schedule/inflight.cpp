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

}  // namespace ppb
