// Markdown: the verdict first, then the tables a CI log reader needs.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "ppb/pipeline/schedule.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/reports/fast_paths.hpp"
#include "ppb/reports/format.hpp"
#include "ppb/reports/report_model.hpp"
#include "ppb/reports/stats.hpp"
#include "ppb/reports/writers.hpp"

namespace ppb::reports {

namespace {

// Text from the results (names, errors, folders) in a table cell or a
// line: one line (a newline is a space), its control bytes shown as the
// terminal shows them (printable), and nothing Markdown would read as
// syntax or a renderer as HTML: `|` does not split the row, a backslash
// stays one, `<` starts no tag.
std::string cell(const std::string& s) {
  std::string line = s;
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::string out;
  for (char c : printable(line)) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '<') {
      out += "\\<";  // CommonMark's escape: no tag starts here
    } else {
      out += c;
    }
  }
  return out;
}

std::string peak_text(const ResultEntry& e) {
  const auto v = metric_value(e, "peak_memory");
  if (!v) return "n/a";
  const std::string& profiler = e.result.metrics->peak_memory_bytes.device_profiler;
  return format_bytes(*v) + (profiler.empty() ? "" : " (" + cell(profiler) + " attached)");
}

// metrics.device beside the host bubble, for the results that carry it.
void device_section(std::ostringstream& md, const GroupView& g) {
  const std::vector<const ResultEntry*> rows = device_entries(g);
  if (rows.empty()) return;
  md << "### Device activity (" << cell(rows.front()->result.metrics->device->profiler)
     << "): " << cell(g.work) << "\n\n"
     << "Device bubble = (step time - time compute kernels ran) / step time, per stage, mean "
        "over stages; NCCL kernels and message copies are communication. Times are means over "
        "stages, in ms.\n\n"
     << "| combination | host bubble | device bubble | compute | communication | overlap | "
        "per-stage device bubble |\n|---|---|---|---|---|---|---|\n";
  for (const ResultEntry* e : rows) {
    const ResultMetrics& m = *e->result.metrics;
    const DeviceFigures& d = *m.device;
    std::string per;
    for (double x : d.bubble_ratio_per_stage) per += (per.empty() ? "" : " ") + format_fixed(x, 2);
    md << "| " << cell(e->label) << " | " << format_fixed(m.bubble_ratio.measured, 3) << " | "
       << format_fixed(d.bubble_ratio, 3) << " | "
       << format_fixed(1e3 * mean_finite(d.compute_seconds_per_stage), 3) << " | "
       << format_fixed(1e3 * mean_finite(d.communication_seconds_per_stage), 3) << " | "
       << format_fixed(1e3 * mean_finite(d.overlap_seconds_per_stage), 3) << " | " << per << " |\n";
  }
  md << "\n";
}

// Whether a device backend's work took its fast paths, and why not where
// it fell back (fast_paths.hpp).
void fast_paths_section(std::ostringstream& md, const GroupView& g) {
  const std::vector<const ResultEntry*> rows = fast_path_entries(g);
  if (rows.empty()) return;
  md << "### Fast paths: " << cell(g.work) << "\n\n"
     << "the fused attention (cuDNN's in bf16, pipebench's flash kernels in fp32); CUDA graphs "
        "(units of work of every step and rank: captured, "
        "replayed, rebuilt, eager); cuBLASLt GEMM epilogues (GEMMs with their bias, GeLU or bias "
        "gradient fused, and those cuBLASLt refused). **fell back** marks work that ran the slow "
        "way, with why.\n\n"
     << "| combination | attention | CUDA graphs | GEMM epilogues |\n|---|---|---|---|\n";
  for (const ResultEntry* e : rows) {
    md << "| " << cell(e->label);
    for (const FastPath& p : fast_paths(e->result)) {
      md << " | " << (p.outcome == FastPathOutcome::kFellBack ? "**fell back:** " : "")
         << cell(p.text);
    }
    md << " |\n";
  }
  md << "\n";
}

