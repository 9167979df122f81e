// The result file of one schedule x partition x M combination (docs/result-schema.md,
// "Result file"), schema "pipebench.result/1".
//
// One file per combination, written by rank 0 of `pipebench run` and read by
// `pipebench report`. The C++ model below mirrors the JSON one to one; the
// JSON key of every member is its name unless a comment says otherwise.
//
//   {"schema":"pipebench.result/1","status":"ok","error":"",
//    "config":{...},"metrics":{...},"timeline":[[{"op":"F","mb":0,"chunk":0,
//    "start":0.0,"end":0.002},...],...],"environment":{...}}
//
// Reading rules (result_from_json):
//  * unknown extra keys are ignored anywhere (forward compatible);
//  * a key marked "optional" may be absent (or null) and then keeps its default;
//    every other key is required and a missing one is an error;
//  * `metrics` and `timeline` are required when status is "ok" and optional
//    otherwise (an "oom" result carries the figures it reached; "invalid"
//    usually has none); `error` is required when status is not "ok";
//  * numbers: integer fields accept JSON integers (or integral doubles); plain
//    number fields accept any JSON number; "number or null" fields read null as
//    NaN (the writer writes every non-finite double as null);
//  * every error is a ppb::UsageError whose one-line message names the source
//    and the field path, e.g.
//    "run/1f1b.json: field 'metrics.step_time_seconds.median': expected a number".
#pragma once

#include <array>
#include <boost/json/value.hpp>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/pipeline/action.hpp"
#include "ppb/pipeline/cuda_graphs.hpp"
#include "ppb/pipeline/gemm_epilogues.hpp"
#include "ppb/pipeline/gpu_state.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/profiling/memory.hpp"
#include "ppb/profiling/output_file.hpp"

namespace ppb {

/// The schema string every result file carries.
inline constexpr const char* kResultSchema = "pipebench.result/1";
/// "pipebench.result/1" as a function, for code that links ppb::result only.
const char* result_schema();

/// How a combination ended. JSON: "ok", "oom", "invalid", "error".
enum class ResultStatus : uint8_t {
  kOk,       ///< ran and measured
  kOom,      ///< would exceed --memory-budget; metrics hold what was reached
  kInvalid,  ///< the combination is not valid (schedule/partition/P/M); `error` says why
  kError,    ///< failed at run time; `error` says how
};

/// "ok", "oom", "invalid", "error".
const char* result_status_name(ResultStatus status);

/// The vocabulary a run's head and embedding held: the model's, padded as
/// --make-vocab-size-divisible-by asks (ModelSpec::vocab_divisor).
struct VocabPadding {
  int divisor = 1;  ///< --make-vocab-size-divisible-by (1: none)
  int vocab = 1;    ///< the model's true vocabulary (tokens and labels are drawn from it)
  int padded = 1;   ///< padded_vocab_size(vocab, divisor)

