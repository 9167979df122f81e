// The regression gate: tonight's results against the recent history of
// each combination (matched by configuration and machine; the build may
// differ, that is the point). docs/gate.md is the full account of how it
// decides (the figures, the U test, the noise band and the sweep's noise
// floor, step changes, what is not judged, confirmation by re-runs); the
// contracts below say what each type and function holds and returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ppb/reports/fast_paths.hpp"
#include "ppb/reports/history.hpp"
#include "ppb/reports/load.hpp"

namespace ppb::reports {

/// The share of the host's CPU that other processes may use while a run is
/// timed (metrics.foreign_cpu) before its timings say more about the host
/// than about the schedule: the gate's default (--max-foreign-cpu), and
/// where `plan --validate` warns.
inline constexpr double kBusyHostCpuShare = 0.2;

/// The gate's settings (`pipebench report` flags).
struct GateOptions {
  double threshold = 0.07;              ///< --threshold: fraction (samples/s, memory) or points
  double alpha = 0.01;                  ///< --alpha: significance level of the U test
  int window = 10;                      ///< --history-window: most recent nights compared
  bool include_oversubscribed = false;  ///< --gate-oversubscribed
  /// --max-foreign-cpu: timings taken while other processes used more than
  /// this share of the host's CPU (metrics.foreign_cpu) are not judged.
  double max_foreign_cpu = kBusyHostCpuShare;
  /// --max-speed-drift: timings taken while the machine itself ran faster
  /// or slower than usual by more than this fraction (the backend's speed
  /// probe, metrics.speed_probe_seconds_per_stage, against the median of the
  /// history's) are not judged.
  double max_speed_drift = 0.05;
  /// --no-noise-floor turns off the sweep's launch-to-launch noise floor
  /// (docs/gate.md, "Noise floor").
  bool noise_floor = true;
};

/// How far one combination's nightly median moves between launches of an
/// unchanged build, estimated from the whole sweep's history (one machine,
/// one backend, one kind of figure), and the floor it puts under every
/// combination's noise band.
struct NoiseFloor {
  std::string machine;
  std::string backend;
  std::string figure;         ///< "samples/s", "bubble ratio", "stage compute"
  bool relative = true;       ///< sigma and floor are fractions (else ratio points)
  std::size_t residuals = 0;  ///< night-to-night differences pooled
  std::size_t figures = 0;    ///< tonight's figures of this machine and backend (the family)
  double sigma =
      0;  ///< one launch's noise: 1.4826 x MAD of the differences / sqrt 2 (log when relative)
  double z = 0;  ///< upper normal quantile of alpha x max(1, beyond) / figures
  /// Tonight's figures beyond the noise at false-discovery rate alpha
  /// (Benjamini-Hochberg over the machine and backend's figures).
  std::size_t beyond = 0;
  int nights = 0;    ///< reference nights of a typical combination (the median)
  double floor = 0;  ///< the floor with `nights` reference nights; 0 = none
  /// The differences are tonight's launch against the last reference
  /// night's, over every combination, because the history held too few of
  /// its own (a single reference night): median-centred, so that a change
  /// tonight's build brought to some combinations does not widen it.
  bool from_tonight = false;
};

/// The floor under a combination's band with `nights` reference nights:
/// z x sigma x sqrt(1 + 1 / nights) (tonight's launch against the mean of
/// the reference's), as a fraction (exp(.) - 1) when relative. 0 when
/// sigma or nights is 0.
double noise_floor_for(const NoiseFloor& floor, int nights);

enum class RegressionStatus : uint8_t {
  kPass,         ///< no change: nothing beyond the threshold, and the gate could have seen it
  kRegressed,    ///< worse beyond the threshold, significant, beyond the noise band
  kImproved,     ///< better, by the same three tests
  kUndecidable,  ///< too noisy (or too few steps) to tell at this threshold
  kNew,          ///< not in any night of the history
  kMissing,      ///< in the latest night, not tonight
  kExcluded,     ///< kept out of the gate: an oversubscribed run, or one whose
                 ///< history ran at another time scale (not comparable; not new)
};

/// "no change", "regression", "improvement", "undecidable", "new",
/// "missing", "excluded".
const char* regression_status_name(RegressionStatus status);

/// What a re-run said about one figure (docs/gate.md, "Confirmation by re-runs").
enum class Confirmation : uint8_t {
  kNone,           ///< nothing to confirm: no timing move tonight (or memory)
  kAwaiting,       ///< a timing move of tonight without a re-run: the verdict stands
  kConfirmed,      ///< the re-run gave the same verdict: it stands
  kNotReproduced,  ///< the re-run did not: the figure is undecidable
};

/// Why a figure (or a row) is undecidable.
enum class Undecided : uint8_t {
  kNo,             ///< it is not
  kTooNoisy,       ///< the smallest change the gate could detect is beyond the threshold
  kHostBusy,       ///< not judged: other processes used the host's CPU (tonight or every night)
  kMachineSpeed,   ///< not judged: the machine itself ran at another speed (speed probe)
  kNotReproduced,  ///< a move tonight that its re-run did not show
};

/// "too noisy to tell at the threshold", "the host was busy", "the machine
/// itself ran at another speed", "did not reproduce on a re-run"; "" for kNo.
const char* undecided_name(Undecided why);

/// Why the gate declined to judge a combination's timing figures.
enum class NotJudged : uint8_t {
  kNo,               ///< judged
  kHostBusy,         ///< tonight other processes used more than the limit of the host's CPU
  kMachineSpeed,     ///< tonight the machine ran at another speed than usual (speed probe)
  kEveryNightSpeed,  ///< every earlier night's machine ran at another speed than usual
  kEveryNightBusy,   ///< every earlier night's host was busy with other processes
};

/// A NotJudged reason with the numbers its sentence quotes.
struct NotJudgedWhy {
  NotJudged kind = NotJudged::kNo;
  double limit = 0;  ///< --max-foreign-cpu (busy) or --max-speed-drift (speed), a fraction
  double share = std::numeric_limits<double>::quiet_NaN();  ///< kHostBusy: tonight's foreign CPU
  /// kMachineSpeed: the stage whose probe moved most, its change (> 0:
  /// slower), tonight's probe and the usual one (seconds).
  int stage = -1;
  double drift = std::numeric_limits<double>::quiet_NaN();
  double probe = std::numeric_limits<double>::quiet_NaN();
  double usual = std::numeric_limits<double>::quiet_NaN();
};

/// What the re-run of a combination said about one figure awaiting it.
enum class RerunOutcome : uint8_t {
  kNone,            ///< no re-run judged this figure
  kSameVerdict,     ///< the re-run's verdict (MetricVerdict::rerun) is the same: confirmed
  kOtherVerdict,    ///< the re-run judged it otherwise (MetricVerdict::rerun)
  kNotJudged,       ///< the re-run's timings were not judged (MetricVerdict::rerun says why)
  kNoFigure,        ///< the re-run has no such figure
  kOversubscribed,  ///< the re-run was oversubscribed (kept out of the gate)
  kEnded,           ///< the re-run ended with MetricVerdict::rerun_status (and rerun_error)
};

/// A version of the software stack that differs between two nights of a
/// combination: what ("driver", "CUDA", "NCCL", "cuDNN") and both versions.
struct SoftwareChange {
  std::string what;
  std::string from;
  std::string to;