// metrics.allreduce: the gradient all-reduce of data-parallel runs, beside
// the ring model the simulator used.
void allreduce_section(std::ostringstream& md, const GroupView& g) {
  const std::vector<const ResultEntry*> rows = allreduce_entries(g);
  if (rows.empty()) return;
  md << "### Data parallelism, the gradient all-reduce: " << cell(g.work) << "\n\n"
     << "Per stage, means over stages, in ms: all-reduce time (posted to complete) measured and "
        "as the simulator's ring model 2(D-1) x latency + 2(D-1)/D x bytes / bandwidth predicts "
        "it; its overlap with the stage's compute; exposed = step time - pipeline time. Bubble "
        "ratio with the all-reduce (over the step) and without it (over the pipeline time), "
        "measured (theory).\n\n"
     << "| combination | P x D | all-reduce (theory) | overlap | exposed | bytes/stage | "
        "bubble with (theory) | bubble without (theory) |\n|---|---|---|---|---|---|---|---|\n";
  for (const ResultEntry* e : rows) {
    const ResultMetrics& m = *e->result.metrics;
    const AllReduceFigures& a = *m.allreduce;
    double bytes = 0;
    for (int64_t b : a.bytes_per_stage) bytes += static_cast<double>(b);
    if (!a.bytes_per_stage.empty()) bytes /= static_cast<double>(a.bytes_per_stage.size());
    md << "| " << cell(e->label) << " | " << stages_text(e->result.config) << " | "
       << format_fixed(1e3 * a.seconds, 3) << " ("
       << format_fixed(1e3 * mean_finite(a.theoretical_seconds_per_stage), 3) << ") | "
       << format_fixed(1e3 * mean_finite(a.overlap_seconds_per_stage), 3) << " | "
       << format_fixed(1e3 * a.exposed_seconds, 3) << " | " << format_bytes(bytes) << " | "
       << format_fixed(m.bubble_ratio.measured, 3) << " ("
       << format_fixed(m.bubble_ratio.theoretical, 3) << ") | "
       << format_fixed(a.bubble_ratio_pipeline.measured, 3) << " ("
       << format_fixed(a.bubble_ratio_pipeline.theoretical, 3) << ") |\n";
  }
  md << "\n";
}

std::string check_text(const ResultEntry& e) {
  if (!e.result.metrics || !e.result.metrics->check) return "-";
  const CheckFigures& c = *e.result.metrics->check;
  const std::string steps =
      c.steps.value_or(1) > 1 ? ", " + std::to_string(*c.steps) + " steps" : "";
  // As run's progress line: the gradient error, the optimizer step's, the steps.
  const std::string update =
      c.update_rel_error ? ", update " + format_number(*c.update_rel_error) : "";
  return std::string(c.passed ? "ok" : "FAIL") + " (" + format_number(c.max_rel_error) + update +
         steps + ")";
}

std::string pct(double x) {
  if (std::isnan(x)) return "-";
  if (std::isinf(x)) return "none";
  return format_percent(x, 1);
}

void gate_list(std::ostringstream& md, const ReportModel& m, RegressionStatus status,
               const char* heading) {
  const RegressionSummary& r = *m.regression;
  if (r.count(status) == 0) return;
  md << "### " << heading << "\n\n";
  for (const RegressionRow& row : r.rows) {
    if (row.status != status) continue;
    md << "- **" << cell(m.row_label(row.label, row.work)) << "** (" << cell(row.machine) << ")"
       << (row.arrived.empty() ? "" : ", arrived " + cell(row.arrived)) << ": ";
    std::string why;
    for (const std::string& s : row.reasons) why += (why.empty() ? "" : "; ") + s;
    for (const std::string& s : row.notes) why += (why.empty() ? "" : "; ") + s;
    md << cell(why) << "\n";
  }
  md << "\n";
}

// The GPU health probe's verdict per machine, its throttled GPUs and each
// figure (health_gate.hpp).
void health_section(std::ostringstream& md, const ReportModel& m) {
  for (const HealthSummary& h : m.health) {
    md << "**" << cell(health_text(h)) << "**\n\n";
    for (const GpuTrouble& t : h.trouble) md << "- " << cell(trouble_text(t)) << "\n";
    for (const std::string& n : h.notes) md << "- " << cell(n) << "\n";
    for (const HealthVerdict& v : h.figures) {
      md << "- " << cell(v.gpu) << ": " << regression_status_name(v.what.status) << ": "
         << cell(verdict_text(v.what)) << "\n";
    }
    md << "\n";
  }
}