  friend bool operator==(const VocabPadding&, const VocabPadding&) = default;
};

/// What was run. Every field required unless marked optional.
struct ResultConfig {
  std::string schedule;      ///< "1f1b", "gpipe", ... (or the schedule file's name)
  std::string partition;     ///< "layer", "operator", "balanced", "manual:..."
  int stages = 1;            ///< P
  int microbatches = 1;      ///< M per batch
  int micro_batch_size = 1;  ///< samples per micro-batch
  int inflight = 0;          ///< N of async-1f1b/adaptive (0 when the schedule has none)
  int chunks = 1;            ///< V
  std::string model;         ///< --model as given ("gpt-tiny", "gpt:layers=...")
  std::string backend;       ///< "cpu", "cuda", "timed"
  std::string transport;     ///< "mpi", "nccl"
  /// optional: how messages crossed the transport: "direct" (it moved the
  /// backend's buffers, e.g. device memory through CUDA-aware MPI or NCCL)
  /// or "staged" (through pinned host buffers and copy-stream copies);
  /// "" when not recorded.
  std::string message_path;
  int iters = 0;              ///< timed iterations
  int warmup = 0;             ///< warm-up iterations (not timed)
  double time_scale = 0;      ///< optional: timed backend's --time-scale (0 = not used)
  int64_t memory_budget = 0;  ///< optional: --memory-budget in bytes (0 = none)
  uint64_t seed = 0;          ///< optional: data/parameter seed
  int sync_warmup = 0;        ///< optional: hybrid's --sync-warmup K
  double memory_guard = 0;    ///< optional: adaptive's guard fraction (0 = not used)
  int batches = 1;            ///< optional: batches per step without flush (pipedream)
  double min_time = 0;        ///< optional: --min-time seconds of timed steps (0 = not used)
  /// optional: a slowdown planted on purpose to test the regression gate,
  /// "stage 1 x1.1" ("" = none). A planted result is never a real measurement.
  std::string plant;
  /// optional: --device, the cost model of the timed backend and of the
  /// balanced partition ("" = not recorded, which is the default "cpu").
  std::string device;
  int max_iters = 0;    ///< optional: --max-iters, the cap under --min-time (0 = not recorded)
  std::string profile;  ///< optional: --profile, the collectors as given ("" = none)
  /// optional: a --check step ran before the warm-up (absent: whether
  /// metrics.check is present).
  bool check = false;
  /// optional: --dtype, the storage of activations, messages and weights
  /// ("fp32" when absent: files written before the field).
  std::string dtype = "fp32";
  /// optional: the vocabulary padding the head and embedding had; absent
  /// in files written before padding (they ran unpadded).
  std::optional<VocabPadding> vocab_padding;
  /// optional: the attention that ran, "naive" or "fused" (--attention);
  /// "" when not recorded (files written before the field, which ran naive:
  /// attention_ran()).
  std::string attention;
  /// optional: why the attention ran naive where it did ("--attention
  /// naive", "the CUDA emulator has no cuDNN", "head dimension 256: the fp32
  /// flash attention takes at most 128", ...); "" for fused or when not
  /// recorded. (Files written before the fp32 flash kernels may say "fp32:
  /// cuDNN has no fused flash attention for fp32".)
  std::string attention_reason;
  /// optional: D, the data-parallel replicas of the pipeline (the job ran on
  /// stages x data_parallel ranks); 1 when absent (files written before it).
  int data_parallel = 1;
  /// optional: how ranks map to (stage, replica): "dp-pp" (a stage's D ranks
  /// adjacent, Megatron-LM's order) or "pp-dp"; "" when not recorded.
  std::string rank_order;
  /// optional: the unit ranges the partition gave each virtual stage, in
  /// the `manual:` form "0-9,10-30,31-58" (format_partition), so that a
  /// calibration re-prices exactly these parts ("" = not recorded).
  std::string unit_ranges;
  /// optional: --cuda-graphs of a device backend, "on" or "off" ("" = not
  /// recorded: another backend, or a file written before the flag).
  std::string cuda_graphs;

  friend bool operator==(const ResultConfig&, const ResultConfig&) = default;
};

/// The model a result ran: its `model` spec with its vocabulary padding,
/// micro-batch size and the element bytes of its dtype (bf16: 2, else 4).
/// Throws UsageError as parse_model_spec.
ModelSpec model_spec(const ResultConfig& c);
/// The attention `c` ran: its `attention`, or "naive" where the file did
/// not record it (written before the field).
inline std::string attention_ran(const ResultConfig& c) {
  return c.attention.empty() ? "naive" : c.attention;
}

/// The schedule parameters a result ran with: P, M, V, N, K and batches
/// (wgrad_share and the pass times of zb-1p/zb-2p keep their defaults:
/// set_pass_times supplies the latter from the caller's costs).
ScheduleParams schedule_params(const ResultConfig& c);

/// Step time over the timed iterations, seconds (docs/metrics.md).
struct StepTimeStats {
  double median = 0;
  double min = 0;
  double max = 0;
  std::vector<double> samples;  ///< one per timed iteration, in run order

  friend bool operator==(const StepTimeStats&, const StepTimeStats&) = default;
};

/// Bubble ratio (idle/step) or bubble overhead (idle/busy, Megatron-LM's).
/// measured = mean of per_stage; theoretical is number or null (NaN when the
/// run had no theory, e.g. an invalid combination).
struct BubbleFigures {
  double measured = 0;
  double theoretical = 0;
  std::vector<double> per_stage;
  /// optional: the figure of each timed step (mean over stages), in run
  /// order, so the gate can test a change against the step-to-step noise.
  std::vector<double> samples;

