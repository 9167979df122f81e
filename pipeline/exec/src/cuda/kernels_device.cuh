// The kernels of the `cuda` backend: device code only, launched by
// kernels.cu. Kept simple on purpose: elementwise kernels are grid-stride
// loops over the flat index, row kernels use one block of kThreads threads
// per row with shared-memory tree reductions (fixed order: deterministic),
// column kernels one thread per column. Storage is T (float or
// __nv_bfloat16); arithmetic is fp32 through cpu/kernel_math.hpp, the same
// functions the cpu kernels use. A header so that the CUDA emulator
// (pipeline/exec/cudaemu) compiles the same kernels as host code.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "cpu/kernel_math.hpp"

namespace ppb::cuda::device {

inline constexpr int kThreads = 256;  // every launch uses exactly this block size
using Bf16 = __nv_bfloat16;

__device__ inline float to_f(float v) { return v; }
__device__ inline float to_f(Bf16 v) { return __bfloat162float(v); }
template <class T>
__device__ inline T from_f(float v);
template <>
__device__ inline float from_f<float>(float v) {
  return v;
}
template <>
__device__ inline Bf16 from_f<Bf16>(float v) {
  return __float2bfloat16_rn(v);
}

// Sum / max over the block; every thread gets the result. REQUIRES: called by
// all kThreads threads of the block (it synchronises).
template <class V>
__device__ V block_sum(V v) {
  __shared__ V buf[kThreads];
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (static_cast<int>(threadIdx.x) < half) buf[threadIdx.x] += buf[threadIdx.x + half];
    __syncthreads();
  }
  const V out = buf[0];
  __syncthreads();  // buf is reused by the next call
  return out;
}

__device__ float block_max(float v) {
  __shared__ float buf[kThreads];
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (static_cast<int>(threadIdx.x) < half) {
      buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + half]);
    }
    __syncthreads();
  }
  const float out = buf[0];
  __syncthreads();
  return out;
}

// Grid-stride loop bounds.
__device__ inline int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// --- kernels -----------------------------------------------------------------

template <class T>
__global__ void ppb_embedding_fwd(const int32_t* tokens, int64_t t, int seq, int h, const T* wte,
                                  const T* wpe, T* x) {
  for (int64_t i = first_index(); i < t * h; i += grid_stride()) {
    const int64_t r = i / h;
    const int64_t c = i % h;
    x[i] = from_f<T>(to_f(wte[int64_t{tokens[r]} * h + c]) + to_f(wpe[(r % seq) * h + c]));
  }
}

template <class T>
__global__ void ppb_embedding_bwd_weight(const int32_t* tokens, const T* dx, int64_t t, int seq,
                                         int h, float* dwte, float* dwpe) {
  for (int64_t i = first_index(); i < t * h; i += grid_stride()) {
    const int64_t r = i / h;
    const int64_t c = i % h;
    const float g = to_f(dx[i]);
    atomicAdd(dwte + int64_t{tokens[r]} * h + c, g);
    atomicAdd(dwpe + (r % seq) * h + c, g);
  }
}

// One block per row.
template <class T>
__global__ void ppb_layernorm_stats(const T* x, int h, float* mean, float* rstd) {
  const int64_t r = blockIdx.x;
  const T* row = x + r * h;
  double sum = 0;
  for (int c = threadIdx.x; c < h; c += kThreads) sum += to_f(row[c]);
  const double mu = kmath::layernorm_mean(block_sum(sum), h);
  double sq = 0;
  for (int c = threadIdx.x; c < h; c += kThreads) sq += kmath::layernorm_sq_dev(to_f(row[c]), mu);
  const double sq_total = block_sum(sq);
  if (threadIdx.x == 0) {
    mean[r] = static_cast<float>(mu);
    rstd[r] = kmath::layernorm_rstd(sq_total, h);
  }
}

