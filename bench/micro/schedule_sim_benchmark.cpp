// Speed of the schedule engine: generating, validating and
// simulating interleaved-1f1b with P=64, M=1024, V=4 (about half a million
// actions) must run at >= 2 million actions per second on one core. The
// items_per_second counter of BM_GenerateValidateSimulate is that figure.
//
//   ./ppb_micro_bench --benchmark_filter=GenerateValidateSimulate
#include <benchmark/benchmark.h>

#include <string>

#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/simulator.hpp"
#include "ppb/pipeline/validator.hpp"

namespace {

ppb::ScheduleParams params(int stages, int microbatches, int chunks) {
  ppb::ScheduleParams p;
  p.stages = stages;
  p.microbatches = microbatches;
  p.chunks = chunks;
  return p;
}

// The goal: generate (generate_schedule validates what it returns: the
// validator's dry run is part of every call), then simulate with events
// recorded, as `pipebench simulate` does.
void BM_GenerateValidateSimulate(benchmark::State& state) {
  const int P = static_cast<int>(state.range(0));
  const int M = static_cast<int>(state.range(1));
  const int V = static_cast<int>(state.range(2));
  const ppb::StageCosts costs = ppb::uniform_costs(P, V, 1.0, 2.0, 0.0, 0.1);
  int64_t actions = 0;
  for (auto _ : state) {
    const ppb::Schedule s = ppb::generate_schedule("interleaved-1f1b", params(P, M, V));
    const ppb::SimResult r = ppb::simulate(s, costs);
    benchmark::DoNotOptimize(r.step_time);
    actions += s.total_actions();
  }
  state.SetItemsProcessed(actions);
  state.counters["actions"] =
      static_cast<double>(actions) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_GenerateValidateSimulate)
    ->Args({64, 1024, 4})
    ->Args({8, 64, 2})
    ->Unit(benchmark::kMillisecond);

// Generation + validation alone (the schedules area's share of the goal).
void BM_Generate(benchmark::State& state) {
  const auto p = params(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                        static_cast<int>(state.range(2)));
  int64_t actions = 0;
  for (auto _ : state) {
    const ppb::Schedule s = ppb::generate_schedule("interleaved-1f1b", p);
    benchmark::DoNotOptimize(s.actions.data());
    actions += s.total_actions();
  }
  state.SetItemsProcessed(actions);
}
BENCHMARK(BM_Generate)->Args({64, 1024, 4})->Unit(benchmark::kMillisecond);

// The validator's dry run alone, on an already generated schedule.
void BM_Validate(benchmark::State& state) {
  const ppb::Schedule s = ppb::generate_schedule("interleaved-1f1b", params(64, 1024, 4));
  for (auto _ : state) {
    const ppb::ValidationResult v = ppb::validate_schedule(s);
    benchmark::DoNotOptimize(v.ok);
  }
  state.SetItemsProcessed(state.iterations() * s.total_actions());
}
BENCHMARK(BM_Validate)->Unit(benchmark::kMillisecond);

// simulate() alone: arg 0 = record events (timeline, transfers) or not.
void BM_Simulate(benchmark::State& state, const std::string& name, int P, int M, int V) {
  const ppb::Schedule s = ppb::generate_schedule(name, params(P, M, V));
  const ppb::StageCosts costs = ppb::uniform_costs(P, V, 1.0, 2.0, 0.5, 0.1);
  const ppb::SimOptions options{.record_events = state.range(0) != 0};
  for (auto _ : state) {
    const ppb::SimResult r = ppb::simulate(s, costs, options);
    benchmark::DoNotOptimize(r.step_time);
  }
  state.SetItemsProcessed(state.iterations() * s.total_actions());
}
BENCHMARK_CAPTURE(BM_Simulate, interleaved_P64_M1024_V4, std::string("interleaved-1f1b"), 64, 1024,
                  4)
    ->Arg(1)
    ->Arg(0)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Simulate, zb_h1_P16_M256, std::string("zb-h1"), 16, 256, 1)->Arg(1)->Arg(0);
BENCHMARK_CAPTURE(BM_Simulate, one_f_one_b_P8_M64, std::string("1f1b"), 8, 64, 1)->Arg(1)->Arg(0);

}  // namespace
