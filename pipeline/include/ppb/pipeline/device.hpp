// Devices and the roofline cost model: turns each unit's FLOPs and bytes into
// seconds, optionally overridden by a calibration file measured on a real run,
// and sums units into the per-virtual-stage costs the simulator consumes.
//
//   ModelSpec spec = parse_model_spec("gpt-small");
//   std::vector<Unit> units = expand_units(spec);
//   DeviceSpec dev = device_preset("h100", spec.bytes_per_element);
//   std::vector<UnitTime> times = unit_times(units, dev);
//   std::vector<UnitRange> parts = make_partition("balanced", units, times, 4);
//   StageCosts costs = model_costs(units, times, parts, 4, 1, dev.link());
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/pipeline/costs.hpp"
#include "ppb/pipeline/model.hpp"

namespace ppb {

/// One accelerator (or one CPU core) and the link between two pipeline stages.
struct DeviceSpec {
  std::string name;
  double peak_flops = 0;      ///< FLOP/s of GEMMs, dense, at the precision the model runs in
  int bytes_per_element = 0;  ///< that precision's storage (2 bf16, 4 fp32); 0: not stated
  /// FLOP/s of a fused kernel's products (Unit::fused_products: the fused
  /// attention's), dense, at that precision; 0 = peak_flops.
  double fused_flops = 0;
  double mem_bandwidth = 0;  ///< bytes/s of device memory
  double efficiency = 1;     ///< fraction of peak_flops that GEMMs reach, (0, 1]
  /// FLOP/s of the non-GEMM (elementwise) work of a unit: LayerNorm, GeLU,
  /// softmax, bias. 0 = the same rate as GEMMs (peak_flops * efficiency).
  double vector_flops = 0;
  double kernel_overhead_s = 0;  ///< fixed seconds added per unit per pass (launch/dispatch)
  int64_t memory_bytes = 0;      ///< device memory capacity
  double link_bandwidth = 0;     ///< bytes/s, one direction, stage to stage
  double link_latency = 0;       ///< seconds per transfer

  /// The link between neighbouring stages: latency + bytes / link_bandwidth.
  LinkModel link() const;
};

/// Presets (figures and their sources in device.cpp and `pipebench list`):
///   cpu   one core of the 2-core AMD EPYC (Zen 4) machine these tests run on,
///         fp32 through OpenBLAS, shared-memory MPI as the link;
///   a100  A100 SXM4 80GB; h100  H100 SXM5 80GB; h200  H200 SXM 141GB — the
///         GEMMs' peak for the storage (bytes_per_element 2, bf16: the dense
///         BF16 tensor-core peak; 4, fp32: the FP32 CUDA-core peak, as the
///         cuda backend's fp32 GEMMs do not use TF32), HBM bandwidth, NVLink
///         per direction.
/// Throws UsageError("--device: unknown device 'x' (devices: cpu, a100, h100, h200)").
/// REQUIRES: bytes_per_element is 2 or 4 (ModelSpec::bytes_per_element).
/// Example: device_preset("h100", 2).peak_flops == 989.4e12;
///          device_preset("h100", 4).peak_flops == 67e12.
DeviceSpec device_preset(std::string_view name, int bytes_per_element);

/// "cpu", "a100", "h100", "h200".
std::vector<std::string> device_preset_names();

/// Seconds of one unit's three passes for ONE micro-batch.
struct UnitTime {
  double fwd = 0;
  double bwd_input = 0;
  double bwd_weight = 0;

