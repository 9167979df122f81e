// The gate on the GPUs' own health (`pipebench health` files, schema
// pipebench.health/1), beside the gate on the sweeps' results: the GPU form
// of the cpu backend's speed probe. Each probe figure of each GPU (GEMM
// TFLOP/s, copy and peer bandwidths) is judged against the same GPU's
// earlier nights with the gate's own statistics (decide_figure), and the
// verdict is read together with the GPU sweeps' of the same machine:
//  * the probe slower and the GPU sweep slower: the GPU itself got slower
//    (clocks, throttling, a failing part), not the code;
//  * the probe held and the GPU sweep slower: the software (pipebench's
//    code, the driver or a library);
//  * the probe slower and the sweep held: the GPU got slower, the sweep did
//    not show it.
// Throttle reasons that slow a GPU, and ECC errors, seen tonight are named.
// docs/gate.md, "GPU health".
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ppb/pipeline/health.hpp"
#include "ppb/reports/history.hpp"
#include "ppb/reports/regression.hpp"

namespace ppb::reports {

/// One loaded health file.
struct HealthEntry {
  std::string source;   ///< the file
  std::string machine;  ///< machine_key of its environment (as the results')
  HealthFile file;
};

/// The health files under `paths` (folders or files, walked as results
/// are: result_candidates), and, when none is, those in a `health` folder
/// beside each path (<night>/health beside <night>/cuda). Other JSON is
/// left alone. Throws UsageError naming a bad health file, or with `bad`
/// (--skip-bad) lists it there, and what cannot be read, and goes on (a
/// file already listed is not listed again).
std::vector<HealthEntry> load_health(const std::vector<std::string>& paths,
                                     std::vector<BadFile>* bad = nullptr);

/// Which way the probe and the GPU sweep point.
enum class HealthCause : uint8_t {
  kNone,       ///< nothing moved (or nothing to compare)
  kGpu,        ///< the probe got slower with the GPU sweep: the GPU itself
  kSoftware,   ///< the probe held, the GPU sweep got slower: the software
  kProbeOnly,  ///< the probe got slower, the GPU sweep did not
  /// The sweep ran at lower clocks with no hardware reason for it (no
  /// thermal or hardware slowdown, no power brake, the power limit held):
  /// a heavier build does that at the power cap too, so it is not blamed on
  /// the GPU.
  kLowerClocks,
};

/// One probe figure of one GPU, judged.
struct HealthVerdict {
  std::string gpu;     ///< "GPU 0 NVIDIA H200 (0000:3B:00.0)"
  MetricVerdict what;  ///< its name is the figure's ("gemm_bf16_tflops")
};

/// What a GPU's state showed tonight that slows it or fails it.
struct GpuTrouble {
  std::string gpu;
  std::vector<std::string> reasons;  ///< slowing throttle reasons (gpu_state.hpp)
  double sm_clock_mhz_min = std::numeric_limits<double>::quiet_NaN();   ///< NaN: not read
  double temperature_c_max = std::numeric_limits<double>::quiet_NaN();  ///< NaN: not read
  int64_t ecc_uncorrected = -1;  ///< arrived during the probe (or the sweep's runs)
  int64_t ecc_corrected = -1;
  bool sweep = false;  ///< seen by the GPU sweep's runs (their metrics.gpu_state), not the probe
};

/// The health gate of one machine.
struct HealthSummary {
  std::string machine;
  std::string host;    ///< the machine without its GPU count (host_key): the sweep's runs match it
  std::string source;  ///< tonight's health file ("" when only the sweep's)
  std::vector<HealthVerdict> figures;  ///< each GPU's figures with earlier nights
  int new_figures = 0;                 ///< figures no earlier night had
  std::vector<GpuTrouble> trouble;     ///< GPUs throttled or with ECC errors tonight
  /// Why there is no GPU state (when NVML was not sampled), and tonight's
  /// earlier probes of the machine that the newest one supersedes.
  std::vector<std::string> notes;
  int probe_regressions = 0;        ///< figures judged slower (the probe's and the sweep's)
  int sweep_state_regressions = 0;  ///< of them, what NVML read during the sweep (sweep_*)
  bool reasons_unread = false;      ///< a run of the sweep could not read the throttle reasons
  int probe_held = 0;               ///< figures judged unchanged
  int sweep_regressions = 0;        ///< GPU sweep rows of this machine that regressed tonight
  HealthCause cause = HealthCause::kNone;
};

/// Tonight's health files against the earlier nights' (each Night's folder,
/// through load_health; only the last options.window nights), one summary
/// per machine of tonight: of several health files of a machine in a
/// night, the newest (HealthFile::date) is gated, as in the earlier nights,
/// and the others are named in its notes. `sweep` is the sweeps' gate (null without one):
/// its regressed rows on a GPU (environment.gpus not empty) of the same
/// machine (host_key: whatever share of its GPUs a run used) set
/// sweep_regressions and the cause. What NVML read while the sweep's runs
/// ran (their metrics.gpu_state) is judged the same way, per GPU of the
/// runs, one sample per result, against the earlier nights' results of the
/// combinations both ran: figures sweep_sm_clock_mhz,
/// sweep_memory_clock_mhz (the median clocks at work) and
/// sweep_power_limit_watts, counted with the probe's (and apart, in
/// sweep_state_regressions); the slowing reasons and ECC errors the runs
/// saw are troubles (GpuTrouble::sweep). Lower clocks are the GPU's own
/// slowdown only with a hardware reason (a slowing reason other than the
/// power cap, or a lower power limit); without one the cause is
/// kLowerClocks. A machine whose sweep was sampled but that has no health
/// file tonight gets a summary of those alone. With `bad` (--skip-bad) an
/// earlier night's bad health file is listed there (load_health).
std::vector<HealthSummary> gate_health(const std::vector<HealthEntry>& tonight,
                                       const std::string& tonight_name,
                                       const std::vector<Night>& history,
                                       const RegressionSummary* sweep, const GateOptions& options,
                                       std::vector<BadFile>* bad = nullptr);

/// The summary's verdict in one line, e.g. "GPU health (node1 | ... ):
/// the GPU itself got slower (clocks, throttling, a failing part): GPU 0
/// NVIDIA H200 (...) gemm_bf16_tflops 700 -> 600 (-14.3%, ...); the GPU
/// sweep's 3 regression(s) on this machine follow it, not the code".
std::string health_text(const HealthSummary& summary);

/// A GPU's trouble in one line: "GPU 0 NVIDIA H200 (...): throttled
/// tonight: hw_slowdown, sw_thermal_slowdown (SM clock down to 1200 MHz,
/// up to 87 C); 2 uncorrected ECC error(s)".
std::string trouble_text(const GpuTrouble& trouble);

}  // namespace ppb::reports
