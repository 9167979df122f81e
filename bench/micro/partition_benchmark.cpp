// Speed of the balanced partition: 4 and 64 parts of GPT models from 1,000 to
// 64,000 layers (about 7 operator units each). Complexity() fits the growth
// in units: the goal is O(n log n) or better (the quadratic program it
// replaced took 72 s at 20,000 layers).
//
//   ./ppb_micro_bench --benchmark_filter=BalancedPartition
#include <benchmark/benchmark.h>

#include <string>

#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/pipeline/partition.hpp"

namespace {

void BM_BalancedPartition(benchmark::State& state) {
  const auto layers = state.range(0);
  const int parts = static_cast<int>(state.range(1));
  const ppb::ModelSpec spec = ppb::parse_model_spec("gpt:layers=" + std::to_string(layers) +
                                                    ",hidden=64,heads=4,seq=64,vocab=1000,mbs=1");
  const std::vector<ppb::Unit> units = ppb::expand_units(spec);
  const ppb::DeviceSpec device = ppb::device_preset("h100", 2);
  const std::vector<ppb::UnitTime> times = ppb::unit_times(units, device);
  ppb::PartitionOptions options;
  options.link = device.link();
  for (auto _ : state) {
    const auto ranges = ppb::make_partition("balanced", units, times, parts, options);
    benchmark::DoNotOptimize(ranges.data());
  }
  state.SetComplexityN(static_cast<int64_t>(units.size()));
  state.counters["units"] = static_cast<double>(units.size());
}
BENCHMARK(BM_BalancedPartition)
    ->ArgsProduct({{1000, 4000, 16000, 64000}, {4}})
    ->Unit(benchmark::kMillisecond)
    ->Complexity();
BENCHMARK(BM_BalancedPartition)
    ->ArgsProduct({{1000, 4000, 16000}, {64}})
    ->Unit(benchmark::kMillisecond)
    ->Complexity();

}  // namespace
