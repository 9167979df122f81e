// The GPU health probe's file (docs/result-schema.md, "Health file"),
// schema "pipebench.health/1": what `pipebench health` measured of each GPU
// (the hardware alone, without pipebench's pipeline code), written by the
// command and gated by `pipebench report` beside the sweeps' results.
//
//   {"schema":"pipebench.health/1","date":"2026-12-05T01:00:00Z",
//    "config":{"model":"gpt-small","iters":20,"repeats":5,"copy_bytes":268435456},
//    "gpus":[{"device":0,"name":"NVIDIA H200","bus":"0000:3B:00.0",
//             "figures":{"gemm_bf16_tflops":[...],"copy_d2d_gbps":[...],...},
//             "gpu_state":{...}}],
//    "gpu_state_note":"", "environment":{...}}
//
// Every figure is higher-is-better and holds one sample per repeat.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/pipeline/gpu_state.hpp"
#include "ppb/pipeline/result.hpp"
#include "ppb/profiling/output_file.hpp"

namespace ppb {

/// The schema string every health file carries.
inline constexpr const char* kHealthSchema = "pipebench.health/1";

/// What the probe was asked to measure.
struct HealthConfig {
  std::string model;       ///< whose GEMMs (one layer and the head): "gpt-small"
  int iters = 0;           ///< calls per timed round
  int repeats = 0;         ///< samples of each figure
  int64_t copy_bytes = 0;  ///< bytes per copy

  friend bool operator==(const HealthConfig&, const HealthConfig&) = default;
};

/// One GPU's figures.
struct HealthGpu {
  int device = 0;    ///< CUDA device index in the probing process
  std::string name;  ///< "NVIDIA H200"
  std::string bus;   ///< PCI bus id
  /// figure -> its samples (one per repeat): gemm_bf16_tflops,
  /// gemm_fp32_tflops, copy_d2d_gbps, copy_h2d_gbps, copy_d2h_gbps, and
  /// peer_gbps_to_gpu<N> per other GPU N.
  std::map<std::string, std::vector<double>> figures;
  std::optional<GpuState> gpu_state;  ///< absent when NVML was not there

  friend bool operator==(const HealthGpu&, const HealthGpu&) = default;
};

/// One health file.
struct HealthFile {
  std::string date;  ///< ISO 8601, UTC, when the probe finished
  HealthConfig config;
  std::vector<HealthGpu> gpus;
  /// Why gpu_state is absent ("" when NVML sampled): the one line the probe
  /// printed, e.g. "gpu state: NVML not found (libnvidia-ml.so.1): ...".
  std::string gpu_state_note;
  ResultEnvironment environment;

  friend bool operator==(const HealthFile&, const HealthFile&) = default;
};

/// Whether a parsed JSON document is a health file (its schema starts with
/// "pipebench.health/").
bool is_health_document(const boost::json::value& doc);

/// The JSON document of a health file (schema first; NaN as null).
boost::json::value health_to_json(const HealthFile& health);

/// Parses a health document; `source` names it in errors. Throws
/// UsageError "<source>: field '<path>': <what>" for a missing or bad
/// field, another schema, a figure with no sample or a sample that is not
/// a finite number > 0.
HealthFile health_from_json(const boost::json::value& doc, std::string_view source);

/// The JSON document of a health file's text; UsageError naming `path`
/// when it is empty or malformed (a file cut short).
boost::json::value parse_health_text(const std::string& text, const std::string& path);

/// Reads and parses one file (UsageError naming it when missing, empty or
/// malformed).
HealthFile read_health_file(const std::string& path);

/// Writes the file atomically (write_json_file).
void write_health_file(const OutputPath& path, const HealthFile& health);

}  // namespace ppb
