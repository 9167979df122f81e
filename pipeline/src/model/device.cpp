#include "ppb/pipeline/device.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/profiling/check.hpp"
#include "ppb/profiling/input_file.hpp"
#include "ppb/profiling/json_fields.hpp"

namespace ppb {
namespace {

constexpr std::string_view kCalibrationSchema = "pipebench.calibration/1";

// Device presets. GPU figures are NVIDIA datasheet figures for the SXM parts:
// the GEMMs' peak per storage (bf16: the dense, no-sparsity BF16 tensor-core
// peak; fp32: the FP32 CUDA-core peak, as the cuda backend's fp32 GEMMs do
// not drop to TF32), the fused attention's products' peak (bf16: cuDNN's,
// on the BF16 tensor cores, the GEMMs' peak; fp32: the flash kernels'
// 3xTF32, three products on the TF32 tensor cores per fp32 product, a third
// of the dense TF32 peak), HBM bandwidth, capacity in decimal GB as the datasheet
// states it, and NVLink bandwidth per direction (half the datasheet's
// bidirectional total). Efficiency and per-unit overhead are assumptions
// (typical large cuBLAS BF16 GEMMs reach 60-70 % of peak, and the same
// share is taken for fp32; a unit is a handful of kernels of a few
// microseconds' launch cost); a calibration file replaces them with
// measurements. Link latency for GPUs is an assumed NCCL point-to-point
// latency inside one NVLink node.
DeviceSpec make_preset(std::string_view name, int bytes_per_element) {
  PPB_CHECK(bytes_per_element == 2 || bytes_per_element == 4,
            "device_preset: bytes_per_element must be 2 (bf16) or 4 (fp32)");
  const bool bf16 = bytes_per_element == 2;
  DeviceSpec d;
  d.name = std::string(name);
  d.bytes_per_element = bytes_per_element;
  if (name == "cpu") {
    // One core of the 2-core AMD EPYC (Zen 4) machine the tests run on, fp32
    // through single-threaded OpenBLAS. Measured here (2026-11-29):
    // cblas_sgemm 4096x768x2304 109 GFLOP/s, 128x128x384 (gpt-tiny's QKV)
    // 96-100 GFLOP/s; a one-core triad 40-41 GB/s; Open MPI 4.1 shared-memory
    // ping-pong 0.36 us for 8 B and 4.3 GB/s at 16 MiB. The cpu backend's
    // elementwise kernels (scalar loops with expf) ran, per unit of gpt-tiny:
    // LayerNorm 3-6 GFLOP/s, GeLU and softmax about 2, cross-entropy 0.5 (in
    // the FLOP counts of model.hpp); 2 GFLOP/s is taken. With these figures
    // a whole gpt-tiny micro-batch (fwd + bwd, every unit on one core) is
    // predicted at 25.0 ms against 23.4-23.5 ms measured; per unit the GEMM
    // units are within 10 %, LayerNorm is predicted 2x too slow and the head
    // 1.7x too fast. A calibration file measured on a run does better.
    d.peak_flops = 110e9;  // either storage: the cpu backend computes in fp32
    d.efficiency = 0.9;
    d.vector_flops = 2e9;
    d.mem_bandwidth = 40e9;
    d.kernel_overhead_s = 2e-6;
    d.memory_bytes = int64_t{24} << 30;  // the machine's 24 GiB
    d.link_bandwidth = 4e9;
    d.link_latency = 0.4e-6;
  } else if (name == "a100") {
    // A100 SXM4 80GB datasheet: BF16 tensor 312 TFLOPS dense, FP32 19.5, HBM2e
    // 2,039 GB/s, 80 GB, NVLink 3 600 GB/s bidirectional.
    d.peak_flops = bf16 ? 312e12 : 19.5e12;
    d.fused_flops = bf16 ? 0 : 156e12 / 3;  // 3xTF32 on the TF32 tensor cores (156 dense)
    d.efficiency = 0.7;
    d.vector_flops = 19.5e12;  // FP32 (CUDA cores)
    d.mem_bandwidth = 2039e9;
    d.kernel_overhead_s = 5e-6;
    d.memory_bytes = int64_t{80'000'000'000};
    d.link_bandwidth = 300e9;
    d.link_latency = 10e-6;
  } else if (name == "h100") {
    // H100 SXM5 80GB datasheet: BF16 tensor 989.4 TFLOPS dense (1,979 with
    // sparsity), FP32 67 TFLOPS, HBM3 3.35 TB/s, 80 GB, NVLink 4 900 GB/s
    // bidirectional.
    d.peak_flops = bf16 ? 989.4e12 : 67e12;
    d.fused_flops = bf16 ? 0 : 494.7e12 / 3;  // 3xTF32 on the TF32 tensor cores (494.7 dense)
    d.efficiency = 0.6;
    d.vector_flops = 67e12;
    d.mem_bandwidth = 3.35e12;
    d.kernel_overhead_s = 4e-6;
    d.memory_bytes = int64_t{80'000'000'000};
    d.link_bandwidth = 450e9;
    d.link_latency = 8e-6;
  } else if (name == "h200") {
    // H200 SXM 141GB datasheet: BF16 tensor 989.4 TFLOPS dense and FP32
    // 67 TFLOPS (the H100's compute), HBM3e 4.8 TB/s, 141 GB, NVLink 4
    // 900 GB/s bidirectional.
    d.peak_flops = bf16 ? 989.4e12 : 67e12;
    d.fused_flops = bf16 ? 0 : 494.7e12 / 3;  // 3xTF32 on the TF32 tensor cores (494.7 dense)
    d.efficiency = 0.6;
    d.vector_flops = 67e12;
    d.mem_bandwidth = 4.8e12;
    d.kernel_overhead_s = 4e-6;
    d.memory_bytes = int64_t{141'000'000'000};
    d.link_bandwidth = 450e9;
    d.link_latency = 8e-6;
  } else {
    throw UsageError("--device: unknown device '" + std::string(name) +
                     "' (devices: cpu, a100, h100, h200)");
  }
  return d;
}

// The two compute terms of a pass: its GEMMs' seconds and its elementwise
// work's.
struct ComputeTerms {
  double gemm = 0;
  double elementwise = 0;
};

// `fused`: the products run inside a fused kernel (Unit::fused_products).
ComputeTerms compute_terms(double flops, double elementwise, const DeviceSpec& d, bool fused) {
  const double gemm_rate = d.peak_flops * d.efficiency;
  const double matrix_rate = fused && d.fused_flops > 0 ? d.fused_flops * d.efficiency : gemm_rate;
  const double vector_rate = d.vector_flops > 0 ? d.vector_flops : gemm_rate;
  return {(flops - elementwise) / matrix_rate, elementwise / vector_rate};
}

double gemm_share(double flops, double elementwise, const DeviceSpec& d, bool fused) {
  if (flops <= 0) return 0;
  const ComputeTerms t = compute_terms(flops, elementwise, d, fused);
  return t.gemm + t.elementwise > 0 ? t.gemm / (t.gemm + t.elementwise) : 0.0;
}

double pass_time(double flops, double elementwise, double traffic_bytes, const DeviceSpec& d,
                 bool fused) {
  if (flops <= 0) return 0;  // a pass that does nothing launches nothing
  const ComputeTerms t = compute_terms(flops, elementwise, d, fused);
  const double compute = t.gemm + t.elementwise;
  const double memory = d.mem_bandwidth > 0 ? traffic_bytes / d.mem_bandwidth : 0.0;
  return std::max(compute, memory) + d.kernel_overhead_s;
}

// ---- calibration JSON -------------------------------------------------------

/// A number in [0, kMaxCalibrationValue] (times and scales).
double non_negative(const JsonObject& o, std::string_view key) {
  const boost::json::value& v = o.at(key);
  const double x = v.is_number() ? o.get<double>(key) : -1.0;
  if (!(x >= 0 && x <= kMaxCalibrationValue)) o.fail(key, "expected a number in [0, 1e6]");
  return x;
}

UnitTime unit_time_object(const JsonObject& o) {
  o.only({"fwd", "bwd_input", "bwd_weight"}, "fwd, bwd_input, bwd_weight");
  return {non_negative(o, "fwd"), non_negative(o, "bwd_input"), non_negative(o, "bwd_weight")};
}

// The workspace of chunk `r`'s actions on top of their activation peaks
// (ChunkCost::*_workspace_bytes), walking the units as a backend runs them.
// F: every unit after the chunk's first keeps its input, and the unit
// before writes it there in place, so no boundary inside the chunk is
// workspace; F allocates unit i+1's activations (its input) before unit i
// runs, so only the activations after those are not yet held while unit i
// holds its scratch. B and I go down the units, unit i holding the main
// parts of the gradient boundaries on either side of it that lie inside
// the chunk (the residual's gradient travels by pointer), the residual's
// gradient where a unit above it inside the chunk added the residual
// (attn_out, fc2: their output gradient, held down to the LayerNorm that
// began the residual), and its own scratch; a unit that keeps nothing for
// W (attention) frees its activations once its scratch is gone; I keeps a
// unit's output gradient for W, allocated before the unit's scratch, while
// both boundaries are still held. B runs each unit's weight gradient after
// its input gradient, W only the weight gradients (no boundaries).
void add_workspace(const std::vector<Unit>& units, const UnitRange& r, ChunkCost& c) {
  const auto unit = [&](int i) -> const Unit& { return units[static_cast<size_t>(i)]; };
  const auto gradient = [&](int i) { return unit(i).boundary_bytes - unit(i).residual_bytes; };
  const auto boundaries = [&](int i) {
    return (i > r.begin ? gradient(i - 1) : 0) + (i + 1 < r.end ? gradient(i) : 0);
  };
  int64_t later = c.activation_bytes - unit(r.begin).activation_bytes;
  for (int i = r.begin; i < r.end; ++i) {
    if (i + 1 < r.end) later -= unit(i + 1).activation_bytes;
    c.forward_workspace_bytes =
        std::max(c.forward_workspace_bytes, unit(i).forward_scratch_bytes - later);
  }
  int64_t freed = 0;
  int64_t held = c.activation_bytes;
  int64_t input_top = held;
  // The residual's gradient held for a LayerNorm below, in B and in I (in I
  // a unit with weights keeps it for W anyway: counted in `held`).
  int64_t residual = 0;
  int64_t input_residual = 0;
  for (int i = r.end - 1; i >= r.begin; --i) {
    const Unit& u = unit(i);
    const int64_t around = boundaries(i) + residual;
    const int64_t whole = around + std::max(u.backward_scratch_bytes, u.weight_scratch_bytes);
    c.backward_workspace_bytes = std::max(c.backward_workspace_bytes, whole - freed);
    c.weight_workspace_bytes = std::max(c.weight_workspace_bytes, u.weight_scratch_bytes);
    if (u.split_kept_bytes == 0) freed += u.activation_bytes;
    // I keeps a unit's output gradient for W: inside the chunk the buffer it
    // arrived in (already counted in the boundaries), else a copy allocated
    // before the unit's scratch.
    const int64_t kept_gradient = std::max<int64_t>(0, u.split_kept_bytes - u.activation_bytes);
    const bool in_place = kept_gradient > 0 && i + 1 < r.end;
    const int64_t input_around = boundaries(i) + input_residual - (in_place ? gradient(i) : 0);
    input_top = std::max(input_top, held + (in_place ? gradient(i) : kept_gradient) + input_around +
                                        u.backward_scratch_bytes);
    held += u.split_kept_bytes - u.activation_bytes;
    input_top = std::max(input_top, held + input_around);
    if (u.kind == UnitKind::kLayerNorm1 || u.kind == UnitKind::kLayerNorm2) {
      residual = 0;
      input_residual = 0;
    }
    if ((u.kind == UnitKind::kAttnOut || u.kind == UnitKind::kFc2) && i + 1 < r.end) {
      residual = gradient(i);
      input_residual = in_place ? 0 : gradient(i);
    }
  }
  c.input_workspace_bytes = std::max<int64_t>(0, input_top - c.peak_during_input());
}

}  // namespace

PassBytes unit_traffic_bytes(const Unit& u) {
  const auto param = static_cast<double>(u.param_bytes);
  const auto act = static_cast<double>(u.activation_bytes);
  const auto boundary = static_cast<double>(u.boundary_bytes);
  return {param + act + boundary, param + act + 2 * boundary, 2 * param + act + boundary};
}

LinkModel DeviceSpec::link() const {
  LinkModel l;
  l.latency = link_latency;
  l.bandwidth = link_bandwidth;
  return l;
}

DeviceSpec device_preset(std::string_view name, int bytes_per_element) {
  return make_preset(name, bytes_per_element);
}

std::vector<std::string> device_preset_names() { return {"cpu", "a100", "h100", "h200"}; }

Calibration parse_calibration(std::string_view json_text, const std::string& source) {
  boost::json::error_code ec;
  const boost::json::value doc = boost::json::parse(json_text, ec);
  if (ec) throw UsageError(source + ": not valid JSON (" + ec.message() + ")");
  const JsonReader reader(source);
  if (!doc.is_object()) reader.fail("(document)", "expected an object");
  const JsonObject root = reader.root(doc);
  root.only({"schema", "device", "units", "kinds", "launch_seconds"},
            "schema, device, units, kinds, launch_seconds");
  Calibration cal;
  cal.source = source;
  const boost::json::value& schema = root.at("schema");
  if (!schema.is_string() || schema.get_string() != kCalibrationSchema)
    root.fail("schema", "expected \"" + std::string(kCalibrationSchema) + "\"");
  const boost::json::value& device = root.at("device");
  if (!device.is_string() || device.get_string().empty())
    root.fail("device", "expected a device name");
  cal.device = std::string(device.get_string());
  if (const auto units = root.find_object("units")) {
    for (const auto& kv : units->raw())
      cal.unit_seconds[std::string(kv.key())] = unit_time_object(units->object(kv.key()));
  }
  if (const auto kinds = root.find_object("kinds")) {
    for (const auto& kv : kinds->raw()) {
      if (!is_unit_kind_name(kv.key()))
        kinds->fail(kv.key(), "unknown unit kind (kinds: " + unit_kind_names() + ")");
      const double x = kv.value().is_object() ? 0.0 : non_negative(*kinds, kv.key());
      const UnitTime t =
          kv.value().is_object() ? unit_time_object(kinds->object(kv.key())) : UnitTime{x, x, x};
      // Every kind has a forward: a factor of 0 would price its work as free.
      if (!(t.fwd > 0)) kinds->fail(kv.key(), "expected a forward factor > 0, got 0");
      cal.kind_scale[std::string(kv.key())] = t;
    }
  }
  if (root.has("launch_seconds")) cal.launch_seconds = non_negative(root, "launch_seconds");
  return cal;
}

Calibration read_calibration(const std::string& path) {
  return parse_calibration(read_input_file(path, "calibration file", kMaxSmallInputBytes), path);
}

std::string calibration_to_json(const Calibration& cal) {
  auto times = [](const UnitTime& t) {
    return boost::json::object{
        {"fwd", t.fwd}, {"bwd_input", t.bwd_input}, {"bwd_weight", t.bwd_weight}};
  };
  boost::json::object units;
  for (const auto& [name, t] : cal.unit_seconds) units[name] = times(t);
  boost::json::object kinds;
  for (const auto& [name, t] : cal.kind_scale) kinds[name] = times(t);
  boost::json::object root{{"schema", kCalibrationSchema}, {"device", cal.device}};
  root["units"] = std::move(units);
  root["kinds"] = std::move(kinds);
  if (cal.launch_seconds > 0) root["launch_seconds"] = cal.launch_seconds;
  return boost::json::serialize(root);
}

UnitTime gemm_shares(const Unit& u, const DeviceSpec& device) {
  const bool f = u.fused_products;
  return {gemm_share(u.fwd_flops, u.fwd_elementwise_flops, device, f),
          gemm_share(u.bwd_input_flops, u.bwd_input_elementwise_flops, device, f),
          gemm_share(u.bwd_weight_flops, u.bwd_weight_elementwise_flops, device, f)};
}

std::vector<UnitTime> unit_times(const std::vector<Unit>& units, const DeviceSpec& device,
                                 const Calibration* cal) {
  PPB_CHECK(
      device.peak_flops > 0 && device.efficiency > 0 && device.efficiency <= 1,
      "unit_times: device '" + device.name + "' needs peak_flops > 0 and efficiency in (0, 1]");
  const std::string source = cal != nullptr && !cal->source.empty() ? cal->source : "calibration";
  if (cal != nullptr && cal->device != device.name) {
    throw UsageError(source + ": field 'device': measured on '" + cal->device +
                     "' but the device is '" + device.name + "'");
  }
  std::vector<UnitTime> out;
  out.reserve(units.size());
  size_t matched = 0;
  for (const Unit& u : units) {
    const PassBytes traffic = unit_traffic_bytes(u);
    UnitTime t{
        pass_time(u.fwd_flops, u.fwd_elementwise_flops, traffic.fwd, device, u.fused_products),
        pass_time(u.bwd_input_flops, u.bwd_input_elementwise_flops, traffic.bwd_input, device,
                  u.fused_products),
        pass_time(u.bwd_weight_flops, u.bwd_weight_elementwise_flops, traffic.bwd_weight, device,
                  u.fused_products)};
    if (cal != nullptr) {
      if (auto it = cal->unit_seconds.find(u.name); it != cal->unit_seconds.end()) {
        t = it->second;
        ++matched;
      } else if (auto k = cal->kind_scale.find(unit_kind_name(u.kind));
                 k != cal->kind_scale.end()) {
        t.fwd *= k->second.fwd;
        t.bwd_input *= k->second.bwd_input;
        t.bwd_weight *= k->second.bwd_weight;
      }
    }
    out.push_back(t);
  }
  if (cal != nullptr && matched != cal->unit_seconds.size()) {
    for (const auto& entry : cal->unit_seconds) {
      const std::string& name = entry.first;
      const bool found = std::any_of(units.begin(), units.end(),
                                     [&name](const Unit& u) { return u.name == name; });
      if (!found) {
        throw UsageError(source + ": field 'units." + name + "': the model has no unit '" + name +
                         "' (calibrated on a different model?)");
      }
    }
  }
  return out;
}

StageCosts model_costs(const std::vector<Unit>& units, const std::vector<UnitTime>& times,
                       const std::vector<UnitRange>& parts, int stages, int chunks,
                       const LinkModel& link) {
  PPB_CHECK(stages >= 1 && chunks >= 1, "model_costs: stages and chunks must be >= 1");
  PPB_CHECK(times.size() == units.size(), "model_costs: one time per unit");
  PPB_CHECK(parts.size() == static_cast<size_t>(stages) * static_cast<size_t>(chunks),
            "model_costs: parts must have stages * chunks ranges");
  StageCosts costs;
  costs.stages = stages;
  costs.chunks_per_stage = chunks;
  costs.link = link;
  costs.has_bytes = true;
  costs.chunks.reserve(parts.size());
  int expected_begin = 0;
  for (const UnitRange& r : parts) {
    PPB_CHECK(
        r.begin == expected_begin && r.end > r.begin && r.end <= static_cast<int>(units.size()),
        "model_costs: parts must be contiguous, non-empty and in order");
    expected_begin = r.end;
    ChunkCost c;
    for (int i = r.begin; i < r.end; ++i) {
      const auto idx = static_cast<size_t>(i);
      c.fwd += times[idx].fwd;
      c.bwd_input += times[idx].bwd_input;
      c.bwd_weight += times[idx].bwd_weight;
      c.activation_bytes += units[idx].activation_bytes;
      c.param_bytes += units[idx].param_bytes;
    }
    // I walks the units backwards, each keeping its output gradient or
    // freeing its activations as it goes (Unit::split_kept_bytes).
    c.split_kept_bytes = 0;
    c.input_peak_bytes = c.activation_bytes;
    int64_t held = c.activation_bytes;
    for (int i = r.end - 1; i >= r.begin; --i) {
      const Unit& u = units[static_cast<size_t>(i)];
      held += u.split_kept_bytes - u.activation_bytes;
      c.input_peak_bytes = std::max(c.input_peak_bytes, held);
      c.split_kept_bytes += u.split_kept_bytes;
    }
    c.send_bytes = units[static_cast<size_t>(r.end - 1)].boundary_bytes;
    add_workspace(units, r, c);
    costs.chunks.push_back(c);
  }
  PPB_CHECK(expected_begin == static_cast<int>(units.size()),
            "model_costs: parts must cover all units");
  return costs;
}

}  // namespace ppb
