// `pipebench report`: load, build the model, write the requested formats.
// bench/cmd_report.cpp is a thin adapter over run_report.
//
// Example:
//   ppb::reports::ReportOptions o;
//   o.inputs = {"results/"};
//   o.html = "report.html";
//   int code = ppb::reports::run_report(o, std::cout);  // 0, or 1 on regression
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "ppb/reports/regression.hpp"

namespace ppb::reports {

struct ReportOptions {
  std::vector<std::string> inputs;  ///< result folders or files (DIR...)
  std::string reference;            ///< --reference FILE ("" = built-in documents.json)
  bool reference_setup = false;     ///< --reference-setup: check absolute figures
  /// --baseline PATH (repeatable): earlier nights, or folders of nights
  /// (history.hpp); empty = no gate.
  std::vector<std::string> baselines;
  std::string html, markdown, junit, csv, gbench;  ///< output files ("" = not written)
  double threshold = 0.07;                         ///< --threshold, a fraction
  double alpha = 0.01;                             ///< --alpha, the U test's level
  int window = 10;                                 ///< --history-window, nights
  bool gate_oversubscribed = false;                ///< --gate-oversubscribed
  double max_foreign_cpu = kBusyHostCpuShare;      ///< --max-foreign-cpu, a fraction
  double max_speed_drift = 0.05;                   ///< --max-speed-drift, a fraction
  bool no_noise_floor = false;                     ///< --no-noise-floor
  int64_t memory_budget = 0;                       ///< --memory-budget bytes (0 = none)
  bool skip_bad = false;                           ///< --skip-bad
  /// --confirm DIR (repeatable): re-runs of tonight's combinations
  /// (`pipebench run --rerun`) that confirm or refute their timing moves
  /// (regression.hpp). Files under a --confirm folder are never tonight's
  /// results, even when it lies inside one of `inputs`.
  std::vector<std::string> confirm;
  /// --rerun-list FILE: written with the result files of tonight's
  /// combinations whose timing moves await a re-run, one path a line
  /// (empty when none; requires --baseline).
  std::string rerun_list;
};

/// Runs the report. Writes each requested file atomically; prints a short
/// summary (verdict, counts, files written) to `out`, or the whole Markdown
/// report when no output file was requested.
/// Returns 1 when the gate found a regression, else 0.
/// Throws UsageError (exit 2) for bad input: no inputs, a missing folder,
/// a bad result file (without skip_bad), nothing to report, a bad reference
/// file, a bad baseline, threshold outside [0, 1), alpha outside (0, 1), a
/// window < 1, max_foreign_cpu outside [0, 1], max_speed_drift outside (0, 1), --confirm or
/// --rerun-list without --baseline, a --confirm folder without results.
int run_report(const ReportOptions& options, std::ostream& out);

}  // namespace ppb::reports
