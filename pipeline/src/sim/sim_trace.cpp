// The simulated timeline through the one pipeline trace writer.
#include <algorithm>
#include <string>
#include <vector>

#include "ppb/pipeline/pipeline_trace.hpp"
#include "ppb/pipeline/simulator.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

PipelineTrace sim_trace(const Schedule& schedule, const SimResult& result) {
  const int P = schedule.stages;
  if (static_cast<int>(result.stages.size()) != P) {
    throw UsageError("sim trace: result has " + std::to_string(result.stages.size()) +
                     " stages, schedule " + std::to_string(P));
  }
  PipelineTrace t(P, schedule.chunks, " (simulated " + schedule.name + ")");
  for (int s = 0; s < P; ++s) {
    const SimStage& st = result.stages[static_cast<size_t>(s)];
    if (st.events.empty() && !schedule.actions[static_cast<size_t>(s)].empty()) {
      throw UsageError("sim trace: stage " + std::to_string(s) +
                       " has no events (simulate with record_events)");
    }
    for (const SimEvent& e : st.events) t.add_action(s, e.action, e.start, e.end);
    for (const SimAllReduce& a : st.allreduces)
      t.add_allreduce(s, a.chunk, a.bytes, a.start, a.end);
  }
  // Each track's slices in order of their end; the flow arrow's id comes from
  // the message plan (unique per message, the same one the executor uses).
  std::vector<const SimTransfer*> order;
  for (const SimTransfer& x : result.transfers) order.push_back(&x);
  std::stable_sort(order.begin(), order.end(),
                   [](const SimTransfer* a, const SimTransfer* b) { return a->end < b->end; });
  for (const SimTransfer* xp : order) {
    const SimTransfer& x = *xp;
    PPB_CHECK(x.from_stage >= 0 && x.from_stage < P, "sim trace: bad transfer stage");
    const TraceMessage m{x.gradient, x.from_stage, x.to_stage, x.microbatch, x.chunk};
    const auto id = static_cast<uint64_t>(x.flow_id);
    t.add_message(true, m, x.start, x.end, id);
    t.add_message(false, m, x.start, x.end, id);
  }
  return t;
}

}  // namespace

std::vector<std::unique_ptr<trace::TraceWriter>> sim_trace_writers(const Schedule& schedule,
                                                                   const SimResult& result) {
  return sim_trace(schedule, result).release();
}

void write_sim_trace(const Schedule& schedule, const SimResult& result, const std::string& path) {
  sim_trace(schedule, result).write_merged(path);
}

}  // namespace ppb
