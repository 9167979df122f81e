// The CUDA kernels of the `cuda` backend (kernels.cu), as host functions that
// launch them on a stream. Every pointer is a device pointer. Tensors are
// row-major with t rows (tokens), laid out as the cpu kernels lay them out
// (cpu/kernels.hpp); `void*` tensors are in the storage dtype (fp32 or bf16),
// `float*` ones are fp32 (master weights, gradients, row statistics). All
// arithmetic is fp32 (row sums in double where the CPU sums in double),
// through the shared element math of cpu/kernel_math.hpp. Kernels are named
// ppb_<op>_<fwd|bwd...> so that a profile reads. Each launcher checks the
// launch (PPB_CUDA_CHECK(cudaGetLastError())).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ppb::cuda {

/// Storage type of activations, messages and the compute copy of the weights.
enum class Dtype : uint8_t { kFp32, kBf16 };

/// 4 or 2.
inline int64_t dtype_bytes(Dtype dt) { return dt == Dtype::kFp32 ? 4 : 2; }

/// x[r,:] = wte[tokens[r],:] + wpe[r % seq,:].
void embedding_fwd(Dtype dt, const int32_t* tokens, int64_t t, int seq, int h, const void* wte,
                   const void* wpe, void* x, cudaStream_t s);
/// dwte[tokens[r],:] += dx[r,:]; dwpe[r % seq,:] += dx[r,:] (atomic adds).
void embedding_bwd_weight(Dtype dt, const int32_t* tokens, const void* dx, int64_t t, int seq,
                          int h, float* dwte, float* dwpe, cudaStream_t s);

/// Per row of x[t,h]: mean[r] and rstd[r] (kernel_math's two-pass double sums).
void layernorm_stats(Dtype dt, const void* x, int64_t t, int h, float* mean, float* rstd,
                     cudaStream_t s);
/// y = xhat * gamma + beta from the row statistics. With `kept_stats` (2t
/// storage elements, may be null) also stores mean at [r], rstd at [t + r].
void layernorm_fwd(Dtype dt, const void* x, const float* mean, const float* rstd, const void* gamma,
                   const void* beta, int64_t t, int h, void* y, void* kept_stats, cudaStream_t s);
/// dx = LayerNorm input gradient of dy (+ add[r,c] when add is not null).
/// dx must not alias dy, x or add.
void layernorm_bwd_input(Dtype dt, const void* dy, const void* x, const float* mean,
                         const float* rstd, const void* gamma, const void* add, int64_t t, int h,
                         void* dx, cudaStream_t s);
/// dgamma[c] += sum_r dy * xhat; dbeta[c] += sum_r dy.
void layernorm_bwd_weight(Dtype dt, const void* dy, const void* x, const float* mean,
                          const float* rstd, int64_t t, int h, float* dgamma, float* dbeta,
                          cudaStream_t s);

/// y = gelu(x), n elements; y may alias x.
void gelu_fwd(Dtype dt, const void* x, void* y, int64_t n, cudaStream_t s);
/// dx = dy * gelu'(x); dx may alias x or dy.
void gelu_bwd(Dtype dt, const void* x, const void* dy, void* dx, int64_t n, cudaStream_t s);

/// y[r,c] = bias[c] (or y[r,c] += bias[c] with accumulate), y[t,n].
void bias_fill(Dtype dt, const void* bias, int64_t t, int n, void* y, bool accumulate,
               cudaStream_t s);
/// dbias[c] += sum_r dy[r,c].
void bias_bwd(Dtype dt, const void* dy, int64_t t, int n, float* dbias, cudaStream_t s);

/// In place on `rows` rows of `seq` scores (rows of [batch, heads, seq, seq],
/// so row r is query position r % seq): causal softmax over columns
/// 0..r % seq, 0 above the diagonal.
void attention_softmax_fwd(Dtype dt, void* scores, int seq, int64_t rows, cudaStream_t s);
/// In place: dp -> ds = p * (dp - rowsum(p * dp)) on the causal part, 0 above.
void attention_softmax_bwd(Dtype dt, const void* probs, void* dp, int seq, int64_t rows,
                           cudaStream_t s);

/// In place logits[t,v] -> softmax probabilities; row_loss[r] = -log p[label].
void cross_entropy_fwd(Dtype dt, void* logits, const int32_t* labels, int64_t t, int v,
                       double* row_loss, cudaStream_t s);
/// *out = sum of row_loss[0..t) (one block, fixed order: deterministic).
void loss_sum(const double* row_loss, int64_t t, double* out, cudaStream_t s);
/// In place probs -> (probs - onehot(label)) * scale.
void cross_entropy_bwd(Dtype dt, void* probs, const int32_t* labels, int64_t t, int v, float scale,
                       cudaStream_t s);

/// SGD: master -= lr * grads; grads = 0; and, with `copy` (not null), the
/// storage copy of the updated master.
void sgd(float* master, float* grads, int64_t n, float lr, Dtype dt, void* copy, cudaStream_t s);
/// dst (storage dtype) = src (fp32), n elements.
void to_storage(Dtype dt, const float* src, void* dst, int64_t n, cudaStream_t s);
/// dst (fp32) = src (storage dtype), n elements.
void to_float(Dtype dt, const void* src, float* dst, int64_t n, cudaStream_t s);

}  // namespace ppb::cuda
