// The cluster description of `pipebench plan`: a "pipebench.cluster/1" file
// and the flags, resolved against the device presets (plan.hpp).
#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "ppb/profiling/check.hpp"
#include "ppb/profiling/input_file.hpp"
#include "ppb/profiling/json_fields.hpp"
#include "ppb/reports/format.hpp"
#include "ppb/reports/plan.hpp"

namespace ppb::reports {
namespace {

constexpr std::string_view kClusterSchema = "pipebench.cluster/1";

// Node network per GPU when neither the file nor the flags give one: the
// vendor's reference nodes give each GPU its own NIC, one direction —
// DGX A100: 8 x 200 Gb/s HDR InfiniBand (25 GB/s); DGX H100 and H200:
// 8 x 400 Gb/s NDR (50 GB/s). InfiniBand's point-to-point latency is a few
// microseconds; 5 us is taken. A CPU "cluster" is one host: its own link.
LinkModel default_inter_node(const DeviceSpec& d) {
  LinkModel l;
  l.latency = 5e-6;
  if (d.name == "a100") {
    l.bandwidth = 25e9;
  } else if (d.name == "h100" || d.name == "h200") {
    l.bandwidth = 50e9;
  } else {
    l = d.link();
  }
  return l;
}

// The powers of ten and two the ranges are made of, as people write them.
std::string bound_text(double x) {
  if (x >= 0x1p20 && x == std::ldexp(1.0, std::ilogb(x)))
    return "2^" + std::to_string(std::ilogb(x));
  const double decade = std::round(std::log10(x));
  if (x >= 1e3 && x == std::pow(10.0, decade))
    return "1e" + std::to_string(static_cast<int>(decade));
  return format_trimmed(x);
}

double in_range(const JsonObject& o, std::string_view key, const FigureRange& range,
                const std::string& unit) {
  const double x = o.get<double>(key);
  if (!range.contains(x)) o.fail(key, "expected a number in " + range.text() + " (" + unit + ")");
  return x;
}

int gpu_count(const JsonObject& o, std::string_view key) {
  const auto n = o.get<int64_t>(key);
  if (n < 1 || n > kMaxClusterGpus)
    o.fail(key, "expected an integer in [1, " + std::to_string(kMaxClusterGpus) + "]");
  return static_cast<int>(n);
}

void read_link(const JsonObject& o, double* bandwidth, double* latency) {
  o.only({"bandwidth", "latency"}, "bandwidth, latency");
  if (o.has("bandwidth")) *bandwidth = in_range(o, "bandwidth", kBandwidthRange, "bytes/s");
  if (o.has("latency")) *latency = in_range(o, "latency", kLatencyRange, "seconds");
}

void need(bool ok, const std::string& flag, const std::string& what) {
  if (!ok) throw UsageError(flag + ": " + what);
}

bool finite_positive(double x) { return std::isfinite(x) && x > 0; }

}  // namespace

std::string FigureRange::text() const { return "[" + bound_text(lo) + ", " + bound_text(hi) + "]"; }

ClusterInput parse_cluster(std::string_view json_text, const std::string& source) {
  boost::json::error_code ec;
  const boost::json::value doc = boost::json::parse(json_text, ec);
  if (ec) throw UsageError(source + ": not valid JSON (" + ec.message() + ")");
  const JsonReader reader(source);
  const JsonObject root = reader.root(doc);
  root.only({"schema", "gpus", "gpus_per_node", "device", "peak_flops", "memory_bandwidth",
             "gpu_memory_bytes", "intra_node", "inter_node"},
            "schema, gpus, gpus_per_node, device, peak_flops, memory_bandwidth, "
            "gpu_memory_bytes, intra_node, inter_node");
  if (root.get<std::string>("schema") != kClusterSchema)
    root.fail("schema", "expected \"" + std::string(kClusterSchema) + "\"");
  ClusterInput in;
  in.gpus = gpu_count(root, "gpus");
  if (root.has("gpus_per_node")) {
    in.gpus_per_node = gpu_count(root, "gpus_per_node");
    in.gpus_per_node_named = source + ": field 'gpus_per_node'";
  }
  in.device = root.get_or("device", std::string());
  if (root.has("device")) in.device_named = source + ": field 'device'";
  if (root.has("peak_flops"))
    in.peak_flops = in_range(root, "peak_flops", kPeakFlopsRange, "FLOP/s");
  if (root.has("memory_bandwidth"))
    in.memory_bandwidth = in_range(root, "memory_bandwidth", kBandwidthRange, "bytes/s");
  if (root.has("gpu_memory_bytes")) {
    in.gpu_memory_bytes = root.get<int64_t>("gpu_memory_bytes");
    if (!kGpuMemoryRange.contains(static_cast<double>(in.gpu_memory_bytes)))
      root.fail("gpu_memory_bytes", "expected an integer in " + kGpuMemoryRange.text());
  }
  if (const auto o = root.find_object("intra_node"))
    read_link(*o, &in.link_bandwidth, &in.link_latency);
  if (const auto o = root.find_object("inter_node"))
    read_link(*o, &in.inter_node_bandwidth, &in.inter_node_latency);
  return in;
}

ClusterInput read_cluster_file(const std::string& path) {
  return parse_cluster(read_input_file(path, "cluster file", kMaxSmallInputBytes), path);
}

ClusterSpec resolve_cluster(const ClusterInput& in, int bytes_per_element) {
  PPB_CHECK(bytes_per_element == 2 || bytes_per_element == 4,
            "resolve_cluster: bytes_per_element must be 2 (bf16) or 4 (fp32)");
  need(in.gpus >= 1, "--gpus", "expected >= 1 GPUs, got " + std::to_string(in.gpus));
  ClusterSpec c;
  c.gpus = in.gpus;
  c.gpus_per_node = in.gpus_per_node > 0 ? in.gpus_per_node : in.gpus;
  need(c.gpus % c.gpus_per_node == 0, in.gpus_per_node_named,
       std::to_string(c.gpus) + " GPUs are not whole nodes of " + std::to_string(c.gpus_per_node));
  if (!in.device.empty()) {
    const std::vector<std::string> names = device_preset_names();
    if (std::find(names.begin(), names.end(), in.device) == names.end()) {
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
      need(false, in.device_named, "unknown device '" + in.device + "' (devices: " + list + ")");
    }
    c.device = device_preset(in.device, bytes_per_element);
  } else {
    need(
        in.peak_flops > 0 && in.memory_bandwidth > 0, "--device", "give a preset (" + [] {
          std::string names;
          for (const std::string& n : device_preset_names())
            names += (names.empty() ? "" : ", ") + n;
          return names;
        }() + ") or --peak-flops and --memory-bandwidth");
    c.device.name = "custom";
    c.device.efficiency = 1;
    c.device.bytes_per_element = bytes_per_element;
  }
  if (in.peak_flops > 0) c.device.peak_flops = in.peak_flops;
  if (in.memory_bandwidth > 0) c.device.mem_bandwidth = in.memory_bandwidth;
  need(finite_positive(c.device.peak_flops), "--peak-flops", "expected a number > 0");
  need(finite_positive(c.device.mem_bandwidth), "--memory-bandwidth", "expected a number > 0");
  c.gpu_memory_bytes = in.gpu_memory_bytes > 0 ? in.gpu_memory_bytes : c.device.memory_bytes;
  need(c.gpu_memory_bytes > 0, "--gpu-memory", "expected a size > 0 (no device preset gives one)");
  c.intra_node = c.device.link();
  if (in.link_bandwidth > 0) c.intra_node.bandwidth = in.link_bandwidth;
  if (in.link_latency >= 0) c.intra_node.latency = in.link_latency;
  need(finite_positive(c.intra_node.bandwidth), "--link-bandwidth",
       "expected a number > 0 (no device preset gives one)");
  c.inter_node = default_inter_node(c.device);
  if (in.inter_node_bandwidth > 0) c.inter_node.bandwidth = in.inter_node_bandwidth;
  if (in.inter_node_latency >= 0) c.inter_node.latency = in.inter_node_latency;
  if (c.inter_node.bandwidth <= 0) c.inter_node = c.intra_node;
  need(std::isfinite(c.intra_node.latency) && std::isfinite(c.inter_node.latency), "--link-latency",
       "expected a finite number >= 0");
  return c;
}

}  // namespace ppb::reports
