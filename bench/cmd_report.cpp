// `pipebench report DIR... [--reference FILE] [--reference-setup] [--baseline PATH]...
//   [--html F] [--md F] [--junit F] [--csv F] [--gbench F] [--threshold 0.07]
//   [--alpha 0.01] [--history-window 10] [--max-foreign-cpu 0.2] [--gate-oversubscribed]
//   [--memory-budget BYTES] [--skip-bad] [--rerun-list FILE] [--confirm DIR]...`
// A thin adapter: the work is ppb::reports::run_report (reports/), which reads
// JSON only. Exit 1 on a regression against --baseline, 2 on bad input.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <string>

#include "cli.hpp"
#include "ppb/reports/report.hpp"

namespace ppb::cli {

void register_report(CLI::App& app) {
  struct Flags {
    reports::ReportOptions options;
    std::string memory_budget;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("report",
                                     "Read result folders: verdict, throughput, memory, bubbles, "
                                     "pipeline pictures, the documents' claims, regression gate");
  reports::ReportOptions& o = flags->options;
  cmd->add_option("DIR", o.inputs, "Result folders (or result files)")->required();
  cmd->add_option("--reference", o.reference,
                  "Reference file of claims (default: the built-in documents.json)")
      ->check(non_empty("a file"));
  cmd->add_flag("--reference-setup", o.reference_setup,
                "The setup matches the documents': check their absolute figures too");
  cmd->add_option("--baseline", o.baselines,
                  "Earlier runs (repeatable): a result folder per night, or a folder of nights; "
                  "regressions exit with code 1");
  cmd->add_option("--html", o.html, "Write the HTML report (one self-contained file)")
      ->check(non_empty("a file"));
  cmd->add_option("--md", o.markdown, "Write the Markdown summary")->check(non_empty("a file"));
  cmd->add_option("--junit", o.junit, "Write JUnit XML (one test case per combination)")
      ->check(non_empty("a file"));
  cmd->add_option("--csv", o.csv, "Write one CSV row per result")->check(non_empty("a file"));
  cmd->add_option("--gbench", o.gbench, "Write Google Benchmark JSON (for compare.py)")
      ->check(non_empty("a file"));
  cmd->add_option("--threshold", o.threshold, "Regression threshold as a fraction (default 0.07)");
  cmd->add_option("--alpha", o.alpha,
                  "Significance level of the gate's Mann-Whitney U test (default 0.01)");
  cmd->add_option("--history-window", o.window,
                  "Most recent earlier nights the gate compares with (default 10)");
  cmd->add_option("--max-foreign-cpu", o.max_foreign_cpu,
                  "Timings taken while other processes used more than this share of the host's "
                  "CPU are not judged (default 0.2)");
  cmd->add_option("--max-speed-drift", o.max_speed_drift,
                  "Timings taken while the machine itself ran faster or slower than on the "
                  "earlier nights by more than this fraction (the backend's speed probe) are not "
                  "judged (default 0.05)");
  cmd->add_flag("--no-noise-floor", o.no_noise_floor,
                "Judge each combination by its own nights' spread only, without the floor the "
                "whole sweep's launch-to-launch noise puts under it");
  cmd->add_flag("--gate-oversubscribed", o.gate_oversubscribed,
                "Gate results of oversubscribed runs too (left out by default)");
  cmd->add_option("--memory-budget", flags->memory_budget,
                  "Memory budget per stage for the verdict (e.g. 16GiB)");
  cmd->add_flag("--skip-bad", o.skip_bad,
                "List unreadable result files in the report instead of failing");
  cmd->add_option("--rerun-list", o.rerun_list,
                  "Write the result files of tonight's combinations whose timing regressed or "
                  "improved tonight (to confirm with pipebench run --rerun), one per line");
  cmd->add_option("--confirm", o.confirm,
                  "Re-runs of tonight's combinations (repeatable): a timing change tonight stands "
                  "only when its re-run gives the same verdict, else it is undecidable");
  cmd->callback([flags]() {
    if (!flags->memory_budget.empty())
      flags->options.memory_budget = parse_bytes(flags->memory_budget, "--memory-budget");
    const int code = reports::run_report(flags->options, std::cout);
    if (code != 0) throw ExitCode{code};
  });
}

}  // namespace ppb::cli
