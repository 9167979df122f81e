#include "watchdog.hpp"

#include <algorithm>
#include <cstdio>

#include "ppb/exec/mpi.hpp"
#include "ppb/profiling/clock.hpp"

namespace ppb {

std::string action_text(const Action& a, int chunks) {
  if (a.kind == ActionKind::kSync) return "SYNC";
  std::string s = std::string(action_kind_name(a.kind)) + std::to_string(a.microbatch);
  if (chunks > 1) s += " c" + std::to_string(a.chunk);
  return s;
}

void Watchdog::loop() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(50));
    if (stop_ || !in_step_) continue;
    const double stuck = now_seconds() - step_start_;
    // A rank that waits on another gives the rank that is stuck in its own
    // work half a second (or 10%) more, so that the culprit reports first.
    const bool waiting = doing_ != Doing::kCompute && doing_ != Doing::kOptimizer;
    if (stuck <= timeout_ + (waiting ? std::max(0.5, 0.1 * timeout_) : 0.0)) continue;
    std::string where;
    switch (doing_) {
      case Doing::kIdle:
        where = "between steps";
        break;
      case Doing::kStartBarrier:
        where = "the barrier that starts the step (a rank did not arrive)";
        break;
      case Doing::kCompute:
        where = "in " + action_text(action_, chunks_) + " (computing)";
        break;
      case Doing::kWaitRecv:
        where = "in " + action_text(action_, chunks_) + " (waiting for the " +
                (kind_ == MessageKind::kActivation ? "activation" : "input gradient") + " of mb " +
                std::to_string(action_.microbatch) + " from rank " + std::to_string(peer_) + ")";
        break;
      case Doing::kSync:
        where = "in SYNC (a barrier: another rank did not arrive)";
        break;
      case Doing::kOptimizer:
        where = "in the optimizer step";
        break;
      case Doing::kAllReduce:
        where = "waiting for the gradient all-reduce of chunk " + std::to_string(peer_) +
                " across the stage's replicas (a replica did not join)";
        break;
      case Doing::kDrain:
        where = "after its last action (waiting for its sends to complete)";
        break;
    }
    char line[512];
    std::snprintf(line, sizeof line,
                  "rank %d: step %d stuck for %.1f s %s; aborting (--timeout %.1f)", rank_, step_,
                  stuck, where.c_str(), timeout_);
    lock.unlock();
    abort_job(line, 1);
  }
}

}  // namespace ppb
