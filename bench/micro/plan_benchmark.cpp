// Speed of the planner (`pipebench plan`): gpt-7b on 64 to 1024 H100s, 8 per
// node, global batch 1024, every schedule, partition, micro-batch size 1-8,
// N and V. The goal is a 1024-GPU search in under 10 seconds; the counters
// say how many configurations the search space holds and how many were
// simulated (the rest pruned).
//
//   ./ppb_micro_bench --benchmark_filter=Plan
#include <benchmark/benchmark.h>

#include "ppb/pipeline/model.hpp"
#include "ppb/reports/plan.hpp"

namespace {

void BM_PlanGpt7bOnH100(benchmark::State& state) {
  ppb::reports::ClusterInput in;
  in.gpus = static_cast<int>(state.range(0));
  in.gpus_per_node = 8;
  in.device = "h100";
  ppb::reports::PlanOptions o;
  o.model = ppb::parse_model_spec("gpt-7b");
  o.cluster = ppb::reports::resolve_cluster(in, o.model.bytes_per_element);
  o.global_batch = 1024;
  o.memory.optimizer = ppb::OptimizerKind::kAdam;
  ppb::reports::Plan plan;
  for (auto _ : state) {
    plan = ppb::reports::make_plan(o);
    benchmark::DoNotOptimize(plan.ranked.data());
  }
  state.counters["considered"] = static_cast<double>(plan.considered);
  state.counters["simulated"] = static_cast<double>(plan.evaluated);
}
BENCHMARK(BM_PlanGpt7bOnH100)->Arg(64)->Arg(1024)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
