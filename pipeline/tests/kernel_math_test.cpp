// The element and row math the cpu and CUDA kernels share (cpu/kernel_math.hpp),
// against central differences and its defining identities.
#include "cpu/kernel_math.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ppb {
namespace {

TEST(KernelMath, GeluMatchesItsClosedFormAndItsDerivativeTheCentralDifference) {
  for (float v : {-6.0f, -2.5f, -1.0f, -0.3f, 0.0f, 0.2f, 0.7f, 1.5f, 3.0f, 8.0f}) {
    const double exact =
        0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(kmath::gelu(v), exact, 2e-6 * (1 + std::fabs(exact))) << v;
    const float h = 1e-2f;
    const double fd = (static_cast<double>(kmath::gelu(v + h)) - kmath::gelu(v - h)) / (2.0 * h);
    EXPECT_NEAR(kmath::gelu_grad(v), fd, 2e-4) << v;
  }
  EXPECT_EQ(kmath::gelu(0.0f), 0.0f);
  EXPECT_FLOAT_EQ(kmath::gelu_grad(0.0f), 0.5f);
  EXPECT_FLOAT_EQ(kmath::gelu(40.0f), 40.0f);  // saturates without NaN
  EXPECT_EQ(kmath::gelu(-40.0f), 0.0f);
}

// LayerNorm of one row: statistics as the kernels compute them, and the input
// gradient of L = sum(dy * y) against central differences in double.
TEST(KernelMath, LayerNormRowStatisticsAndInputGradient) {
  const int h = 7;
  const std::vector<float> x = {0.3f, -1.2f, 2.5f, 0.0f, 0.9f, -0.4f, 1.1f};
  const std::vector<float> gamma = {1.0f, 0.5f, -0.7f, 1.3f, 0.9f, 1.1f, -0.2f};
  const std::vector<float> dy = {0.2f, -0.1f, 0.4f, 0.3f, -0.5f, 0.1f, 0.25f};
  const auto forward_loss = [&](const std::vector<double>& row) {
    double mu = 0;
    for (double v : row) mu += v;
    mu /= h;
    double var = 0;
    for (double v : row) var += (v - mu) * (v - mu);
    const double rstd = 1.0 / std::sqrt(var / h + kmath::kLayerNormEps);
    double loss = 0;
    for (int c = 0; c < h; ++c) loss += dy[c] * (row[c] - mu) * rstd * gamma[c];
    return loss;
  };
  double sum = 0;
  for (float v : x) sum += v;
  const double mu = kmath::layernorm_mean(sum, h);
  double sq = 0;
  for (float v : x) sq += kmath::layernorm_sq_dev(v, mu);
  const float m = static_cast<float>(mu);
  const float s = kmath::layernorm_rstd(sq, h);
  EXPECT_NEAR(m, 3.2 / 7.0, 1e-6);
  double sum_d = 0;
  double sum_dx = 0;
  for (int c = 0; c < h; ++c) {
    const float dxhat = dy[c] * gamma[c];
    sum_d += dxhat;
    sum_dx += static_cast<double>(dxhat) * kmath::layernorm_xhat(x[c], m, s);
  }
  for (int c = 0; c < h; ++c) {
    const float dx =
        kmath::layernorm_dx(dy[c], gamma[c], kmath::layernorm_xhat(x[c], m, s), s,
                            static_cast<float>(sum_d / h), static_cast<float>(sum_dx / h));
    std::vector<double> up(x.begin(), x.end());
    std::vector<double> down(x.begin(), x.end());
    up[c] += 1e-4;
    down[c] -= 1e-4;
    EXPECT_NEAR(dx, (forward_loss(up) - forward_loss(down)) / 2e-4, 1e-4) << c;
  }
  // A constant row normalises to 0 with rstd 1/sqrt(eps).
  EXPECT_FLOAT_EQ(kmath::layernorm_rstd(0.0, 5), static_cast<float>(1.0 / std::sqrt(1e-5)));
}

TEST(KernelMath, SoftmaxAndCrossEntropyGradients) {
  // With sum(p) = 1 and dot = sum(p * dp), the softmax gradient sums to 0.
  const std::vector<float> p = {0.1f, 0.2f, 0.3f, 0.4f};
  const std::vector<float> dp = {1.0f, -2.0f, 0.5f, 3.0f};
  float dot = 0;
  for (size_t i = 0; i < p.size(); ++i) dot += p[i] * dp[i];
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) total += kmath::softmax_grad(p[i], dp[i], dot);
  EXPECT_NEAR(total, 0.0, 1e-6);
  EXPECT_FLOAT_EQ(kmath::softmax_grad(0.25f, 2.0f, 1.0f), 0.25f);
  // (p - onehot) * scale.
  EXPECT_FLOAT_EQ(kmath::cross_entropy_grad(0.25f, true, 0.5f), -0.375f);
  EXPECT_FLOAT_EQ(kmath::cross_entropy_grad(0.25f, false, 0.5f), 0.125f);
}

}  // namespace
}  // namespace ppb
