// The gate's statistics on synthetic samples: the spread figures, the exact
// and asymptotic Mann-Whitney U p-values against scipy.stats.mannwhitneyu's
// (the documentation's example and values worked out by enumerating every
// ordering), the detectable shift, and change points on synthetic series.
#include "ppb/reports/stats.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace ppb::reports {
namespace {

TEST(Spread, MedianMadQuartilesMinMax) {
  const Spread s = spread({4, 1, 3, 2, 100});
  EXPECT_EQ(s.n, 5U);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.mad, 1);  // |dev| = 1, 2, 0, 1, 97
  EXPECT_DOUBLE_EQ(s.q1, 2);
  EXPECT_DOUBLE_EQ(s.q3, 4);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 100);
  EXPECT_NEAR(s.relative_mad(), 1.4826 / 3, 1e-12);
}

TEST(Spread, EvenCountInterpolatesAndDropsNonFinite) {
  const Spread s = spread({1, 2, 3, 4, std::nan("")});
  EXPECT_EQ(s.n, 4U);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.q1, 1.75);
  EXPECT_DOUBLE_EQ(s.q3, 3.25);
  EXPECT_TRUE(std::isnan(spread({}).median));
}

TEST(NormalQuantile, KnownValuesAndTheTail) {
  // scipy.stats.norm.isf: 0.5 -> 0, 0.025 -> 1.959964, 0.001 -> 3.090232,
  // 1e-5 -> 4.264891, 0.975 -> -1.959964.
  EXPECT_NEAR(normal_upper_quantile(0.5), 0.0, 1e-9);
  EXPECT_NEAR(normal_upper_quantile(0.025), 1.959964, 1e-6);
  EXPECT_NEAR(normal_upper_quantile(0.001), 3.090232, 1e-6);
  EXPECT_NEAR(normal_upper_quantile(1e-5), 4.264891, 1e-6);
  EXPECT_NEAR(normal_upper_quantile(0.975), -1.959964, 1e-6);
}

TEST(NormalTail, InvertsTheQuantile) {
  EXPECT_NEAR(normal_upper_tail(1.959964), 0.025, 1e-7);
  EXPECT_NEAR(normal_upper_tail(0.0), 0.5, 1e-15);
  for (double p : {0.3, 1e-3, 1e-9})
    EXPECT_NEAR(normal_upper_tail(normal_upper_quantile(p)), p, p * 1e-9);
}

TEST(BenjaminiHochberg, ThePapersFifteenHypotheses) {
  // Benjamini & Hochberg (1995), section 4: fifteen p-values at q = 0.05;
  // the step-up procedure rejects the four smallest, Bonferroni (0.05/15)
  // only three. Order does not matter.
  const std::vector<double> p = {0.0201, 0.0001, 0.0004, 0.0019, 0.0095, 0.0278, 0.0298, 0.0344,
                                 0.0459, 0.3240, 0.4262, 0.5719, 0.6528, 0.7590, 1.000};
  EXPECT_EQ(benjamini_hochberg(p, 0.05, 15), 4u);
  // Hypotheses not tested count as p = 1: among 30, the fourth smallest
  // (0.0095) is above 0.05 x 4 / 30, the third (0.0019) within 0.05 x 3 / 30.
  EXPECT_EQ(benjamini_hochberg(p, 0.05, 30), 3u);
  EXPECT_EQ(benjamini_hochberg({0.5, 0.9}, 0.05, 2), 0u);
  EXPECT_EQ(benjamini_hochberg({}, 0.05, 10), 0u);
  // Every p at alpha itself: all m are discoveries (k = m).
  EXPECT_EQ(benjamini_hochberg({0.01, 0.01, 0.01}, 0.01, 3), 3u);
}