template <class T>
__global__ void ppb_layernorm_fwd(const T* x, const float* mean, const float* rstd, const T* gamma,
                                  const T* beta, int64_t t, int h, T* y, T* kept_stats) {
  for (int64_t i = first_index(); i < t * h; i += grid_stride()) {
    const int64_t r = i / h;
    const int64_t c = i % h;
    const float xhat = kmath::layernorm_xhat(to_f(x[i]), mean[r], rstd[r]);
    y[i] = from_f<T>(xhat * to_f(gamma[c]) + to_f(beta[c]));
    if (kept_stats != nullptr && c == 0) {
      kept_stats[r] = from_f<T>(mean[r]);
      kept_stats[t + r] = from_f<T>(rstd[r]);
    }
  }
}

// One block per row.
template <class T>
__global__ void ppb_layernorm_bwd_input(const T* dy, const T* x, const float* mean,
                                        const float* rstd, const T* gamma, const T* add, int h,
                                        T* dx) {
  const int64_t r = blockIdx.x;
  const int64_t base = r * h;
  const float m = mean[r];
  const float s = rstd[r];
  double sum_d = 0;
  double sum_dx = 0;
  for (int c = threadIdx.x; c < h; c += kThreads) {
    const float dxhat = to_f(dy[base + c]) * to_f(gamma[c]);
    sum_d += dxhat;
    sum_dx += static_cast<double>(dxhat) * kmath::layernorm_xhat(to_f(x[base + c]), m, s);
  }
  const float mean_d = static_cast<float>(block_sum(sum_d) / h);
  const float mean_dx = static_cast<float>(block_sum(sum_dx) / h);
  for (int c = threadIdx.x; c < h; c += kThreads) {
    const float xhat = kmath::layernorm_xhat(to_f(x[base + c]), m, s);
    float v = kmath::layernorm_dx(to_f(dy[base + c]), to_f(gamma[c]), xhat, s, mean_d, mean_dx);
    if (add != nullptr) v = to_f(add[base + c]) + v;
    dx[base + c] = from_f<T>(v);
  }
}

// One thread per column.
template <class T>
__global__ void ppb_layernorm_bwd_weight(const T* dy, const T* x, const float* mean,
                                         const float* rstd, int64_t t, int h, float* dgamma,
                                         float* dbeta) {
  const int64_t c = first_index();
  if (c >= h) return;
  float g = 0;
  float b = 0;
  for (int64_t r = 0; r < t; ++r) {
    const float d = to_f(dy[r * h + c]);
    g += d * kmath::layernorm_xhat(to_f(x[r * h + c]), mean[r], rstd[r]);
    b += d;
  }
  dgamma[c] += g;
  dbeta[c] += b;
}

template <class T>
__global__ void ppb_gelu_fwd(const T* x, T* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    y[i] = from_f<T>(kmath::gelu(to_f(x[i])));
}

template <class T>
__global__ void ppb_gelu_bwd(const T* x, const T* dy, T* dx, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    dx[i] = from_f<T>(to_f(dy[i]) * kmath::gelu_grad(to_f(x[i])));
  }
}

template <class T>
__global__ void ppb_bias_fill(const T* bias, int64_t t, int n, T* y, bool accumulate) {
  for (int64_t i = first_index(); i < t * n; i += grid_stride()) {
    const float b = to_f(bias[i % n]);
    y[i] = from_f<T>(accumulate ? to_f(y[i]) + b : b);
  }
}

// One thread per column.
template <class T>
__global__ void ppb_bias_bwd(const T* dy, int64_t t, int n, float* dbias) {
  const int64_t c = first_index();
  if (c >= n) return;
  float sum = 0;
  for (int64_t r = 0; r < t; ++r) sum += to_f(dy[r * n + c]);
  dbias[c] += sum;
}

