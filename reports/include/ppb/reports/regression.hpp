// Regression gate against a baseline: each current
// combination is matched to the baseline result of the same configuration on
// the same machine (config_key + machine_key; the build may differ, that is
// the point). Beyond `threshold`:
//  * samples/s drop:       (base - cur) / base > threshold
//  * peak-memory growth:   (cur - base) / base > threshold (max over stages)
//  * bubble growth:        cur - base > threshold, in bubble-ratio points
//    (the ratio is already a share of the step; a relative change of a small
//    bubble would flag noise)
//  * status: ok in the baseline, anything else now.
// New combinations (not in the baseline) and missing ones (only in the
// baseline) are listed, never failed.
#pragma once

#include <string>
#include <vector>

#include "ppb/reports/load.hpp"

namespace ppb::reports {

enum class RegressionStatus : uint8_t {
  kPass,       ///< matched, nothing beyond the threshold
  kRegressed,  ///< matched, at least one figure beyond the threshold
  kNew,        ///< only in the current results
  kMissing,    ///< only in the baseline
};

/// "pass", "regressed", "new", "missing".
const char* regression_status_name(RegressionStatus status);

/// One combination compared.
struct RegressionRow {
  std::string label;  ///< config_label
  std::string machine;
  std::string config_key;
  RegressionStatus status = RegressionStatus::kPass;
  const ResultEntry* current = nullptr;   ///< null when missing
  const ResultEntry* baseline = nullptr;  ///< null when new
  double samples_change = 0;              ///< (cur - base) / base; NaN when not both ok
  double memory_change = 0;               ///< (cur - base) / base of the peak
  double bubble_change = 0;               ///< cur - base, ratio points
  std::vector<std::string> reasons;       ///< one line per regressed figure
};

struct RegressionSummary {
  double threshold = 0.07;
  std::string baseline_source;
  std::vector<RegressionRow> rows;  ///< current order, then missing ones
  int regressions() const;
};

/// Compares. REQUIRES: threshold >= 0. The pointers in the rows point into
/// `current` and `baseline`, which must outlive the summary.
RegressionSummary compare_to_baseline(const std::vector<ResultEntry>& current,
                                      const std::vector<ResultEntry>& baseline, double threshold);

}  // namespace ppb::reports
