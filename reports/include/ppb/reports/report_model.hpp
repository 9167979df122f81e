// One model of the report, built once from the loaded results; every writer
// (HTML, Markdown, JUnit, CSV, Google Benchmark JSON) reads it and computes
// nothing of its own beyond layout (STYLE.md rule 13).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ppb/reports/claims.hpp"
#include "ppb/reports/health_gate.hpp"
#include "ppb/reports/history.hpp"
#include "ppb/reports/load.hpp"
#include "ppb/reports/reference.hpp"
#include "ppb/reports/regression.hpp"

namespace ppb::reports {

/// The best combination that fits one memory budget.
struct BudgetChoice {
  int64_t budget = 0;                     ///< bytes; 0 = no budget (fastest overall)
  const ResultEntry* best = nullptr;      ///< null when nothing fits
  const ResultEntry* smallest = nullptr;  ///< lowest peak memory (for "nothing fits")
  int candidates = 0;                     ///< ok results that fit
};

/// Measured and predicted timeline of one result, for the Gantt pictures.
struct GanttPair {
  const ResultEntry* entry = nullptr;
  Timeline predicted;            ///< empty when no prediction is available
  std::string predicted_source;  ///< "theory.timeline in the result", "simulator (measured action
                                 ///< times)", or why none
};

/// Results of one machine + build + backend + work (model, micro-batch
/// size, dtype: work_fields), never mixed with another group's.
struct GroupView {
  std::string key;  ///< ResultEntry::group
  std::string machine;
  std::string build;
  std::string backend;                      ///< "cpu", "timed", ...: one group per backend
  std::string work;                         ///< work_label: one model, mbs and dtype per group
  ResultEnvironment environment;            ///< of the first result of the group
  std::vector<const ResultEntry*> entries;  ///< sorted: schedule, partition, P, M, ...
  std::vector<BudgetChoice> choices;
  std::vector<std::string> rule_findings;  ///< S7 / P8 / disagreement, one sentence each
  std::vector<ClaimRow> claims;            ///< the documents' claims on this group's results
  /// ok results whose peak memory was measured with a device profiler
  /// attached and have no run of the same combination without one.
  int unclean_memory = 0;
  std::vector<std::string> verdict_points;  ///< the verdict, one sentence per point (best per
                                            ///< budget, rules, the spread of partitions of one
                                            ///< cut, claims, regressions)
  std::string verdict;                      ///< the same points as one paragraph
  /// The setup (partition, P, M) whose schedules are drawn and compared
  /// side by side: the one run by the most schedules.
  std::string showcase_label;
  std::vector<const ResultEntry*> showcase;  ///< one entry per schedule of that setup
  std::vector<GanttPair> gantt;              ///< for showcase entries with a timeline
};

/// A result's failed --check in words ("--check failed: max relative error
/// 0.030"); "" when its check passed or it ran none. The verdict's FAILED
/// point and JUnit's check failure say it; such a result is no choice.
std::string check_failure(const Result& result);

/// The group as headings name it: "<machine>, <backend> backend, <work>"
/// ("vm | Intel Xeon | NVIDIA H200, cuda backend, gpt-tiny, mbs 2, fp32").
std::string group_title(const GroupView& group);

/// The group's results with status ok that carry device figures
/// (metrics.device), in the group's order.
std::vector<const ResultEntry*> device_entries(const GroupView& group);

/// The group's results whose fast paths are recorded (fast_paths.hpp: a
/// device backend's results with status ok), in the group's order.
std::vector<const ResultEntry*> fast_path_entries(const GroupView& group);

/// The group's results with status ok that carry data-parallel all-reduce
/// figures (metrics.allreduce), in the group's order (sorted by P, then D).
std::vector<const ResultEntry*> allreduce_entries(const GroupView& group);

/// The result whose peak memory stands for `entry`'s: `entry` itself when
/// no device profiler was attached to its memory figures, else a result of
/// the group with the same combination measured without one; null when
/// none was (a profiler such as CUPTI holds device memory of its own, so a
/// peak measured under it is not the run's).
const ResultEntry* clean_memory(const GroupView& group, const ResultEntry& entry);

/// The environment of a group's results as its table row gives it, over
/// every result (one file's environment is not the group's: its sweeps may
/// have run on 2 and 4 ranks).
struct GroupEnvironment {
  std::string ranks;  ///< "2" or "2, 4"
  std::string gpus;   ///< "NVIDIA H200 (2 or 4 ranks per GPU)"; "-" without GPUs
  std::string mpi;    ///< each MPI library, ", "-joined
  std::string cuda;   ///< each CUDA runtime, "-" for none
  std::string driver;
  std::string hostnames;
  std::string dates;  ///< "first .. last", or the one date
};
GroupEnvironment group_environment(const GroupView& group);

/// "8" for one pipeline, "8 x 4" for P = 8 stages x D = 4 replicas.
std::string stages_text(const ResultConfig& config);

struct ReportModel {
  ReportModel() = default;
  ReportModel(const ReportModel&) = delete;  // groups/claims point into `loaded`
  ReportModel& operator=(const ReportModel&) = delete;
  ReportModel(ReportModel&&) = default;
  ReportModel& operator=(ReportModel&&) = default;

