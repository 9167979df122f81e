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

NvtxInstrumentation::NvtxInstrumentation(int stage, int /*stages*/, int chunks)
    : stage_(stage), chunks_(chunks) {
  nvtx::init();
  nvtx::name_this_thread("rank " + std::to_string(stage) + " executor");
}

void NvtxInstrumentation::step_begin(int step) {
  nvtx::push("step " + std::to_string(step), nvtx::Category::kStep, step);
}

void NvtxInstrumentation::step_end(int /*step*/) { nvtx::pop(); }

void NvtxInstrumentation::action_begin(int stage, const Action& action) {
  nvtx::push(action_range_name(action, stage, chunks_), category_of(action.kind),
             action.microbatch);
}

void NvtxInstrumentation::action_end(int /*stage*/, const Action& /*action*/) { nvtx::pop(); }

void NvtxInstrumentation::comm_begin(const CommRecord& record) {
  if (record.local) return;  // a same-rank hand-over is not a message
  const int from = record.send ? stage_ : record.peer;
  const int to = record.send ? record.peer : stage_;
  const std::string name = message_range_name(record.send, record.kind == MessageKind::kGradient,
                                              from, to, record.microbatch);
  uint64_t id = nvtx::start_range(name, record.send ? nvtx::Category::kSend : nvtx::Category::kRecv,
                                  record.microbatch);
  open_[{record.send, record.flow_id}] = id;
}

void NvtxInstrumentation::comm_end(const CommRecord& record) {
  auto it = open_.find({record.send, record.flow_id});
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
