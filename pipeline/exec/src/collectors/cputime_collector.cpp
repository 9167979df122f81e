// `--profile cputime`: how much CPU the rank's process used while it ran each
// action and each step. On a machine with fewer cores than ranks (or with
// OpenBLAS threads competing) an action whose CPU seconds fall well below its
// wall seconds was descheduled: the figure tells a slow action from a
// preempted one.
//
//   action["cpu_seconds"]         process CPU seconds (all threads: compute,
//                                 OpenBLAS, the executor's polling) between
//                                 the action's begin and end hooks
//   step["cpu_seconds"]           process CPU seconds from step_begin to step_end
//   step["cpu_per_wall"]          step cpu_seconds / the step's wall seconds
//                                 (StepRecord::end); 1.0 = one core busy throughout
//   step["involuntary_switches"]  context switches the kernel forced on the
//                                 process during the step (getrusage ru_nivcsw)
//
// Always available on Linux (CLOCK_PROCESS_CPUTIME_ID, getrusage).
#include <sys/resource.h>

#include <cmath>
#include <ctime>
#include <deque>
#include <limits>
#include <map>
#include <string>
#include <tuple>

#include "collectors/collectors.hpp"

namespace ppb::collectors {
namespace {

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

long involuntary_switches() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_nivcsw;
}

class CputimeCollector final : public Collector {
 public:
  std::string_view name() const override { return "cputime"; }

  void step_begin(int /*step*/) override {
    done_.clear();
    step_cpu_ = process_cpu_seconds();
    step_switches_ = involuntary_switches();
  }
  void step_end(int /*step*/) override {
    step_cpu_ = process_cpu_seconds() - step_cpu_;
    step_switches_ = involuntary_switches() - step_switches_;
  }
  void action_begin(int /*stage*/, const Action& /*action*/) override {
    action_cpu_ = process_cpu_seconds();
  }
  void action_end(int /*stage*/, const Action& action) override {
    done_[key(action)].push_back(process_cpu_seconds() - action_cpu_);
  }

  void finish_step(const StepRecord& record, CollectedFigures& out) override {
    // Matched by action (not by position), so the figures stay right however
    // the executor orders its hooks; a repeated action (SYNC) in hook order.
    std::vector<double>& per_action = out.action["cpu_seconds"];
    for (const ActionRecord& a : record.actions) {
      auto it = done_.find(key(a.action));
      if (it == done_.end() || it->second.empty()) {
        per_action.push_back(std::numeric_limits<double>::quiet_NaN());
        continue;
      }
      per_action.push_back(it->second.front());
      it->second.pop_front();
    }
    out.step["cpu_seconds"] = step_cpu_;
    out.step["cpu_per_wall"] = record.end > 0 ? step_cpu_ / record.end : 0.0;
    out.step["involuntary_switches"] = static_cast<double>(step_switches_);
  }

 private:
  using Key = std::tuple<int, int32_t, int32_t>;
  static Key key(const Action& a) { return {static_cast<int>(a.kind), a.microbatch, a.chunk}; }

  std::map<Key, std::deque<double>> done_;
  double action_cpu_ = 0;
  double step_cpu_ = 0;
  long step_switches_ = 0;
};

}  // namespace

std::string cputime_unavailable() { return ""; }

std::unique_ptr<Collector> make_cputime(const CollectorContext& /*context*/) {
  return std::make_unique<CputimeCollector>();
}

}  // namespace ppb::collectors
