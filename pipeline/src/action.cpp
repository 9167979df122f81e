#include "ppb/pipeline/action.hpp"

#include "ppb/profiling/check.hpp"

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

Placement::Placement(int stages, int chunks) : stages_(stages), chunks_(chunks) {
  PPB_CHECK(stages >= 1 && chunks >= 1, "Placement: stages and chunks must be >= 1");
  const auto n = static_cast<size_t>(stages) * static_cast<size_t>(chunks);
  stage_of_.resize(n);
  chunk_of_.resize(n);
  virtual_of_.resize(n);
  for (int v = 0; v < stages * chunks; ++v) {
    const auto u = static_cast<size_t>(v);
    stage_of_[u] = v % stages;
    chunk_of_[u] = v / stages;
    virtual_of_[static_cast<size_t>(stage_of_[u]) * static_cast<size_t>(chunks) +
                static_cast<size_t>(chunk_of_[u])] = v;
  }
}

Placement::Placement(int stages, int chunks, std::span<const int32_t> stage_of)
    : stages_(stages), chunks_(chunks) {
  const std::string error = placement_error(stage_of, stages, chunks);
  PPB_CHECK(error.empty(), "Placement: " + error);
  const auto n = stage_of.size();
  stage_of_.assign(stage_of.begin(), stage_of.end());
  chunk_of_.resize(n);
  virtual_of_.resize(n);
  std::vector<int32_t> held(static_cast<size_t>(stages), 0);
  for (size_t v = 0; v < n; ++v) {
    const auto s = static_cast<size_t>(stage_of_[v]);
    chunk_of_[v] = held[s]++;
    virtual_of_[s * static_cast<size_t>(chunks) + static_cast<size_t>(chunk_of_[v])] =
        static_cast<int32_t>(v);
  }
}

std::vector<int> Placement::virtual_stages_of(int stage) const {
  std::vector<int> out;
  out.reserve(static_cast<size_t>(chunks_));
  for (int c = 0; c < chunks_; ++c) out.push_back(virtual_stage(stage, c));
  return out;
}

bool Placement::looping() const {
  for (size_t v = 0; v < stage_of_.size(); ++v) {
    if (stage_of_[v] != static_cast<int32_t>(v % static_cast<size_t>(stages_))) return false;
  }
  return true;
}

Placement placement_of(const Schedule& s) {
  if (s.placement.empty()) return {s.stages, s.chunks};
  return {s.stages, s.chunks, s.placement};
}

std::string placement_error(std::span<const int32_t> stage_of, int stages, int chunks) {
  if (stages < 1 || chunks < 1) return "stages and chunks must be >= 1";
  const auto n = static_cast<size_t>(stages) * static_cast<size_t>(chunks);
  if (stage_of.size() != n) {
    return "expected " + std::to_string(n) +
           " entries (stages x chunks = " + std::to_string(stages) + " x " +
           std::to_string(chunks) + "), got " + std::to_string(stage_of.size());
  }
  std::vector<int> held(static_cast<size_t>(stages), 0);
  for (size_t v = 0; v < n; ++v) {
    if (stage_of[v] < 0 || stage_of[v] >= stages) {
      return "virtual stage " + std::to_string(v) + " is placed on stage " +
             std::to_string(stage_of[v]) + ", outside 0.." + std::to_string(stages - 1);
    }
    ++held[static_cast<size_t>(stage_of[v])];
  }
  for (int s = 0; s < stages; ++s) {
    if (held[static_cast<size_t>(s)] != chunks) {
      return "stage " + std::to_string(s) + " holds " +
             std::to_string(held[static_cast<size_t>(s)]) + " virtual stages, expected " +
             std::to_string(chunks) + " (one per chunk)";
    }
  }
  return {};
}

std::vector<int32_t> v_shape_placement(int stages) {
  std::vector<int32_t> map;
  map.reserve(2 * static_cast<size_t>(stages));
  for (int v = 0; v < stages; ++v) map.push_back(v);
  for (int v = stages; v < 2 * stages; ++v) map.push_back(2 * stages - 1 - v);
  return map;
}

int64_t Schedule::total_actions() const {
  int64_t n = 0;
  for (const auto& stage : actions) n += static_cast<int64_t>(stage.size());
  return n;
}

}  // namespace ppb
