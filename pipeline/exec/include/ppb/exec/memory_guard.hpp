// The memory guard of the `adaptive` schedule (document 000, claim S9): when a
// stage's tracked memory would pass guard x budget, fewer micro-batches are
// admitted in flight.
//
// Why not react inside a step: a stage that alone delays its next forward
// changes the order of its sends and receives while its neighbours keep the
// original order, and the pipeline can deadlock. So the guard acts BETWEEN
// steps and on every rank alike:
//  1. plan() (collective): every rank predicts, for each candidate in-flight
//     limit N = max_inflight, max_inflight-1, ..., 1, its stage's peak as
//       static bytes (tracker total outside a step: parameters, gradients,
//       optimizer state, stash, retained communication buffers)
//       + the peak over its action list of the summed activation bytes of
//         the (micro-batch, chunk) pairs in flight (Backend::activation_bytes
//         through the memory model's list_peaks, memory_model.hpp: exact
//         accounting),
//     an all-reduce (MIN) picks the largest N that fits guard x budget on
//     every stage, and the schedule is regenerated with that N (the
//     generator is the `adaptive` schedule's, passed in). N = 1 when none fits.
//  2. observe() (collective) after the step: if any stage's measured peak
//     passed guard x budget, the cap for later steps drops below the N used.
// acted() counts the steps whose N was lowered below max_inflight by either
// rule; inflight_history() records the N of every step (for the result file).
//
// Example:
//   MemoryGuard guard(comm, {.budget_bytes = 64 << 20, .guard = 0.85, .max_inflight = P},
//                     [&](int n) { return generate_schedule("adaptive", {..., .inflight = n}); });
//   for (...) { const Schedule& s = guard.plan(*backend); auto r = exec.run_step(s);
//   guard.observe(r.peak_bytes); }
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "ppb/exec/backend.hpp"
#include "ppb/pipeline/action.hpp"

namespace ppb {

struct MemoryGuardOptions {
  int64_t budget_bytes = 0;  ///< --memory-budget (> 0)
  double guard = 0.85;       ///< --memory-guard, in (0, 1]
  int max_inflight = 1;      ///< the N asked for (--inflight, default P)
  /// The stage whose list this rank runs; -1: its rank in `comm`. With data
  /// parallelism `comm` holds every replica, so all replicas agree on N.
  int stage = -1;
};

class MemoryGuard {
 public:
  using Generator = std::function<Schedule(int inflight)>;

  /// REQUIRES (else UsageError): budget_bytes > 0, 0 < guard <= 1, max_inflight >= 1.
  MemoryGuard(MPI_Comm comm, MemoryGuardOptions options, Generator generate);

  /// Collective. Picks N (see the file comment) and returns the schedule
  /// generated with it; valid until the next plan().
  const Schedule& plan(const Backend& backend);
  /// Collective. `measured_peak_bytes` = this rank's peak during the step
  /// (StepRecord::peak_bytes).
  void observe(int64_t measured_peak_bytes);

  int inflight() const { return inflight_; }
  int acted() const { return acted_; }
  const std::vector<int>& inflight_history() const { return history_; }
  /// guard x budget in bytes.
  int64_t line_bytes() const;
  /// This rank's predicted peak for the N chosen by the last plan().
  int64_t predicted_peak_bytes() const { return predicted_; }

 private:
  const Schedule& schedule_for(int n);

  MPI_Comm comm_;
  MemoryGuardOptions options_;
  Generator generate_;
  std::map<int, Schedule> cache_;
  int cap_ = 1;
  int inflight_ = 1;
  int acted_ = 0;
  int64_t predicted_ = 0;
  std::vector<int> history_;
};

}  // namespace ppb
