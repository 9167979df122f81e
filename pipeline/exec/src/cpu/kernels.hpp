// fp32 kernels of the cpu backend. Row-major tensors; T rows (tokens).
// Private to ppb_cpu_kernels: CpuChunk is the public face.
#pragma once

#include <cstdint>

namespace ppb::cpu {

/// Threads OpenBLAS computes one call on (1 when the BLAS cannot say).
int blas_threads();

/// C[m,n] = alpha * op(A) * op(B) + beta * C, row-major, through cblas_sgemm.
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);

/// y[t,out] = x[t,in] * w[in,out] + bias[out] (bias may be null); with
/// accumulate the result is added to y (a residual already stored there).
void linear_forward(const float* x, int64_t t, int in, const float* w, const float* bias, int out,
                    float* y, bool accumulate = false);
/// dx[t,in] = dy[t,out] * w^T (+ dx when accumulate).
void linear_backward_input(const float* dy, int64_t t, int out, const float* w, int in, float* dx,
                           bool accumulate);
/// dw[in,out] += x^T dy; dbias[out] += column sums of dy (dbias may be null).
void linear_backward_weight(const float* x, const float* dy, int64_t t, int in, int out, float* dw,
                            float* dbias);

/// y = (x - mean) * rstd * gamma + beta per row; writes mean[t], rstd[t].
void layernorm_forward(const float* x, int64_t t, int h, const float* gamma, const float* beta,
                       float* y, float* mean, float* rstd);
/// dx = d LN / dx applied to dy (+ dx when accumulate).
void layernorm_backward_input(const float* dy, const float* x, const float* mean, const float* rstd,
                              const float* gamma, int64_t t, int h, float* dx, bool accumulate);
/// dgamma += sum_t dy * xhat; dbeta += sum_t dy.
void layernorm_backward_weight(const float* dy, const float* x, const float* mean,
                               const float* rstd, int64_t t, int h, float* dgamma, float* dbeta);

/// GeLU, tanh approximation. y may alias x.
void gelu_forward(const float* x, float* y, int64_t n);
/// dx = dy * gelu'(x), element by element; dx may alias x or dy.
void gelu_backward(const float* x, const float* dy, float* dx, int64_t n);

/// Causal multi-head attention of `batch` sequences of `seq` tokens.
/// qkv[batch*seq, 3h] holds q | k | v, head j at columns j*h/heads.. of each.
/// Writes probs[batch, heads, seq, seq] (0 above the diagonal) and
/// ctx[batch*seq, h]. Scale 1/sqrt(h/heads), numerically stable softmax.
void attention_forward(const float* qkv, int batch, int seq, int h, int heads, float* probs,
                       float* ctx);
/// dqkv[batch*seq, 3h] from dctx[batch*seq, h]. workspace: seq*seq floats.
void attention_backward(const float* qkv, const float* probs, const float* dctx, int batch, int seq,
                        int h, int heads, float* dqkv, float* workspace);

/// In place: logits[t, ld] -> softmax probabilities over the first v
/// columns of each row; the padded columns [v, ld) get probability 0 (they
/// are no token). Returns the summed cross-entropy -log p[label] over the t
/// rows (double). REQUIRES: 1 <= v <= ld, labels in [0, v).
double softmax_cross_entropy_forward(float* logits, const int32_t* labels, int64_t t, int v,
                                     int ld);
/// In place: probs[t, ld] -> dlogits = (probs - onehot(label)) * scale over
/// the first v columns; the padded columns' gradient is 0.
void softmax_cross_entropy_backward(float* probs, const int32_t* labels, int64_t t, int v, int ld,
                                    float scale);

/// x[t,h] = wte[token[t]] + wpe[t % seq].
void embedding_forward(const int32_t* tokens, int64_t t, int seq, int h, const float* wte,
                       const float* wpe, float* x);
/// dwte[token[t]] += dx[t]; dwpe[t % seq] += dx[t], in row order.
void embedding_backward_weight(const int32_t* tokens, const float* dx, int64_t t, int seq, int h,
                               float* dwte, float* dwpe);

}  // namespace ppb::cpu
