#include "ppb/exec/job_watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "ppb/exec/mpi.hpp"
#include "ppb/profiling/clock.hpp"
#include "ppb/profiling/log.hpp"

namespace ppb {

JobWatchdog::JobWatchdog(int rank, double timeout_seconds)
    : rank_(rank), timeout_(timeout_seconds) {
  if (timeout_ > 0) thread_ = std::thread([this] { loop(); });
}

JobWatchdog::~JobWatchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void JobWatchdog::begin(std::string what) {
  if (timeout_ <= 0) return;
  std::lock_guard lock(mutex_);
  open_ = true;
  start_ = now_seconds();
  what_ = std::move(what);
}

void JobWatchdog::end() {
  if (timeout_ <= 0) return;
  std::lock_guard lock(mutex_);
  open_ = false;
}

void JobWatchdog::loop() {
  std::unique_lock lock(mutex_);
  StopGap gap(now_seconds());
  while (!stop_) {
    // 50 ms polls: the job ends at most that late, and the thread costs
    // nothing measurable between them.
    wake_.wait_for(lock, std::chrono::milliseconds(50));
    const double now = now_seconds();
    const double held = gap.held(now);
    if (stop_ || !open_) continue;
    if (held > 0) {
      // Only the part of the phase the hold covers (it may have begun
      // after the process was continued, before this wake).
      start_ += std::clamp(now - start_, 0.0, held);
      lock.unlock();  // a blocked stderr must not hold begin() and end()
      log::warn(
          "rank %d did not run for %.1f s (stopped, or its job or machine suspended): not "
          "counted against --timeout",
          rank_, held);
      lock.lock();
      continue;
    }
    const double stuck = now - start_;
    if (stuck <= timeout_ + kGraceSeconds) continue;
    char line[1024];
    std::snprintf(line, sizeof line, "rank %d: stuck for %s s %s; aborting (--timeout %g)", rank_,
                  seconds_text(stuck).c_str(), what_.c_str(), timeout_);
    lock.unlock();
    abort_job(line, 1, kWatchdogLingerSeconds);  // as the step watchdog: every stuck rank's line
  }
}

}  // namespace ppb
