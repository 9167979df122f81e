#include "kernels.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernel_math.hpp"
#include "ppb/profiling/check.hpp"

extern "C" int openblas_get_num_threads() __attribute__((weak));

namespace ppb::cpu {
namespace {

int to_int(int64_t v) {
  PPB_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "dimension exceeds BLAS int");
  return static_cast<int>(v);
}

}  // namespace

int blas_threads() {
  // OpenBLAS's own query; another CBLAS links without it.
  if (openblas_get_num_threads == nullptr) return 1;
  return std::max(1, openblas_get_num_threads());
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void linear_forward(const float* x, int64_t t, int in, const float* w, const float* bias, int out,
                    float* y, bool accumulate) {
  const int rows = to_int(t);
  if (bias != nullptr) {
    for (int r = 0; r < rows; ++r) {
      float* yr = y + int64_t{r} * out;
      if (accumulate) {
        for (int c = 0; c < out; ++c) yr[c] += bias[c];
      } else {
        std::memcpy(yr, bias, sizeof(float) * static_cast<size_t>(out));
      }
    }
  }
  const float beta = (bias != nullptr || accumulate) ? 1.0f : 0.0f;
  gemm(false, false, rows, out, in, 1.0f, x, in, w, out, beta, y, out);
}

void linear_backward_input(const float* dy, int64_t t, int out, const float* w, int in, float* dx,
                           bool accumulate) {
  gemm(false, true, to_int(t), in, out, 1.0f, dy, out, w, out, accumulate ? 1.0f : 0.0f, dx, in);
}

void linear_backward_weight(const float* x, const float* dy, int64_t t, int in, int out, float* dw,
                            float* dbias) {
  gemm(true, false, in, out, to_int(t), 1.0f, x, in, dy, out, 1.0f, dw, out);
  if (dbias != nullptr) {
    for (int64_t r = 0; r < t; ++r) {
      const float* row = dy + r * out;
      for (int c = 0; c < out; ++c) dbias[c] += row[c];
    }
  }
}

void layernorm_forward(const float* x, int64_t t, int h, const float* gamma, const float* beta,
                       float* y, float* mean, float* rstd) {
  for (int64_t r = 0; r < t; ++r) {
    const float* xr = x + r * h;
    double sum = 0;
    for (int c = 0; c < h; ++c) sum += xr[c];
    const double mu = kmath::layernorm_mean(sum, h);
    double sq_dev = 0;
    for (int c = 0; c < h; ++c) sq_dev += kmath::layernorm_sq_dev(xr[c], mu);
    const float m = static_cast<float>(mu);
    const float s = kmath::layernorm_rstd(sq_dev, h);
    mean[r] = m;
    rstd[r] = s;
    float* yr = y + r * h;
    for (int c = 0; c < h; ++c) yr[c] = kmath::layernorm_xhat(xr[c], m, s) * gamma[c] + beta[c];
  }
}

void layernorm_backward_input(const float* dy, const float* x, const float* mean, const float* rstd,
                              const float* gamma, int64_t t, int h, float* dx, bool accumulate) {
  for (int64_t r = 0; r < t; ++r) {
    const float* xr = x + r * h;
    const float* dyr = dy + r * h;
    const float m = mean[r];
    const float s = rstd[r];
    // dxhat = dy * gamma; dx = s * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
    double sum_d = 0;
    double sum_dx = 0;
    for (int c = 0; c < h; ++c) {
      const float dxhat = dyr[c] * gamma[c];
      sum_d += dxhat;
      sum_dx += static_cast<double>(dxhat) * kmath::layernorm_xhat(xr[c], m, s);
    }
    const float mean_d = static_cast<float>(sum_d / h);
    const float mean_dx = static_cast<float>(sum_dx / h);
    float* dxr = dx + r * h;
    for (int c = 0; c < h; ++c) {
      const float xhat = kmath::layernorm_xhat(xr[c], m, s);
      const float v = kmath::layernorm_dx(dyr[c], gamma[c], xhat, s, mean_d, mean_dx);
      dxr[c] = accumulate ? dxr[c] + v : v;
    }
  }
}

void layernorm_backward_weight(const float* dy, const float* x, const float* mean,
                               const float* rstd, int64_t t, int h, float* dgamma, float* dbeta) {
  for (int64_t r = 0; r < t; ++r) {
    const float* xr = x + r * h;
    const float* dyr = dy + r * h;
    for (int c = 0; c < h; ++c) {
      dgamma[c] += dyr[c] * kmath::layernorm_xhat(xr[c], mean[r], rstd[r]);
      dbeta[c] += dyr[c];
    }
  }
}

void gelu_forward(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = kmath::gelu(x[i]);
}

void gelu_backward(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * kmath::gelu_grad(x[i]);
}

void attention_forward(const float* qkv, int batch, int seq, int h, int heads, float* probs,
                       float* ctx) {
  const int d = h / heads;
  const int ld = 3 * h;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int b = 0; b < batch; ++b) {
    for (int j = 0; j < heads; ++j) {
      const float* q = qkv + int64_t{b} * seq * ld + int64_t{j} * d;
      const float* k = q + h;
      const float* v = q + int64_t{2} * h;
      float* p = probs + (int64_t{b} * heads + j) * seq * seq;
      gemm(false, true, seq, seq, d, scale, q, ld, k, ld, 0.0f, p, seq);
      for (int i = 0; i < seq; ++i) {
        float* row = p + int64_t{i} * seq;
        float mx = row[0];
        for (int c = 1; c <= i; ++c) mx = std::max(mx, row[c]);
        float sum = 0;
        for (int c = 0; c <= i; ++c) {
          row[c] = std::exp(row[c] - mx);
          sum += row[c];
        }
        const float inv = 1.0f / sum;
        for (int c = 0; c <= i; ++c) row[c] *= inv;
        for (int c = i + 1; c < seq; ++c) row[c] = 0.0f;
      }
      float* o = ctx + int64_t{b} * seq * h + int64_t{j} * d;
      gemm(false, false, seq, d, seq, 1.0f, p, seq, v, ld, 0.0f, o, h);
    }
  }
}

