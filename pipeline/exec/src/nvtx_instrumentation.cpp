#include "ppb/exec/nvtx_instrumentation.hpp"

#include "ppb/profiling/nvtx.hpp"

namespace ppb {
namespace {

nvtx::Category category_of(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return nvtx::Category::kForward;
    case ActionKind::kBackward:
      return nvtx::Category::kBackward;
    case ActionKind::kBackwardInput:
      return nvtx::Category::kBackward;
    case ActionKind::kBackwardWeight:
      return nvtx::Category::kWgrad;
    case ActionKind::kSync:
      return nvtx::Category::kSync;
  }
  return nvtx::Category::kStep;
}

}  // namespace

std::string nvtx_action_name(int stage, const Action& action, int chunks) {
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

NvtxInstrumentation::NvtxInstrumentation(int stage, int stages, int chunks)
    : stage_(stage), stages_(stages), chunks_(chunks) {
  nvtx::init();
  nvtx::name_this_thread("rank " + std::to_string(stage) + " executor");
}

void NvtxInstrumentation::step_begin(int step) {
  nvtx::push("step " + std::to_string(step), nvtx::Category::kStep, step);
}

void NvtxInstrumentation::step_end(int /*step*/) { nvtx::pop(); }

void NvtxInstrumentation::action_begin(int stage, const Action& action) {
  nvtx::push(nvtx_action_name(stage, action, chunks_), category_of(action.kind), action.microbatch);
}

void NvtxInstrumentation::action_end(int /*stage*/, const Action& /*action*/) { nvtx::pop(); }

void NvtxInstrumentation::comm_begin(const CommRecord& record) {
  if (record.local) return;  // a same-rank hand-over is not a message
  int from = record.send ? stage_ : record.peer;
  int to = record.send ? record.peer : stage_;
  std::string name = record.send ? "send " : "recv ";
  name += record.kind == MessageKind::kActivation ? "act s" : "grad s";
  name += std::to_string(from);
  name += "->s";
  name += std::to_string(to);
  name += " mb";
  name += std::to_string(record.microbatch);
  uint64_t id = nvtx::start_range(name, record.send ? nvtx::Category::kSend : nvtx::Category::kRecv,
                                  record.microbatch);
  open_[{record.send, record.flow_id(stages_ * chunks_)}] = id;
}

void NvtxInstrumentation::comm_end(const CommRecord& record) {
  auto it = open_.find({record.send, record.flow_id(stages_ * chunks_)});
  if (it == open_.end()) return;
  nvtx::end_range(it->second);
  open_.erase(it);
}

void NvtxInstrumentation::optimizer_begin(int chunk) {
  nvtx::push("optimizer s" + std::to_string(stage_) + " c" + std::to_string(chunk),
             nvtx::Category::kOptimizer);
}

void NvtxInstrumentation::optimizer_end(int /*chunk*/) { nvtx::pop(); }

}  // namespace ppb
