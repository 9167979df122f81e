// JUnit XML in the shape CI systems read (Jenkins, GitLab, GitHub actions):
// testsuites > testsuite(name, tests, failures, errors, skipped, time) >
// testcase(name, classname, time) with failure/error/skipped/system-out.
#include <cmath>
#include <map>
#include <sstream>

#include "ppb/reports/format.hpp"
#include "ppb/reports/writers.hpp"

namespace ppb::reports {

namespace {

struct Case {
  std::string name;
  std::string classname;
  double time = 0;
  std::string failure;                      // regression text (a failed --check's first)
  std::string failure_type = "regression";  // "check" when a --check failed
  std::string error;                        // run error
  std::string skipped;                      // missing, undecidable, excluded
  std::string out;                          // note
};

double case_time(const ResultEntry& e) {
  if (!e.result.metrics) return 0;
  const double t = e.result.metrics->step_time_seconds.median;
  return std::isfinite(t) && t > 0 ? t : 0;
}

// One combination's test case: its regression verdict, notes and status.
Case combination_case(const ResultEntry* e,
                      const std::map<std::string, const RegressionRow*>& rows) {
  Case c;
  c.name = e->label + " [" + e->work + "]";
  c.classname = "pipebench." + e->result.config.schedule;
  c.time = case_time(*e);
  const auto it = rows.find(e->source);
  if (it != rows.end()) {
    const RegressionRow& r = *it->second;
    for (const std::string& why : r.reasons) c.failure += (c.failure.empty() ? "" : "\n") + why;
    if (r.status == RegressionStatus::kNew) c.out = "new combination: not in the baseline";
    // Too noisy to tell is neither a pass nor a failure: skipped, saying why.
    if (r.status == RegressionStatus::kUndecidable || r.status == RegressionStatus::kExcluded) {
      for (const std::string& n : r.notes) c.skipped += (c.skipped.empty() ? "" : "; ") + n;
    } else {
      for (const std::string& n : r.notes) c.out += (c.out.empty() ? "" : "\n") + n;
    }
    if (!r.planted.empty()) {
      c.name += " [planted " + r.planted + "]";
      c.out += (c.out.empty() ? "" : "\n") + ("planted slowdown: " + r.planted);
    }
  }
  if (const std::string check = check_failure(e->result); !check.empty()) {
    c.failure = check + (c.failure.empty() ? "" : "\n" + c.failure);
    c.failure_type = "check";
  }
  if (e->result.status == ResultStatus::kError) {
    c.error = e->result.error;
  } else if (e->result.status != ResultStatus::kOk) {
    c.out += (c.out.empty() ? "" : "\n") + std::string("status ") +
             result_status_name(e->result.status) +
             (e->result.error.empty() ? "" : ": " + e->result.error);
  }
  return c;
}

// The combinations of the baseline that this run lacks, as skipped cases.
void add_missing(const ReportModel& model,
                 std::vector<std::pair<std::string, std::vector<Case>>>& suites) {
  if (model.regression) {
    std::vector<Case> missing;
    for (const RegressionRow& r : model.regression->rows) {
      if (r.status != RegressionStatus::kMissing) continue;
      Case c;
      c.name = r.label + " [" + r.work + "]";
      c.classname = "pipebench." + r.baseline->result.config.schedule;
      c.skipped = "missing: in the baseline (" + r.machine + "), not in this run";
      missing.push_back(std::move(c));
    }
    if (!missing.empty()) suites.emplace_back("missing from this run", std::move(missing));
  }
}

void write_case(std::ostringstream& x, const Case& c) {
  x << "    <testcase name=\"" << xml_escape(c.name) << "\" classname=\"" << xml_escape(c.classname)
    << "\" time=\"" << format_fixed(c.time, 6) << "\"";
  if (c.failure.empty() && c.error.empty() && c.skipped.empty() && c.out.empty()) {
    x << "/>\n";
    return;
  }
  x << ">\n";
  if (!c.failure.empty()) {
    const std::string first = c.failure.substr(0, c.failure.find('\n'));
    x << "      <failure type=\"" << c.failure_type << "\" message=\"" << xml_escape(first) << "\">"
      << xml_escape(c.failure) << "</failure>\n";
  }
  if (!c.error.empty()) {
    x << "      <error type=\"run-error\" message=\"" << xml_escape(c.error) << "\">"
      << xml_escape(c.error) << "</error>\n";
  }
  if (!c.skipped.empty()) x << "      <skipped message=\"" << xml_escape(c.skipped) << "\"/>\n";
  if (!c.out.empty()) x << "      <system-out>" << xml_escape(c.out) << "</system-out>\n";
  x << "    </testcase>\n";
}

}  // namespace

std::string write_junit(const ReportModel& model) {
  std::map<std::string, const RegressionRow*> rows;
  if (model.regression) {
    for (const RegressionRow& r : model.regression->rows) {
      if (r.current != nullptr) rows[r.current->source] = &r;
    }
  }
  std::vector<std::pair<std::string, std::vector<Case>>> suites;
  for (const GroupView& g : model.groups) {
    std::vector<Case> cases;
    for (const ResultEntry* e : g.entries) cases.push_back(combination_case(e, rows));
    suites.emplace_back(g.key, std::move(cases));
  }
  add_missing(model, suites);

  // The GPU health probe: one case per GPU figure, failed when it got
  // slower; the machine's verdict and any throttling in its output.
  for (const HealthSummary& h : model.health) {
    std::vector<Case> cases;
    std::string context = health_text(h);
    for (const GpuTrouble& t : h.trouble) context += "\n" + trouble_text(t);
    for (const std::string& n : h.notes) context += "\n" + n;
    for (const HealthVerdict& v : h.figures) {
      Case c;
      c.name = v.gpu + " " + v.what.name;
      c.classname = "pipebench.health";
      c.out = context;
      if (v.what.status == RegressionStatus::kRegressed)
        c.failure = "regression: " + verdict_text(v.what);
      cases.push_back(std::move(c));
    }
    if (!cases.empty()) suites.emplace_back("GPU health: " + h.machine, std::move(cases));
  }

  int tests = 0, failures = 0, errors = 0, skipped = 0;
  double time = 0;
  for (const auto& [name, cases] : suites) {
    for (const Case& c : cases) {
      ++tests;
      failures += c.failure.empty() ? 0 : 1;
      errors += c.error.empty() ? 0 : 1;
      skipped += c.skipped.empty() ? 0 : 1;
      time += c.time;
    }
  }
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"pipebench\" tests=\"" << tests << "\" failures=\"" << failures
    << "\" errors=\"" << errors << "\" skipped=\"" << skipped << "\" time=\""
    << format_fixed(time, 6) << "\">\n";
  for (const auto& [name, cases] : suites) {
    int f = 0, e = 0, s = 0;
    double t = 0;
    for (const Case& c : cases) {
      f += c.failure.empty() ? 0 : 1;
      e += c.error.empty() ? 0 : 1;
      s += c.skipped.empty() ? 0 : 1;
      t += c.time;
    }
    x << "  <testsuite name=\"" << xml_escape(name) << "\" tests=\"" << cases.size()
      << "\" failures=\"" << f << "\" errors=\"" << e << "\" skipped=\"" << s << "\" time=\""
      << format_fixed(t, 6) << "\" timestamp=\"" << model.generated_at << "\">\n";
    for (const Case& c : cases) write_case(x, c);
    x << "  </testsuite>\n";
  }
  x << "</testsuites>\n";
  return x.str();
}

}  // namespace ppb::reports
