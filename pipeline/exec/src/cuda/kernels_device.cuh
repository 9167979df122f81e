// The kernels of the `cuda` backend: device code only, launched by
// kernels.cu. Elementwise kernels are grid-stride loops over the flat index;
// row kernels (LayerNorm, softmax, cross-entropy) use one block of kThreads
// threads per row with shared-memory reductions in a fixed order; column
// reductions (bias and LayerNorm weight gradients) are two launches: a grid
// of tiles of kColumnTile columns by kColumnRows rows, each writing one fp32
// partial sum per column, then one fixed-order sum of a column's partials.
// Every result is therefore the same run to run (no float atomics; the
// embedding's scatter sums each row's tokens in row order). Storage is T (float or __nv_bfloat16);
// arithmetic is fp32 through cpu/kernel_math.hpp, the same functions the cpu kernels use. Only
// __shared__ memory and __syncthreads() synchronise threads (no warp shuffles), so that the CUDA
// emulator (pipeline/exec/cudaemu), which compiles this header as host code, runs the very same
// kernels.
#pragma once

#include <cuda_bf16.h>

#include <chrono>
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

// Column reductions: a block covers kColumnTile adjacent columns (one per
// lane, so that a warp reads a row segment coalesced) and kColumnRows rows,
// kColumnLanes threads per column taking every kColumnLanes-th row.
inline constexpr int kColumnTile = 32;
inline constexpr int kColumnLanes = kThreads / kColumnTile;
inline constexpr int kColumnRows = 128;

// Sums over the block of one or two values (a pair costs the barriers of
// one); every thread gets the result. The order is fixed: 32 sequential
// sums of 8 values with a stride of 32, then a sequential sum of those 32.
// REQUIRES: called by all kThreads threads of the block (it synchronises).
template <class V>
struct Pair {
  V a;
  V b;
};
template <class V>
__device__ Pair<V> block_sum2(V a, V b) {
  constexpr int kWarp = 32;
  __shared__ V buf_a[kThreads];
  __shared__ V buf_b[kThreads];
  __shared__ V total[2];
  const int i = static_cast<int>(threadIdx.x);
  buf_a[i] = a;
  buf_b[i] = b;
  __syncthreads();
  if (i < kWarp) {
    V sa = buf_a[i];
    V sb = buf_b[i];
    for (int k = i + kWarp; k < kThreads; k += kWarp) {
      sa += buf_a[k];
      sb += buf_b[k];
    }
    buf_a[i] = sa;
    buf_b[i] = sb;
  }
  __syncthreads();
  if (i == 0) {
    V sa = buf_a[0];
    V sb = buf_b[0];
    for (int k = 1; k < kWarp; ++k) {
      sa += buf_a[k];
      sb += buf_b[k];
    }
    total[0] = sa;
    total[1] = sb;
  }
  __syncthreads();
  const Pair<V> out{total[0], total[1]};
  __syncthreads();  // the buffers are reused by the next call
  return out;
}

