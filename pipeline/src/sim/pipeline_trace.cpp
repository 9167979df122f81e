#include "ppb/pipeline/pipeline_trace.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "ppb/profiling/check.hpp"

namespace ppb {

PipelineTrace::PipelineTrace(int stages, int chunks, const std::string& label)
    : stages_(stages), chunks_(chunks) {
  PPB_CHECK(stages >= 1 && chunks >= 1, "PipelineTrace: stages and chunks must be >= 1");
  tracks_.resize(static_cast<size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    writers_.push_back(
        std::make_unique<trace::TraceWriter>(s, "stage " + std::to_string(s) + label, stages));
    trace::TraceWriter& w = *writers_.back();
    Stage& st = tracks_[static_cast<size_t>(s)];
    st.send.assign(static_cast<size_t>(stages), 0);
    st.recv.assign(static_cast<size_t>(stages), 0);
    st.compute = w.add_thread("compute");
    // Next stage's link first, then the previous one's: a fixed order, so
    // tids read the same in every trace.
    for (const int other : {(s + 1) % stages, (s + stages - 1) % stages}) {
      const auto o = static_cast<size_t>(other);
      if (other == s || st.send[o] != 0) continue;
      st.send[o] = w.add_thread("send to s" + std::to_string(other));
      st.recv[o] = w.add_thread("recv from s" + std::to_string(other));
    }
  }
}

double PipelineTrace::clamp(int stage, int tid, double start, double& end) {
  std::vector<double>& last = tracks_[static_cast<size_t>(stage)].last_end;
  if (static_cast<size_t>(tid) >= last.size()) last.resize(static_cast<size_t>(tid) + 1, -1e300);
  double& prev = last[static_cast<size_t>(tid)];
  const double s = std::max(start, prev);
  end = std::max(end, s);
  prev = end;
  return s;
}

void PipelineTrace::add_action(int stage, const Action& action, double start, double end,
                               int64_t correlation) {
  PPB_CHECK(stage >= 0 && stage < stages_, "PipelineTrace: stage out of range");
  const int tid = tracks_[static_cast<size_t>(stage)].compute;
  const double s = clamp(stage, tid, start, end);
  std::vector<trace::TraceArg> args;
  if (action.kind != ActionKind::kSync) args = {{"mb", action.microbatch}, {"chunk", action.chunk}};
  if (correlation >= 0) {
    args.push_back({"correlation", correlation});
    args.push_back({"stream", -1});
  }
  writers_[static_cast<size_t>(stage)]->complete(tid, action_range_name(action, stage, chunks_),
                                                 action_category(action.kind), s, end - s,
                                                 std::move(args));
}

int PipelineTrace::track(int stage, bool send, int other) {
  PPB_CHECK(stage >= 0 && stage < stages_ && other >= 0 && other < stages_ && other != stage,
            "PipelineTrace: a message between stages that are not distinct");
  Stage& st = tracks_[static_cast<size_t>(stage)];
  const auto o = static_cast<size_t>(other);
  if (st.send[o] == 0) {
    // A placement given in a schedule file may link stages that are not
    // neighbours: their tracks come after the neighbours', in first use.
    trace::TraceWriter& w = *writers_[static_cast<size_t>(stage)];
    st.send[o] = w.add_thread("send to s" + std::to_string(other));
    st.recv[o] = w.add_thread("recv from s" + std::to_string(other));
  }
  return (send ? st.send : st.recv)[o];
}

void PipelineTrace::add_message(bool send, const TraceMessage& m, double start, double end,
                                uint64_t seq) {
  const int stage = send ? m.from_stage : m.to_stage;
  const int tid = track(stage, send, send ? m.to_stage : m.from_stage);
  const double s = clamp(stage, tid, start, end);
  trace::TraceWriter& w = *writers_[static_cast<size_t>(stage)];
  w.complete(tid, message_range_name(send, m.gradient, m.from_stage, m.to_stage, m.microbatch),
             send ? "send" : "recv", s, end - s, {{"mb", m.microbatch}, {"chunk", m.chunk}});
  // The arrow's ends sit in the middle of their slices, so each binds to
  // exactly one slice even where slices touch end to start.
  const uint64_t id = trace::flow_id(m.from_stage, seq);
  const char* flow = m.gradient ? "grad" : "act";
  const double mid = 0.5 * (s + end);
  if (send)
    w.flow_start(tid, id, flow, "p2p", mid);
  else
    w.flow_end(tid, id, flow, "p2p", mid);
}

void PipelineTrace::add_device_op(int stage, const device::DeviceOp& op, int64_t correlation) {
  PPB_CHECK(stage >= 0 && stage < stages_, "PipelineTrace: stage out of range");
  PPB_CHECK(op.stream >= 0, "PipelineTrace: a device stream id is >= 0");
  Stage& st = tracks_[static_cast<size_t>(stage)];
  trace::TraceWriter& w = *writers_[static_cast<size_t>(stage)];
  int& tid = st.streams[op.stream];
  if (tid == 0) tid = w.add_thread("stream " + std::to_string(op.stream));
  double end = op.end;
  const double s = clamp(stage, tid, op.start, end);
  const char* category = "kernel";
  switch (op.kind) {
    case device::OpKind::kKernel:
      break;
    case device::OpKind::kMemcpy:
      category = "gpu_memcpy";
      break;
    case device::OpKind::kMemset:
      category = "gpu_memset";
      break;
  }
  std::vector<trace::TraceArg> args = {{"stream", op.stream},
                                       {"device", static_cast<int64_t>(op.device)},
                                       {"correlation", correlation}};
  if (op.kind != device::OpKind::kKernel) args.push_back({"bytes", op.bytes});
  w.complete(tid, op.name, category, s, end - s, std::move(args));
}

void PipelineTrace::add_step(int stage, int k, double start, double end) {
  PPB_CHECK(stage >= 0 && stage < stages_, "PipelineTrace: stage out of range");
  Stage& st = tracks_[static_cast<size_t>(stage)];
  trace::TraceWriter& w = *writers_[static_cast<size_t>(stage)];
  if (st.steps == 0) st.steps = w.add_thread("steps");
  const double s = clamp(stage, st.steps, start, end);
  w.complete(st.steps, "ProfilerStep#" + std::to_string(k), "user_annotation", s, end - s,
             {{"step", k}});
}

void PipelineTrace::add_allreduce(int stage, int chunk, int64_t bytes, double start, double end) {
  PPB_CHECK(stage >= 0 && stage < stages_, "PipelineTrace: stage out of range");
  Stage& st = tracks_[static_cast<size_t>(stage)];
  trace::TraceWriter& w = *writers_[static_cast<size_t>(stage)];
  if (st.allreduce == 0) st.allreduce = w.add_thread("allreduce");
  const double s = clamp(stage, st.allreduce, start, end);
  w.complete(st.allreduce, "allreduce s" + std::to_string(stage) + " c" + std::to_string(chunk),
             "allreduce", s, end - s, {{"chunk", static_cast<int64_t>(chunk)}, {"bytes", bytes}});
}

void PipelineTrace::write_merged(const OutputPath& path) const {
  std::vector<const trace::TraceWriter*> ranks;
  ranks.reserve(writers_.size());
  for (const auto& w : writers_) ranks.push_back(w.get());
  trace::write_merged(ranks, path);
}

void PipelineTrace::write_per_rank(const OutputPath& dir) const {
  if (dir.within.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir.name, ec);
    if (ec) throw UsageError(dir.name + ": cannot create the trace folder (" + ec.message() + ")");
  }
  // Inside a folder pipebench fills, write_output_file makes the folder
  // itself, refusing a link on the way.
  for (const auto& w : writers_)
    w->write(OutputPath{dir.within, dir.name + "/rank" + std::to_string(w->rank()) + ".json"});
}

}  // namespace ppb
