// Cluster files (plan --cluster): any input is a cluster or a UsageError; an
// accepted one resolves to whole nodes with every figure in the ranges the
// flags take, or to a UsageError naming the flag.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.hpp"
#include "ppb/reports/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ppb::fuzz::accept_or_usage_error([&] {
    const ppb::reports::ClusterSpec c =
        ppb::reports::resolve_cluster(ppb::reports::parse_cluster(text, "fuzz.json"), 2);
    PPB_FUZZ_REQUIRE(c.gpus >= 1 && c.gpus_per_node >= 1 && c.gpus % c.gpus_per_node == 0);
    PPB_FUZZ_REQUIRE(c.device.peak_flops > 0 && c.device.mem_bandwidth > 0);
    PPB_FUZZ_REQUIRE(c.gpu_memory_bytes > 0 && c.intra_node.bandwidth > 0);
    PPB_FUZZ_REQUIRE(c.intra_node.latency >= 0 && c.inter_node.latency >= 0);
    // Every figure within the ranges the flags take too.
    namespace r = ppb::reports;
    PPB_FUZZ_REQUIRE(c.gpus <= r::kMaxClusterGpus &&
                     r::kPeakFlopsRange.contains(c.device.peak_flops) &&
                     r::kBandwidthRange.contains(c.device.mem_bandwidth) &&
                     r::kGpuMemoryRange.contains(static_cast<double>(c.gpu_memory_bytes)));
    PPB_FUZZ_REQUIRE(r::kBandwidthRange.contains(c.intra_node.bandwidth) &&
                     r::kBandwidthRange.contains(c.inter_node.bandwidth) &&
                     r::kLatencyRange.contains(c.intra_node.latency) &&
                     r::kLatencyRange.contains(c.inter_node.latency));
  });
  return 0;
}