template <class V>
__device__ V block_sum(V v) {
  return block_sum2(v, V{0}).a;
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

// The LayerNorm statistics of one row of h elements, as the cpu kernels
// compute them (kernel_math: two passes of double sums). Every thread of
// the block gets them. REQUIRES: called by all threads of the block.
template <class T>
__device__ Pair<float> row_stats(const T* row, int h) {
  double sum = 0;
  for (int c = threadIdx.x; c < h; c += kThreads) sum += to_f(row[c]);
  const double mu = kmath::layernorm_mean(block_sum(sum), h);
  double sq = 0;
  for (int c = threadIdx.x; c < h; c += kThreads) sq += kmath::layernorm_sq_dev(to_f(row[c]), mu);
  return {static_cast<float>(mu), kmath::layernorm_rstd(block_sum(sq), h)};
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

// Thread (r, c): for r < seq, position r's column c over the samples in
// order; where r is its token's first row, the token's column c over its
// rows in order (chains: embedding_chains). Each element has one writer.
template <class T>
__global__ void ppb_embedding_bwd_weight(const int32_t* tokens, const int32_t* chains, const T* dx,
                                         int64_t t, int seq, int h, float* dwte, float* dwpe) {
  const int32_t* first = chains + t;
  for (int64_t i = first_index(); i < t * h; i += grid_stride()) {
    const int64_t r = i / h;
    const int64_t c = i % h;
    if (r < seq) {
      float g = dwpe[i];
      for (int64_t q = r; q < t; q += seq) g += to_f(dx[q * h + c]);
      dwpe[i] = g;
    }
    if (first[r] != 0) {
      float* w = dwte + int64_t{tokens[r]} * h + c;
      float g = *w;
      for (int64_t q = r; q >= 0; q = chains[q]) g += to_f(dx[q * h + c]);
      *w = g;
    }
  }
}

// One block per row: mean[r], rstd[r] in fp32.
template <class T>
__global__ void ppb_layernorm_stats(const T* x, int h, float* mean, float* rstd) {
  const int64_t r = blockIdx.x;
  const Pair<float> st = row_stats(x + r * h, h);
  if (threadIdx.x == 0) {
    mean[r] = st.a;
    rstd[r] = st.b;
  }
}

// One block per row, one pass: the row's statistics, y = xhat * gamma +
// beta, the statistics in storage precision at kept_stats[r] (mean) and
// kept_stats[t + r] (rstd) when kept_stats is not null, and the row itself
// at kept_x (the unit's kept input) and at resid (the residual it passes
// on) where those are not null.
template <class T>
__global__ void ppb_layernorm_fwd(const T* x, const T* gamma, const T* beta, int64_t t, int h, T* y,
                                  T* kept_x, T* kept_stats, T* resid) {
  const int64_t r = blockIdx.x;
  const int64_t base = r * h;
  const Pair<float> st = row_stats(x + base, h);
  for (int c = threadIdx.x; c < h; c += kThreads) {
    const T v = x[base + c];
    const float xhat = kmath::layernorm_xhat(to_f(v), st.a, st.b);
    y[base + c] = from_f<T>(xhat * to_f(gamma[c]) + to_f(beta[c]));
    if (kept_x != nullptr) kept_x[base + c] = v;
    if (resid != nullptr) resid[base + c] = v;
  }
  if (kept_stats != nullptr && threadIdx.x == 0) {
    kept_stats[r] = from_f<T>(st.a);
    kept_stats[t + r] = from_f<T>(st.b);
  }
}

// One block per row, one pass: the row's statistics (also stored at mean[r]
// and rstd[r] when mean is not null, for the weight gradient), then dx.
template <class T>
__global__ void ppb_layernorm_bwd_input(const T* dy, const T* x, const T* gamma, const T* add,
                                        int h, T* dx, float* mean, float* rstd) {
  const int64_t r = blockIdx.x;
  const int64_t base = r * h;
  const Pair<float> st = row_stats(x + base, h);
  double sum_d = 0;
  double sum_dx = 0;
  for (int c = threadIdx.x; c < h; c += kThreads) {
    const float dxhat = to_f(dy[base + c]) * to_f(gamma[c]);
    sum_d += dxhat;
    sum_dx += static_cast<double>(dxhat) * kmath::layernorm_xhat(to_f(x[base + c]), st.a, st.b);
  }
  const Pair<double> sums = block_sum2(sum_d, sum_dx);
  const float mean_d = static_cast<float>(sums.a / h);
  const float mean_dx = static_cast<float>(sums.b / h);
  for (int c = threadIdx.x; c < h; c += kThreads) {
    const float xhat = kmath::layernorm_xhat(to_f(x[base + c]), st.a, st.b);
    float v = kmath::layernorm_dx(to_f(dy[base + c]), to_f(gamma[c]), xhat, st.b, mean_d, mean_dx);
    if (add != nullptr) v = to_f(add[base + c]) + v;
    dx[base + c] = from_f<T>(v);
  }
  if (mean != nullptr && threadIdx.x == 0) {
    mean[r] = st.a;
    rstd[r] = st.b;
  }
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

// y[r,c] = bias[c], plus add[r,c] when add is not null (a residual).
template <class T>
__global__ void ppb_bias_fill(const T* bias, const T* add, int64_t t, int n, T* y) {
  for (int64_t i = first_index(); i < t * n; i += grid_stride()) {
    const float b = to_f(bias[i % n]);
    y[i] = from_f<T>(add != nullptr ? to_f(add[i]) + b : b);
  }
}

// Column partial sums of dy[t,n] over one tile: kColumnTile columns from
// blockIdx.x * kColumnTile, kColumnRows rows from blockIdx.y * kColumnRows
// (fewer in the last tile). Without mean (a bias gradient) part is [tiles of
// rows][n]: part[y * n + c] = sum_r dy[r,c]. With mean and rstd (a LayerNorm
// weight gradient, x the LayerNorm's input) part is [tiles of rows][2n]:
// part[y * 2n + c] = sum_r dy[r,c] * xhat[r,c] (gamma) and part[y * 2n + n +
// c] = sum_r dy[r,c] (beta). The order is fixed: thread group g sums rows
// g, g + kColumnLanes, .. of the tile in turn, then lane c's thread of group
// 0 sums the groups' sums in group order.
template <class T>
__global__ void ppb_column_partials(const T* dy, const T* x, const float* mean, const float* rstd,
                                    int64_t t, int n, float* part) {
  __shared__ float sum_a[kThreads];
  __shared__ float sum_b[kThreads];
  const int lane = static_cast<int>(threadIdx.x) % kColumnTile;
  const int group = static_cast<int>(threadIdx.x) / kColumnTile;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumnTile + lane;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kColumnRows;
  const int64_t r1 = r0 + kColumnRows < t ? r0 + kColumnRows : t;
  const bool norm = mean != nullptr;
  float a = 0;
  float b = 0;
  if (c < n) {
    for (int64_t r = r0 + group; r < r1; r += kColumnLanes) {
      const float d = to_f(dy[r * n + c]);
      if (norm) a += d * kmath::layernorm_xhat(to_f(x[r * n + c]), mean[r], rstd[r]);
      b += d;
    }
  }
  sum_a[threadIdx.x] = a;
  sum_b[threadIdx.x] = b;
  __syncthreads();
  if (group == 0 && c < n) {
    float ta = 0;
    float tb = 0;
    for (int g = 0; g < kColumnLanes; ++g) {
      ta += sum_a[g * kColumnTile + lane];
      tb += sum_b[g * kColumnTile + lane];
    }
    if (norm) {
      float* row = part + static_cast<int64_t>(blockIdx.y) * 2 * n;
      row[c] = ta;
      row[n + c] = tb;
    } else {
      part[static_cast<int64_t>(blockIdx.y) * n + c] = tb;
    }
  }
}

// out[c] += sum over p = 0, 1, .. parts-1 of part[p * width + c], in that
// order, for c < width (grid-stride).
__global__ void ppb_column_finish(const float* part, int parts, int64_t width, float* out) {
  for (int64_t c = first_index(); c < width; c += grid_stride()) {
    float sum = 0;
    for (int p = 0; p < parts; ++p) sum += part[static_cast<int64_t>(p) * width + c];
    out[c] += sum;
  }
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

// One block per row of ld logits, of which the first v are the vocabulary's
// (the rest are padding: probability 0).
template <class T>
__global__ void ppb_cross_entropy_fwd(T* logits, const int32_t* labels, int v, int ld,
                                      double* row_loss) {
  const int64_t r = blockIdx.x;
  T* row = logits + r * ld;
  const float at_label = to_f(row[labels[r]]);  // read before any thread overwrites the row
  float mx = -INFINITY;
  for (int c = threadIdx.x; c < v; c += kThreads) mx = fmaxf(mx, to_f(row[c]));
  mx = block_max(mx);
  // The exponentials in single precision (arguments <= 0: within 2 ulp; in
  // double, two per logit ran at the GPU's FP64 rate), their sum in double.
  double sum = 0;
  for (int c = threadIdx.x; c < v; c += kThreads) sum += kmath::exp_f(to_f(row[c]) - mx);
  const double total = block_sum(sum);
  if (threadIdx.x == 0) row_loss[r] = log(total) + mx - at_label;
  const double inv = 1.0 / total;
  for (int c = threadIdx.x; c < v; c += kThreads) {
    row[c] = from_f<T>(static_cast<float>(kmath::exp_f(to_f(row[c]) - mx) * inv));
  }
  for (int c = v + static_cast<int>(threadIdx.x); c < ld; c += kThreads) row[c] = from_f<T>(0.0f);
}

// One block.
__global__ void ppb_loss_sum(const double* row_loss, int64_t t, double* out) {
  double sum = 0;
  for (int64_t r = threadIdx.x; r < t; r += kThreads) sum += row_loss[r];
  sum = block_sum(sum);
  if (threadIdx.x == 0) *out = sum;
}

// One block per row (no 64-bit division per logit, as a flat loop over the
// t x ld logits would make).
template <class T>
__global__ void ppb_cross_entropy_bwd(T* probs, const int32_t* labels, int v, int ld, float scale) {
  const int64_t r = blockIdx.x;
  T* row = probs + r * ld;
  const int32_t label = labels[r];
  for (int c = threadIdx.x; c < v; c += kThreads) {
    row[c] = from_f<T>(kmath::cross_entropy_grad(to_f(row[c]), c == label, scale));
  }
  for (int c = v + static_cast<int>(threadIdx.x); c < ld; c += kThreads) row[c] = from_f<T>(0.0f);
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

// --- a planted slowdown (pipebench run --plant) ------------------------------

// The device's nanosecond clock: %globaltimer on a GPU; compiled as host
// code (the emulator's twins), the host's steady clock, which the
// emulator's stream workers run on.
__device__ inline uint64_t clock_ns() {
#if defined(__CUDA_ARCH__)
  uint64_t t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
#endif
}

// One block (of kThreads, as every launch), thread 0 alone: *start = now,
// when the stream reaches the action's start.
__global__ void ppb_plant_mark(uint64_t* start) {
  if (threadIdx.x == 0) *start = clock_ns();
}

// One block, thread 0 alone: spins until extra x (the time since *start)
// has passed again, so that the action it follows takes (1 + extra) times
// as long on its stream.
__global__ void ppb_plant_spin(const uint64_t* start, double extra) {
  if (threadIdx.x != 0) return;
  const uint64_t now = clock_ns();
  const uint64_t took = now > *start ? now - *start : 0;
  const uint64_t end = now + static_cast<uint64_t>(extra * static_cast<double>(took));
  while (clock_ns() < end) {
  }
}

}  // namespace ppb::cuda::device