  double total() const { return fwd + bwd_input + bwd_weight; }
  friend bool operator==(const UnitTime&, const UnitTime&) = default;
};

/// Measured or corrected unit times, read from a "pipebench.calibration/1"
/// JSON document:
///   {"schema": "pipebench.calibration/1", "device": "cpu",
///    "units": {"l0.qkv": {"fwd": 1.2e-4, "bwd_input": 1.1e-4, "bwd_weight": 1.3e-4}, ...},
///    "kinds": {"attention": 1.7, "qkv": {"fwd": 1.1, "bwd_input": 1.2, "bwd_weight": 1.0}},
///    "launch_seconds": 1.4e-5}
/// "units" gives measured seconds per unit name (all three fields required);
/// "kinds" gives scale factors applied to the roofline time of every unit of
/// that kind (unit_kind_name: "embedding", "ln1", "qkv", ...), as one number
/// for all three passes or per pass. Both are optional; a measured unit time
/// wins over a kind factor. "launch_seconds" (optional, default 0) is a
/// fixed cost every action (F, B, I, W) takes besides its units
/// (StageCosts::action_seconds).
struct Calibration {
  std::string source;  ///< file path (for messages), or "" when built in code
  std::string device;  ///< the device it was measured on; must match the DeviceSpec
  std::map<std::string, UnitTime> unit_seconds;
  std::map<std::string, UnitTime> kind_scale;
  double launch_seconds = 0;  ///< per action, seconds
  /// How it was fitted, in words, for the planner's output (not in the
  /// file): "per unit kind from CUPTI on 3 results: ...; launch 14 us per action".
  std::string summary;
};

/// The largest unit time (seconds) or kind factor a calibration may give:
/// beyond any measurement, and small enough that the sums of a plan's
/// times stay finite.
inline constexpr double kMaxCalibrationValue = 1e6;

/// Reads a calibration file. Throws UsageError naming the file and the field:
/// "calibration.json: field 'units.l0.qkv.fwd': expected a number in [0, 1e6]".
Calibration read_calibration(const std::string& path);

/// Parses a calibration document from text; `source` names it in errors.
Calibration parse_calibration(std::string_view json_text, const std::string& source);

/// The calibration as a "pipebench.calibration/1" JSON document (round-trips
/// through parse_calibration). For tools that measure unit times.
std::string calibration_to_json(const Calibration& cal);

/// Memory traffic of one unit's passes, in bytes (an estimate, documented in
/// device.cpp), as the roofline of unit_times reads it:
///   fwd        = param + activation + boundary bytes
///   bwd_input  = param + activation + 2 * boundary bytes
///   bwd_weight = 2 * param + activation + boundary bytes
struct PassBytes {
  double fwd = 0;
  double bwd_input = 0;
  double bwd_weight = 0;
};
PassBytes unit_traffic_bytes(const Unit& u);

/// The part of each pass's roofline compute time that its GEMMs take (the
/// gemm term of unit_times' formula over the gemm and elementwise terms),
/// in [0, 1]; 0 for a pass with no FLOPs. A unit's elementwise kernels
/// take the rest.
UnitTime gemm_shares(const Unit& u, const DeviceSpec& device);

/// Roofline time of every unit: per pass,
///   max(gemm / (peak_flops * efficiency) + elementwise / vector_flops,
///       traffic / mem_bandwidth) + kernel_overhead_s
/// (gemm = the pass's FLOPs minus its *_elementwise_flops, at fused_flops
/// instead of peak_flops for a unit whose products run fused,
/// Unit::fused_products; with vector_flops 0 this is
/// max(flops / (peak_flops * efficiency), traffic / mem_bandwidth)),
/// and 0 for a pass with no FLOPs (e.g. attention's bwd_weight, embedding's
/// bwd_input); traffic = unit_traffic_bytes.
/// With `cal`, measured unit times replace the roofline, kind factors scale it.
/// Throws UsageError when cal->device differs from device.name or cal names a
/// unit the model does not have.
std::vector<UnitTime> unit_times(const std::vector<Unit>& units, const DeviceSpec& device,
                                 const Calibration* cal = nullptr);

/// Sums units into the simulator's StageCosts. `parts` has stages * chunks
/// contiguous ranges covering all units in order, indexed by virtual stage
/// c * P + s (so parts[v] holds the v-th slice of the model). Per chunk:
/// fwd/bwd_input/bwd_weight = sums of the unit times, send_bytes = boundary
/// bytes of the part's last unit, activation_bytes and param_bytes = sums.
/// has_bytes = true. REQUIRES: parts as described, times.size() == units.size().
StageCosts model_costs(const std::vector<Unit>& units, const std::vector<UnitTime>& times,
                       const std::vector<UnitRange>& parts, int stages, int chunks,
                       const LinkModel& link);

}  // namespace ppb
