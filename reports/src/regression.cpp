#include "ppb/reports/regression.hpp"

#include <cmath>
#include <map>

#include "ppb/profiling/check.hpp"
#include "ppb/reports/claims.hpp"
#include "ppb/reports/format.hpp"

namespace ppb::reports {

const char* regression_status_name(RegressionStatus status) {
  switch (status) {
    case RegressionStatus::kPass:
      return "pass";
    case RegressionStatus::kRegressed:
      return "regressed";
    case RegressionStatus::kNew:
      return "new";
    case RegressionStatus::kMissing:
      return "missing";
  }
  return "?";
}

int RegressionSummary::regressions() const {
  int n = 0;
  for (const RegressionRow& r : rows) n += r.status == RegressionStatus::kRegressed ? 1 : 0;
  return n;
}

namespace {

std::string match_key(const ResultEntry& e) { return e.machine + " # " + e.config_key; }

std::string percent(double x) { return (x >= 0 ? "+" : "") + format_fixed(x * 100, 1) + "%"; }

}  // namespace

RegressionSummary compare_to_baseline(const std::vector<ResultEntry>& current,
                                      const std::vector<ResultEntry>& baseline, double threshold) {
  PPB_CHECK(threshold >= 0, "threshold must be >= 0");
  RegressionSummary out;
  out.threshold = threshold;
  std::map<std::string, const ResultEntry*> base;
  for (const ResultEntry& b : baseline) base.emplace(match_key(b), &b);
  std::map<std::string, bool> used;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const ResultEntry& c : current) {
    RegressionRow row;
    row.label = c.label;
    row.machine = c.machine;
    row.config_key = c.config_key;
    row.current = &c;
    row.samples_change = row.memory_change = row.bubble_change = nan;
    const auto it = base.find(match_key(c));
    if (it == base.end()) {
      row.status = RegressionStatus::kNew;
      out.rows.push_back(std::move(row));
      continue;
    }
    used[it->first] = true;
    const ResultEntry& b = *it->second;
    row.baseline = &b;
    const bool base_ok = b.result.status == ResultStatus::kOk;
    const bool cur_ok = c.result.status == ResultStatus::kOk;
    if (base_ok && !cur_ok) {
      row.reasons.push_back(std::string("status ok -> ") + result_status_name(c.result.status) +
                            (c.result.error.empty() ? "" : ": " + c.result.error));
    }
    if (base_ok && cur_ok) {
      const auto bs = metric_value(b, "samples_per_second");
      const auto cs = metric_value(c, "samples_per_second");
      if (bs && cs && *bs > 0) {
        row.samples_change = (*cs - *bs) / *bs;
        if (-row.samples_change > threshold) {
          row.reasons.push_back("samples/s " + format_number(*bs) + " -> " + format_number(*cs) +
                                " (" + percent(row.samples_change) + ", threshold -" +
                                format_trimmed(threshold * 100) + "%)");
        }
      }
      const auto bm = metric_value(b, "peak_memory");
      const auto cm = metric_value(c, "peak_memory");
      if (bm && cm && *bm > 0) {
        row.memory_change = (*cm - *bm) / *bm;
        if (row.memory_change > threshold) {
          row.reasons.push_back("peak memory " + format_bytes(*bm) + " -> " + format_bytes(*cm) +
                                " (" + percent(row.memory_change) + ", threshold +" +
                                format_trimmed(threshold * 100) + "%)");
        }
      }
      const auto bb = metric_value(b, "bubble_ratio");
      const auto cb = metric_value(c, "bubble_ratio");
      if (bb && cb) {
        row.bubble_change = *cb - *bb;
        if (row.bubble_change > threshold) {
          row.reasons.push_back("bubble ratio " + format_fixed(*bb, 3) + " -> " +
                                format_fixed(*cb, 3) + " (+" + format_fixed(row.bubble_change, 3) +
                                ", threshold +" + format_fixed(threshold, 3) + ")");
        }
      }
    }
    row.status = row.reasons.empty() ? RegressionStatus::kPass : RegressionStatus::kRegressed;
    out.rows.push_back(std::move(row));
  }
  for (const ResultEntry& b : baseline) {
    if (used.count(match_key(b)) != 0) continue;
    RegressionRow row;
    row.label = b.label;
    row.machine = b.machine;
    row.config_key = b.config_key;
    row.status = RegressionStatus::kMissing;
    row.baseline = &b;
    row.samples_change = row.memory_change = row.bubble_change = nan;
    out.rows.push_back(std::move(row));
  }
  return out;
}

}  // namespace ppb::reports