  friend bool operator==(const BubbleFigures&, const BubbleFigures&) = default;
};

/// Bytes per memory category of one stage at its peak. JSON: an object keyed
/// by mem_category_name ("activations", "parameters", "gradients",
/// "optimizer_state", "weight_stash", "comm_buffers", "workspace"); missing
/// categories read as 0.
using MemoryByCategory = std::array<int64_t, kNumMemCategories>;

/// Peak memory per stage (index = stage), bytes.
struct PeakMemory {
  std::vector<int64_t> per_stage;              ///< tracked total at its high-water mark
  std::vector<int64_t> activations_per_stage;  ///< activation category's own peak
  std::vector<int64_t> device_per_stage;      ///< optional: GPU pool high-water mark (empty on cpu)
  std::vector<MemoryByCategory> by_category;  ///< optional: categories at the total's peak
  std::vector<int64_t> peak_rss_per_stage;    ///< optional: process peak RSS
  /// optional: the device profiler that was attached while these peaks were
  /// measured ("cupti": its buffers and instrumentation take device memory),
  /// "" when none was: quote peaks from a run without one.
  std::string device_profiler;

  friend bool operator==(const PeakMemory&, const PeakMemory&) = default;
};

/// Mean measured duration of each action kind on one stage, seconds (what the
/// theory simulation was fed). NaN (null) for a kind the schedule never ran.
struct StageActionTimes {
  double fwd = 0;         ///< F
  double bwd = 0;         ///< B (full backward)
  double bwd_input = 0;   ///< I
  double bwd_weight = 0;  ///< W

  friend bool operator==(const StageActionTimes&, const StageActionTimes&) = default;
};

/// Seconds one micro-batch spent in the units of one kind on one stage, by
/// pass (a full backward's input and weight halves apart).
struct KindSeconds {
  double fwd = 0;         ///< "F"
  double bwd_input = 0;   ///< "I"
  double bwd_weight = 0;  ///< "W"

  friend bool operator==(const KindSeconds&, const KindSeconds&) = default;
};

/// One action as it ran (or as the simulator predicts it): seconds from the
/// start of the step. JSON: {"op":"F","mb":0,"chunk":0,"start":..,"end":..}.
struct TimelineEvent {
  ActionKind op = ActionKind::kForward;
  int32_t mb = 0;
  int32_t chunk = 0;
  double start = 0;
  double end = 0;

  friend bool operator==(const TimelineEvent&, const TimelineEvent&) = default;
};

/// Per stage, in execution order.
using Timeline = std::vector<std::vector<TimelineEvent>>;

/// A stage-to-stage link as `run` fitted it from its own transfers
/// (docs/metrics.md, "Measured links"): transfer time = latency + bytes /
/// bandwidth. JSON: {"path":"network","latency_seconds":..,
/// "bandwidth_bytes_per_second":..,"messages":..,"sizes":[..]}.
struct MeasuredLinkFigures {
  /// "host": between ranks on one host; "network": between hosts.
  std::string path;
  double latency_seconds = 0;  ///< the fit's intercept (number or null)
  /// number or null: null (NaN) when the transfers had a single size (then
  /// latency_seconds is their median time and no bandwidth is fitted).
  double bandwidth_bytes_per_second = 0;
  int messages = 0;            ///< transfers the fit used
  std::vector<int64_t> sizes;  ///< their distinct sizes, bytes, ascending

  friend bool operator==(const MeasuredLinkFigures&, const MeasuredLinkFigures&) = default;
};

/// What the simulator predicts for this combination, fed with the measured
/// mean action times (docs/metrics.md: "theory in a result uses measured action
/// times"). Optional as a whole; inside it only step_time_seconds is required.
struct TheoryFigures {
  double step_time_seconds = 0;              ///< simulated step time (number or null)
  std::vector<int> peak_inflight_per_stage;  ///< optional: micro-batches in flight at the peak
  /// optional: activation bytes ONE micro-batch leaves on each stage (the
  /// documents' "M"); the formulas M x P, M x (P+N-1), GPipe M x a_s, 1F1B
  /// min(P-s, M) x a_s are computed from it.
  std::vector<int64_t> activation_bytes_per_microbatch;
  std::vector<int64_t> peak_activation_bytes_per_stage;  ///< optional: peak_inflight x per-mb bytes
  std::vector<StageActionTimes> action_seconds;          ///< optional: per stage
  /// optional: per stage, unit kind name ("qkv", ...) -> the seconds one
  /// micro-batch spent in that stage's units of the kind, in the same step
  /// as action_seconds. Backends that time their units (cpu) only.
  std::vector<std::map<std::string, KindSeconds>> kind_seconds;
  Timeline timeline;  ///< optional: predicted median step
  /// optional: the links the simulation was fed, one per path that carried
  /// transfers ("host" first, then "network").
  std::vector<MeasuredLinkFigures> links;