// One block per row of seq scores; row r is query position r % seq.
template <class T>
__global__ void ppb_attention_softmax_fwd(T* scores, int seq) {
  const int64_t r = blockIdx.x;
  const int n = static_cast<int>(r % seq) + 1;  // causal: columns 0..r%seq
  T* row = scores + r * seq;
  float mx = -INFINITY;
  for (int c = threadIdx.x; c < n; c += kThreads) mx = fmaxf(mx, to_f(row[c]));
  mx = block_max(mx);
  float sum = 0;
  for (int c = threadIdx.x; c < n; c += kThreads) sum += kmath::exp_f(to_f(row[c]) - mx);
  const float inv = 1.0f / block_sum(sum);
  // Each thread rewrites only the columns it read: no race with the reads above.
  for (int c = threadIdx.x; c < seq; c += kThreads) {
    row[c] = from_f<T>(c < n ? kmath::exp_f(to_f(row[c]) - mx) * inv : 0.0f);
  }
}

template <class T>
__global__ void ppb_attention_softmax_bwd(const T* probs, T* dp, int seq) {
  const int64_t r = blockIdx.x;
  const int n = static_cast<int>(r % seq) + 1;
  const T* p = probs + r * seq;
  T* d = dp + r * seq;
  float dot = 0;
  for (int c = threadIdx.x; c < n; c += kThreads) dot += to_f(p[c]) * to_f(d[c]);
  dot = block_sum(dot);
  for (int c = threadIdx.x; c < seq; c += kThreads) {
    d[c] = from_f<T>(c < n ? kmath::softmax_grad(to_f(p[c]), to_f(d[c]), dot) : 0.0f);
  }
}

// One block per row of v logits.
template <class T>
__global__ void ppb_cross_entropy_fwd(T* logits, const int32_t* labels, int v, double* row_loss) {
  const int64_t r = blockIdx.x;
  T* row = logits + r * v;
  const float at_label = to_f(row[labels[r]]);  // read before any thread overwrites the row
  float mx = -INFINITY;
  for (int c = threadIdx.x; c < v; c += kThreads) mx = fmaxf(mx, to_f(row[c]));
  mx = block_max(mx);
  double sum = 0;
  for (int c = threadIdx.x; c < v; c += kThreads)
    sum += exp(static_cast<double>(to_f(row[c])) - mx);
  const double total = block_sum(sum);
  if (threadIdx.x == 0) row_loss[r] = log(total) + mx - at_label;
  const double inv = 1.0 / total;
  for (int c = threadIdx.x; c < v; c += kThreads) {
    row[c] = from_f<T>(static_cast<float>(exp(static_cast<double>(to_f(row[c])) - mx) * inv));
  }
}

// One block.
__global__ void ppb_loss_sum(const double* row_loss, int64_t t, double* out) {
  double sum = 0;
  for (int64_t r = threadIdx.x; r < t; r += kThreads) sum += row_loss[r];
  sum = block_sum(sum);
  if (threadIdx.x == 0) *out = sum;
}

template <class T>
__global__ void ppb_cross_entropy_bwd(T* probs, const int32_t* labels, int64_t t, int v,
                                      float scale) {
  for (int64_t i = first_index(); i < t * v; i += grid_stride()) {
    const int64_t r = i / v;
    const bool is_label = i % v == labels[r];
    probs[i] = from_f<T>(kmath::cross_entropy_grad(to_f(probs[i]), is_label, scale));
  }
}

template <class T>
__global__ void ppb_sgd(float* master, float* grads, int64_t n, float lr, T* copy) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float p = master[i] - lr * grads[i];
    master[i] = p;
    grads[i] = 0.0f;
    if (copy != nullptr) copy[i] = from_f<T>(p);
  }
}

template <class T>
__global__ void ppb_to_storage(const float* src, T* dst, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dst[i] = from_f<T>(src[i]);
}

template <class T>
__global__ void ppb_to_float(const T* src, float* dst, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dst[i] = to_f(src[i]);
}

}  // namespace ppb::cuda::device
