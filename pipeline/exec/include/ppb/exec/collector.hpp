// Collectors: what `pipebench run --profile a,b` switches on. A collector
// sees every step, action, message and optimizer step of this rank through
// the executor's Instrumentation hooks, and may add figures per step and per
// action to the result (metrics.collectors, docs/result-schema.md).
//
// Registered collectors (one file in src/collectors/ plus one line in
// collector_registry.cpp; `pipebench list` prints collector_list()):
//   nvtx     NVTX ranges for Nsight Systems (collectors/nvtx_collector.cpp)
//   cputime  process CPU seconds per action and per step, involuntary
//            context switches per step (collectors/cputime_collector.cpp)
//   perf     hardware counters per step: cycles, instructions, IPC
//            (collectors/perf_collector.cpp, Linux perf_event_open)
//   cupti    the device's kernels, copies and memsets per step, attributed
//            to the actions that launched them (collectors/cupti_collector.cpp;
//            the arithmetic on the records: ppb/profiling/device_activity.hpp)
//
// Profiling never kills a run: a collector that cannot start here (no NVTX
// in this build, no hardware counters in this virtual machine, CUPTI held
// by another tool) is off, and rank 0 logs ONE warning naming it and why;
// the run goes on. A name that is not registered is a usage error (exit 2).
//
// Life of a collector, per combination of a sweep:
//   make (factory; throws CollectorUnavailable to switch itself off)
//   -> for every step: step_begin, {action_begin/end, comm_begin/end,
//      optimizer_begin/end}..., step_end, then finish_step(record) once the
//      executor returned the step's StepRecord
//   -> measure_begin/measure_end around the timed steps.
//
// How the CUPTI collector fits (device activity of a CUDA backend):
//   * make: subscribe, register 4 MB activity buffers, enable
//     CONCURRENT_KERNEL, MEMCPY, MEMSET, EXTERNAL_CORRELATION (and RUNTIME,
//     which external correlation needs); a subscriber taken by another tool,
//     no driver or no device throws CollectorUnavailable: one warning, the
//     run goes on;
//   * launch_begin/launch_end bracket Backend::enqueue() of each action
//     (optimizer_begin/end each optimizer step): push/pop a fresh external
//     correlation id, so every kernel launched there carries it, whichever
//     stream runs it;
//   * finish_step: synchronise the devices, cuptiActivityFlushAll(FORCED),
//     then the step's operations (CollectedFigures::device) on the step
//     clock, per-action device seconds and the record counts;
//   * each rank sums the operations into busy, communication and overlap
//     seconds (rank_step); rank 0 adds the device bubble of the median step
//     (metrics.device) and, with --trace, draws the operations as device
//     tracks.
//
// Example:
//   ppb::CollectorSet set(comm, {"nvtx", "cputime"}, {.stage = rank, .stages = P, .chunks = V});
//   options.instrumentation = &set;             // ExecutorOptions
//   ppb::StepRecord r = exec.run_step(schedule);
//   ppb::CollectorStepFigures f = set.finish_step(r);    // {"cputime": {...}}
#pragma once

#include <mpi.h>

#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/exec/executor.hpp"
#include "ppb/profiling/device_activity.hpp"

namespace ppb {

/// Where a collector runs: this rank's stage and the shape of the schedules.
struct CollectorContext {
  int stage = 0;   ///< this rank
  int stages = 1;  ///< P
  int chunks = 1;  ///< V of the schedules this rank will run
  /// The backend runs on a device it binds on this thread (traits.device):
  /// at each step's end its context is the thread's current one.
  bool device_backend = false;
};

/// Figures one collector adds for one step of this rank. Names are
/// snake_case with their unit ("cpu_seconds", "cycles").
struct CollectedFigures {
  /// figure -> value for the whole step on this rank.
  std::map<std::string, double> step;
  /// figure -> one value per entry of StepRecord::actions, in list order
  /// (SYNC included; NaN where the figure does not apply).
  std::map<std::string, std::vector<double>> action;
  /// The device's operations in this step, on the step clock (a device
  /// profiler's: cupti); absent for other collectors.
  std::optional<device::DeviceStep> device;

