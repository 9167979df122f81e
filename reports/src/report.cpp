#include "ppb/reports/report.hpp"

#include <cmath>
#include <ostream>

#include "ppb/profiling/check.hpp"
#include "ppb/profiling/output_file.hpp"
#include "ppb/reports/format.hpp"
#include "ppb/reports/report_model.hpp"
#include "ppb/reports/writers.hpp"

namespace ppb::reports {

int run_report(const ReportOptions& o, std::ostream& out) {
  if (o.inputs.empty())
    throw UsageError("report: expected at least one result folder (pipebench report DIR...)");
  if (!(o.threshold >= 0 && o.threshold < 1)) {
    throw UsageError("--threshold: expected a fraction in [0, 1), got " +
                     format_exact(o.threshold));
  }
  if (o.memory_budget < 0) throw UsageError("--memory-budget: expected a size >= 0");
  LoadedResults loaded = load_results(o.inputs, o.skip_bad);
  Reference reference =
      o.reference.empty() ? builtin_reference() : load_reference_file(o.reference);
  std::optional<LoadedResults> baseline;
  if (!o.baseline.empty()) {
    try {
      baseline = load_results({o.baseline}, o.skip_bad);
    } catch (const UsageError& e) {
      throw UsageError(std::string("--baseline: ") + e.what());
    }
  }
  ModelOptions mo;
  mo.inputs = o.inputs;
  mo.setup_matches = o.reference_setup;
  mo.threshold = o.threshold;
  mo.memory_budget = o.memory_budget;
  ReportModel model =
      build_report_model(std::move(loaded), std::move(reference), std::move(baseline), mo);
  if (model.regression) model.regression->baseline_source = o.baseline;

  std::vector<std::string> written;
  auto emit = [&](const std::string& path, const std::string& text) {
    if (path.empty()) return;
    write_output_file(path, text);
    written.push_back(path);
  };
  emit(o.html, write_html(model));
  emit(o.markdown, write_markdown(model));
  emit(o.junit, write_junit(model));
  emit(o.csv, write_csv(model));
  emit(o.gbench, write_gbench_json(model));

  if (written.empty()) {
    out << write_markdown(model);
  } else {
    out << "pipebench report: " << model.loaded.results.size() << " result(s), "
        << model.groups.size() << " machine/build group(s)";
    if (!model.loaded.bad.empty())
      out << ", " << model.loaded.bad.size() << " unreadable (skipped)";
    out << "\n";
    for (const GroupView& g : model.groups)
      out << "verdict (" << g.machine << "): " << g.verdict << "\n";
    if (model.regression) {
      out << "regressions: " << model.regressions() << " beyond "
          << format_trimmed(o.threshold * 100) << "%\n";
      for (const RegressionRow& r : model.regression->rows) {
        for (const std::string& why : r.reasons)
          out << "  REGRESSION " << r.label << ": " << why << "\n";
      }
    }
    for (const std::string& w : written) out << "wrote " << w << "\n";
  }
  return model.regressions() > 0 ? 1 : 0;
}

}  // namespace ppb::reports
