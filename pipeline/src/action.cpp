#include "ppb/pipeline/action.hpp"

namespace ppb {

const char* action_kind_name(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return "F";
    case ActionKind::kBackward:
      return "B";
    case ActionKind::kBackwardInput:
      return "I";
    case ActionKind::kBackwardWeight:
      return "W";
    case ActionKind::kSync:
      return "SYNC";
  }
  return "?";
}

int64_t Schedule::total_actions() const {
  int64_t n = 0;
  for (const auto& stage : actions) n += static_cast<int64_t>(stage.size());
  return n;
}

}  // namespace ppb