  friend bool operator==(const CollectedFigures&, const CollectedFigures&) = default;
};

/// Every active collector's figures for one step: collector name -> figures.
using CollectorStepFigures = std::map<std::string, CollectedFigures>;

/// Thrown by a collector's factory when it cannot run here; what() says why
/// in a few words ("this build has no NVTX").
class CollectorUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One profiling collector. The Instrumentation hooks run on the executor's
/// thread and must not call the transport. REQUIRES of implementations:
/// cheap hooks (a few microseconds at most), no throwing from hooks.
class Collector : public Instrumentation {
 public:
  virtual std::string_view name() const = 0;
  /// After run_step returned `record` (every action complete, the stream
  /// synchronised): flush what was buffered and add this step's figures.
  virtual void finish_step(const StepRecord& /*record*/, CollectedFigures& /*out*/) {}
  /// Around the timed steps of a combination (after --check and warm-up).
  virtual void measure_begin() {}
  virtual void measure_end() {}
};

/// A registered collector, for `pipebench list`, --profile and its errors.
struct CollectorInfo {
  std::string name;
  std::string help;        ///< one line
  bool available = false;  ///< whether it can run on this machine with this build
  std::string why_not;     ///< when not available: why, in a few words
  /// Attaches a device profiler (CUPTI): it takes device memory and time, so
  /// a run's memory peaks are clean only without it.
  bool device_profiler = false;
};

/// Every registered collector, availability probed once per process.
const std::vector<CollectorInfo>& collector_list();

/// Checks --profile's names against the registry. Throws UsageError naming
/// the first unknown one and listing the registered ones, available first:
///   "--profile: unknown collector 'nosuch' (collectors: nvtx, cputime; not available here: perf)"
/// An unavailable collector is not an error.
void check_collector_names(const std::vector<std::string>& names);

/// Makes the collector `name`. Throws UsageError for an unknown name and
/// CollectorUnavailable when it cannot run here.
std::unique_ptr<Collector> make_collector(std::string_view name, const CollectorContext& context);

/// The collectors of one run on this rank, as one Instrumentation for the
/// executor: every hook goes to every active collector in --profile order.
/// Construction is collective over `comm`: a collector is on only where it
/// started on every rank, so every stage reports the same figures. For each
/// collector that is off, rank 0 logs one warning (once per process):
///   "pipebench[r0]: --profile perf: off (rank 0: no hardware counters: ...)".
/// `extra` (may be null, not owned) receives every hook before the
/// collectors do (the run's --check probes).
class CollectorSet final : public Instrumentation {
 public:
  CollectorSet(MPI_Comm comm, const std::vector<std::string>& names,
               const CollectorContext& context, Instrumentation* extra = nullptr);
  ~CollectorSet() override;
  CollectorSet(const CollectorSet&) = delete;
  CollectorSet& operator=(const CollectorSet&) = delete;

  /// Names of the collectors that are on, in --profile order.
  std::vector<std::string> active() const;
  /// The active collector that attaches a device profiler
  /// (CollectorInfo::device_profiler), "" when none is on.
  std::string device_profiler() const;

  void step_begin(int step) override;
  void step_end(int step) override;
  void action_begin(int stage, const Action& action) override;
  void action_end(int stage, const Action& action) override;
  void launch_begin(int stage, const Action& action) override;
  void launch_end(int stage, const Action& action) override;
  void comm_begin(const CommRecord& record) override;
  void comm_end(const CommRecord& record) override;
  void optimizer_begin(int chunk) override;
  void optimizer_end(int chunk) override;

  /// Every active collector's figures for the step just run.
  CollectorStepFigures finish_step(const StepRecord& record);
  void measure_begin();
  void measure_end();

 private:
  std::vector<std::unique_ptr<Collector>> collectors_;
  Instrumentation* extra_;
};

}  // namespace ppb