TEST(MannWhitney, ScipyDocumentationExampleExact) {
  // scipy.stats.mannwhitneyu(males, females): statistic 17.0, pvalue 0.1111...
  const UTest t = mann_whitney_u({19, 22, 16, 29, 24}, {20, 11, 17, 12});
  EXPECT_TRUE(t.exact);
  EXPECT_DOUBLE_EQ(t.u, 17);
  EXPECT_NEAR(t.p, 1.0 / 9.0, 1e-12);
}

TEST(MannWhitney, CompleteSeparationIsTheSmallestPValue) {
  const UTest a = mann_whitney_u({1, 2, 3}, {4, 5, 6});
  EXPECT_DOUBLE_EQ(a.u, 0);
  EXPECT_NEAR(a.p, 0.1, 1e-12);  // 2 / C(6, 3)
  EXPECT_NEAR(a.p, min_p_value(3, 3), 1e-12);
  const UTest b = mann_whitney_u({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5});
  EXPECT_DOUBLE_EQ(b.u, 25);
  EXPECT_NEAR(b.p, 2.0 / 252.0, 1e-12);
}

TEST(MannWhitney, ExactAgainstEnumeration) {
  // Every one of the C(13, 7) = 1716 orderings enumerated: 310 have U >= 31.
  const UTest t =
      mann_whitney_u({1.1, 2.3, 3.7, 4.2, 5.9, 6.1, 7.4}, {2.2, 3.3, 8.1, 9.0, 9.5, 10.2});
  EXPECT_TRUE(t.exact);
  EXPECT_DOUBLE_EQ(t.u, 11);
  EXPECT_NEAR(t.p, 0.18065268065268064, 1e-12);
}

TEST(MannWhitney, TiesUseTheCorrectedNormalApproximation) {
  // scipy method="asymptotic" (tie and continuity corrections).
  const UTest t = mann_whitney_u({1, 2, 2, 3, 3, 3}, {2, 3, 4, 4, 5, 6});
  EXPECT_FALSE(t.exact);
  EXPECT_DOUBLE_EQ(t.u, 5.5);
  EXPECT_NEAR(t.p, 0.0483816574977987, 1e-12);
}

TEST(MannWhitney, LargeSamplesUseTheNormalApproximation) {
  std::vector<double> x, y;
  for (int i = 0; i < 40; ++i) {
    x.push_back(i);
    y.push_back(i + 0.5);
  }
  const UTest t = mann_whitney_u(x, y);
  EXPECT_FALSE(t.exact);
  EXPECT_DOUBLE_EQ(t.u, 780);  // sum over i of i pairs beaten = 40 * 39 / 2
  EXPECT_GT(t.p, 0.5);
  EXPECT_DOUBLE_EQ(mann_whitney_u({}, {1}).p, 1);
  EXPECT_DOUBLE_EQ(mann_whitney_u({2, 2, 2}, {2, 2}).p, 1);
}

// A step whose figure is unknown (null in the file, NaN here) has no rank:
// it is left out, as spread() leaves it out (no order places NaN; the ranks
// once looped on it forever).
TEST(MannWhitney, AnUnknownValueIsLeftOut) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const UTest with = mann_whitney_u({1, nan, 2, 3, 3, 3}, {2, 3, nan, 4, 4, 5, 6});
  const UTest without = mann_whitney_u({1, 2, 3, 3, 3}, {2, 3, 4, 4, 5, 6});
  EXPECT_EQ(with.u, without.u);
  EXPECT_EQ(with.p, without.p);
  const std::vector<double> y = {100, 101, 99, 100.5, 99.5, 100.2, 99.8, 100.1, nan};
  const std::vector<double> x = {100.3, nan, 99.7, 100.4, 99.6, 100, 100.6, 99.4, 100.05};
  EXPECT_EQ(detectable_shift(x, y, 0.01, -1),
            detectable_shift({100.3, 99.7, 100.4, 99.6, 100, 100.6, 99.4, 100.05},
                             {100, 101, 99, 100.5, 99.5, 100.2, 99.8, 100.1}, 0.01, -1));
}

