// The planner behind `pipebench plan`: for a described cluster and model,
// every pipeline depth P that divides the GPUs (the rest data-parallel
// replicas), every registered schedule, partition, micro-batch count M and
// size, in-flight limit N and chunk count V; memory from the memory model
// (memory_model.hpp) against the capacity under the guard, samples/s from
// the simulator plus the gradient all-reduce; ranked, with reasons.
//
//   ClusterSpec cluster = cluster_from_preset("h100", 1024, 8);
//   PlanOptions o;
//   o.cluster = cluster;
//   o.model = parse_model_spec("gpt-7b");
//   o.global_batch = 1024;
//   Plan plan = make_plan(o);
//   plan.ranked[0].why;   // "fastest: ..."
//
// Lives above pipeline core (no MPI, no CUDA).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/pipeline/attention.hpp"
#include "ppb/pipeline/costs.hpp"
#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/memory_model.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/pipeline/result.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/reports/load.hpp"
#include "ppb/reports/regression.hpp"

namespace ppb::reports {

/// The ranges a cluster's figures must lie in, whether a flag or a cluster
/// file gives them (docs/cli.md, "plan"): wider than any machine's, narrow
/// enough that the planner's sums of seconds stay far from overflowing.
struct FigureRange {
  double lo = 0;
  double hi = 0;
  bool contains(double x) const { return x >= lo && x <= hi; }  ///< false for NaN
  /// "[1e3, 1e16]", "[2^20, 2^50]": for messages.
  std::string text() const;
};
inline constexpr int kMaxClusterGpus = 1 << 24;                ///< gpus, gpus_per_node
inline constexpr FigureRange kPeakFlopsRange{1e6, 1e18};       ///< FLOP/s per GPU
inline constexpr FigureRange kBandwidthRange{1e3, 1e16};       ///< bytes/s: memory, links
inline constexpr FigureRange kLatencyRange{0, 1};              ///< seconds, links
inline constexpr FigureRange kGpuMemoryRange{0x1p20, 0x1p50};  ///< bytes per GPU: 1 MiB to 1 PiB

/// The machine a plan is for. Links are one direction, per GPU.
struct ClusterSpec {
  int gpus = 0;                  ///< G >= 1
  int gpus_per_node = 0;         ///< K >= 1, G a multiple of K
  DeviceSpec device;             ///< compute: a preset, or peak FLOP/s and memory bandwidth
  int64_t gpu_memory_bytes = 0;  ///< capacity per GPU
  LinkModel intra_node;          ///< between GPUs of one node (latency, bandwidth)
  LinkModel inter_node;          ///< between nodes (per GPU: its NIC)
};

/// What a cluster file or the flags give; unset fields stay at their
/// sentinels (0 or negative) until resolve_cluster fills them.
struct ClusterInput {
  int gpus = 0;
  int gpus_per_node = 0;  ///< 0: all GPUs in one node
  std::string device;     ///< preset name; "" with peak_flops and memory_bandwidth
  double peak_flops = 0;
  double memory_bandwidth = 0;
  int64_t gpu_memory_bytes = 0;  ///< 0: the preset's
  double link_bandwidth = 0;     ///< 0: the preset's
  double link_latency = -1;      ///< < 0: the preset's
  double inter_node_bandwidth = 0;
  double inter_node_latency = -1;
  /// How messages name where `device` and `gpus_per_node` came from: the
  /// flag, or the cluster file's field ("c.json: field 'device'") when the
  /// file gave it and no flag replaced it.
  std::string device_named = "--device";
  std::string gpus_per_node_named = "--gpus-per-node";
};

/// Reads a "pipebench.cluster/1" document (docs/cli.md, "plan"):
///   {"schema": "pipebench.cluster/1", "gpus": 64, "gpus_per_node": 8,
///    "device": "h100", "peak_flops": 9.894e14, "memory_bandwidth": 3.35e12,
///    "gpu_memory_bytes": 80000000000,
///    "intra_node": {"bandwidth": 4.5e11, "latency": 8e-6},
///    "inter_node": {"bandwidth": 5e10, "latency": 5e-6}}
/// Only "schema" and "gpus" are required; each figure must lie in its range
/// above. Throws UsageError naming the file and the field ("c.json: field
/// 'intra_node.bandwidth': expected a number in [1e3, 1e16] (bytes/s)").
ClusterInput parse_cluster(std::string_view json_text, const std::string& source);
ClusterInput read_cluster_file(const std::string& path);

/// Checks the input and fills what it leaves out from the device preset at
/// the model's storage (bytes_per_element: its GEMMs' peak for bf16 or fp32;
/// --peak-flops is taken at that storage; inter-node link: the preset's
/// node network, device.cpp). Throws
/// UsageError naming the flag (`--gpus-per-node: 1000 GPUs are not whole
/// nodes of 16`, `--device: give a preset or --peak-flops and
/// --memory-bandwidth`).
ClusterSpec resolve_cluster(const ClusterInput& in, int bytes_per_element);

/// The most micro-batches per step a plan considers (M from --global-batch).
inline constexpr int64_t kMaxPlanMicrobatches = int64_t{1} << 20;
/// The most work a plan may take, checked before the search starts so that
/// it ends in seconds, not hours (docs/cli.md, "plan"): the balanced cuts'
/// parts x units summed over every P, V and micro-batch size, and the
/// compute slots P x M x V summed over every configuration left to search.
inline constexpr double kMaxPlanCutWork = 0x1p24;
inline constexpr double kMaxPlanSlots = 0x1p24;

struct PlanOptions {
  ClusterSpec cluster;
  ModelSpec model;
  /// Samples per optimizer step across all replicas; 0 = not fixed (then
  /// M takes P, 2P and 4P).
  int64_t global_batch = 0;
  std::vector<int> micro_batch_sizes = {1, 2, 4, 8};
  /// Schedules and partitions to consider; empty = every registered one
  /// (partitions: every named one but manual).
  std::vector<std::string> schedules;
  std::vector<std::string> partitions;
  MemoryModelOptions memory;  ///< optimizer and element width
  /// --attention: auto models what `run --attention auto` would compute on
  /// the cluster's device (modelled_attention: fused for bf16 on a GPU,
  /// whose kept bytes are the softmax statistics, not the probabilities).
  AttentionRequest attention = AttentionRequest::kAuto;
  double memory_guard = 0.85;
  int top = 10;                              ///< leaders kept in Plan::ranked
  const Calibration* calibration = nullptr;  ///< measured unit times or kind factors
  /// Called as the search goes (configurations done, in all), for a
  /// progress line; may be empty.
  std::function<void(int64_t done, int64_t total)> progress;
};

/// One configuration and its prediction.
struct Candidate {
  std::string schedule;
  std::string partition;
  /// The other partitions searched that cut the model into the same P x V
  /// parts for this configuration: the same run, listed once under
  /// `partition` (the first of --partition's order).
  std::vector<std::string> same_cut;
  int stages = 1;         ///< P
  int data_parallel = 1;  ///< D = G / P
  int microbatches = 1;   ///< M
  int micro_batch_size = 1;
  int chunks = 1;    ///< V
  int inflight = 0;  ///< N (0: the schedule does not take one)
  /// K and B: the planner searches neither and keeps ScheduleParams' values.
  int sync_warmup = ScheduleParams{}.sync_warmup;
  int batches = ScheduleParams{}.batches;
  double samples_per_second = 0;
  double step_seconds = 0;       ///< pipeline step (simulator)
  double allreduce_seconds = 0;  ///< gradient all-reduce across the D replicas
  double bubble_ratio = 0;
  std::vector<int64_t> peak_memory_bytes;  ///< per stage (memory model)
  int worst_stage = 0;
  bool fits = false;
  std::string why;  ///< in words: why it leads, or why it loses
};

/// A candidate in words, one name per run: "1f1b x balanced P=4 M=8",
/// with " D=2", " N=2", " V=2" where they apply. A single stage is no
/// pipeline whatever schedule ranked it (every schedule runs its
/// micro-batches one after another on one device): "no pipeline (P=1) M=4"
/// (" D=2" after P when replicated).
std::string candidate_label(const Candidate& c);

/// The schedule a candidate is listed under: "no pipeline" for a single
/// stage (candidate_label's reason), else its schedule.
std::string shown_schedule(const Candidate& c);

/// The schedule parameters of a candidate: P, M, V, N, K and B (the pass
/// times of zb-1p/zb-2p come from its costs: set_pass_times).
ScheduleParams schedule_params(const Candidate& c);

struct Plan {
  /// Fitting, best first (at most options.top; of equal samples/s the one
  /// with less memory, then fewer chunks); single-stage candidates that
  /// differ only in their schedule's name (candidate_label) once, and
  /// partitions of one cut once (Candidate::same_cut).
  std::vector<Candidate> ranked;
  /// Per schedule no leader runs (shown_schedule), its best configuration
  /// with why it loses: a schedule's best pipelined one (P >= 2), and
  /// "no pipeline" once for the single stages.
  std::vector<Candidate> alternatives;
  int64_t capacity_bytes = 0;  ///< guard x GPU memory
  AttentionChoice attention;   ///< the attention every candidate was priced with
  int64_t considered = 0;      ///< configurations in the search space (schedule x shape x M x N)
  int64_t evaluated = 0;       ///< simulated
  std::string advice;          ///< when nothing fits: what would
};

/// Searches and ranks (the file comment). Throws UsageError for bad options
/// (a model with fewer units than one stage needs is not an error: those P
/// are skipped).
Plan make_plan(const PlanOptions& options);

/// The predicted timeline of `c` as a Chrome/Perfetto trace at `path`
/// (simulate --trace's format).
void write_plan_trace(const PlanOptions& options, const Candidate& c, const std::string& path);

// ---- calibration from measured results, and its validation ----------------

/// A measured combination re-priced on the roofline of its device: the
/// units, their times and the parts it ran (config.unit_ranges, else its
/// partition cut again), its schedule, and the model costs of that cut in
/// modelled seconds (model_costs: what the timed backend sleeps, times its
/// time scale, and what `simulate --model` prices).
struct Repriced {
  ModelSpec spec;
  DeviceSpec device;
  Attention attention = Attention::kNaive;  ///< the attention the result ran
  std::vector<Unit> units;
  std::vector<UnitTime> times;
  std::vector<UnitRange> parts;
  Schedule schedule;
  StageCosts costs;
};

/// Re-prices `result`'s combination on the roofline of the device it ran on
/// (roofline_device). Throws UsageError for a configuration that cannot be
/// priced (a schedule file's name, an unknown model).
Repriced reprice(const Result& result);

/// The roofline fitted on measured results: per-pass scale factors (least
/// squares through the origin over every stage of every result: measured
/// mean F against the roofline's F of the stage's parts, measured B, or
/// I + W, against the roofline's I + W) and the mean of the measured links.
/// Timed-backend results are compared in modelled seconds (divided by their
/// config.time_scale).
struct PassCalibration {
  double forward = 1;
  double backward = 1;
  LinkModel link;   ///< wall seconds; the device's link when none was measured
  int results = 0;  ///< results fitted
  /// Per unit kind ("qkv", ...): factors on the roofline's forward, input-
  /// and weight-gradient times, fitted on the results that timed their
  /// units (theory.kind_seconds). A kind or pass without such data takes
  /// forward / backward.
  std::map<std::string, UnitTime> kinds;
  /// Seconds every action takes besides its units (StageCosts::
  /// action_seconds): fitted from CUPTI's action windows, else 0.
  double launch = 0;
  bool from_cupti = false;  ///< per unit kind from CUPTI's figures (fit_calibration)
  /// How it was fitted, in one line (Calibration::summary): "per unit kind
  /// from CUPTI on 3 results (achieved / roofline): embedding 0.52, ...;
  /// launch 14 us per action", or the per-pass fit and why not CUPTI's.
  std::string method;

