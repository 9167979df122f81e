// The predicted timeline beside each measured one: the simulator (ppb::sim)
// run on the same schedule with the run's own measured mean action times, as
// docs/metrics.md's theory figures are defined.
#include <cmath>

#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/simulator.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/reports/report_model.hpp"

namespace ppb::reports {

namespace {

double or_zero(double x) { return std::isfinite(x) && x > 0 ? x : 0.0; }

}  // namespace

Timeline predicted_timeline(const ResultEntry& entry, std::string* source) {
  const Result& r = entry.result;
  if (!r.metrics || !r.metrics->theory) {
    *source = "no prediction: the result has no theory block";
    return {};
  }
  const TheoryFigures& t = *r.metrics->theory;
  if (!t.timeline.empty()) {
    *source = "the run's own theory timeline (simulator fed with the measured action times)";
    return t.timeline;
  }
  const ResultConfig& c = r.config;
  if (t.action_seconds.size() != static_cast<size_t>(c.stages)) {
    *source = "no prediction: the result carries neither theory.timeline nor theory.action_seconds";
    return {};
  }
  try {
    const Schedule schedule = generate_schedule(c.schedule, schedule_params(c));
    StageCosts costs;
    costs.stages = c.stages;
    costs.chunks_per_stage = c.chunks;
    costs.chunks.resize(static_cast<size_t>(c.stages * c.chunks));
    const Placement place = placement_of(schedule);
    for (int chunk = 0; chunk < c.chunks; ++chunk) {
      for (int s = 0; s < c.stages; ++s) {
        const StageActionTimes& a = t.action_seconds[static_cast<size_t>(s)];
        ChunkCost& cc = costs.chunks[static_cast<size_t>(place.virtual_stage(s, chunk))];
        cc.fwd = or_zero(a.fwd);
        if (or_zero(a.bwd_input) > 0 || or_zero(a.bwd_weight) > 0) {
          cc.bwd_input = or_zero(a.bwd_input);
          cc.bwd_weight = or_zero(a.bwd_weight);
        } else {
          cc.bwd_input = or_zero(a.bwd);
        }
      }
    }
    const SimResult sim = simulate(schedule, costs);
    Timeline out(sim.stages.size());
    for (size_t s = 0; s < sim.stages.size(); ++s) {
      for (const SimEvent& ev : sim.stages[s].events) {
        out[s].push_back({ev.action.kind, ev.action.microbatch, ev.action.chunk, ev.start, ev.end});
      }
    }
    *source = "simulator on the same schedule with the measured mean action times (no link cost)";
    return out;
  } catch (const UsageError& e) {
    *source = std::string("no prediction: ") + e.what();
    return {};
  }
}

}  // namespace ppb::reports