  friend bool operator==(const TheoryFigures&, const TheoryFigures&) = default;
};

/// --check outcome: the pipelined step against a single-process reference.
struct CheckFigures {
  bool passed = false;
  double max_rel_error = 0;  ///< worst relative error over loss and gradients (number or null)
  double loss = 0;           ///< optional: the pipelined run's loss (number or null)
  std::string method;        ///< optional: "reference" or "weight-stash" (pipedream)
  /// optional (absent in files written before it): the worst relative error
  /// of a chunk's first optimizer step against plain SGD, w - lr * g, on
  /// the update itself (0 when exact, 1 for a step that did nothing or a
  /// compute copy not refreshed; docs/metrics.md, "Check").
  std::optional<double> update_rel_error;
  /// optional (absent in files written before it): the steps checked, 1
  /// (the check step) or 2 (also the first warm-up step: its optimizer
  /// updates and, with method "reference", its gradients and loss against
  /// the reference's second step; docs/metrics.md, "Check").
  std::optional<int> steps;

  friend bool operator==(const CheckFigures&, const CheckFigures&) = default;
};

/// What the memory guard of `adaptive` did over the run.
struct MemoryGuardFigures {
  int64_t actions = 0;   ///< times a stage lowered its in-flight limit
  int min_inflight = 0;  ///< the lowest limit any stage reached

  friend bool operator==(const MemoryGuardFigures&, const MemoryGuardFigures&) = default;
};

/// What one collector (--profile) added, for the median step (the step
/// whose timeline the result carries). Figure names are snake_case with
/// their unit ("cpu_seconds", "cycles").
struct CollectorResult {
  /// figure -> one value per stage (number or null).
  std::map<std::string, std::vector<double>> step;
  /// figure -> per stage, one value per entry of that stage's `timeline`, in
  /// the same order (number or null).
  std::map<std::string, std::vector<std::vector<double>>> action;

  friend bool operator==(const CollectorResult&, const CollectorResult&) = default;
};

/// What the devices did in the median step, per stage (index = stage), from
/// a device profiler's records (docs/metrics.md, "Device activity"). Busy
/// figures are lengths of unions of operation intervals, seconds; a stage
/// without records holds null (NaN).
struct DeviceFigures {
  std::string profiler;                                 ///< the collector: "cupti"
  double bubble_ratio = 0;                              ///< mean of bubble_ratio_per_stage
  std::vector<double> bubble_ratio_per_stage;           ///< (step - compute) / step
  std::vector<double> compute_seconds_per_stage;        ///< kernels of F, B, I, W
  std::vector<double> communication_seconds_per_stage;  ///< NCCL kernels, message copies
  std::vector<double> overlap_seconds_per_stage;        ///< compute and communication at once
  std::vector<double> busy_seconds_per_stage;           ///< any operation
  /// optional: bubble_ratio of every timed step, in run order (the gate's
  /// samples; empty in files written before it).
  std::vector<double> bubble_ratio_samples;

  friend bool operator==(const DeviceFigures&, const DeviceFigures&) = default;
};

/// Robust spread of one figure over the timed steps (JSON: an object with
/// these keys; mad is the median absolute deviation, unscaled).
struct SampleSpread {
  int n = 0;
  double median = 0;
  double mad = 0;
  double q1 = 0;  ///< 25th percentile
  double q3 = 0;  ///< 75th percentile
  double min = 0;
  double max = 0;

  friend bool operator==(const SampleSpread&, const SampleSpread&) = default;
};

/// The noise of a run: spread of each gated figure over its timed steps.
struct SpreadFigures {
  SampleSpread step_time_seconds;
  SampleSpread samples_per_second;  ///< per step: samples per step / that step's time
  SampleSpread bubble_ratio;

