#include "ppb/exec/gemm_calls.hpp"

#include <cmath>

#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

// Elements a row-major operand of `rows` x `cols` (as stored) with leading
// dimension `ld` spans, over `count` matrices `stride` apart.
int64_t span_of(int rows, int cols, int ld, int64_t stride, int count) {
  if (rows == 0 || cols == 0) return 0;
  return int64_t{count - 1} * stride + int64_t{rows - 1} * ld + cols;
}

// A plain GEMM of a linear layer (cuda_chunk.cpp's linear_forward, the
// input-gradient and weight-gradient calls).
GemmCall linear(std::string name, UnitKind unit, GemmPass pass, bool ta, bool tb, int m, int n,
                int k, int lda, int ldb, int ldc, float beta, bool c_fp32) {
  GemmCall g;
  g.name = std::move(name);
  g.unit = unit;
  g.pass = pass;
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  g.lda = lda;
  g.ldb = ldb;
  g.ldc = ldc;
  g.beta = beta;
  g.c_fp32 = c_fp32;
  return g;
}

// A linear unit of `in` -> `out` features over t tokens: forward
// y = x W (+ bias, which the backend writes first: beta 1), input gradient
// dx = dy W^T, weight gradient dW += x^T dy in fp32.
void add_linear(std::vector<GemmCall>& out, const std::string& base, UnitKind unit, int t, int in,
                int width) {
  out.push_back(linear(base + ".F", unit, GemmPass::kForward, false, false, t, width, in, in, width,
                       width, 1.0f, false));
  out.push_back(linear(base + ".I", unit, GemmPass::kInputGrad, false, true, t, in, width, width,
                       width, in, 0.0f, false));
  out.push_back(linear(base + ".W", unit, GemmPass::kWeightGrad, true, false, in, width, t, in,
                       width, width, 1.0f, true));
}

// Attention per sample, batched over the a heads (cuda_chunk.cpp's
// attention_forward / attention_backward); Q, K, V are column blocks of the
// 3h-wide qkv rows, P and dS are a x s x s.
void add_attention(std::vector<GemmCall>& out, const ModelSpec& spec) {
  const int s = spec.seq;
  const int h = spec.hidden;
  const int a = spec.heads;
  const int d = h / a;
  const int ld = 3 * h;
  const int64_t ss = int64_t{s} * s;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  auto batched = [&](std::string name, GemmPass pass, bool ta, bool tb, int m, int n, int k,
                     float alpha, int lda, int64_t sa, int ldb, int64_t sb, int ldc, int64_t sc) {
    GemmCall g = linear("attention." + std::move(name), UnitKind::kAttention, pass, ta, tb, m, n, k,
                        lda, ldb, ldc, 0.0f, false);
    g.alpha = alpha;
    g.stride_a = sa;
    g.stride_b = sb;
    g.stride_c = sc;
    g.count = a;
    g.repeat = spec.micro_batch_size;
    out.push_back(std::move(g));
  };
  // scores = scale Q K^T; context = P V
  batched("F.scores", GemmPass::kForward, false, true, s, s, d, scale, ld, d, ld, d, s, ss);
  batched("F.context", GemmPass::kForward, false, false, s, d, s, 1.0f, s, ss, ld, d, h, d);
  // dP = dO V^T, dV = P^T dO, dQ = scale dS K, dK = scale dS^T Q
  batched("I.dp", GemmPass::kInputGrad, false, true, s, s, d, 1.0f, h, d, ld, d, s, ss);
  batched("I.dv", GemmPass::kInputGrad, true, false, s, d, s, 1.0f, s, ss, h, d, ld, d);
  batched("I.dq", GemmPass::kInputGrad, false, false, s, d, s, scale, s, ss, ld, d, ld, d);
  batched("I.dk", GemmPass::kInputGrad, true, false, s, d, s, scale, s, ss, ld, d, ld, d);
}

}  // namespace

const char* gemm_pass_name(GemmPass pass) {
  switch (pass) {
    case GemmPass::kForward:
      return "F";
    case GemmPass::kInputGrad:
      return "I";
    case GemmPass::kWeightGrad:
      return "W";
  }
  return "?";
}

double GemmCall::flops() const { return 2.0 * m * static_cast<double>(n) * k * count * repeat; }

// Stored shapes: op(A) is m x k, so A is k x m when transposed; op(B) is
// k x n, so B is n x k when transposed.
int64_t GemmCall::a_elements() const {
  return trans_a ? span_of(k, m, lda, stride_a, count) : span_of(m, k, lda, stride_a, count);
}
int64_t GemmCall::b_elements() const {
  return trans_b ? span_of(n, k, ldb, stride_b, count) : span_of(k, n, ldb, stride_b, count);
}
int64_t GemmCall::c_elements() const { return span_of(m, n, ldc, stride_c, count); }

std::vector<GemmCall> cuda_gemm_calls(const ModelSpec& spec, UnitKind unit) {
  PPB_CHECK(spec.heads > 0 && spec.hidden % spec.heads == 0,
            "gemm calls: hidden must be a multiple of heads");
  const auto t = static_cast<int>(spec.tokens());
  const int h = spec.hidden;
  const int f = spec.ffn_mult * spec.hidden;
  std::vector<GemmCall> out;
  switch (unit) {
    case UnitKind::kQkv:
      add_linear(out, "qkv", unit, t, h, 3 * h);
      break;
    case UnitKind::kAttention:
      add_attention(out, spec);
      break;
    case UnitKind::kAttnOut:
      add_linear(out, "attn_out", unit, t, h, h);
      break;
    case UnitKind::kFc1Gelu:
      add_linear(out, "fc1", unit, t, h, f);
      break;
    case UnitKind::kFc2:
      add_linear(out, "fc2", unit, t, f, h);
      break;
    case UnitKind::kHead:
      add_linear(out, "head", unit, t, h, spec.padded_vocab());
      out.front().beta = 0.0f;  // logits: no bias, nothing to add to
      break;
    case UnitKind::kEmbedding:
    case UnitKind::kLayerNorm1:
    case UnitKind::kLayerNorm2:
    case UnitKind::kFinalNorm:
      break;
  }
  return out;
}

std::vector<GemmCall> cuda_gemm_calls(const ModelSpec& spec) {
  std::vector<GemmCall> out;
  for (UnitKind u : {UnitKind::kQkv, UnitKind::kAttention, UnitKind::kAttnOut, UnitKind::kFc1Gelu,
                     UnitKind::kFc2, UnitKind::kHead}) {
    std::vector<GemmCall> part = cuda_gemm_calls(spec, u);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

}  // namespace ppb
