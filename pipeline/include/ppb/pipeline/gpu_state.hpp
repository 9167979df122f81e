// What a GPU itself did while pipebench measured: its clocks, power,
// temperature, throttling and ECC error counts, as NVML reports them
// (read by pipeline/exec's nvml.hpp sampler), and their summary, written as
// `gpu_state` into the health probe's file and a cuda run's result
// (docs/result-schema.md). Pure values and functions: no NVML, no CUDA.
//
// Example:
//   std::vector<ppb::GpuSample> s = sampler.stop()[0];
//   ppb::GpuState g = ppb::summarise_gpu_samples(s);
//   g.throttle_reasons == {"sw_power_cap", "hw_slowdown"}
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace ppb {

/// One reading of one GPU. A number NVML could not give is NaN; an ECC
/// count it could not give (no ECC, or not supported) is -1.
struct GpuSample {
  double sm_clock_mhz = std::numeric_limits<double>::quiet_NaN();
  double memory_clock_mhz = std::numeric_limits<double>::quiet_NaN();
  double power_watts = std::numeric_limits<double>::quiet_NaN();        ///< draw
  double power_limit_watts = std::numeric_limits<double>::quiet_NaN();  ///< enforced limit
  double temperature_c = std::numeric_limits<double>::quiet_NaN();
  /// NVML's clocks-event ("throttle") reason bits; 0 when none or unknown.
  uint64_t throttle_reasons = 0;
  bool throttle_read = false;    ///< whether NVML gave the reason bits (0 is then "none")
  int64_t ecc_corrected = -1;    ///< volatile corrected errors since the driver loaded
  int64_t ecc_uncorrected = -1;  ///< volatile uncorrected errors since the driver loaded
};

/// The summary of one GPU's samples (JSON: an object with these keys;
/// numbers are null, and ECC counts -1, where no sample had them).
struct GpuState {
  std::string gpu;  ///< the GPU's name and PCI bus id: "NVIDIA H200 (0000:3B:00.0)"
  int samples = 0;  ///< readings summarised
  double sm_clock_mhz_min = std::numeric_limits<double>::quiet_NaN();
  double sm_clock_mhz_median = std::numeric_limits<double>::quiet_NaN();
  double memory_clock_mhz_median = std::numeric_limits<double>::quiet_NaN();
  double power_watts_mean = std::numeric_limits<double>::quiet_NaN();
  double power_limit_watts = std::numeric_limits<double>::quiet_NaN();  ///< the lowest seen
  double temperature_c_max = std::numeric_limits<double>::quiet_NaN();
  /// Names of the throttle reasons any sample showed, in bit order
  /// (throttle_reason_names).
  std::vector<std::string> throttle_reasons;
  /// Whether any sample read the reasons (false: the driver did not give
  /// them, and an empty list says nothing). Files from before the field
  /// read as true.
  bool throttle_reasons_read = true;
  /// Errors that arrived while sampling: last count - first count (-1: unknown).
  int64_t ecc_corrected = -1;
  int64_t ecc_uncorrected = -1;

  friend bool operator==(const GpuState&, const GpuState&) = default;
};

/// The names of the reason bits set in `mask`, in bit order: "gpu_idle",
/// "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
/// "sync_boost", "sw_thermal_slowdown", "hw_thermal_slowdown",
/// "hw_power_brake_slowdown", "display_clock_setting" (NVML's
/// nvmlClocksEventReason* bits 0x1 to 0x100); any other bit as its hex
/// value ("0x200"). Example: throttle_reason_names(0x48) ==
/// {"hw_slowdown", "hw_thermal_slowdown"}.
std::vector<std::string> throttle_reason_names(uint64_t mask);

/// Whether a reason (a throttle_reason_names name) holds the clocks below
/// what the GPU would run at under load: every reason but "gpu_idle",
/// "applications_clocks_setting", "sync_boost" and "display_clock_setting"
/// (a setting or an idle GPU, not the hardware's protection).
bool throttle_reason_slows(const std::string& name);

/// The summary of one GPU's samples, in the order taken (see GpuState;
/// `gpu` is left empty for the caller). The clocks are those of the samples
/// that did not find the GPU idle (reason gpu_idle), where any did not:
/// an idle GPU clocks down by design. An empty list gives samples = 0 and
/// nothing known.
GpuState summarise_gpu_samples(const std::vector<GpuSample>& samples);

/// The reasons of `state` that slow the GPU (throttle_reason_slows).
std::vector<std::string> slowing_reasons(const GpuState& state);

/// `state` in one line, each figure the driver did not read said so:
/// "SM clock min 1410 / median 1980 MHz, memory clock 3201 MHz, power mean
/// 512 W of 700 W, temperature max 42 C, throttle reasons hw_slowdown, ECC
/// errors +3 corrected +0 uncorrected (4 samples)"; "SM clock not read",
/// "power not read (limit 700 W)", "throttle reasons not read", "ECC
/// errors not read" where unknown.
std::string gpu_state_text(const GpuState& state);

}  // namespace ppb