  friend bool operator==(const SpreadFigures&, const SpreadFigures&) = default;
};

/// Data parallelism (config.data_parallel > 1): the gradient all-reduce of
/// each stage across its replicas, in the median step (docs/metrics.md,
/// "Data parallelism"). Per-stage lists are means over the stage's replicas.
/// JSON: `seconds` is metrics.allreduce_seconds, the rest metrics.allreduce.
struct AllReduceFigures {
  double seconds = 0;                     ///< mean over stages of seconds_per_stage
  std::vector<double> seconds_per_stage;  ///< summed per step: posted -> seen complete
  /// Of seconds_per_stage, the time the stage's compute ran at once.
  std::vector<double> overlap_seconds_per_stage;
  std::vector<int64_t> bytes_per_stage;  ///< gradient bytes all-reduced per step
  /// Step time - pipeline time (the end of the last action on any rank):
  /// what the all-reduce adds to the step beyond the pipeline.
  double exposed_seconds = 0;
  /// The ring model (2(D-1) x latency + 2(D-1)/D x bytes / bandwidth)
  /// fitted to the measured all-reduces; the theory uses it.
  double latency = 0;
  double bandwidth = 0;  ///< bytes/s (number or null: infinite)
  /// The simulator's all-reduce seconds per stage with that model.
  std::vector<double> theoretical_seconds_per_stage;
  /// The bubble ratio without the all-reduce: per stage (pipeline time -
  /// compute busy) / pipeline time, measured and theoretical. The result's
  /// bubble_ratio is the one with it (over the whole step).
  BubbleFigures bubble_ratio_pipeline;

  friend bool operator==(const AllReduceFigures&, const AllReduceFigures&) = default;
};

/// Measured figures (docs/metrics.md).
struct ResultMetrics {
  double samples_per_second = 0;
  StepTimeStats step_time_seconds;
  BubbleFigures bubble_ratio;
  BubbleFigures bubble_overhead;
  PeakMemory peak_memory_bytes;
  std::optional<TheoryFigures> theory;             ///< optional
  std::optional<CheckFigures> check;               ///< optional: absent without --check
  std::optional<MemoryGuardFigures> memory_guard;  ///< optional: absent unless a guard ran
  /// optional: collector name -> its figures (absent without --profile, or
  /// when no active collector adds figures).
  std::map<std::string, CollectorResult> collectors;
  std::optional<SpreadFigures> spread;  ///< optional: absent in older files
  /// optional: per stage, the compute busy seconds (F/B/I/W) of each timed
  /// step, in run order (JSON: busy_seconds_per_stage). A slowdown of one
  /// stage shows here in full, where the step time dilutes it.
  std::vector<std::vector<double>> busy_seconds_per_stage;
  /// optional: per stage, the seconds of the backend's speed probe (a fixed
  /// workload on the stage's compute resource: StepProbes::speed_probe) after
  /// each timed step, in run order (JSON: speed_probe_seconds_per_stage).
  /// Absent for backends without one (timed) and in older files. The gate
  /// reads it to tell a slower machine from slower code.
  std::vector<std::vector<double>> speed_probe_seconds_per_stage;
  /// optional (number or null): share of the busiest host's CPU time that
  /// processes other than this run's ranks used during the timed steps, in
  /// [0, 1]; absent when unknown (older files, no /proc/stat).
  std::optional<double> foreign_cpu;
  /// optional: the device figures of a run with a device profiler
  /// (--profile cupti), beside the host-side bubble and busy figures.
  std::optional<DeviceFigures> device;
  /// optional: the gradient all-reduce (data parallelism only).
  std::optional<AllReduceFigures> allreduce;
  /// optional: what each GPU of the run did during the timed steps (NVML:
  /// clocks, power, temperature, throttling, ECC errors), one entry per GPU
  /// sampled; absent when none was (no GPU backend, no NVML).
  std::vector<GpuState> gpu_state;
  /// optional: how a device backend's work reached the device (CUDA graphs
  /// or eager), summed over the ranks, with rank 0's eager reason; absent
  /// for other backends and in files written before it.
  std::optional<CudaGraphFigures> cuda_graphs;
  /// optional: a device backend's GEMMs with a cuBLASLt epilogue and those
  /// cuBLASLt refused, over the same steps as cuda_graphs, summed over the
  /// ranks; absent for other backends and in files written before it.
  std::optional<GemmEpilogueFigures> gemm_epilogues;

