// Result fixtures made with the tool itself: the schedule generator and the
// simulator produce the timeline, bubbles, in-flight counts and activation
// peaks, so every figure in a fixture is consistent with every other (as a
// real run's are), and written with write_result_file like `pipebench run`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ppb/pipeline/result.hpp"
#include "ppb/reports/report.hpp"
#include "ppb/reports/report_model.hpp"

namespace ppb::reports::testing {

struct FixtureSpec {
  std::string schedule = "1f1b";
  std::string partition = "balanced";
  int stages = 4;
  int microbatches = 8;
  int inflight = 0;  ///< async-1f1b/adaptive N (0 = P)
  int chunks = 1;
  int micro_batch_size = 2;
  double fwd = 1e-3;      ///< seconds per F on a stage
  double bwd = 2e-3;      ///< seconds per full B on a stage (I and W half each)
  double slowdown = 1.0;  ///< measured step = simulated step x slowdown
  /// The whole machine slower: the step and every stage's busy time x this
  /// (the bubble ratio stays).
  double machine = 1.0;
  /// Timed steps. 3: the samples {1.02, 1, 0.99} x step. Otherwise `steps`
  /// samples spread evenly over step x (1 +/- noise), median = step, and as
  /// many bubble-ratio samples spread over measured +/- bubble_noise.
  int steps = 3;
  double noise = 0.01;
  double bubble_noise = 0.002;
  /// With steps != 3, each stage's busy seconds per step (simulated busy,
  /// +/- noise) are recorded too; stage `slow_stage` (if >= 0) busy x stage_factor.
  int slow_stage = -1;
  double stage_factor = 1.0;
  double skew = 0;  ///< stage 0's actions take (1 + skew) x as long (an unbalanced partition)
  int generated_inflight =
      0;  ///< in-flight limit the schedule ran with (adaptive's guard), 0 = inflight
  int64_t activation_bytes = int64_t{1} << 20;  ///< one micro-batch on one stage
  int64_t extra_memory = 0;                     ///< added to every stage's workspace
  int64_t memory_budget = 0;
  std::string host = "node1";
  std::string git = "abc1234";
  std::string date = "2026-11-29T07:00:00Z";
  std::string plant;      ///< config.plant
  double time_scale = 0;  ///< config.time_scale (0: not recorded)
  /// config.vocab_padding of gpt-tiny (vocab 512) padded to this, which is
  /// also the divisor (0: not recorded, unpadded). REQUIRES: 0 or >= 512.
  int padded_vocab = 0;
  bool oversubscribed = false;  ///< environment.oversubscribed (with cores = 2)
  int ranks_per_gpu = 0;        ///< environment.ranks_per_gpu (0: not recorded; gpus > 0 sets it)
  double foreign_cpu = 0;       ///< metrics.foreign_cpu (< 0: absent)
  /// metrics.speed_probe_seconds_per_stage: each stage's probe after each
  /// timed step, `probe` seconds +/- 0.5% (0: absent); stage `probe_stage`
  /// (if >= 0) x probe_factor (the machine ran slower there).
  double probe = 0;
  int probe_stage = -1;
  double probe_factor = 1.0;
  /// A GPU run: `gpus` NVIDIA H200s (0: none) shared by the stages
  /// (environment.ranks_per_gpu = stages / gpus, rounded up), with this
  /// driver and NCCL.
  int gpus = 0;
  std::string driver = "580.95.05";
  std::string nccl = "2.28.3";
  /// metrics.device (with gpus > 0): the device bubble of every timed step,
  /// device_bubble +/- bubble_noise (< 0: no device figures), and each
  /// stage's device peak, bytes (0: not recorded).
  double device_bubble = -1;
  int64_t device_memory = 0;
  /// With device_bubble >= 0: the cupti collector's kernel times of the
  /// median step, per stage: layernorm `layernorm_seconds` (x stage_factor
  /// on slow_stage), gemm 4 x as long on every stage (0: none recorded).
  double layernorm_seconds = 0;
  /// config.backend: "timed", or "cuda" (a device backend: its result has
  /// fast paths, fast_paths.hpp) with the attention that ran and why
  /// (config.attention and attention_reason, "": not recorded) and its
  /// CUDA graphs and GEMM epilogues (nullopt: not recorded).
  std::string backend = "timed";
  std::string attention;
  std::string attention_reason;
  std::optional<CudaGraphFigures> cuda_graphs;
  std::optional<GemmEpilogueFigures> gemm_epilogues;
};

/// A consistent "ok" result for the spec.
Result make_fixture(const FixtureSpec& spec);

/// Writes make_fixture(spec) into dir (created) as
/// "<schedule>_<partition>_P<P>_M<M>[_N..].json"; returns the path.
std::string write_fixture(const std::string& dir, const FixtureSpec& spec);

/// A fresh empty directory under the system temp dir, unique per test and
/// process; removed at exit when every test passed.
std::string fresh_dir(const std::string& name);

constexpr int64_t kMiB = int64_t{1} << 20;

/// Writes every spec into dir (write_fixture); returns dir.
std::string write_sweep(const std::string& dir, const std::vector<FixtureSpec>& specs);

/// The two-combination sweep of the gate's tests: 1f1b and gpipe, ten timed
/// steps each (+/-1% apart: enough for the U test at alpha 0.01), their steps
/// x slow_1f1b and x slow_gpipe.
std::vector<FixtureSpec> two(double slow_1f1b, double slow_gpipe);

/// One night of `specs` in <root>/<name>, dated 2026-11-(10 + day) 02:00 UTC;
/// returns the night's folder.
std::string night(const std::string& root, const std::string& name, int day,
                  std::vector<FixtureSpec> specs);

/// The whole file at path ("" when it cannot be read).
std::string read(const std::string& path);

/// The message of the UsageError run_report(o) throws, "(no error)" when it
/// throws none.
std::string usage_error(const ReportOptions& o);

/// The fixture sweep of the report's tests: every schedule once, two
/// micro-batch counts, the layer and operator cuts, adaptive beside
/// async-1f1b in one budget.
/// P=4, M=8, F=1 ms, B=2 ms per stage, one micro-batch = 1 MiB of activations
/// per stage; every stage also holds 12.75 MiB of parameters, gradients,
/// optimizer state and buffers.
std::vector<FixtureSpec> sweep();

/// The report model of the results in dir with the built-in reference
/// (`setup`: the setup matches the documents').
ReportModel model_of(const std::string& dir, bool setup = false);

}  // namespace ppb::reports::testing
