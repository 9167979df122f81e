// The CUDA kernels of the `cuda` backend (kernels.cu), as host functions that
// launch them on a stream. Every pointer is a device pointer. Tensors are
// row-major with t rows (tokens), laid out as the cpu kernels lay them out
// (cpu/kernels.hpp); `void*` tensors are in the storage dtype (fp32 or bf16),
// `float*` ones are fp32 (master weights, gradients, row statistics). All
// arithmetic is fp32 (row sums in double where the CPU sums in double;
// column sums in fp32 partials of a fixed row range, then summed in order),
// through the shared element math of cpu/kernel_math.hpp. Kernels are named
// ppb_<op>_<fwd|bwd...> so that a profile reads. Each launcher checks the
// launch (PPB_CUDA_CHECK(cudaGetLastError())).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace ppb::cuda {

/// Storage type of activations, messages and the compute copy of the weights.
enum class Dtype : uint8_t { kFp32, kBf16 };

/// 4 or 2.
inline int64_t dtype_bytes(Dtype dt) { return dt == Dtype::kFp32 ? 4 : 2; }

/// x[r,:] = wte[tokens[r],:] + wpe[r % seq,:].
void embedding_fwd(Dtype dt, const int32_t* tokens, int64_t t, int seq, int h, const void* wte,
                   const void* wpe, void* x, cudaStream_t s);
/// The rows of each token of a micro-batch, in row order, for the
/// embedding's backward (host memory, 2t int32): chains[r] = the next row
/// after r with r's token (-1: none), chains[t + r] = 1 where r is its
/// token's first row, else 0.
void embedding_chains(const int32_t* tokens, int64_t t, int32_t* chains);
/// dwte[tokens[r],:] += dx[r,:]; dwpe[r % seq,:] += dx[r,:]: each gradient
/// row summed over its token's (position's) rows in row order, one thread
/// per element, so the same bits every run and as the cpu kernel (no
/// atomics). `chains` (device): embedding_chains of the tokens.
void embedding_bwd_weight(Dtype dt, const int32_t* tokens, const int32_t* chains, const void* dx,
                          int64_t t, int seq, int h, float* dwte, float* dwpe, cudaStream_t s);

/// Per row of x[t,h]: mean[r] and rstd[r] (kernel_math's two-pass double sums).
void layernorm_stats(Dtype dt, const void* x, int64_t t, int h, float* mean, float* rstd,
                     cudaStream_t s);
/// One launch: y = xhat * gamma + beta with the row statistics computed in
/// the same pass. Where not null, also: kept_x (t*h) and resid (t*h) get a
/// copy of x, kept_stats (2t storage elements) mean at [r] and rstd at
/// [t + r]. None of the outputs may alias x.
void layernorm_fwd(Dtype dt, const void* x, const void* gamma, const void* beta, int64_t t, int h,
                   void* y, void* kept_x, void* kept_stats, void* resid, cudaStream_t s);
/// One launch: dx = LayerNorm input gradient of dy (+ add[r,c] when add is
/// not null), the row statistics recomputed from x in the same pass; with
/// `mean` and `rstd` (t floats each, may be null) also stores them for
/// layernorm_bwd_weight. dx must not alias dy, x or add.
void layernorm_bwd_input(Dtype dt, const void* dy, const void* x, const void* gamma,
                         const void* add, int64_t t, int h, void* dx, float* mean, float* rstd,
                         cudaStream_t s);

/// Floats of the partial sums a column reduction of t rows and `width`
/// outputs needs (bias_bwd: width n; layernorm_bwd_weight: width 2h).
int64_t column_partials_floats(int64_t t, int64_t width);
/// grad[c] += sum_r dy[r,c] * xhat[r,c] (gamma, c < h) and grad[h + c] +=
/// sum_r dy[r,c] (beta): the LayerNorm weight gradient laid out as the
/// unit's parameters, gamma then beta. Two launches (column partials, then
/// their fixed-order sum): deterministic. `partials` holds
/// column_partials_floats(t, 2h) floats of workspace.
void layernorm_bwd_weight(Dtype dt, const void* dy, const void* x, const float* mean,
                          const float* rstd, int64_t t, int h, float* grad, float* partials,
                          cudaStream_t s);
/// dbias[c] += sum_r dy[r,c], as layernorm_bwd_weight sums (two launches,
/// deterministic); `partials` holds column_partials_floats(t, n) floats.
void bias_bwd(Dtype dt, const void* dy, int64_t t, int n, float* dbias, float* partials,
              cudaStream_t s);