  friend bool operator==(const SoftwareChange&, const SoftwareChange&) = default;
};

/// The versions of the GPU software stack (environment.driver, cuda, nccl,
/// cudnn) that differ from `before` to `after`, in that order; a version
/// that either side did not record ("", "none") is not a change, nor is a
/// driver recorded as its own version on one side and as only its CUDA
/// version on the other (NVML there one night and not the other).
std::vector<SoftwareChange> software_changes(const ResultEnvironment& before,
                                             const ResultEnvironment& after);

/// A fast path of a device backend whose outcome differs between two
/// nights of a combination (ran on one, fell back on the other): which, and
/// what ran on each night (FastPath::text: "fused", "naive (cannot load
/// libcudnn.so.9: ...)").
struct FastPathChange {
  FastPathKind kind = FastPathKind::kAttention;
  std::string from;
  std::string to;

  friend bool operator==(const FastPathChange&, const FastPathChange&) = default;
};

/// The fast paths (fast_paths.hpp) whose outcome differs from `before` to
/// `after`, in FastPathKind order. Outcomes are compared, not counts (a
/// graph's replays grow with the steps); a fast path that either side did
/// not record (kNotRecorded: a file written before the field) is not a
/// change, nor is anything where either result has no fast paths (another
/// backend, a status other than ok).
std::vector<FastPathChange> fast_path_changes(const Result& before, const Result& after);

/// A family of kernels (device::kernel_family: "gemm", "layernorm",
/// "attention", ...) whose device time on one stage moved beyond the
/// threshold: CUPTI's metrics.collectors.<profiler>.step.kernel_seconds_<family>
/// of the median step, tonight against the median over the reference nights.
struct KernelChange {
  std::string family;
  int stage = 0;
  double reference = 0;  ///< seconds per step
  double current = 0;

