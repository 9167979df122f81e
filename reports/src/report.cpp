#include "ppb/reports/report.hpp"

#include <cmath>
#include <filesystem>
#include <optional>
#include <ostream>
#include <sstream>

#include "ppb/profiling/check.hpp"
#include "ppb/profiling/output_file.hpp"
#include "ppb/reports/format.hpp"
#include "ppb/reports/history.hpp"
#include "ppb/reports/report_model.hpp"
#include "ppb/reports/writers.hpp"

namespace ppb::reports {

namespace {

// The current run's name: the folder given, or the common parent of the
// folders given (ci/suite passes <night>/cpu and <night>/timed).
std::string tonight_name(const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  auto name_of = [](const fs::path& p) {
    const fs::path n = p.lexically_normal();
    return n.has_filename() ? n.filename().string() : n.parent_path().filename().string();
  };
  if (inputs.size() == 1) return name_of(fs::absolute(inputs.front()));
  fs::path parent = fs::absolute(inputs.front()).lexically_normal().parent_path();
  for (const std::string& in : inputs) {
    if (fs::absolute(in).lexically_normal().parent_path() != parent) return "tonight";
  }
  return name_of(parent);
}

// Two outputs at one path (the second would replace the first), or an
// output at an input (a result it would overwrite: the input file, or an
// existing *.json inside an input folder): refused, naming both.
// "-" (standard output) and devices may be given twice.
template <size_t N>
void refuse_colliding_outputs(const std::pair<const char*, const std::string*> (&outputs)[N],
                              const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  const auto regular_or_new = [](const std::string& p) {
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    return p != "-" && (!fs::exists(st) || fs::is_regular_file(st));
  };
  for (size_t i = 0; i < N; ++i) {
    const std::string& a = *outputs[i].second;
    if (a.empty() || !regular_or_new(a)) continue;
    const fs::path where = resolved_path(a);
    for (size_t j = i + 1; j < N; ++j) {
      const std::string& b = *outputs[j].second;
      if (!b.empty() && where == resolved_path(b)) {
        throw UsageError(std::string(outputs[j].first) + " " + b + ": the same file as " +
                         outputs[i].first + " " + a + " (each output needs its own)");
      }
    }
    for (const std::string& in : inputs) {
      // An existing *.json among a folder's results may be one of them.
      std::error_code ec;
      const bool same = where == resolved_path(in);
      if (same || (fs::is_directory(in, ec) && fs::exists(a, ec) && same_or_inside(a, in) &&
                   fs::path(a).extension() == ".json")) {
        throw UsageError(std::string(outputs[i].first) + " " + a + ": would overwrite " +
                         (same ? "the result file " : "a file among the results in ") + in +
                         " (write it outside the results)");
      }
    }
  }
}

// A night gated against itself, or re-runs that are tonight's own files,
// say nothing useful: refused, naming the folders.
void refuse_overlaps(const ReportOptions& o) {
  for (const std::string& in : o.inputs) {
    for (const std::string& b : o.baselines) {
      if (same_or_inside(in, b) && same_or_inside(b, in)) {
        throw UsageError("--baseline " + b + ": the same folder as tonight's results " + in +
                         " (a night gated against itself; give earlier nights)");
      }
    }
    for (const std::string& c : o.confirm) {
      if (same_or_inside(in, c)) {
        throw UsageError("--confirm " + c + ": holds tonight's results " + in +
                         " themselves; give the folder the re-runs were written to "
                         "(run --rerun ... --out DIR)");
      }
    }
  }
}

void print_gate(const ReportModel& m, std::ostream& out) {
  const RegressionSummary& r = *m.regression;
  out << "gate: " << r.regressions() << " regression(s), " << r.count(RegressionStatus::kImproved)
      << " improvement(s), " << r.count(RegressionStatus::kPass) << " no change, "
      << r.count(RegressionStatus::kUndecidable) << " undecidable, "
      << r.count(RegressionStatus::kExcluded) << " excluded (threshold "
      << format_trimmed(r.threshold * 100) << "%, " << r.nights.size() << " earlier night(s))\n";
  if (r.count(RegressionStatus::kUndecidable) > 0)
    out << "undecidable: " << r.undecidable_causes() << "\n";
  for (const NoiseFloor& f : r.floors)
    out << "noise floor (" << f.machine << "): " << noise_floor_text(f) << "\n";
  for (const HealthSummary& h : m.health) {
    out << health_text(h) << "\n";
    for (const GpuTrouble& t : h.trouble) out << "  GPU STATE " << trouble_text(t) << "\n";
    for (const std::string& n : h.notes) out << "  " << n << "\n";
  }
  out << "regressions: " << m.regressions() << " beyond " << format_trimmed(r.threshold * 100)
      << "%\n";
  for (const RegressionRow& row : r.rows) {
    for (const std::string& why : row.reasons)
      out << "  REGRESSION " << m.row_label(row.label, row.work) << ": " << why << "\n";
  }
  for (const HealthSummary& h : m.health) {
    for (const HealthVerdict& v : h.figures) {
      if (v.what.status == RegressionStatus::kRegressed)
        out << "  REGRESSION GPU health " << v.gpu << ": " << verdict_text(v.what) << "\n";
    }
  }
  for (const RegressionRow& row : r.rows) {
    if (row.status != RegressionStatus::kImproved) continue;
    for (const std::string& n : row.notes) {
      const std::string kind = "improvement: ";
      if (n.rfind(kind, 0) == 0)
        out << "  IMPROVEMENT " << m.row_label(row.label, row.work) << ": " << n.substr(kind.size())
            << "\n";
    }
  }
  const int awaiting = r.rows_with(Confirmation::kAwaiting);
  if (!r.confirming) {
    if (awaiting > 0)
      out << "confirm: " << awaiting
          << " combination(s) moved tonight in timing; a re-run would confirm or refute them "
             "(--rerun-list, then --confirm)\n";
    return;
  }
  out << "confirm: " << r.rows_with(Confirmation::kConfirmed) << " confirmed by a re-run, "
      << r.rows_with(Confirmation::kNotReproduced) << " did not reproduce (undecidable), "
      << awaiting << " without a re-run\n";
  for (const RegressionRow& row : r.rows) {
    for (const MetricVerdict& v : row.metrics) {
      if (v.confirmation == Confirmation::kNotReproduced)
        out << "  UNDECIDABLE " << m.row_label(row.label, row.work) << ": " << verdict_text(v)
            << "\n";
    }
  }
}

// --confirm's re-runs, keeping tonight's and the re-runs' files apart.
LoadedResults load_reruns(const ReportOptions& o) {
  try {
    return load_results(o.confirm, o.skip_bad);
  } catch (const UsageError& e) {
    throw UsageError(std::string("--confirm: ") + e.what());
  }
}

// The flags' values, each in its range (before anything is read or written).
void check_options(const ReportOptions& o) {
  if (o.inputs.empty())
    throw UsageError("report: expected at least one result folder (pipebench report DIR...)");
  if (!(o.threshold >= 0 && o.threshold < 1)) {
    throw UsageError("--threshold: expected a fraction in [0, 1), got " +
                     format_exact(o.threshold));
  }
  if (o.memory_budget < 0) throw UsageError("--memory-budget: expected a size >= 0");
  if (!(o.alpha > 0 && o.alpha < 1)) {
    throw UsageError("--alpha: expected a significance level in (0, 1), got " +
                     format_exact(o.alpha));
  }
  if (!(o.max_foreign_cpu >= 0 && o.max_foreign_cpu <= 1)) {
    throw UsageError("--max-foreign-cpu: expected a fraction in [0, 1], got " +
                     format_exact(o.max_foreign_cpu));
  }
  if (!(o.max_speed_drift > 0 && o.max_speed_drift < 1)) {
    throw UsageError("--max-speed-drift: expected a fraction in (0, 1), got " +
                     format_exact(o.max_speed_drift));
  }
  if (o.window < 1)
    throw UsageError("--history-window: expected >= 1 night, got " + std::to_string(o.window));
  if (o.baselines.empty() && (!o.confirm.empty() || !o.rerun_list.empty())) {
    throw UsageError(std::string(o.confirm.empty() ? "--rerun-list" : "--confirm") +
                     ": confirms the gate's verdicts, which need --baseline");
  }
}

ModelOptions model_options(const ReportOptions& o) {
  ModelOptions mo;
  mo.inputs = o.inputs;
  mo.setup_matches = o.reference_setup;
  mo.gate.threshold = o.threshold;
  mo.gate.alpha = o.alpha;
  mo.gate.window = o.window;
  mo.gate.include_oversubscribed = o.gate_oversubscribed;
  mo.gate.max_foreign_cpu = o.max_foreign_cpu;
  mo.gate.max_speed_drift = o.max_speed_drift;
  mo.gate.noise_floor = !o.no_noise_floor;
  mo.tonight = tonight_name(o.inputs);
  mo.memory_budget = o.memory_budget;
  return mo;
}

// Every output is checked before any is written (or any input read), so a
// bad one leaves no other behind: each writable, none at another's path or
// at a result it reads.
void check_outputs(const ReportOptions& o) {
  const std::pair<const char*, const std::string*> flagged[] = {
      {"--html", &o.html}, {"--md", &o.markdown},   {"--junit", &o.junit},
      {"--csv", &o.csv},   {"--gbench", &o.gbench}, {"--rerun-list", &o.rerun_list}};
  for (const auto& [flag, path] : flagged) {
    if (!path->empty()) check_output_path(*path);
  }
  std::vector<std::string> read = o.inputs;  // what an output must not replace
  read.insert(read.end(), o.baselines.begin(), o.baselines.end());
  read.insert(read.end(), o.confirm.begin(), o.confirm.end());
  refuse_colliding_outputs(flagged, read);
}

// What leave_out_later left out, in a sentence ("" for nothing): at most
// five names, then how many more.
std::string later_nights_note(const std::vector<std::string>& later, const std::string& tonight) {
  if (later.empty()) return "";
  std::string names;
  for (size_t i = 0; i < later.size() && i < 5; ++i) names += (i ? ", " : "") + later[i];
  if (later.size() > 5) names += " and " + std::to_string(later.size() - 5) + " more";
  return "left out " + std::to_string(later.size()) +
         " night(s) of --baseline that began after tonight did (at " + tonight + "): " + names +
         "; the gate compares tonight with earlier nights only";
}

// The gate's parts beside the sweeps' (built with the model): the GPUs'
// health, where the baselines came from, or why there is no gate.
void add_gate(const ReportOptions& o, const ModelOptions& mo, ReportModel& model) {
  if (!o.baselines.empty() && !model.regression) {
    std::string where;
    for (const std::string& b : o.baselines) where += (where.empty() ? "" : ", ") + b;
    model.no_earlier_night =
        "no earlier night in " + where +
        (model.later_nights.empty()
             ? " (tonight is the first): nothing to compare yet; tonight's results are the next "
               "night's baseline"
             : ": every night there began after tonight did; nothing to compare");
  }
  if (model.regression) {
    // With --skip-bad a bad health file is listed with the unreadable results.
    std::vector<BadFile>* bad = o.skip_bad ? &model.loaded.bad : nullptr;
    model.health = gate_health(load_health(o.inputs, bad), mo.tonight, model.history,
                               &*model.regression, mo.gate, bad);
    for (const std::string& b : o.baselines) {
      std::string& src = model.regression->baseline_source;
      src += (src.empty() ? "" : ", ") + b;
    }
  }
}

}  // namespace

int run_report(const ReportOptions& o, std::ostream& out) {
  check_options(o);
  check_outputs(o);
  refuse_overlaps(o);
  LoadedResults loaded = load_results(o.inputs, o.skip_bad, o.confirm);
  std::optional<LoadedResults> reruns;
  if (!o.confirm.empty()) reruns = load_reruns(o);
  Reference reference =
      o.reference.empty() ? builtin_reference() : load_reference_file(o.reference);
  std::vector<Night> history;
  std::string later;  // what leave_out_later left out, said
  if (!o.baselines.empty()) {
    try {
      history = load_nights(o.baselines, o.skip_bad, o.inputs);
    } catch (const UsageError& e) {
      throw UsageError(std::string("--baseline: ") + e.what());
    }
    // With --skip-bad the earlier nights' unreadable files are listed with
    // tonight's: none is dropped without a word.
    for (Night& n : history) {
      for (BadFile& b : n.results.bad) loaded.bad.push_back(std::move(b));
    }
    const std::string began = earliest_date(loaded);
    later = later_nights_note(leave_out_later(history, began), began);
  }
  const ModelOptions mo = model_options(o);
  ReportModel model = build_report_model(std::move(loaded), std::move(reference),
                                         std::move(history), mo, std::move(reruns));
  model.later_nights = std::move(later);
  add_gate(o, mo, model);

  // Only the outputs asked for are rendered (each can be as large as the
  // results: the Google Benchmark JSON has one run per timed step), and
  // they are written together: all, or none where one cannot be.
  std::vector<std::string> written;
  std::vector<std::string> texts;
  auto emit = [&](const std::string& path, std::string (*render)(const ReportModel&)) {
    if (path.empty()) return;
    texts.push_back(render(model));
    written.push_back(path);
  };
  emit(o.html, write_html);
  emit(o.markdown, write_markdown);
  emit(o.junit, write_junit);
  emit(o.csv, write_csv);
  emit(o.gbench, write_gbench_json);
  if (!o.rerun_list.empty() && model.regression) {
    std::string list;
    for (const std::string& f : model.regression->rerun_list()) list += f + "\n";
    texts.push_back(std::move(list));
    written.push_back(o.rerun_list);
  }
  std::vector<std::pair<OutputPath, std::string_view>> outputs;
  for (size_t i = 0; i < written.size(); ++i) outputs.emplace_back(written[i], texts[i]);
  write_output_files(outputs);

  // What goes to the terminal quotes the results' own text (names, errors):
  // their control bytes are shown, never sent (terminal_text).
  std::ostringstream text;
  if (written.empty()) {
    text << write_markdown(model);
  } else {
    text << "pipebench report: " << model.loaded.results.size() << " result(s), "
         << model.groups.size() << " group(s) of one machine, build, backend and work";
    if (!model.loaded.bad.empty())
      text << ", " << model.loaded.bad.size() << " unreadable (skipped)";
    if (!model.loaded.superseded.empty())
      text << ", " << model.loaded.superseded.size()
           << " superseded (another result of the same combination is reported)";
    text << "\n";
    for (const GroupView& g : model.groups)
      text << "verdict (" << group_title(g) << "): " << g.verdict << "\n";
    if (model.regression) print_gate(model, text);
    if (!model.later_nights.empty()) text << "gate: " << model.later_nights << "\n";
    if (!model.no_earlier_night.empty()) text << "gate: " << model.no_earlier_night << "\n";
    for (const std::string& w : written) text << "wrote " << w << "\n";
  }
  out << terminal_text(text.str());
  return model.regressions() > 0 ? 1 : 0;
}

}  // namespace ppb::reports
