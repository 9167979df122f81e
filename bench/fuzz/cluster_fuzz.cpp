// Cluster files (plan --cluster): any input is a cluster or a UsageError; an
// accepted one resolves to whole nodes with positive rates and capacity, or
// to a UsageError naming the flag.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.hpp"
#include "ppb/reports/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ppb::fuzz::accept_or_usage_error([&] {
    const ppb::reports::ClusterSpec c =
        ppb::reports::resolve_cluster(ppb::reports::parse_cluster(text, "fuzz.json"));
    PPB_FUZZ_REQUIRE(c.gpus >= 1 && c.gpus_per_node >= 1 && c.gpus % c.gpus_per_node == 0);
    PPB_FUZZ_REQUIRE(c.device.peak_flops > 0 && c.device.mem_bandwidth > 0);
    PPB_FUZZ_REQUIRE(c.gpu_memory_bytes > 0 && c.intra_node.bandwidth > 0);
    PPB_FUZZ_REQUIRE(c.intra_node.latency >= 0 && c.inter_node.latency >= 0);
  });
  return 0;
}