  friend bool operator==(const ResultMetrics&, const ResultMetrics&) = default;
};

/// Where and with what it ran. Strings are "" and lists empty when unknown
/// (e.g. cuda/gpus/driver on a CPU-only machine), but every key is written.
struct ResultEnvironment {
  std::vector<std::string> hosts;  ///< distinct host names of the ranks
  /// optional: the host of each rank (index = rank); empty in files written
  /// before the field.
  std::vector<std::string> rank_hosts;
  int ranks = 0;
  std::string mpi;                ///< MPI library and version
  std::string cuda;               ///< CUDA runtime version, "" without
  std::vector<std::string> gpus;  ///< device names, one per rank that has one
  std::string driver;             ///< GPU driver version, "" without
  /// optional: NCCL's version ("2.28.3", ncclGetVersion) in a build that
  /// links NCCL, on a GPU backend; "" otherwise.
  std::string nccl;
  /// optional: cuDNN's version on a GPU backend in a build that links it;
  /// "" otherwise (pipebench links no cuDNN today: always "").
  std::string cudnn;
  std::string git;         ///< build revision
  std::string date;        ///< ISO 8601, UTC, when the combination finished
  std::string compiler;    ///< optional
  std::string build_type;  ///< optional
  std::string hostname;    ///< optional: rank 0's host
  std::string cpu;         ///< optional: CPU model name
  int cores = 0;           ///< optional: hardware threads of rank 0's host (0 = unknown)
  /// optional: ranks that compute on the host CPU outnumbered its cores, so
  /// they took turns on them: the timings are not comparable run to run and
  /// the regression gate leaves them out by default.
  bool oversubscribed = false;
  /// optional: the most ranks that computed on one GPU (same host and PCI
  /// bus id); above 1 they took turns on it, so its times and bubbles
  /// include that sharing. 0 = no GPU backend (or a file from before).
  int ranks_per_gpu = 0;

  friend bool operator==(const ResultEnvironment&, const ResultEnvironment&) = default;
};

/// One result file.
struct Result {
  ResultStatus status = ResultStatus::kOk;
  std::string error;  ///< why, when status != ok ("" when ok)
  ResultConfig config;
  /// Present when status == ok; may be present for oom (the figures reached).
  std::optional<ResultMetrics> metrics;
  Timeline timeline;  ///< the median step, per stage (empty unless measured)
  ResultEnvironment environment;

  friend bool operator==(const Result&, const Result&) = default;
};

class JsonObject;

/// A GPU's summarised state (metrics.gpu_state entries, the health file's
/// gpu_state) by its one field list; the reader names the field path of a
/// bad value (UsageError).
boost::json::object gpu_state_to_json(const GpuState& state);
GpuState gpu_state_from_json(const JsonObject& o);

/// A result's `environment` object by its one field list (also the health
/// probe's file carries one).
boost::json::object environment_to_json(const ResultEnvironment& env);
ResultEnvironment environment_from_json(const JsonObject& o);

/// The JSON document of a result (schema first). Non-finite doubles become null.
boost::json::value result_to_json(const Result& result);

/// Parses a result document. `source` names it in errors (usually the path).
/// Throws UsageError "<source>: field '<path>': <what>" for a missing
/// required field, a wrong type or a bad value, and
/// "<source>: field 'schema': expected \"pipebench.result/1\", got \"...\"" for
/// another schema.
Result result_from_json(const boost::json::value& json, std::string_view source);

/// Parses a result document from text; `source` names it in errors. An
/// empty text or malformed JSON throws UsageError naming the source.
Result result_from_text(std::string_view text, const std::string& source);

/// Reads and parses one file. A missing/unreadable file, an empty file, or
/// malformed/truncated JSON throws UsageError naming the file.
Result read_result_file(const std::string& path);

/// Refuses (UsageError naming `key` of `o`) a date other than a UTC time as
/// pipebench writes it, "2026-12-06T19:47:54Z": the gate orders nights by
/// comparing these as text, which only this one shape keeps in time order,
/// and a real time of day on a day of the calendar (a leap second allowed).
/// Result and health files are read through it.
void check_utc_date(const JsonObject& o, std::string_view key, const std::string& date);

/// Writes the result with write_output_file (profiling/output_file.hpp): a
/// regular file is replaced atomically (temporary file in the same folder,
/// flushed, renamed), so a reader never sees a half file; on failure no
/// temporary is left behind and UsageError names the path.
void write_result_file(const OutputPath& path, const Result& result);

/// Writes any JSON value, indented, with a final newline, by the rules of
/// write_output_file (for the report's and p2p's JSON outputs).
void write_json_file(const OutputPath& path, const boost::json::value& json);

}  // namespace ppb