// The gate: counts, each outcome listed apart, then every combination with
// its figures and the smallest change the gate could have detected.
void gate_section(std::ostringstream& md, const ReportModel& m) {
  const RegressionSummary& r = *m.regression;
  md << "## Regression gate\n\n";
  md << "Tonight (" << cell(r.tonight) << ") against " << r.nights.size() << " earlier night(s)";
  if (!r.nights.empty())
    md << " (" << cell(r.nights.front()) << " .. " << cell(r.nights.back()) << ")";
  md << ". A change counts when it is beyond the threshold (" << format_trimmed(r.threshold * 100)
     << "% for samples/s and peak memory, " << format_fixed(r.threshold, 2)
     << " bubble-ratio points), significant (Mann-Whitney U over the steps, p < "
     << format_trimmed(r.options.alpha)
     << ") and beyond the nights' noise band (never narrower than the sweep's noise floor); "
     << "memory is "
     << "compared exactly. **" << r.regressions() << " regression(s), "
     << r.count(RegressionStatus::kImproved) << " improvement(s), "
     << r.count(RegressionStatus::kPass) << " no change, "
     << r.count(RegressionStatus::kUndecidable) << " undecidable**";
  md << " (" << r.count(RegressionStatus::kNew) << " new, " << r.count(RegressionStatus::kMissing)
     << " missing, " << r.count(RegressionStatus::kExcluded) << " excluded).";
  if (r.count(RegressionStatus::kUndecidable) > 0)
    md << " Undecidable: " << cell(r.undecidable_causes()) << ".";
  md << "\n\n";
  if (!r.floors.empty()) {
    md << "Noise floors (how far a launch of an unchanged build lands from its other nights, "
          "pooled over every combination of the sweep; no combination's band is narrower):\n\n";
    for (const NoiseFloor& f : r.floors)
      md << "- " << cell(f.machine) << ": " << cell(noise_floor_text(f)) << "\n";
    md << "\n";
  }
  health_section(md, m);
  gate_list(md, m, RegressionStatus::kRegressed, "Regressions");
  gate_list(md, m, RegressionStatus::kImproved, "Improvements");
  if (r.confirming) {
    md << "Tonight's timing moves were re-measured (`--confirm`): **"
       << r.rows_with(Confirmation::kConfirmed) << " confirmed by a re-run, "
       << r.rows_with(Confirmation::kNotReproduced)
       << " did not reproduce** (undecidable: a transient, not the build), "
       << r.rows_with(Confirmation::kAwaiting) << " without a re-run.\n\n";
  } else if (r.rows_with(Confirmation::kAwaiting) > 0) {
    md << r.rows_with(Confirmation::kAwaiting)
       << " combination(s) moved tonight in timing and are not confirmed by a re-run yet.\n\n";
  }
  gate_list(md, m, RegressionStatus::kUndecidable,
            "Undecidable (too noisy to tell at this threshold, or not reproduced on a re-run)");
  gate_list(md, m, RegressionStatus::kExcluded, "Excluded");
  md << "| combination | machine | outcome | samples/s | p | smallest detectable | peak memory "
        "| bubble | since | re-run |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const RegressionRow& row : r.rows) {
    const double p = row.metrics.empty() ? std::nan("") : row.metrics[0].p;
    md << "| " << cell(m.row_label(row.label, row.work)) << " | " << cell(row.machine) << " | "
       << regression_status_name(row.status) << " | " << pct(row.samples_change) << " | "
       << (std::isnan(p) ? std::string("-") : format_number(p)) << " | " << pct(row.detectable)
       << " | " << pct(row.memory_change) << " | "
       << (std::isnan(row.bubble_change) ? std::string("-") : format_fixed(row.bubble_change, 3))
       << " | " << cell(row.arrived) << " | "
       << cell(confirmation_summary(row).empty() ? "-" : confirmation_summary(row)) << " |\n";
  }
  md << "\n";
}

// The documents' claims checked on one group's results.
void claims_section(std::ostringstream& md, const ReportModel& model, const GroupView& g) {
  md << "## The documents' claims: " << cell(group_title(g)) << "\n\n";
  md << "Reference: " << cell(model.reference.source)
     << (model.setup_matches
             ? " (absolute figures checked: setup declared matching)"
             : " (ratios and rules checked; absolute figures need --reference-setup)")
     << ".\n\n";
  md << "| id | claim | documented | measured | verdict |\n|---|---|---|---|---|\n";
  for (const ClaimRow& c : g.claims) {
    std::string measured;
    std::vector<std::string> reasons;  // each once: two checks often miss the same run
    for (const CheckOutcome& o : c.checks) {
      if (!o.measured.empty())
        measured += (measured.empty() ? "" : "; ") + o.description + ": " + o.measured;
      if (o.verdict != Verdict::kConsistent && !o.why.empty() &&
          std::find(reasons.begin(), reasons.end(), o.why) == reasons.end())
        reasons.push_back(o.why);
    }
    std::string why;
    for (const std::string& r : reasons) why += (why.empty() ? "" : "; ") + r;
    md << "| " << c.id << " | " << cell(c.title) << " | " << cell(c.documented) << " | "
       << cell(measured.empty() ? "-" : measured) << " | **" << verdict_name(c.verdict) << "**"
       << (why.empty() ? "" : " (" + cell(why) + ")") << " |\n";
  }
  md << "\n";
}

}  // namespace

