#include "ppb/pipeline/data_parallel.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "ppb/profiling/check.hpp"

namespace ppb {

const char* rank_order_name(RankOrder order) {
  switch (order) {
    case RankOrder::kDpPp:
      return "dp-pp";
    case RankOrder::kPpDp:
      return "pp-dp";
  }
  return "?";
}

RankOrder parse_rank_order(std::string_view text, std::string_view flag) {
  if (text == "dp-pp") return RankOrder::kDpPp;
  if (text == "pp-dp") return RankOrder::kPpDp;
  throw UsageError(std::string(flag) + ": expected dp-pp (the D ranks of a stage adjacent, " +
                   "Megatron-LM's order) or pp-dp (the P ranks of a replica adjacent), got '" +
                   std::string(text) + "'");
}

std::vector<char> allreduce_points(const Schedule& schedule, int stage, bool per_backward) {
  PPB_CHECK(stage >= 0 && stage < static_cast<int>(schedule.actions.size()),
            "allreduce_points: stage out of range");
  const std::vector<Action>& list = schedule.actions[static_cast<size_t>(stage)];
  std::vector<char> after(list.size(), 0);
  const auto is_weight_backward = [](ActionKind k) {
    return k == ActionKind::kBackward || k == ActionKind::kBackwardWeight;
  };
  if (per_backward) {
    for (size_t k = 0; k < list.size(); ++k) after[k] = is_weight_backward(list[k].kind) ? 1 : 0;
    return after;
  }
  // (batch, chunk) -> the index of its last weight-gradient backward.
  std::map<std::pair<int, int>, size_t> last;
  const int m = std::max(schedule.microbatches, 1);
  for (size_t k = 0; k < list.size(); ++k) {
    if (!is_weight_backward(list[k].kind)) continue;
    const int batch = std::min(list[k].microbatch / m, std::max(schedule.batches, 1) - 1);
    last[{batch, list[k].chunk}] = k;
  }
  for (const auto& [key, k] : last) after[k] = 1;
  return after;
}

}  // namespace ppb
