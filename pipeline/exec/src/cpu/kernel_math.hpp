// Element and row math shared by the cpu kernels (kernels.cpp) and the CUDA
// kernels (cuda/kernels.cu): one definition of GeLU, its derivative, the
// LayerNorm row statistics and gradient, and the softmax / cross-entropy
// gradients, so that the CPU tests cover the arithmetic the GPU runs. Each
// function is __host__ __device__ under nvcc and plain inline otherwise.
// (nvcc may contract a*b+c into an FMA in device code, so GPU results agree
// with the CPU to rounding, not bit for bit.)
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define PPB_HD __host__ __device__
#else
#define PPB_HD
#endif

namespace ppb::kmath {

inline constexpr float kLayerNormEps = 1e-5f;
inline constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
inline constexpr float kGeluA = 0.044715f;

/// e^x in single precision (expf on both sides).
PPB_HD inline float exp_f(float x) {
#if defined(__CUDA_ARCH__)
  return ::expf(x);
#else
  return std::exp(x);
#endif
}

/// Square root in double precision.
PPB_HD inline double sqrt_d(double x) {
#if defined(__CUDA_ARCH__)
  return ::sqrt(x);
#else
  return std::sqrt(x);
#endif
}

/// tanh through one exp: glibc's tanhf is several times slower and GeLU is
/// the hottest elementwise op. Absolute error ~1e-7, saturates cleanly (exp
/// overflow gives +inf and 2/inf = 0).
PPB_HD inline float fast_tanh(float u) { return 1.0f - 2.0f / (1.0f + exp_f(2.0f * u)); }

/// GeLU, tanh approximation: 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))).
PPB_HD inline float gelu(float v) {
  return 0.5f * v * (1.0f + fast_tanh(kGeluC * (v + kGeluA * v * v * v)));
}

/// d gelu(v) / dv.
PPB_HD inline float gelu_grad(float v) {
  const float th = fast_tanh(kGeluC * (v + kGeluA * v * v * v));
  return 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * kGeluC * (1.0f + 3.0f * kGeluA * v * v);
}

/// LayerNorm row statistics from double sums over the h elements of a row:
/// the mean is sum / h; the reciprocal standard deviation comes from the sum
/// of squared deviations from that (double) mean. Two passes, as the CPU
/// computes them: first layernorm_mean, then sum layernorm_sq_dev(x, mean).
PPB_HD inline double layernorm_mean(double sum, int h) { return sum / h; }
PPB_HD inline double layernorm_sq_dev(float x, double mean) { return (x - mean) * (x - mean); }
PPB_HD inline float layernorm_rstd(double sq_dev_sum, int h) {
  return static_cast<float>(1.0 / sqrt_d(sq_dev_sum / h + kLayerNormEps));
}

/// The normalised value xhat = (x - mean) * rstd.
PPB_HD inline float layernorm_xhat(float x, float mean, float rstd) { return (x - mean) * rstd; }

/// One element of the LayerNorm input gradient: with dxhat = dy * gamma,
/// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) where the
/// two means run over the row (mean_d, mean_dx).
PPB_HD inline float layernorm_dx(float dy, float gamma, float xhat, float rstd, float mean_d,
                                 float mean_dx) {
  return rstd * (dy * gamma - mean_d - xhat * mean_dx);
}

/// Softmax backward for one element: p * (dp - sum_row(p * dp)).
PPB_HD inline float softmax_grad(float p, float dp, float dot) { return p * (dp - dot); }

/// Cross-entropy gradient of one logit from its softmax probability:
/// (p - [is_label]) * scale.
PPB_HD inline float cross_entropy_grad(float p, bool is_label, float scale) {
  return (is_label ? p - 1.0f : p) * scale;
}

}  // namespace ppb::kmath