std::string write_markdown(const ReportModel& model) {
  std::ostringstream md;
  md << "# pipebench report\n\n";
  md << "Generated " << model.generated_at << " from " << model.loaded.results.size()
     << " result(s)";
  if (!model.inputs.empty()) {
    md << " in";
    for (const std::string& in : model.inputs) md << " `" << printable(in) << "`";
  }
  md << ".\n\n";
  for (const GroupView& g : model.groups) {
    md << "## Verdict: " << cell(group_title(g)) << "\n\n";
    if (model.groups.size() > 1) md << "Build " << cell(g.build) << ".\n\n";
    for (const std::string& point : g.verdict_points) md << "- " << point << "\n";
    md << "\n";
  }
  if (model.regression) gate_section(md, model);
  if (!model.no_earlier_night.empty())
    md << "## Regression gate\n\n" << cell(model.no_earlier_night) << ".\n\n";
  if (!model.later_nights.empty()) md << "Gate: " << cell(model.later_nights) << ".\n\n";
  for (const GroupView& g : model.groups) {
    md << "## Throughput: " << cell(group_title(g)) << "\n\n";
    md << "| schedule | partition | P | M | status | samples/s | step (ms) | bubble ratio (theory) "
          "| bubble overhead (theory) | peak/stage | check |\n";
    md << "|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const ResultEntry* e : g.entries) {
      const ResultConfig& c = e->result.config;
      const ScheduleInfo* info = find_schedule_info(c.schedule);
      md << "| " << cell(c.schedule) << (c.chunks > 1 ? " V=" + std::to_string(c.chunks) : "")
         << (info && info->uses_inflight ? " N=" + std::to_string(c.inflight) : "")
         << (info && info->uses_sync_warmup ? " K=" + std::to_string(c.sync_warmup) : "")
         << (e->variant.empty() ? "" : " [" + cell(e->variant) + "]") << " | " << cell(c.partition)
         << " | " << stages_text(c) << " | " << c.microbatches << " | ";
      if (e->result.status != ResultStatus::kOk || !e->result.metrics) {
        md << result_status_name(e->result.status) << " | " << cell(e->result.error)
           << " | | | | | |\n";
        continue;
      }
      const ResultMetrics& m = *e->result.metrics;
      md << "ok | " << format_number(m.samples_per_second) << " | "
         << format_number(m.step_time_seconds.median * 1e3) << " | "
         << format_fixed(m.bubble_ratio.measured, 3) << " ("
         << format_fixed(m.bubble_ratio.theoretical, 3) << ") | "
         << format_fixed(m.bubble_overhead.measured, 3) << " ("
         << format_fixed(m.bubble_overhead.theoretical, 3) << ") | " << peak_text(*e) << " | "
         << check_text(*e) << " |\n";
    }
    md << "\n";
    device_section(md, g);
    fast_paths_section(md, g);
    allreduce_section(md, g);
  }
  for (const GroupView& g : model.groups) claims_section(md, model, g);
  md << "## Environment\n\n| machine | build | backend | work | ranks | MPI | CUDA | GPUs | date "
        "|\n|---|---|---|---|---|---|---|---|---|\n";
  for (const GroupView& g : model.groups) {
    const GroupEnvironment env = group_environment(g);
    md << "| " << cell(g.machine) << " | " << cell(g.build) << " | " << cell(g.backend) << " | "
       << cell(g.work) << " | " << cell(env.ranks) << " | " << cell(env.mpi) << " | "
       << cell(env.cuda) << " | " << cell(env.gpus) << " | " << cell(env.dates) << " |\n";
  }
  if (!model.loaded.bad.empty()) {
    md << "\n## Unreadable result files (--skip-bad)\n\n";
    for (const BadFile& b : model.loaded.bad) md << "- " << cell(b.message) << "\n";
  }
  if (!model.loaded.superseded.empty()) {
    md << "\n## Superseded result files (another result of the same combination is reported)\n\n";
    for (const std::string& f : model.loaded.superseded) md << "- " << cell(f) << "\n";
  }
  return md.str();
}

}  // namespace ppb::reports