  /// The factors of `kind`'s three passes.
  UnitTime factors(const std::string& kind) const {
    const auto it = kinds.find(kind);
    return it != kinds.end() ? it->second : UnitTime{forward, backward, backward};
  }
};

/// Fits on `results` (ok results with theory.action_seconds; others are
/// left out). When every usable result has CUPTI's figures
/// (has_cupti_figures), per unit kind from them instead: per kernel family
/// f, least squares through the origin over every stage of the measured
/// step's kernel_seconds_f against the roofline's seconds of the units'
/// share in f (kernel_gemm_shares, kernel_family_of; x M x B actions); then one
/// factor on all families so that a stage's kernel seconds of every family
/// come out (families no unit runs: copies, bias fills); each kind's factor
/// per pass is its units' GEMM and elementwise shares at their families'
/// factors. The launch cost is the median over every action of its window
/// (timeline end - start) less its device seconds. REQUIRES: at least one
/// usable result (else UsageError).
PassCalibration fit_calibration(const std::vector<const ResultEntry*>& results);

/// The kernel family (the device profiler's kernel_seconds_<family>,
/// docs/metrics.md) that runs the non-GEMM work of a unit kind: its GEMMs
/// run in "gemm". embedding -> "embedding"; ln1, ln2, final_norm ->
/// "layernorm"; qkv, attn_out, fc2 (bias and residual only) -> "gemm";
/// attention -> "attention" (naive: its scores and context GEMMs in
/// "gemm"); fc1_gelu -> "gelu"; head -> "cross_entropy". The one mapping
/// between the two.
const char* kernel_family_of(UnitKind kind);

/// The share of each pass of `unit` that runs in "gemm" kernels, as the
/// result `r` ran them: gemm_shares, except that a fused attention (cuDNN's,
/// the fp32 flash kernels) takes its scores and context products in its own
/// kernels, all in "attention".
UnitTime kernel_gemm_shares(const Unit& unit, const Repriced& r);

/// The device time of each kernel family per stage in `r`'s median step
/// (its device profiler's step.kernel_seconds_<family>): family -> per
/// stage; empty without a device profiler.
std::map<std::string, std::vector<double>> kernel_seconds(const Result& r);

/// Calibration from CUPTI: whether `r` has what it takes (kernel seconds per
/// family for every stage, some of them above zero, and each action's
/// device seconds beside the median step's timeline).
bool has_cupti_figures(const Result& r);

/// The fitted factors as a "pipebench.calibration/1" calibration of every
/// unit kind on `device`: each kind's own factors where they were fitted,
/// else forward and backward (for I and W), all x scale.
Calibration kind_calibration(const PassCalibration& cal, const std::string& device,
                             double scale = 1);

/// `plan --calibration PATH...`: one "pipebench.calibration/1" file is read
/// as it is; otherwise the paths are result files or folders, and the
/// results measured on `device` (roofline_device: results of an H200 for
/// "h200", of the cpu backend or the CUDA emulator for "cpu") are fitted (fit_calibration, in
/// modelled seconds) into kind factors. Throws UsageError naming the path, or when no result of
/// `device` can be calibrated from.
Calibration calibration_from(const std::vector<std::string>& paths, const std::string& device);

/// The device preset (device_preset_names) a GPU stands for, as CUDA names
/// it: the preset whose name is a word of the GPU's name, case aside
/// ("NVIDIA H200" -> "h200", "NVIDIA A100-SXM4-80GB" -> "a100"); "" when
/// none is ("pipebench CUDA emulator (CPU)": the emulator has no roofline).
std::string gpu_preset(std::string_view gpu_name);

/// The device whose roofline prices a measured result: the preset of the
/// GPU its first rank ran on (environment.gpus, gpu_preset) when there is
/// one, else its config.device ("cpu" when not recorded).
std::string roofline_device(const Result& result);

/// One measured combination predicted from its configuration.
struct ValidationRow {
  std::string source;
  ResultConfig config;
  double predicted_samples_per_second = 0;
  double measured_samples_per_second = 0;
  int64_t predicted_peak_bytes = 0;  ///< worst stage, memory model (SGD, as the executor)
  int64_t measured_peak_bytes = 0;   ///< worst stage, tracked
  double samples_error = 0;          ///< (predicted - measured) / measured
  double memory_error = 0;
  int calibrated_on = 0;  ///< results of the same setup it was calibrated on
  /// Measurements of the combination (result files with the same setup and
  /// configuration: several nights) merged into this row by their median.
  int measurements = 1;
  /// The largest share of the host's CPU other processes used while one of
  /// its measurements was timed (metrics.foreign_cpu); NaN = not recorded.
  double foreign_cpu = std::numeric_limits<double>::quiet_NaN();
};

/// Whether a row was measured on a busy host (foreign_cpu above
/// kBusyHostCpuShare): its samples/s error says as much about the host's
/// load as about the planner.
bool measured_on_busy_host(const ValidationRow& row);

struct Validation {
  std::vector<ValidationRow> rows;
  std::vector<std::string> skipped;  ///< "file: why"
  /// Results the planner refuses to predict, one line per reason with how
  /// many: "12 results of ranks sharing one GPU (environment.ranks_per_gpu
  /// 2): ..." (shared_gpu_refusal).
  std::vector<std::string> refused;
  /// How each setup of more than one result was calibrated, fitted on all
  /// of it (each row is fitted on the others): "setup: " + its method.
  std::vector<std::string> calibrations;
  /// What makes the errors less telling, one line each: "3 of 12
  /// measurements were timed while other processes used more than 20% of
  /// the host's CPU (up to 47%; metrics.foreign_cpu): ...".
  std::vector<std::string> warnings;
  double mean_abs_samples_error = 0;
  double mean_abs_memory_error = 0;
};

/// Why the planner does not predict a run whose ranks took turns on one GPU
/// (environment.ranks_per_gpu = `ranks_per_gpu` > 1): "2 ranks shared one
/// GPU (environment.ranks_per_gpu), so its stages took turns on one device,
/// and the planner models one device per stage".
std::string shared_gpu_refusal(int ranks_per_gpu);

/// Leave-one-out: each ok result is predicted by the simulator and the
/// memory model from its configuration, with the roofline calibrated
/// (fit_calibration) on the other results of its setup (machine, backend,
/// roofline_device, model, dtype). A result alone in its setup, without action
/// times, or of a schedule the registry does not hold is skipped, with why.
/// Results whose ranks shared a GPU are neither predicted nor calibrated on:
/// Validation::refused says how many and why.
Validation validate_plan(const std::vector<ResultEntry>& results);

/// The report's "which schedule for this machine": the planner run for the
/// machine the results were measured on (as many devices as their largest
/// P, one node, the memory budget they ran under or the device's memory,
/// SGD as the executor) with the roofline calibrated on them (the setup
/// with the most results), as one sentence naming the leader and why. For
/// results that ran on GPUs the machine is the GPUs: their name, their
/// memory and roofline from the device table (roofline_device); when the
/// ranks shared a GPU (environment.ranks_per_gpu > 1) or the table has no
/// preset for it, the sentence names the GPU and says why the planner does
/// not predict. "" when no result can be calibrated from.
std::string which_schedule_for_this_machine(const std::vector<const ResultEntry*>& results);

}  // namespace ppb::reports
