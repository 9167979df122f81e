// Statistics of the regression gate: robust spread of a sample, the
// Mann-Whitney U rank test (as google/benchmark's tools/compare.py uses it),
// the smallest shift a test could detect, and change-point detection on a
// series of nights. Pure functions, no I/O.
//
// Example:
//   Spread s = spread({1.02, 0.98, 1.00, 1.10});       // s.median == 1.01
//   UTest t = mann_whitney_u({1, 2, 3}, {4, 5, 6});     // t.u == 0, t.p == 0.1 (exact)
//   std::optional<size_t> j = change_point({100, 101, 99, 90, 91, 89});  // j == 3
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace ppb::reports {

/// Robust summary of a sample. All NaN when the sample is empty.
struct Spread {
  std::size_t n = 0;
  double median = 0;
  double mad = 0;  ///< median absolute deviation from the median (unscaled)
  double q1 = 0;   ///< 25th percentile (linear interpolation, as numpy's default)
  double q3 = 0;   ///< 75th percentile
  double min = 0;
  double max = 0;
  /// 1.4826 x mad / median: the relative standard deviation a normal sample
  /// with this MAD would have (0 when the median is 0).
  double relative_mad() const;
};

/// Spread of `values` (any order; non-finite values are dropped).
Spread spread(std::vector<double> values);

/// spread(values).median, to the last bit, in O(n) (no sort, no MAD).
double median(std::vector<double> values);

/// Mean of the finite entries (a stage without records is NaN); NaN if none.
double mean_finite(const std::vector<double>& values);

/// The q-quantile (0 <= q <= 1) of sorted values, linear interpolation
/// between closest ranks. REQUIRES: sorted non-empty.
double quantile_sorted(const std::vector<double>& sorted, double q);

/// The standard normal distribution's upper quantile: the z with
/// P(Z > z) = p. normal_upper_quantile(0.025) == 1.959964 (to 1e-6).
/// REQUIRES: p in (0, 1).
double normal_upper_quantile(double p);

/// The standard normal distribution's upper tail P(Z > z).
/// normal_upper_tail(1.959964) == 0.025 (to 1e-6).
double normal_upper_tail(double z);

/// Benjamini-Hochberg's step-up procedure at false-discovery rate `alpha`
/// over `m` hypotheses, of which `p` holds the p-values of those tested
/// (the others count as p = 1): the largest k with the k-th smallest
/// p <= alpha x k / m, 0 when none. The k smallest are the discoveries.
/// Example: benjamini_hochberg({0.001, 0.008, 0.039, 0.041, 0.6}, 0.05, 5)
/// == 2.
/// REQUIRES: alpha in (0, 1), m >= p.size().
std::size_t benjamini_hochberg(std::vector<double> p, double alpha, std::size_t m);

/// Two-sided Mann-Whitney U test of x against y.
struct UTest {
  double u = 0;        ///< U of x: pairs (x_i, y_j) with x_i > y_j, plus 1/2 per tie
  double p = 1;        ///< two-sided p-value (1 when either side is empty)
  bool exact = false;  ///< exact distribution (no ties, n1 + n2 <= kExactLimit) or normal
};

/// Largest n1 + n2 for which the exact distribution of U is used.
inline constexpr std::size_t kExactLimit = 60;

/// The test. Without ties and with n1 + n2 <= kExactLimit the p-value is
/// exact (2 x the smaller tail, at most 1, as scipy.stats.mannwhitneyu
/// method="exact"); otherwise the normal approximation with tie correction
/// and continuity correction (scipy's method="asymptotic").
/// Example: mann_whitney_u({19, 22, 16, 29, 24}, {20, 11, 17, 12}) gives
/// u == 17, p == 1/9 (exact).
UTest mann_whitney_u(const std::vector<double>& x, const std::vector<double>& y);

/// The smallest two-sided p-value any data of these sizes can give (complete
/// separation, no ties): 2 / C(n1 + n2, n1), at most 1. 1 when a side is empty.
double min_p_value(std::size_t n1, std::size_t n2);

/// How detectable_shift moves a sample: by a factor (1 +/- d) or by +/- d.
enum class ShiftKind : uint8_t { kRelative, kAbsolute };

/// The smallest shift d (0 <= d <= max_shift) such that `x`, re-centred on
/// y's median and then moved by d in `direction` (-1 down, +1 up; by a factor
/// 1 + direction x d for kRelative, by direction x d for kAbsolute), differs
/// from `y` with p < alpha. Both spreads count: wide samples need a larger
/// shift. nullopt when even max_shift is not significant (too few samples,
/// or too noisy).
/// REQUIRES: direction is -1 or +1, alpha in (0, 1).
std::optional<double> detectable_shift(const std::vector<double>& x, const std::vector<double>& y,
                                       double alpha, int direction, double max_shift = 1.0,
                                       ShiftKind kind = ShiftKind::kRelative);

/// The best single change point of a series (a night's median per element):
/// the index j (1 <= j < size) that splits it into [0, j) and [j, size) with
/// the smallest summed squared deviation from each part's mean (a mean-shift
/// model, as CUSUM-style detectors use). nullopt for fewer than 2 elements
/// or a constant series. Whether the step matters is the caller's test.
std::optional<std::size_t> change_point(const std::vector<double>& series);

}  // namespace ppb::reports