  friend bool operator==(const KernelChange&, const KernelChange&) = default;
};

/// The decision on one figure of one combination: enums and numbers only;
/// verdict_text and rerun_text put it into words.
struct MetricVerdict {
  std::string name;      ///< "samples/s", "bubble ratio", "peak memory"
  bool relative = true;  ///< change, band and detectable are fractions (else ratio points)
  RegressionStatus status =
      RegressionStatus::kPass;  ///< kPass, kRegressed, kImproved, kUndecidable
  double reference = 0;         ///< median over the reference nights' samples (memory: their peak)
  double current = 0;           ///< tonight's median (memory: tonight's peak)
  double change = 0;  ///< (current - reference) / reference, or current - reference in points
  double p = std::numeric_limits<double>::quiet_NaN();  ///< U test (NaN for memory)
  double band = 0;          ///< history's noise band, half-width (0 with one reference night)
  double floor = 0;         ///< the sweep's noise floor under the band (NoiseFloor::floor)
  double detectable = 0;    ///< smallest change the gate could have detected (inf: none)
  double threshold = 0;     ///< the threshold it was judged at (GateOptions::threshold)
  std::string arrived;      ///< night a regression/improvement arrived (tonight's name if tonight)
  NotJudgedWhy not_judged;  ///< why a timing figure was not judged (then status is kUndecidable)
  bool timing = true;       ///< a timing figure (confirmable); false for peak memory
  /// A move dated to an earlier night that the gate of the figure's last
  /// reference night (the night before tonight in its series) already gave
  /// the same verdict: seen again since, no re-run needed. That night's gate
  /// is judged again as the nightly job judged it (its first measurements
  /// against its own window of nights, its re-runs confirming), as near as
  /// the files tell: today's options, controls chosen again. A step that
  /// night's gate did not report (it was "no change" or undecidable then, or
  /// its re-run refuted it) awaits tonight's re-run like a move of tonight.
  bool reported_before = false;
  Confirmation confirmation = Confirmation::kNone;
  bool reruns_given = false;  ///< kAwaiting although re-runs were given: none of this combination
  RerunOutcome rerun_outcome = RerunOutcome::kNone;
  std::shared_ptr<const MetricVerdict> rerun;     ///< the re-run's verdict (see RerunOutcome)
  ResultStatus rerun_status = ResultStatus::kOk;  ///< kEnded: how the re-run ended
  std::string rerun_error;                        ///< kEnded: its error, if any
  Undecided undecided = Undecided::kNo;           ///< why, when status is kUndecidable
  /// A figure that moved (kRegressed, kImproved): the software that changed
  /// on the night the move arrived against the night before it (the
  /// combination's previous night in the history); empty when none did.
  std::vector<SoftwareChange> software;
  /// A figure that moved: the fast paths that changed on the same night
  /// against the same night before (fast_path_changes); empty when none did.
  std::vector<FastPathChange> fast_paths;
  /// A per-stage figure ("stage 1 compute"): its stage; -1 otherwise.
  int stage = -1;
  /// A timing figure that moved (not a bubble): the kernel families whose
  /// device time moved the same way beyond the threshold (on its stage for
  /// a per-stage figure), largest move in seconds first; empty without a
  /// device profiler's kernel times on both sides.
  std::vector<KernelChange> kernels;
};

/// The verdict in one line: figures, test and decision, then what its
/// re-run said. Examples: "samples/s 120 -> 108 (-10.0%, p=2e-06, band 1.1%,
/// detectable 7.0%, threshold 7.0%), since tonight"; "peak memory 18.5 MiB
/// -> 20.0 MiB (+8.1%, threshold +7%)"; "bubble ratio not judged: the host
/// was busy: ..."; "...; kernels: layernorm on stage 1 1.2 ms -> 1.62 ms
/// (+35.0%)"; "...; driver 550.54 -> 560.35 on that night" (the software
/// changes); "...; fast path changed: attention fused -> naive (cannot load
/// libcudnn.so.9: ...) on that night" (one clause per fast path change);
/// "...; confirmed by a re-run: ...".
std::string verdict_text(const MetricVerdict& v);

/// What the re-run said about `v`, in words ("" when nothing): the
/// re-run's verdict when it confirmed, else why it did not reproduce.
std::string rerun_text(const MetricVerdict& v);

/// One night of one combination, for the trend charts.
struct TrendPoint {
  std::string night;
  double samples_median = 0, samples_q1 = 0, samples_q3 = 0;  ///< samples/s over the steps
  double bubble_median = 0, bubble_q1 = 0, bubble_q3 = 0;     ///< bubble ratio over the steps
  double memory = 0;                                          ///< peak bytes (max over stages)
};

/// One combination compared.
struct RegressionRow {
  std::string label;  ///< config_label (+ " [planted ...]" when planted)
  std::string work;   ///< ResultEntry::work: the model, micro-batch size and dtype
  std::string machine;
  std::string config_key;
  RegressionStatus status = RegressionStatus::kPass;
  const ResultEntry* current = nullptr;   ///< null when missing
  const ResultEntry* baseline = nullptr;  ///< the latest night's entry; null when new
  double samples_change = 0;              ///< samples/s verdict's change; NaN when not decided
  double memory_change = 0;               ///< peak memory verdict's change
  double bubble_change = 0;               ///< bubble verdict's change, ratio points
  /// samples/s: the smallest change the gate could have detected (fraction;
  /// inf when no change could be; NaN when not decided).
  double detectable = 0;
  std::string arrived;                 ///< night the regression (or improvement) arrived
  std::string planted;                 ///< config.plant of tonight's run ("" = real)
  std::vector<std::string> reasons;    ///< one line per regressed figure
  std::vector<std::string> notes;      ///< improvements, undecidable figures, exclusions
  std::vector<MetricVerdict> metrics;  ///< samples/s, bubble ratio, peak memory
  std::vector<TrendPoint> trend;       ///< window's nights then tonight
  int arrived_index = -1;              ///< index into trend of `arrived`, -1 = none
  const ResultEntry* rerun = nullptr;  ///< the re-run that confirmed or refuted a figure
  /// A row awaiting a re-run: the combination of its sweep that tonight's
  /// gate found unchanged, re-run right after it, whose speed in the re-run
  /// scales the re-run's times (null: none to be had). The speed is its
  /// samples/s in the re-run against both its sweep measurement and its
  /// history, when the two agree on the direction: the one nearer 1.
  const ResultEntry* control = nullptr;
  const ResultEntry* control_rerun = nullptr;  ///< the control's re-run, when given
  /// The control's samples/s over the nights its gate compared it with
  /// (NaN: not known).
  double control_history = std::numeric_limits<double>::quiet_NaN();
  /// How many figures are in `confirmation` state (kAwaiting, kConfirmed, ...).
  int count(Confirmation confirmation) const;
  /// Why an undecidable row is: the weightiest cause among its undecidable
  /// figures (a re-run that did not reproduce; the machine's speed or a
  /// busy host, which leave the timings unjudged; the noise); kNo when the
  /// row is not undecidable.
  Undecided undecided() const;
};

struct RegressionSummary {
  GateOptions options;
  double threshold = 0.07;          ///< options.threshold
  std::string baseline_source;      ///< the --baseline paths, comma-separated
  std::string tonight = "tonight";  ///< name of the current run
  std::vector<std::string> nights;  ///< the window's nights, oldest first
  std::vector<RegressionRow> rows;  ///< current order, then missing ones
  bool confirming = false;          ///< re-runs were given (--confirm)
  std::vector<NoiseFloor> floors;   ///< per machine, backend and figure; empty when off
  int regressions() const;
  int count(RegressionStatus status) const;
  /// Rows with at least one figure in `confirmation` state.
  int rows_with(Confirmation confirmation) const;
  /// The undecidable rows by cause, most frequent first: "56 the machine
  /// itself ran at another speed, 28 too noisy to tell at the threshold";
  /// "" when none is undecidable.
  std::string undecidable_causes() const;
  /// The result files (ResultEntry::source) of tonight's combinations with
  /// a figure awaiting a re-run, in row order, each followed by its
  /// control's unless listed already: `report --rerun-list`.
  std::vector<std::string> rerun_list() const;
};

/// One line on a noise floor: "cpu samples/s: one launch of an unchanged
/// build lands sigma 3.3% off (252 night-to-night differences); floor 15.0%
/// with 4 reference nights (z 4.01: alpha over 336 figures)" (with "z 2.87:
/// alpha x 41 / 336 figures, 41 beyond the noise (Benjamini-Hochberg)" when
/// more than one is), or why there is none.
std::string noise_floor_text(const NoiseFloor& floor);

/// What confirmation made of a row's timing moves: "confirmed", "did not
/// reproduce", "awaiting a re-run" (comma-separated when several), "" for
/// none.
std::string confirmation_summary(const RegressionRow& row);

/// One night's samples of a figure kept outside the result files (the GPU
/// health probe's, health_gate.hpp).
struct NightFigure {
  std::string night;
  std::vector<double> values;
};

/// A relative figure decided by the gate's own statistics, as samples/s is
/// (the U test, the nights' noise band, a step change dated to its night;
/// no sweep noise floor): `nights` oldest first, tonight last; `worse` -1
/// when a drop is worse, +1 when a rise is. REQUIRES: two nights or more,
/// each with a sample.
MetricVerdict decide_figure(const std::string& name, int worse,
                            const std::vector<NightFigure>& nights, const GateOptions& options);

/// The gate. `history` is oldest first (load_nights); only its last
/// options.window nights are compared with. `reruns` (--confirm; null =
/// none given) confirm or refute tonight's timing moves: a re-run matches a
/// row by machine, build, backend and configuration. A night of `history`
/// that holds re-runs of its own (LoadedResults::replaced) is read with them
/// in place of its first measurements. Where a move is dated to an earlier
/// night, the night before tonight in its figure's series is judged again
/// as its own gate judged it (MetricVerdict::reported_before), against the
/// window of nights before it: nights older than tonight's window are read
/// for that alone (give twice the window to judge each night of it against
/// as many nights as its own gate had).
/// REQUIRES: threshold >= 0,
/// alpha in (0, 1), window >= 1. The rows point into `current`, `history`
/// and `reruns`, which must outlive the summary.
RegressionSummary run_gate(const std::vector<ResultEntry>& current, const std::string& tonight,
                           const std::vector<Night>& history, const GateOptions& options,
                           const std::vector<ResultEntry>* reruns = nullptr);

}  // namespace ppb::reports