// median() is spread().median to the last bit, without the sorts.
TEST(Median, IsTheSpreadsMedianBitForBit) {
  const std::vector<double> odd = {3.3, -1, 7.25, 0.1, 2, 2, 9};
  const std::vector<double> even = {0.1, 0.7, 0.2, 1e9, -3, 0.3};
  EXPECT_EQ(median(odd), spread(odd).median);
  EXPECT_EQ(median(even), spread(even).median);
  EXPECT_EQ(median({1, std::numeric_limits<double>::infinity(), 2}), 1.5);
  EXPECT_TRUE(std::isnan(median({})));
}

TEST(MinPValue, BinomialCoefficient) {
  EXPECT_DOUBLE_EQ(min_p_value(3, 3), 0.1);
  EXPECT_NEAR(min_p_value(10, 10), 2.0 / 184756.0, 1e-18);
  EXPECT_DOUBLE_EQ(min_p_value(1, 1), 1);
  EXPECT_DOUBLE_EQ(min_p_value(0, 5), 1);
}

TEST(DetectableShift, TooFewSamplesIsUndecidable) {
  // 3 vs 3 can never reach p < 0.05 (smallest p is 0.1).
  EXPECT_FALSE(detectable_shift({1, 1.01, 0.99}, {1, 1.01, 0.99}, 0.05, -1).has_value());
}

TEST(DetectableShift, GrowsWithTheNoise) {
  std::mt19937 rng(7);
  auto sample = [&rng](double rel_sd) {
    std::normal_distribution<double> d(100.0, 100.0 * rel_sd);
    std::vector<double> v;
    for (int i = 0; i < 12; ++i) v.push_back(d(rng));
    return v;
  };
  const auto quiet = detectable_shift(sample(0.005), sample(0.005), 0.01, -1);
  const auto noisy = detectable_shift(sample(0.05), sample(0.05), 0.01, -1);
  ASSERT_TRUE(quiet.has_value());
  ASSERT_TRUE(noisy.has_value());
  EXPECT_LT(*quiet, 0.03);
  EXPECT_GT(*noisy, 3 * *quiet);
  // At the returned shift the test is significant, just below it is not.
  EXPECT_GT(*quiet, 0);
}

TEST(DetectableShift, IsTheEdgeOfSignificance) {
  const std::vector<double> y = {100, 101, 99, 100.5, 99.5, 100.2, 99.8, 100.1};
  const std::vector<double> x = {100.3, 99.7, 100.4, 99.6, 100, 100.6, 99.4, 100.05};
  const auto d = detectable_shift(x, y, 0.01, -1);
  ASSERT_TRUE(d.has_value());
  auto p_at = [&](double s) {
    std::vector<double> shifted;
    const double centre = spread(y).median / spread(x).median;
    for (double v : x) shifted.push_back(v * centre * (1 - s));
    return mann_whitney_u(shifted, y).p;
  };
  EXPECT_LT(p_at(*d), 0.01);
  EXPECT_GE(p_at(*d - 1e-6), 0.01);
}

TEST(ChangePoint, StepInASyntheticSeries) {
  EXPECT_EQ(change_point({100, 101, 99, 100, 90, 91, 89}), std::optional<std::size_t>(4));
  EXPECT_EQ(change_point({5, 5, 5, 5, 5, 9}), std::optional<std::size_t>(5));
  EXPECT_EQ(change_point({9, 5, 5, 5}), std::optional<std::size_t>(1));
  EXPECT_FALSE(change_point({3, 3, 3}).has_value());
  EXPECT_FALSE(change_point({3}).has_value());
}

TEST(ChangePoint, NoisySeriesFindsTheStep) {
  std::mt19937 rng(11);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::vector<double> series;
  for (int i = 0; i < 10; ++i) series.push_back(100 + noise(rng));
  for (int i = 0; i < 5; ++i) series.push_back(88 + noise(rng));
  EXPECT_EQ(change_point(series), std::optional<std::size_t>(10));
}

}  // namespace
}  // namespace ppb::reports
