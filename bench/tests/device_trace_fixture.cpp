// Writes the traces of a synthetic GPU pipeline run for hta_device_check.py:
// 1F1B on 4 stages, M = 8, 20 steps with slightly different action times,
// laid out by the simulator. Every action launches three kernels on compute
// stream 7 and the stage runs an SGD kernel after its last action. The
// records go the way the CUPTI collector's go: CUPTI-style realtime
// nanoseconds with external correlation ids -> ActivityLog ->
// build_device_step (clock mapping, attribution, classification) -> the
// step's StageStep -> write_measured_traces, the one trace writer.
//
// Scenarios (one folder each, DIR/<name>/):
//   aware  the kernels only (messages need no device work: CUDA-aware MPI)
//   nccl   plus NCCL: before each action that needs an input a receive
//          kernel spins on stream 13 from the end of the stage's previous
//          action until the input is there, and each send runs a short
//          kernel on stream 17; the receive kernels hide the bubble from a
//          tool that counts every kernel as work
//   copies each action begins with a copy of its own, 0.6 us, ahead of its
//          kernels in the launch gap (an input upload: an H200 ran
//          gpt-tiny's in 0.8 us, with the device idle around it), at
//          assorted fractions of a microsecond: many cross no whole
//          microsecond, which Holistic Trace Analysis's own rounding of
//          fractional times (start up, end down) turns into negative
//          durations, failing its temporal breakdown
//
// Each folder gets run.trace/rank<r>.json and expected.json with what the
// device-activity module computes from the same records over all steps:
// per stage the device bubble (sum of step times - sum of device compute
// busy) / sum of step times, compute, communication and busy seconds.
//
// usage: device_trace_fixture DIR
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "ppb/pipeline/costs.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/simulator.hpp"
#include "ppb/profiling/device_activity.hpp"
#include "ppb/profiling/output_file.hpp"
#include "run/metrics.hpp"
#include "run/trace_output.hpp"

namespace {

using ppb::device::ActivityLog;
using ppb::device::Launch;
using ppb::device::OpKind;
using ppb::device::RawRecord;

constexpr int kStages = 4;
constexpr int kMicrobatches = 8;
constexpr int kSteps = 20;
constexpr uint64_t kRealtime0 = 1'780'000'000'000'000'000ULL;  // CUPTI's clock at steady 0
constexpr double kLaunchGap = 3e-6;                            // between back-to-back kernels

uint64_t ns(double steady_seconds) {
  return kRealtime0 + static_cast<uint64_t>(std::llround(steady_seconds * 1e9));
}

// The records of one stage in one step, CUPTI-style (times from the step's
// start at steady `origin`, converted to realtime nanoseconds), with their
// launches.
struct StageRecords {
  double origin = 0;
  ActivityLog log;
  std::map<uint64_t, Launch> launches;
  uint32_t correlation = 0;
  uint64_t external = 0;

