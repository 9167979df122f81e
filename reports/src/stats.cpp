#include "ppb/reports/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ppb/profiling/check.hpp"

namespace ppb::reports {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Number of orderings of m x-values and n y-values (no ties) with U == u,
// for u = 0..m*n: f(m, n, u) = f(m-1, n, u-n) + f(m, n-1, u), where the
// first term places the largest value in x (beating all n y-values). Only
// additions, so doubles keep 16 significant digits of every count.
std::vector<double> u_counts(std::size_t m, std::size_t n) {
  // table[i][j] = counts for sizes (i, j); built row by row.
  std::vector<std::vector<std::vector<double>>> table(m + 1,
                                                      std::vector<std::vector<double>>(n + 1));
  for (std::size_t i = 0; i <= m; ++i) {
    for (std::size_t j = 0; j <= n; ++j) {
      std::vector<double>& f = table[i][j];
      f.assign(i * j + 1, 0.0);
      if (i == 0 || j == 0) {
        f[0] = 1;
        continue;
      }
      const std::vector<double>& a = table[i - 1][j];  // largest value is an x: U += j
      const std::vector<double>& b = table[i][j - 1];  // largest value is a y
      for (std::size_t u = 0; u < a.size(); ++u) f[u + j] += a[u];
      for (std::size_t u = 0; u < b.size(); ++u) f[u] += b[u];
    }
  }
  return table[m][n];
}

}  // namespace

double normal_upper_tail(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

std::size_t benjamini_hochberg(std::vector<double> p, double alpha, std::size_t m) {
  PPB_CHECK(alpha > 0 && alpha < 1, "false-discovery rate outside (0, 1)");
  PPB_CHECK(m >= p.size(), "more p-values than hypotheses");
  std::sort(p.begin(), p.end());
  std::size_t k = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= alpha * static_cast<double>(i + 1) / static_cast<double>(m)) k = i + 1;
  }
  return k;
}

double Spread::relative_mad() const { return median != 0 ? 1.4826 * mad / std::fabs(median) : 0; }

double quantile_sorted(const std::vector<double>& sorted, double q) {
  PPB_CHECK(!sorted.empty(), "quantile of an empty sample");
  PPB_CHECK(q >= 0 && q <= 1, "quantile outside [0, 1]");
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + frac * (sorted[hi] - sorted[lo]);
}

Spread spread(std::vector<double> values) {
  values.erase(
      std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }),
      values.end());
  Spread s;
  s.n = values.size();
  if (values.empty()) {
    s.median = s.mad = s.q1 = s.q3 = s.min = s.max = kNaN;
    return s;
  }
  std::sort(values.begin(), values.end());
  s.median = quantile_sorted(values, 0.5);
  s.q1 = quantile_sorted(values, 0.25);
  s.q3 = quantile_sorted(values, 0.75);
  s.min = values.front();
  s.max = values.back();
  // |v - median| falls over the sorted values up to the median and rises
  // after it (rounding is monotone): the two runs merged are the sorted
  // deviations in O(n) (a sort of this V degrades to introsort's heapsort).
  const auto mid = std::lower_bound(values.begin(), values.end(), s.median);
  std::vector<double> below;
  std::vector<double> above;
  std::vector<double> dev(values.size());
  for (auto it = mid; it != values.begin();) below.push_back(std::fabs(*--it - s.median));
  for (auto it = mid; it != values.end(); ++it) above.push_back(std::fabs(*it - s.median));
  std::merge(below.begin(), below.end(), above.begin(), above.end(), dev.begin());
  s.mad = quantile_sorted(dev, 0.5);
  return s;
}

