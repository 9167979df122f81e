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

std::string action_range_name(const Action& action, int stage, int chunks) {
  std::string name = action_kind_name(action.kind);
  name += " s";
  name += std::to_string(stage);
  if (action.kind == ActionKind::kSync) return name;
  name += " mb";
  name += std::to_string(action.microbatch);
  if (chunks > 1) {
    name += " c";
    name += std::to_string(action.chunk);
  }
  return name;
}

std::string message_range_name(bool send, bool gradient, int from_stage, int to_stage,
                               int64_t microbatch) {
  std::string name = send ? "send " : "recv ";
  name += gradient ? "grad s" : "act s";
  name += std::to_string(from_stage);
  name += "->s";
  name += std::to_string(to_stage);
  name += " mb";
  name += std::to_string(microbatch);
  return name;
}

const char* action_category(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return "forward";
    case ActionKind::kBackward:
      return "backward";
    case ActionKind::kBackwardInput:
      return "backward";
    case ActionKind::kBackwardWeight:
      return "wgrad";
    case ActionKind::kSync:
      return "sync";
  }
  return "unknown";
}

int64_t Schedule::total_actions() const {
  int64_t n = 0;
  for (const auto& stage : actions) n += static_cast<int64_t>(stage.size());
  return n;
}

}  // namespace ppb