  void kernel(double start, double end, uint32_t stream, const std::string& name,
              const Launch* launch, OpKind kind = OpKind::kKernel) {
    RawRecord r;
    r.kind = kind;
    r.start_ns = ns(origin + start);
    r.end_ns = ns(origin + end);
    r.stream = stream;
    r.correlation = ++correlation;
    r.name = name;
    if (launch != nullptr) {
      launches[++external] = *launch;
      log.correlate(r.correlation, external);
    }
    log.add(std::move(r));
  }
};

enum class Scenario { kAware, kNccl, kCopies };

ppb::run::StageStep stage_step(const ppb::SimStage& sim, const ppb::SimResult& result, int stage,
                               double origin, Scenario scenario) {
  const bool nccl = scenario == Scenario::kNccl;
  const bool copies = scenario == Scenario::kCopies;
  ppb::run::StageStep s;
  StageRecords rec;
  rec.origin = origin;
  double previous_end = 0;
  for (size_t i = 0; i < sim.events.size(); ++i) {
    const ppb::SimEvent& e = sim.events[i];
    s.actions.push_back({e.action, e.start, e.end, 0});
    s.end = std::max(s.end, e.end);
    const Launch launch = Launch::action(static_cast<int>(i));
    const bool forward = e.action.kind == ppb::ActionKind::kForward;
    const bool has_input = forward ? stage > 0 : stage < kStages - 1;
    if (nccl && has_input && e.start - previous_end > 2 * kLaunchGap) {
      rec.kernel(previous_end + kLaunchGap, e.start - kLaunchGap, 13,
                 "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", &launch);
    }
    // The action's copy, at an assorted fraction of a microsecond, then
    // its kernels from 2 us on.
    const double lead = copies ? 2e-6 : 0.0;
    if (copies) {
      const double at = e.start + 1e-6 * (0.1 + 0.07 * static_cast<double>(i % 10));
      rec.kernel(at, at + 0.6e-6, 7, "Memcpy HtoD (Pageable -> Device)", &launch, OpKind::kMemcpy);
    }
    const double d = e.end - e.start - lead;
    const std::string base = forward ? "ppb_fwd_" : "ppb_bwd_";
    rec.kernel(e.start + lead, e.start + lead + 0.3 * d, 7, base + "gemm", &launch);
    rec.kernel(e.start + lead + 0.3 * d + kLaunchGap, e.start + lead + 0.7 * d, 7,
               base + "attention", &launch);
    rec.kernel(e.start + lead + 0.7 * d + kLaunchGap, e.end, 7, base + "gelu", &launch);
    const bool sends = forward ? stage < kStages - 1 : stage > 0;
    if (nccl && sends) {
      rec.kernel(e.end + kLaunchGap, e.end + 40e-6, 17,
                 "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", &launch);
    }
    previous_end = e.end;
  }
  const Launch sgd = Launch::optimizer(0);
  rec.kernel(s.end + 10e-6, s.end + 30e-6, 7, "ppb_sgd", &sgd);
  for (const ppb::SimTransfer& t : result.transfers) {
    if (t.from_stage != stage && t.to_stage != stage) continue;
    ppb::run::CommTiming c;
    c.send = t.from_stage == stage;
    c.gradient = t.gradient;
    c.microbatch = t.microbatch;
    c.from_virtual = t.from_stage;
    c.to_virtual = t.to_stage;
    c.start = t.start;
    c.end = t.end;
    s.comms.push_back(c);
  }
  // The profiler's clock: a fixed offset from steady, sampled as the
  // collector does; the step started at steady `origin`.
  const ppb::device::ClockSample sample{origin, ns(origin)};
  ppb::device::DeviceStep device = ppb::device::build_device_step(
      rec.log.take(), rec.launches, ppb::device::ClockMap(sample, sample), origin);
  s.has_device = true;
  s.device_busy = ppb::device::device_busy(device.ops, 0, s.end + 1.0);
  s.device = std::move(device.ops);
  return s;
}

void scenario(const std::string& dir, Scenario which) {
  ppb::ScheduleParams p;
  p.stages = kStages;
  p.microbatches = kMicrobatches;
  const ppb::Schedule schedule = ppb::generate_schedule("1f1b", p);
  std::vector<ppb::run::StepMeasure> steps;
  double origin = 100.0;
  for (int k = 0; k < kSteps; ++k) {
    const double jitter = 1.0 + 0.05 * std::sin(k);
    const ppb::StageCosts costs =
        ppb::uniform_costs(kStages, 1, 1e-3 * jitter, 2e-3 * jitter, 0, 150e-6);
    const ppb::SimResult sim = ppb::simulate(schedule, costs);
    ppb::run::StepMeasure step;
    for (int s = 0; s < kStages; ++s)
      step.push_back(stage_step(sim.stages[static_cast<size_t>(s)], sim, s, origin, which));
    origin += ppb::run::step_time(step) + 0.01;
    steps.push_back(std::move(step));
  }
  std::filesystem::create_directories(dir);
  ppb::run::write_measured_traces(steps, ppb::Placement(kStages, 1), kMicrobatches, dir, "run");

  boost::json::array bubble;
  boost::json::array compute;
  boost::json::array communication;
  boost::json::array busy;
  for (int s = 0; s < kStages; ++s) {
    double total = 0;
    double c = 0;
    double m = 0;
    double b = 0;
    for (const ppb::run::StepMeasure& step : steps) {
      const ppb::run::StageStep& st = step[static_cast<size_t>(s)];
      total += ppb::run::step_time(step);
      c += st.device_busy.compute;
      m += st.device_busy.communication;
      b += st.device_busy.busy;
    }
    bubble.push_back(ppb::device::device_bubble_ratio(c, total));
    compute.push_back(c);
    communication.push_back(m);
    busy.push_back(b);
  }
  const char* names[] = {"aware", "nccl", "copies"};
  const boost::json::object expected{{"scenario", names[static_cast<int>(which)]},
                                     {"stages", kStages},
                                     {"steps", kSteps},
                                     {"device_bubble_per_stage", bubble},
                                     {"compute_seconds_per_stage", compute},
                                     {"communication_seconds_per_stage", communication},
                                     {"busy_seconds_per_stage", busy}};
  ppb::write_output_file(dir + "/expected.json", boost::json::serialize(expected) + "\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: device_trace_fixture DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  scenario(dir + "/aware", Scenario::kAware);
  scenario(dir + "/nccl", Scenario::kNccl);
  scenario(dir + "/copies", Scenario::kCopies);
  std::printf("device traces: %s/aware, %s/nccl, %s/copies\n", dir.c_str(), dir.c_str(),
              dir.c_str());
  return 0;
}
