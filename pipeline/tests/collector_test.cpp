// Collectors on real MPI ranks: the registry, the set the executor calls
// (agreement across ranks, the extra hooks, the figures per step and per
// action) with the timed backend.
#include "ppb/exec/collector.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "ppb/exec/backend.hpp"
#include "ppb/exec/executor.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/exec/transport.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

int comm_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int comm_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

TEST(CollectorRegistry, ListsEveryCollectorWithItsAvailability) {
  std::vector<std::string> names;
  for (const CollectorInfo& c : collector_list()) {
    names.push_back(c.name);
    EXPECT_FALSE(c.help.empty()) << c.name;
    EXPECT_EQ(c.help.find('\n'), std::string::npos) << c.name;
    EXPECT_EQ(c.available, c.why_not.empty()) << c.name << ": " << c.why_not;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"nvtx", "cputime", "perf", "cupti"}));
  EXPECT_TRUE(collector_list()[1].available);  // cputime: always on Linux
  // Only cupti attaches a device profiler (memory peaks are not clean under it).
  for (const CollectorInfo& c : collector_list())
    EXPECT_EQ(c.device_profiler, c.name == "cupti") << c.name;
}

TEST(CollectorRegistry, UnknownNameListsTheAvailableOnes) {
  try {
    check_collector_names({"cputime", "nosuch"});
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("--profile: unknown collector 'nosuch' (collectors: ", 0), 0u) << msg;
    for (const CollectorInfo& c : collector_list()) {
      if (c.available) {
        EXPECT_NE(msg.find(c.name), std::string::npos) << msg;
      }
    }
  }
  EXPECT_THROW((void)make_collector("nosuch", {}), UsageError);
}

TEST(CollectorRegistry, AnUnavailableCollectorSaysWhyWhenMade) {
  for (const CollectorInfo& c : collector_list()) {
    if (c.available) continue;
    try {
      (void)make_collector(c.name, {});
      FAIL() << c.name << " was made although unavailable";
    } catch (const CollectorUnavailable& e) {
      EXPECT_EQ(std::string(e.what()), c.why_not);
    }
  }
}

// Counts the hooks the set hands to its extra Instrumentation.
class HookCounter final : public Instrumentation {
 public:
  void step_begin(int /*step*/) override { ++steps; }
  void action_begin(int /*stage*/, const Action& /*a*/) override { ++begins; }
  void action_end(int /*stage*/, const Action& /*a*/) override { ++ends; }
  void optimizer_begin(int /*chunk*/) override { ++optimizers; }
  // Launches bracket each enqueue and never nest.
  void launch_begin(int /*stage*/, const Action& a) override {
    EXPECT_FALSE(launching) << action_range_name(a, 0, 1);
    EXPECT_NE(a.kind, ActionKind::kSync);
    launching = true;
    ++launches;
  }
  void launch_end(int /*stage*/, const Action& /*a*/) override {
    EXPECT_TRUE(launching);
    launching = false;
  }
  bool launching = false;
  int launches = 0;
  int steps = 0;
  int begins = 0;
  int ends = 0;
  int optimizers = 0;
};

TEST(CollectorSet, CputimeFiguresFollowTheRecordOnEveryRank) {
  const int P = comm_size();
  ScheduleParams p;
  p.stages = P;
  p.microbatches = 2 * P;
  const Schedule s = generate_schedule("1f1b", p);
  BackendConfig cfg;
  cfg.costs = uniform_costs(P, 1, 1.0, 2.0, 0.0, 0.0);
  cfg.stage = comm_rank();
  cfg.stages = P;
  cfg.microbatches = p.microbatches;
  cfg.time_scale = 1e-3;  // 1 ms forwards
  std::vector<std::string> names = {"cputime"};
  for (const CollectorInfo& c : collector_list()) {
    if (!c.available) names.push_back(c.name);  // off everywhere, without failing
  }
  HookCounter counter;
  CollectorSet set(MPI_COMM_WORLD, names, {.stage = comm_rank(), .stages = P, .chunks = 1},
                   &counter);
  EXPECT_EQ(set.active(), std::vector<std::string>{"cputime"});
  EXPECT_EQ(set.device_profiler(), "");

  std::unique_ptr<Backend> backend = make_backend("timed", cfg);
  std::unique_ptr<Transport> transport = make_transport("mpi", MPI_COMM_WORLD);
  ExecutorOptions eo;
  eo.instrumentation = &set;
  Executor exec(MPI_COMM_WORLD, *backend, *transport, eo);
  for (int k = 0; k < 2; ++k) {
    const StepRecord rec = exec.run_step(s);
    const CollectorStepFigures figures = set.finish_step(rec);
    ASSERT_EQ(figures.size(), 1u);
    const CollectedFigures& f = figures.at("cputime");
    const std::vector<double>& per_action = f.action.at("cpu_seconds");
    ASSERT_EQ(per_action.size(), rec.actions.size());
    for (double x : per_action) EXPECT_GE(x, 0.0);
    const double step_cpu = f.step.at("cpu_seconds");
    // The actions are disjoint parts of the step: their CPU cannot exceed it.
    EXPECT_LE(std::accumulate(per_action.begin(), per_action.end(), 0.0), step_cpu * 1.0001);
    EXPECT_GT(step_cpu, 0.0);
    EXPECT_DOUBLE_EQ(f.step.at("cpu_per_wall"), step_cpu / rec.end);
    EXPECT_GE(f.step.at("involuntary_switches"), 0.0);
  }
  const int actions = static_cast<int>(s.actions[static_cast<size_t>(comm_rank())].size());
  EXPECT_EQ(counter.steps, 2);
  EXPECT_EQ(counter.begins, 2 * actions);
  EXPECT_EQ(counter.ends, 2 * actions);
  EXPECT_EQ(counter.launches, 2 * actions);
  EXPECT_FALSE(counter.launching);
  EXPECT_EQ(counter.optimizers, 2);  // one chunk, one flush per step
}

}  // namespace
}  // namespace ppb

int main(int argc, char** argv) {
  ppb::MpiSession mpi;
  ::testing::InitGoogleTest(&argc, argv);
  if (mpi.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return rc;
}
