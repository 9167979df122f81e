// One writer per format (STYLE.md rule 13); each reads the ReportModel only.
// Every writer returns the document as text; report.cpp writes the files
// atomically.
#pragma once

#include <string>
#include <vector>

#include "ppb/reports/report_model.hpp"

namespace ppb::reports {

/// One self-contained HTML page: inline CSS and SVG, no scripts, prints well.
/// Sections: verdict, throughput (table + bar chart), memory (stacked per
/// stage, against the formulas), bubbles (measured vs theory, both
/// normalisations), pipeline pictures (measured median step beside the
/// prediction), claims, regression, environment, files.
std::string write_html(const ReportModel& model);

/// A Markdown summary short enough for a CI log: verdict, throughput table,
/// claims table, regressions, environment.
std::string write_markdown(const ReportModel& model);

/// JUnit XML: <testsuites> with one <testsuite> per machine group and one
/// <testcase> per combination (name = label, classname =
/// "pipebench.<schedule>", time = median step seconds); a regression is a
/// <failure type="regression">, a run that ended in "error" an <error>, a
/// new/missing/oom/invalid combination passes with a <system-out> note
/// (missing ones are <skipped>).
std::string write_junit(const ReportModel& model);

/// One row per result (header first), RFC 4180 quoting.
std::string write_csv(const ReportModel& model);

/// The CSV columns, in order.
const std::vector<std::string>& csv_columns();

/// Parses write_csv's output back: one map column -> text per row.
/// Throws UsageError naming `source` and the line on malformed input.
std::vector<std::vector<std::string>> parse_csv(const std::string& text, const std::string& source);

/// Google Benchmark JSON ("context" + "benchmarks"), readable by
/// tools/compare.py: per result one "iteration" entry per timed step
/// (repetitions = steps; real_time/cpu_time in ms, items_per_second =
/// samples/s of that step) and a "median" aggregate.
std::string write_gbench_json(const ReportModel& model);

}  // namespace ppb::reports
