// The job's watchdog: bounds every phase of a rank's work outside the
// executor's steps (validation, the partition, backend start, the --check
// comparison, gathering, writing results, waiting for rank 0), so that a
// rank that hangs, is stopped (SIGSTOP) or waits for one that is can never
// leave the job running forever. Time the whole process was held (StopGap)
// is not counted. The executor's own watchdog (executor.hpp)
// covers the steps and names the action a rank is stuck in.
//
// Example (`pipebench run --timeout 5`):
//   ppb::JobWatchdog watch(5.0);
//   watch.begin("in the partition of 1f1b x balanced P=4 M=8");
//   make_partition(...);          // > 6 s: the whole job ends with
//   // "pipebench[r2]: rank 2: stuck for 6.0 s in the partition of ...; aborting (--timeout 5)"
//   watch.end();
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace ppb {

/// How long this process did not run, as a watchdog's loop sees it: a wake
/// far later than the loop's period means every thread of the process was
/// held (SIGSTOP, a suspended Slurm job, a paused VM). That stretch is no
/// wait on another rank, so the watchdogs do not count it: a job suspended
/// and resumed runs on, and a rank stopped while its peers waited for it
/// does not, once continued, blame the peer it was waiting on (the peers
/// have named it). A rank descheduled that long on a crowded host counts
/// as held too.
/// Example: StopGap gap(0.0); gap.held(0.05) == 0; gap.held(7.05) == 7.0.
class StopGap {
 public:
  /// A wake this much later than the last one counts as held.
  static constexpr double kSeconds = 1.0;
  explicit StopGap(double now) : last_(now) {}
  /// Seconds the process was held since the last call (0: it ran).
  double held(double now) {
    const double gap = now - last_;
    last_ = now;
    return gap > kSeconds ? gap : 0.0;
  }

 private:
  double last_;
};

class JobWatchdog {
 public:
  /// Watches this rank with `timeout_seconds` per phase (0 = off: no thread
  /// is started and begin/end do nothing). A phase may run `timeout +
  /// kGraceSeconds` before the job ends, so that within a step the
  /// executor's watchdog, which knows the action, reports first.
  /// REQUIRES: timeout_seconds >= 0 and finite; MPI initialised (the abort
  /// ends every rank through MPI_Abort, exit code 1).
  JobWatchdog(int rank, double timeout_seconds);
  ~JobWatchdog();
  JobWatchdog(const JobWatchdog&) = delete;
  JobWatchdog& operator=(const JobWatchdog&) = delete;

  static constexpr double kGraceSeconds = 1.0;

  /// Opens a phase, replacing the open one; its clock starts now. `what`
  /// completes "stuck for X s <what>", e.g. "in the partition of <label>" or
  /// "waiting for rank 0 (which writes each result) before <label>".
  void begin(std::string what);
  /// Closes the open phase (nothing is watched until the next begin()).
  void end();

 private:
  void loop();

  int rank_;
  double timeout_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool open_ = false;
  double start_ = 0;
  std::string what_;
  std::thread thread_;
};

/// Opens a phase for a scope and closes it at the end of the scope.
/// Example: { ppb::JobPhase phase(watch, "writing " + path); write(...); }
class JobPhase {
 public:
  JobPhase(JobWatchdog& watch, std::string what) : watch_(watch) { watch_.begin(std::move(what)); }
  ~JobPhase() { watch_.end(); }
  JobPhase(const JobPhase&) = delete;
  JobPhase& operator=(const JobPhase&) = delete;

 private:
  JobWatchdog& watch_;
};

}  // namespace ppb