void attention_backward(const float* qkv, const float* probs, const float* dctx, int batch, int seq,
                        int h, int heads, float* dqkv, float* workspace) {
  const int d = h / heads;
  const int ld = 3 * h;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  float* ds = workspace;
  for (int b = 0; b < batch; ++b) {
    for (int j = 0; j < heads; ++j) {
      const int64_t off = int64_t{b} * seq * ld + int64_t{j} * d;
      const float* q = qkv + off;
      const float* k = q + h;
      const float* v = q + int64_t{2} * h;
      float* dq = dqkv + off;
      float* dk = dq + h;
      float* dv = dq + int64_t{2} * h;
      const float* p = probs + (int64_t{b} * heads + j) * seq * seq;
      const float* dout = dctx + int64_t{b} * seq * h + int64_t{j} * d;
      // dP = dO V^T ; dV = P^T dO
      gemm(false, true, seq, seq, d, 1.0f, dout, h, v, ld, 0.0f, ds, seq);
      gemm(true, false, seq, d, seq, 1.0f, p, seq, dout, h, 0.0f, dv, ld);
      // dS = P * (dP - rowsum(P * dP)), causal part only
      for (int i = 0; i < seq; ++i) {
        const float* prow = p + int64_t{i} * seq;
        float* row = ds + int64_t{i} * seq;
        float dot = 0;
        for (int c = 0; c <= i; ++c) dot += prow[c] * row[c];
        for (int c = 0; c <= i; ++c) row[c] = kmath::softmax_grad(prow[c], row[c], dot);
        for (int c = i + 1; c < seq; ++c) row[c] = 0.0f;
      }
      // dQ = scale dS K ; dK = scale dS^T Q
      gemm(false, false, seq, d, seq, scale, ds, seq, k, ld, 0.0f, dq, ld);
      gemm(true, false, seq, d, seq, scale, ds, seq, q, ld, 0.0f, dk, ld);
    }
  }
}

double softmax_cross_entropy_forward(float* logits, const int32_t* labels, int64_t t, int v,
                                     int ld) {
  double total = 0;
  for (int64_t r = 0; r < t; ++r) {
    float* row = logits + r * ld;
    float mx = row[0];
    for (int c = 1; c < v; ++c) mx = std::max(mx, row[c]);
    double sum = 0;  // single-precision exponentials (as the cuda kernel), a double sum
    for (int c = 0; c < v; ++c) sum += kmath::exp_f(row[c] - mx);
    const int32_t label = labels[r];
    total += std::log(sum) + mx - row[label];
    const double inv = 1.0 / sum;
    for (int c = 0; c < v; ++c) {
      row[c] = static_cast<float>(kmath::exp_f(row[c] - mx) * inv);
    }
    for (int c = v; c < ld; ++c) row[c] = 0.0f;
  }
  return total;
}

void softmax_cross_entropy_backward(float* probs, const int32_t* labels, int64_t t, int v, int ld,
                                    float scale) {
  for (int64_t r = 0; r < t; ++r) {
    float* row = probs + r * ld;
    for (int c = 0; c < v; ++c) row[c] = kmath::cross_entropy_grad(row[c], c == labels[r], scale);
    for (int c = v; c < ld; ++c) row[c] = 0.0f;
  }
}

void embedding_forward(const int32_t* tokens, int64_t t, int seq, int h, const float* wte,
                       const float* wpe, float* x) {
  for (int64_t r = 0; r < t; ++r) {
    const float* te = wte + int64_t{tokens[r]} * h;
    const float* pe = wpe + (r % seq) * h;
    float* xr = x + r * h;
    for (int c = 0; c < h; ++c) xr[c] = te[c] + pe[c];
  }
}

void embedding_backward_weight(const int32_t* tokens, const float* dx, int64_t t, int seq, int h,
                               float* dwte, float* dwpe) {
  for (int64_t r = 0; r < t; ++r) {
    const float* dxr = dx + r * h;
    float* te = dwte + int64_t{tokens[r]} * h;
    float* pe = dwpe + (r % seq) * h;
    for (int c = 0; c < h; ++c) {
      te[c] += dxr[c];
      pe[c] += dxr[c];
    }
  }
}

}  // namespace ppb::cpu