double median(std::vector<double> values) {
  std::erase_if(values, [](double v) { return !std::isfinite(v); });
  if (values.empty()) return kNaN;
  // quantile_sorted(sorted, 0.5) reads ranks lo and lo + 1 only.
  const std::size_t lo = (values.size() - 1) / 2;
  const auto at = values.begin() + static_cast<std::ptrdiff_t>(lo);
  std::nth_element(values.begin(), at, values.end());
  const double hi = lo + 1 < values.size() ? *std::min_element(at + 1, values.end()) : *at;
  const double frac = 0.5 * static_cast<double>(values.size() - 1) - static_cast<double>(lo);
  return *at + frac * (hi - *at);
}

double min_p_value(std::size_t n1, std::size_t n2) {
  if (n1 == 0 || n2 == 0) return 1;
  // C(n1 + n2, n1) as a product of ratios (no overflow).
  double c = 1;
  for (std::size_t i = 1; i <= n1; ++i)
    c = c * static_cast<double>(n2 + i) / static_cast<double>(i);
  return std::min(1.0, 2.0 / c);
}

namespace {

// `v` sorted, without its NaN (which no order places: the U test leaves them
// out, as spread() leaves out non-finite values).
std::vector<double> sorted_without_nan(std::vector<double> v) {
  std::erase_if(v, [](double d) { return std::isnan(d); });
  std::sort(v.begin(), v.end());
  return v;
}

// The test of two samples sorted ascending, without NaN: one merge, O(n1 +
// n2). Tie groups come in ascending order and x's mean ranks are added one
// at a time, as over a sorted pooled sample, so U and p are the same bits.
UTest u_test_sorted(const std::vector<double>& xs, const std::vector<double>& ys) {
  UTest t;
  const std::size_t n1 = xs.size();
  const std::size_t n2 = ys.size();
  if (n1 == 0 || n2 == 0) return t;
  double rank_sum_x = 0;
  double tie_term = 0;  // sum of t^3 - t over tie groups
  for (std::size_t i = 0, j = 0; i < n1 || j < n2;) {
    const double v = j == n2 || (i < n1 && xs[i] < ys[j]) ? xs[i] : ys[j];
    const std::size_t first = i + j;  // the group's ranks: first + 1 .. i + j
    const std::size_t x_begin = i;
    while (i < n1 && xs[i] == v) ++i;
    while (j < n2 && ys[j] == v) ++j;
    const double mean_rank = (static_cast<double>(first + 1) + static_cast<double>(i + j)) / 2.0;
    for (std::size_t k = x_begin; k < i; ++k) rank_sum_x += mean_rank;
    const auto tsize = static_cast<double>(i + j - first);
    tie_term += tsize * tsize * tsize - tsize;
  }
  const double dn1 = static_cast<double>(n1);
  const double dn2 = static_cast<double>(n2);
  t.u = rank_sum_x - dn1 * (dn1 + 1) / 2.0;
  const double u_big = std::max(t.u, dn1 * dn2 - t.u);
  if (tie_term == 0 && n1 + n2 <= kExactLimit) {
    t.exact = true;
    const std::vector<double> counts = u_counts(n1, n2);
    const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
    double upper = 0;  // P(U >= u_big)
    for (auto u = static_cast<std::size_t>(std::llround(u_big)); u < counts.size(); ++u)
      upper += counts[u];
    t.p = std::min(1.0, 2.0 * upper / total);
    return t;
  }
  const double n = dn1 + dn2;
  const double mu = dn1 * dn2 / 2.0;
  const double var = dn1 * dn2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1)));
  if (var <= 0) {  // every value equal
    t.p = 1;
    return t;
  }
  const double z = (u_big - mu - 0.5) / std::sqrt(var);
  t.p = std::min(1.0, 2.0 * normal_upper_tail(z));
  return t;
}

}  // namespace

UTest mann_whitney_u(const std::vector<double>& x, const std::vector<double>& y) {
  return u_test_sorted(sorted_without_nan(x), sorted_without_nan(y));
}