  std::string generated_at;         ///< ISO 8601 UTC
  std::vector<std::string> inputs;  ///< the folders given
  LoadedResults loaded;
  std::vector<GroupView> groups;
  Reference reference;
  bool setup_matches = false;
  std::vector<Night> history;           ///< the --baseline nights, oldest first
  std::optional<LoadedResults> reruns;  ///< --confirm: re-runs of tonight's combinations
  std::optional<RegressionSummary> regression;
  /// A gate asked for (--baseline) with no earlier night to hold tonight
  /// against (the first night): why there is no gate, said in its place.
  std::string no_earlier_night;
  /// Nights of the --baselines that began after tonight did (a re-gate of
  /// an old night), left out of the gate: what was
  /// left out, said beside it; "" when none was.
  std::string later_nights;
  /// The GPU health gate, per machine with a health file tonight or a GPU
  /// sweep whose runs NVML sampled (with a gate only: --baseline).
  std::vector<HealthSummary> health;
  int64_t memory_budget = 0;  ///< --memory-budget (0 = none)

  /// Number of regressions (0 without a baseline): the sweeps' and the
  /// GPU health probe's figures.
  int regressions() const {
    int n = regression ? regression->regressions() : 0;
    for (const HealthSummary& h : health) n += h.probe_regressions;
    return n;
  }

  /// Whether the results hold more than one work (work_fields): then every
  /// row that lists results of several groups names its work.
  bool several_works() const;

  /// `label` of a row of a table across groups, with " [work]" when the
  /// results hold more than one work.
  std::string row_label(const std::string& label, const std::string& work) const;
};

struct ModelOptions {
  std::vector<std::string> inputs;
  bool setup_matches = false;
  GateOptions gate;
  std::string tonight = "tonight";  ///< the current run's name in the gate's trend
  int64_t memory_budget = 0;
};

/// Builds the model. `history` may be empty (no --baseline): then there is
/// no gate. `reruns` (--confirm) confirm or refute the gate's timing moves
/// of tonight (regression.hpp).
ReportModel build_report_model(LoadedResults loaded, Reference reference,
                               std::vector<Night> history, const ModelOptions& options,
                               std::optional<LoadedResults> reruns = std::nullopt);

/// The same with at most one earlier night, named "baseline".
ReportModel build_report_model(LoadedResults loaded, Reference reference,
                               std::optional<LoadedResults> baseline, const ModelOptions& options);

/// Predicts a timeline for a result from its theory block: theory.timeline
/// when the result has one, else a simulation of the schedule with the
/// measured mean action times (theory.action_seconds), else empty with the
/// reason in *source.
Timeline predicted_timeline(const ResultEntry& entry, std::string* source);

}  // namespace ppb::reports
