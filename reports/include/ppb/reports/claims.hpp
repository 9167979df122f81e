// The documents' claims checked against measured results. Comparisons only ever pair results of the
// same group (machine + build) and the same setup (everything but the varied field). Only results
// with status "ok" are measured.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/reports/load.hpp"
#include "ppb/reports/reference.hpp"

namespace ppb::reports {

enum class Verdict : uint8_t {
  kConsistent,     ///< the measurement agrees within the check's tolerance
  kInconsistent,   ///< the measurement disagrees
  kNotMeasurable,  ///< nothing here measures it (the outcome says why)
};

/// The largest whole number an in-flight check's value may be.
inline constexpr long kMaxInflightValue = 1000000;

/// The in-flight count an in-flight check's `value` expects on stage `s` of
/// a run of `config`: "N", "M", "P", "min(P-s,M)", "min(N,M)" or a whole
/// number in [0, kMaxInflightValue]; nullopt for any other text.
std::optional<double> inflight_expected(const std::string& expr, const ResultConfig& config, int s);

/// "consistent", "inconsistent", "not measurable here".
const char* verdict_name(Verdict verdict);

/// One check of one claim, evaluated.
struct CheckOutcome {
  std::string description;
  std::string documented;  ///< the documented figure or rule, as text
  std::string measured;    ///< what was measured, as text ("" when nothing)
  Verdict verdict = Verdict::kNotMeasurable;
  std::string why;  ///< for not measurable / inconsistent: the reason or the counter-example
  int cases = 0;    ///< setups or runs the check looked at
  double value =
      std::numeric_limits<double>::quiet_NaN();  ///< the summarised measured figure, when numeric
};

/// One row of the claims table.
struct ClaimRow {
  std::string id;
  std::string document;
  std::string title;
  std::string statement;
  std::string documented;  ///< the claim's figures as text
  Verdict verdict = Verdict::kNotMeasurable;
  std::vector<CheckOutcome> checks;
};

/// The value of a metric (reference.hpp's list) for one result; nullopt when
/// the result is not "ok" or lacks what the metric needs.
std::optional<double> metric_value(const ResultEntry& entry, std::string_view metric);

/// Whether the result's peak memory was measured without a device profiler
/// attached (`peak_memory_bytes.device_profiler` empty): the peaks the
/// report weighs. CUPTI's buffers take device memory of their own.
bool memory_is_clean(const ResultEntry& entry);

/// Micro-batches in flight at each stage's activation peak: measured
/// activation bytes / one micro-batch's bytes (theory.activation_bytes_per_microbatch),
/// or, without those bytes, the schedule's count (theory.peak_inflight_per_stage).
/// `measured` says which. Empty when neither is in the result.
std::vector<double> inflight_per_stage(const ResultEntry& entry, bool* measured = nullptr);

/// Evaluates every claim. A claim is inconsistent when any of its checks is,
/// consistent when at least one check is and none is inconsistent, and not
/// measurable otherwise. `setup_matches` enables the absolute checks.
std::vector<ClaimRow> evaluate_claims(const Reference& reference,
                                      const std::vector<const ResultEntry*>& results,
                                      bool setup_matches);

/// The same over every result of `results`.
std::vector<ClaimRow> evaluate_claims(const Reference& reference,
                                      const std::vector<ResultEntry>& results, bool setup_matches);

}  // namespace ppb::reports
