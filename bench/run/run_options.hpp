// The options of `pipebench run` (one struct, STYLE.md rule 9) and their
// validation into a sweep plan.
//
// Validation is a pure function of the options, the MPI world size and the
// code's registries, so every rank reaches the same verdict without talking
// to the others: a bad flag makes every rank exit 2 before any collective,
// and no rank is left waiting in one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ppb/pipeline/attention.hpp"
#include "ppb/pipeline/data_parallel.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "run/sweep.hpp"

namespace ppb::run {

/// Limits on --iters, --warmup and --max-iters (steps) and --min-time
/// (seconds), typed or read by --rerun from a result file: a combination
/// runs at most kMaxSteps warm-up and kMaxSteps timed steps, each bounded by
/// --timeout.
inline constexpr int kMaxSteps = 100000;
/// The most model chunks per stage (--chunks) and batches per step
/// (--batches) a run takes: P x V and M x batches stay far from int's end.
inline constexpr int kMaxChunks = 4096;
inline constexpr int kMaxBatches = 4096;
inline constexpr int kMaxMinTimeSeconds = 86400;
/// The largest message between stages: one MPI message (an int count of
/// bytes).
inline constexpr int64_t kMaxMessageBytes = 2147483647;

/// The flags as given (strings where a list or a size is parsed later).
struct RunOptions {
  std::string schedules = "all";   ///< --schedule S,...|all
  std::string partitions = "all";  ///< --partition X,...|all
  std::string microbatches = "8";  ///< --microbatches M,...
  std::string model = "gpt-tiny";  ///< --model SPEC
  std::string dtype = "fp32";      ///< --dtype fp32|bf16: storage of activations, messages, weights
  /// --make-vocab-size-divisible-by N: the head and embedding hold the
  /// vocabulary padded to a multiple of N (1: unpadded).
  int vocab_divisor = kDefaultVocabDivisor;
  std::string attention = "auto";  ///< --attention auto|fused|naive (choose_attention)
  /// Set by --rerun only: why the result measured again ran naive. A naive
  /// run records it where this node's rule finds no obstacle of its own
  /// (a refusal that only cuDNN's trial build had found), so the rerun's
  /// result gives the same reason as the result it measures again.
  std::string recorded_attention_reason;
  /// Set by --rerun only: the settings are a result file's, whose
  /// combinations ran (with their own V, N, K, B), so the sweep-wide checks
  /// of what a schedule takes and runs do not apply.
  bool from_result = false;
  std::string backend;    ///< --backend ("" = the first registered backend)
  std::string transport;  ///< --transport ("" = the first registered transport)
  int iters = 10;         ///< --iters / -n
  int warmup = 2;         ///< --warmup / -w
  /// --min-time: after the --iters timed steps, keep timing steps until
  /// their summed time reaches this many seconds (Google Benchmark's
  /// --benchmark_min_time, applied to pipeline steps), so a fast combination
  /// gets enough samples to show its noise. 0 = exactly --iters steps.
  double min_time = 0;
  int max_iters = 1000;  ///< --max-iters: cap on timed steps under --min-time
  /// --plant STAGE:FACTOR: a planted slowdown (factor > 1) or speed-up
  /// (timed backend only, factor < 1) of one stage, to test the regression
  /// gate end to end; recorded in every result's config.plant.
  std::string plant;
  std::string out;                ///< --out (default results/<UTC date-time>)
  bool resume = false;            ///< --resume
  bool trace = false;             ///< --trace
  bool check = false;             ///< --check / -c
  std::string profile;            ///< --profile a,b: collectors (collector.hpp)
  std::string memory_budget;      ///< --memory-budget BYTES ("" = none)
  double memory_guard = 0.85;     ///< --memory-guard
  double timeout = 0;             ///< --timeout / -T seconds (0 = no watchdog)
  int chunks = kDefaultChunks;    ///< --chunks V (interleaved-1f1b)
  int inflight = 0;               ///< --inflight N (0 = P)
  int sync_warmup = 1;            ///< --sync-warmup K (hybrid)
  int batches = kDefaultBatches;  ///< --batches B (pipedream)
  double time_scale = 0;          ///< --time-scale (0 = automatic)
  uint64_t seed = 1;              ///< --seed
  int stages = 0;                 ///< --stages P (0 = the world size W); W = P x D
  /// --rank-order: how the W ranks map to (stage, replica) with D > 1
  /// (data_parallel.hpp: "dp-pp", Megatron-LM's, or "pp-dp").
  std::string rank_order = "dp-pp";
  /// --device D: the cost model of the timed backend and of `balanced`'s
  /// pricing (device.hpp presets).
  std::string device = "cpu";
  /// --cuda-graphs on|off: a device backend captures its work into CUDA
  /// graphs and replays them where the device can (result:
  /// metrics.cuda_graphs says what ran how, and why any ran eagerly).
  std::string cuda_graphs = "on";
  /// Arguments CLI11 did not recognise (the subcommand allows extras so that
  /// an unknown flag is reported once, by rank 0, like every other error).
  std::vector<std::string> extras;
  /// --rerun RESULT.json|FOLDER...: measure these results' combinations
  /// again with their recorded settings (rerun.hpp) instead of a sweep.
  std::vector<std::string> rerun;
  /// The flags given on the command line, by their long name ("--plant"):
  /// --rerun refuses those that would contradict the recorded settings.
  std::vector<std::string> given;
  /// TEST ONLY (hidden flag --debug-stall-rank): this rank stalls in the
  /// first action of the first step, so the --timeout watchdog can be tested.
  int debug_stall_rank = -1;
  /// TEST ONLY (hidden flag --debug-fault RANK:PHASE:WHAT): in the last
  /// combination of the sweep, rank RANK kills itself (WHAT = kill, SIGKILL),
  /// stops (stop, SIGSTOP) or throws (throw) on entering PHASE: setup
  /// (before the schedule and partition), measure (before the timed steps)
  /// write (before rank 0 writes the result) or trace (with --trace: after
  /// rank 0 wrote the traces, before the result), so the failure tests can
  /// hit each phase of a real job.
  std::string debug_fault;
};

/// A planted fault (--debug-fault), parsed.
struct DebugFault {
  enum class Phase : uint8_t { kSetup, kMeasure, kWrite, kTrace };
  enum class What : uint8_t { kKill, kStop, kThrow };
  int rank = -1;  ///< -1 = none
  Phase phase = Phase::kSetup;
  What what = What::kThrow;
};

/// What the sweep runs, after validation.
struct RunPlan {
  std::vector<std::string> schedules;  ///< expanded, in the order given
  std::vector<std::string> partitions;
  std::vector<int> microbatches;
  ModelSpec model;
  std::vector<Unit> units;                  ///< expanded with attention.attention
  AttentionChoice attention;                ///< --attention after the rule (attention.hpp)
  std::string backend;                      ///< a registered backend (backend_list())
  std::string transport;                    ///< a registered transport (transport_list())
  std::vector<std::string> collectors;      ///< registered collectors, in --profile order
  int stages = 1;                           ///< P (--stages, default the world size W)
  int data_parallel = 1;                    ///< D = W / P replicas of the pipeline
  RankOrder rank_order = RankOrder::kDpPp;  ///< --rank-order
  int inflight = 1;                         ///< N after defaulting to P
  int64_t memory_budget = 0;                ///< bytes, 0 = none
  int plant_stage = -1;                     ///< --plant: the planted stage (-1 = none)
  double plant_factor = 1;                  ///< --plant: its action-time factor
  std::string plant_label;                  ///< "stage 1 x1.1" (config.plant), "" = none
  bool cuda_graphs = true;                  ///< --cuda-graphs on
  DebugFault fault;                         ///< --debug-fault (tests only)
};

/// Checks every flag against the world size and the registries and expands
/// the lists. Throws UsageError with one line naming the flag for: a
/// world size that is not a multiple of --stages, a --rank-order other than
/// dp-pp or pp-dp, replicas (D > 1) on a device backend, an unknown schedule, partition
/// or backend, a malformed model spec, a non-positive count, a guard outside
/// (0, 1], an unrecognised argument, a world larger than the model has units, a partition named
/// explicitly that cannot cut the model into P stages, an unknown backend,
/// transport or collector (each checked against its registry), --check with
/// a backend whose registry entry computes no real gradients, a --dtype other than fp32 or
/// bf16 (bf16 only with a backend whose entry says bf16), a negative --min-time, a --plant that
/// is not STAGE:FACTOR with 0 <= STAGE < P and FACTOR > 0 (>= 1 unless the backend's registry entry
/// can plant a speed-up), a --cuda-graphs other than on or off, --cuda-graphs given
/// with a backend whose registry entry has no device, a schedule parameter
/// (--chunks, --inflight, --sync-warmup, --batches) that no schedule of the
/// sweep takes, or a micro-batch count that none of them runs on P stages.
/// Example: validate_run_options({.schedules = "1f1b"}, 4).schedules == {"1f1b"}.
RunPlan validate_run_options(const RunOptions& options, int world_size);

/// The numeric flags, each against its range (steps, minimum time, V, N,
/// K, B, the guard, --timeout, --time-scale), alike whether typed or read
/// from a result file by --rerun. Throws UsageError naming the flag.
void check_counts(const RunOptions& options);

/// The partitions --partition names, in order, each once: "all" is every
/// registered partition but manual; a "manual:..." item keeps its ranges
/// (split_list splits "manual:0-9,10-58" at its comma; the ranges are
/// joined again). Throws UsageError naming an unknown partition, or an
/// empty list.
/// Example: expand_partitions("operator,manual:0-9,10-58") ==
///          {"operator", "manual:0-9,10-58"}.
std::vector<std::string> expand_partitions(const std::string& text);

/// The schedule parameters a validated sweep gives each of its
/// combinations (P, D, and V, N, K, B for the schedules that take them).
SweepParams sweep_params(const RunOptions& options, const RunPlan& plan);

/// "results/20261129T073000Z" for the given UTC time (seconds since epoch).
std::string default_out_dir(int64_t unix_seconds);

/// ISO 8601 UTC: "2026-11-29T07:30:00Z".
std::string iso8601_utc(int64_t unix_seconds);

}  // namespace ppb::run
