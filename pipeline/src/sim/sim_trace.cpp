#include <array>
#include <string>

#include "ppb/pipeline/simulator.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {}  // namespace

std::vector<std::unique_ptr<trace::TraceWriter>> sim_trace_writers(const Schedule& schedule,
                                                                   const SimResult& result) {
  const int P = schedule.stages;
  if (static_cast<int>(result.stages.size()) != P) {
    throw UsageError("sim trace: result has " + std::to_string(result.stages.size()) +
                     " stages, schedule " + std::to_string(P));
  }
  std::vector<std::unique_ptr<trace::TraceWriter>> writers;
  std::vector<int> compute(static_cast<size_t>(P));
  // One send and one receive track per neighbour: transfers on one link
  // never overlap (FIFO), but those to two neighbours may, and slices on one
  // track must nest. Index [stage][0] = next stage (s+1 mod P), [1] = previous.
  std::vector<std::array<int, 2>> send(static_cast<size_t>(P), {0, 0});
  std::vector<std::array<int, 2>> recv(static_cast<size_t>(P), {0, 0});
  const auto side = [P](int s, int other) { return other == (s + 1) % P ? 0 : 1; };
  for (int s = 0; s < P; ++s) {
    const auto su = static_cast<size_t>(s);
    writers.push_back(std::make_unique<trace::TraceWriter>(
        s, "stage " + std::to_string(s) + " (simulated " + schedule.name + ")", P));
    trace::TraceWriter& w = *writers.back();
    compute[su] = w.add_thread("compute");
    for (const int other : {(s + 1) % P, (s + P - 1) % P}) {
      if (other == s || send[su][static_cast<size_t>(side(s, other))] != 0) continue;
      const auto k = static_cast<size_t>(side(s, other));
      send[su][k] = w.add_thread("send to s" + std::to_string(other));
      recv[su][k] = w.add_thread("recv from s" + std::to_string(other));
    }
    const SimStage& st = result.stages[su];
    if (st.events.empty() && !schedule.actions[su].empty()) {
      throw UsageError("sim trace: stage " + std::to_string(s) +
                       " has no events (simulate with record_events)");
    }
    for (const SimEvent& e : st.events) {
      std::vector<trace::TraceArg> args;
      if (e.action.kind != ActionKind::kSync) {
        args = {{"mb", e.action.microbatch}, {"chunk", e.action.chunk}};
      }
      w.complete(compute[su], action_range_name(e.action, s, schedule.chunks),
                 action_category(e.action.kind), e.start, e.end - e.start, std::move(args));
    }
  }
  for (const SimTransfer& t : result.transfers) {
    const auto from = static_cast<size_t>(t.from_stage);
    const auto to = static_cast<size_t>(t.to_stage);
    PPB_CHECK(from < writers.size() && to < writers.size() && from != to,
              "sim trace: bad transfer stages");
    const int send_tid = send[from][static_cast<size_t>(side(t.from_stage, t.to_stage))];
    const int recv_tid = recv[to][static_cast<size_t>(side(t.to_stage, t.from_stage))];
    PPB_CHECK(send_tid != 0 && recv_tid != 0,
              "sim trace: transfer between stages that are not neighbours");
    const uint64_t id = trace::flow_id(t.from_stage, static_cast<uint64_t>(t.flow_id));
    const char* flow = t.gradient ? "grad" : "act";
    const std::vector<trace::TraceArg> args = {{"mb", t.microbatch}, {"chunk", t.chunk}};
    // The arrow's ends sit in the middle of their slices, so each binds to
    // exactly one slice even where FIFO transfers touch end to start.
    const double mid = 0.5 * (t.start + t.end);
    writers[from]->complete(
        send_tid, message_range_name(true, t.gradient, t.from_stage, t.to_stage, t.microbatch),
        "send", t.start, t.end - t.start, args);
    writers[from]->flow_start(send_tid, id, flow, "p2p", mid);
    writers[to]->complete(
        recv_tid, message_range_name(false, t.gradient, t.from_stage, t.to_stage, t.microbatch),
        "recv", t.start, t.end - t.start, args);
    writers[to]->flow_end(recv_tid, id, flow, "p2p", mid);
  }
  return writers;
}

void write_sim_trace(const Schedule& schedule, const SimResult& result, const std::string& path) {
  const auto writers = sim_trace_writers(schedule, result);
  std::vector<const trace::TraceWriter*> ranks;
  ranks.reserve(writers.size());
  for (const auto& w : writers) ranks.push_back(w.get());
  trace::write_merged(ranks, path);
}

}  // namespace ppb