/// dst[c] += src[c], c < n (fp32; the last launch of a column reduction).
void accumulate(const float* src, int64_t n, float* dst, cudaStream_t s);

/// y = gelu(x), n elements; y may alias x.
void gelu_fwd(Dtype dt, const void* x, void* y, int64_t n, cudaStream_t s);
/// dx = dy * gelu'(x); dx may alias x or dy.
void gelu_bwd(Dtype dt, const void* x, const void* dy, void* dx, int64_t n, cudaStream_t s);

/// y[r,c] = bias[c], plus add[r,c] when add is not null (a residual); y[t,n]
/// may alias add.
void bias_fill(Dtype dt, const void* bias, const void* add, int64_t t, int n, void* y,
               cudaStream_t s);

/// In place on `rows` rows of `seq` scores (rows of [batch, heads, seq, seq],
/// so row r is query position r % seq): causal softmax over columns
/// 0..r % seq, 0 above the diagonal.
void attention_softmax_fwd(Dtype dt, void* scores, int seq, int64_t rows, cudaStream_t s);
/// In place: dp -> ds = p * (dp - rowsum(p * dp)) on the causal part, 0 above.
void attention_softmax_bwd(Dtype dt, const void* probs, void* dp, int seq, int64_t rows,
                           cudaStream_t s);

/// The fp32 flash attention (causal, scale 1/sqrt(d), 3xTF32 on the tensor
/// cores; flash_device.cuh) over the packed qkv rows [b, s, 3h] (head j of
/// q at column j*d, of k at h + j*d, of v at 2h + j*d):
/// out[b, s, h] and lse[b, a, s] (the log-sum-exp of each row's scaled
/// scores), the probabilities never written.
void flash_attention_fwd(const float* qkv, float* out, float* lse, int b, int s, int heads, int d,
                         cudaStream_t st);
/// Bytes of shared memory per block the flash kernels take for head
/// dimension d (1 to 128): the most of the three.
int64_t flash_attention_shared_bytes(int d);
/// Raises each flash kernel's dynamic shared memory limit for d (once per
/// kernel; the launchers do it too): done before a stream capture, so that
/// no capture holds the first call.
void flash_attention_prepare(int d);
/// dqkv[b, s, 3h] (every element written) from qkv, the forward's out and
/// lse, and dout[b, s, h]; drow is b*a*s floats of workspace.
void flash_attention_bwd(const float* qkv, const float* out, const float* lse, const float* dout,
                         float* dqkv, float* drow, int b, int s, int heads, int d, cudaStream_t st);

/// In place logits[t,ld] -> softmax probabilities over the first v columns
/// of each row, 0 in the padded columns [v, ld); row_loss[r] = -log p[label].
/// REQUIRES: 1 <= v <= ld, labels in [0, v).
void cross_entropy_fwd(Dtype dt, void* logits, const int32_t* labels, int64_t t, int v, int ld,
                       double* row_loss, cudaStream_t s);
/// *out = sum of row_loss[0..t) (one block, fixed order: deterministic).
void loss_sum(const double* row_loss, int64_t t, double* out, cudaStream_t s);
/// In place probs[t,ld] -> (probs - onehot(label)) * scale over the first v
/// columns; the padded columns' gradient is 0.
void cross_entropy_bwd(Dtype dt, void* probs, const int32_t* labels, int64_t t, int v, int ld,
                       float scale, cudaStream_t s);

/// SGD: master -= lr * grads; grads = 0; and, with `copy` (not null), the
/// storage copy of the updated master.
void sgd(float* master, float* grads, int64_t n, float lr, Dtype dt, void* copy, cudaStream_t s);
/// dst (storage dtype) = src (fp32), n elements.
void to_storage(Dtype dt, const float* src, void* dst, int64_t n, cudaStream_t s);
/// dst (fp32) = src (storage dtype), n elements.
void to_float(Dtype dt, const void* src, float* dst, int64_t n, cudaStream_t s);

/// A planted slowdown (pipebench run --plant), one launch each, one thread
/// at work:
/// plant_mark stores the device clock (ns) in *slot when the stream reaches
/// it; plant_spin, enqueued after the work to slow down, spins until
/// `extra` x (its start - *slot) has passed again. Between the two the
/// stream's work takes (1 + extra) times as long, with no host wait.
/// REQUIRES: extra >= 0; slot is device memory of one uint64_t.
void plant_mark(uint64_t* slot, cudaStream_t s);
void plant_spin(const uint64_t* slot, double extra, cudaStream_t s);

}  // namespace ppb::cuda