std::optional<double> detectable_shift(const std::vector<double>& x, const std::vector<double>& y,
                                       double alpha, int direction, double max_shift,
                                       ShiftKind kind) {
  PPB_CHECK(direction == -1 || direction == 1, "direction must be -1 or +1");
  PPB_CHECK(alpha > 0 && alpha < 1, "alpha must be in (0, 1)");
  if (x.empty() || y.empty() || min_p_value(x.size(), y.size()) >= alpha) return std::nullopt;
  const double mx = median(x);
  const double my = median(y);
  if (!std::isfinite(mx) || !std::isfinite(my)) return std::nullopt;
  const bool relative = kind == ShiftKind::kRelative;
  if (relative && mx == 0) return std::nullopt;
  // Each step of the bisection tests x shifted against y. Both are sorted
  // once: a factor >= 0 or an offset keeps x's order (rounding is
  // monotone), so a step is one merge, O(n1 + n2), not a sort of the pooled
  // sample; x is sorted again where the order does not hold (a negative
  // factor, or inf x 0).
  const std::vector<double> xs = sorted_without_nan(x);
  const std::vector<double> ys = sorted_without_nan(y);
  std::vector<double> shifted;
  auto p_at = [&](double d) {
    const double factor = (my / mx) * (1.0 + direction * d);
    shifted.resize(xs.size());
    for (std::size_t i = 0; i < xs.size(); ++i)
      shifted[i] = relative ? xs[i] * factor : xs[i] - mx + my + direction * d;
    if (std::any_of(shifted.begin(), shifted.end(), [](double v) { return std::isnan(v); }) ||
        !std::is_sorted(shifted.begin(), shifted.end()))
      shifted = sorted_without_nan(std::move(shifted));
    return u_test_sorted(shifted, ys).p;
  };
  if (p_at(max_shift) >= alpha) return std::nullopt;
  if (p_at(0) < alpha) return 0.0;
  double lo = 0;
  double hi = max_shift;
  for (int i = 0; i < 40; ++i) {
    const double mid = (lo + hi) / 2;
    (p_at(mid) < alpha ? hi : lo) = mid;
  }
  return hi;
}

std::optional<std::size_t> change_point(const std::vector<double>& series) {
  const std::size_t n = series.size();
  if (n < 2) return std::nullopt;
  // Prefix sums give each part's squared deviation in O(1).
  std::vector<double> s(n + 1, 0.0), s2(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    s[i + 1] = s[i] + series[i];
    s2[i + 1] = s2[i] + series[i] * series[i];
  }
  auto sse = [&](std::size_t a, std::size_t b) {  // [a, b)
    const double k = static_cast<double>(b - a);
    const double sum = s[b] - s[a];
    return std::max(0.0, (s2[b] - s2[a]) - sum * sum / k);
  };
  const double whole = sse(0, n);
  if (whole <= 0) return std::nullopt;
  std::size_t best = 1;
  double best_cost = std::numeric_limits<double>::infinity();
  for (std::size_t j = 1; j < n; ++j) {
    const double cost = sse(0, j) + sse(j, n);
    if (cost < best_cost) {
      best_cost = cost;
      best = j;
    }
  }
  return best;
}

double normal_upper_quantile(double p) {
  PPB_CHECK(p > 0 && p < 1, "normal quantile of a probability outside (0, 1)");
  // P(Z > z) = erfc(z / sqrt 2) / 2 falls monotonically in z: bisect to
  // double precision (the tail is representable down to p ~ 1e-300).
  double lo = -40, hi = 40;
  for (int i = 0; i < 200 && hi - lo > 1e-12; ++i) {
    const double mid = (lo + hi) / 2;
    (normal_upper_tail(mid) > p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

double mean_finite(const std::vector<double>& values) {
  double sum = 0;
  int n = 0;
  for (double x : values) {
    if (!std::isfinite(x)) continue;
    sum += x;
    ++n;
  }
  return n > 0 ? sum / n : std::nan("");
}

}  // namespace ppb::reports
