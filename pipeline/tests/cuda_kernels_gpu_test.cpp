// The cuda backend's reduction kernels on a GPU (label gpu) and on the CUDA
// emulator (label emulated): the column reductions of the bias and
// LayerNorm weight gradients against the fixed order they promise and a
// double-precision host sum, bit-identical run to run, on row counts that
// are and are not a multiple of the row tile (one row, a tile and one more,
// several tiles) and column counts across several column tiles; the
// one-pass LayerNorm forward and input gradient against the cpu kernels;
// the embedding's weight gradient against the cpu kernel, bit for bit;
// the fp32 flash attention against a double-precision reference, and
// cuDNN's bf16 one against it within bf16's rounding.
// Skips, saying why, where no CUDA device is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cpu/kernels.hpp"
#include "cuda/fused_attention.hpp"
#include "cuda/kernels.hpp"
#include "cuda/owned_stream.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/pipeline/model.hpp"

namespace ppb {
namespace {

using cuda::Dtype;

// Deterministic values in [-1, 1).
std::vector<float> values(int64_t n, uint32_t seed) {
  std::vector<float> out(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761U + 1U;
  for (float& v : out) {
    x = x * 1664525U + 1013904223U;
    v = static_cast<float>(x >> 8) / static_cast<float>(1U << 23) - 1.0f;
  }
  return out;
}

// A device copy of a host vector, freed with the object.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : n_(host.size()) {
    PPB_CUDA_CHECK(cudaMalloc(&p_, bytes()));
    if (n_ > 0) PPB_CUDA_CHECK(cudaMemcpy(p_, host.data(), bytes(), cudaMemcpyHostToDevice));
  }
  explicit DeviceArray(size_t n) : DeviceArray(std::vector<T>(n)) {}
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return static_cast<T*>(p_); }
  std::vector<T> host() const {
    std::vector<T> out(n_);
    if (n_ > 0) PPB_CUDA_CHECK(cudaMemcpy(out.data(), p_, bytes(), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  size_t bytes() const { return n_ * sizeof(T); }
  size_t n_;
  void* p_ = nullptr;
};

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = cuda::unusable_reason();
    if (!why.empty()) GTEST_SKIP() << "no usable CUDA device: " << why;
    PPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream_ != nullptr) PPB_CUDA_CHECK(cudaStreamDestroy(stream_));
  }
  void sync() const { PPB_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  // dbias = init + the column sums of dy[t,n], on the device.
  std::vector<float> bias_bwd(const std::vector<float>& dy, int64_t t, int n, float init) const {
    const DeviceArray<float> d_dy(dy);
    const DeviceArray<float> d_out(std::vector<float>(static_cast<size_t>(n), init));
    const DeviceArray<float> partials(static_cast<size_t>(cuda::column_partials_floats(t, n)));
    cuda::bias_bwd(Dtype::kFp32, d_dy.get(), t, n, d_out.get(), partials.get(), stream_);
    sync();
    return d_out.host();
  }

  cudaStream_t stream_ = nullptr;
};

// The order the column reduction promises, in float on the host: per tile
// of kCudaColumnRows rows, 8 threads per column each summing every 8th row
// of the tile, their sums added in thread order; then the tiles' partials
// in tile order, added to the initial value.
std::vector<float> fixed_order_sums(const std::vector<float>& dy, int64_t t, int n, float init) {
  constexpr int kLanes = 8;
  std::vector<float> out(static_cast<size_t>(n), init);
  for (int c = 0; c < n; ++c) {
    float total = 0;
    for (int64_t r0 = 0; r0 < t; r0 += kCudaColumnRows) {
      const int64_t r1 = std::min(r0 + kCudaColumnRows, t);
      float tile = 0;
      for (int g = 0; g < kLanes; ++g) {
        float lane = 0;
        for (int64_t r = r0 + g; r < r1; r += kLanes) lane += dy[static_cast<size_t>(r * n + c)];
        tile += lane;
      }
      total += tile;
    }
    out[static_cast<size_t>(c)] += total;
  }
  return out;
}

struct Shape {
  int64_t t;
  int n;
};

// One row; a tile less, exactly and one more than a tile; several tiles, the
// last partial; many columns over few rows; columns not a multiple of 32.
const Shape kShapes[] = {
    {1, 5}, {127, 33}, {128, 64}, {129, 70}, {300, 97}, {3, 1100}, {2 * kCudaColumnRows + 7, 40}};

TEST_F(CudaKernels, BiasGradientSumsInItsFixedOrderAndAgreesWithADoubleSum) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE("t=" + std::to_string(s.t) + " n=" + std::to_string(s.n));
    const std::vector<float> dy = values(s.t * s.n, static_cast<uint32_t>(s.t + s.n));
    const float init = 0.25f;  // the gradient accumulates into what it holds
    const std::vector<float> got = bias_bwd(dy, s.t, s.n, init);
    // Bit for bit: the promised order (sums only, so no FMA can differ).
    const std::vector<float> want = fixed_order_sums(dy, s.t, s.n, init);
    for (int c = 0; c < s.n; ++c) {
      ASSERT_EQ(got[static_cast<size_t>(c)], want[static_cast<size_t>(c)]) << "column " << c;
    }
    // Within fp32 rounding of the exact sum.
    for (int c = 0; c < s.n; ++c) {
      double exact = init;
      double magnitude = std::fabs(init);
      for (int64_t r = 0; r < s.t; ++r) {
        exact += dy[static_cast<size_t>(r * s.n + c)];
        magnitude += std::fabs(dy[static_cast<size_t>(r * s.n + c)]);
      }
      EXPECT_NEAR(got[static_cast<size_t>(c)], exact, 1e-6 * magnitude) << "column " << c;
    }
    // The same bits on a second run.
    EXPECT_EQ(bias_bwd(dy, s.t, s.n, init), got);
  }
}

TEST_F(CudaKernels, LayerNormWeightGradientAgreesWithADoubleSumBitForBitRunToRun) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE("t=" + std::to_string(s.t) + " h=" + std::to_string(s.n));
    const int64_t th = s.t * s.n;
    const std::vector<float> dy = values(th, 7);
    const std::vector<float> x = values(th, 11);
    std::vector<float> mean(static_cast<size_t>(s.t));
    std::vector<float> rstd(static_cast<size_t>(s.t));
    for (int64_t r = 0; r < s.t; ++r) {
      mean[static_cast<size_t>(r)] = 0.01f * static_cast<float>(r % 7);
      rstd[static_cast<size_t>(r)] = 1.0f + 0.1f * static_cast<float>(r % 3);
    }
    const DeviceArray<float> d_dy(dy), d_x(x), d_mean(mean), d_rstd(rstd);
    const auto run = [&] {
      const DeviceArray<float> grad(std::vector<float>(static_cast<size_t>(2 * s.n), 1.0f));
      const DeviceArray<float> partials(
          static_cast<size_t>(cuda::column_partials_floats(s.t, 2 * int64_t{s.n})));
      cuda::layernorm_bwd_weight(Dtype::kFp32, d_dy.get(), d_x.get(), d_mean.get(), d_rstd.get(),
                                 s.t, s.n, grad.get(), partials.get(), stream_);
      sync();
      return grad.host();
    };
    const std::vector<float> got = run();
    for (int c = 0; c < s.n; ++c) {
      double gamma = 1.0;
      double beta = 1.0;
      double magnitude = 1.0;
      for (int64_t r = 0; r < s.t; ++r) {
        const size_t i = static_cast<size_t>(r * s.n + c);
        const double xhat = (static_cast<double>(x[i]) - mean[static_cast<size_t>(r)]) *
                            rstd[static_cast<size_t>(r)];
        gamma += dy[i] * xhat;
        beta += dy[i];
        magnitude += std::fabs(dy[i] * xhat) + std::fabs(dy[i]);
      }
      EXPECT_NEAR(got[static_cast<size_t>(c)], gamma, 1e-6 * magnitude) << "gamma " << c;
      EXPECT_NEAR(got[static_cast<size_t>(s.n + c)], beta, 1e-6 * magnitude) << "beta " << c;
    }
    EXPECT_EQ(run(), got);
  }
}

// The one-pass LayerNorm kernels against the cpu kernels, on rows wider than
// a block (h > 256 threads, not a multiple of it): forward output, kept
// input, kept statistics and residual; the input gradient with the residual
// gradient added, and the statistics it recomputes.
TEST_F(CudaKernels, OnePassLayerNormMatchesTheCpuKernels) {
  const int64_t t = 5;
  const int h = 300;
  const int64_t th = t * h;
  std::vector<float> x = values(th, 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 3.0f * x[i] + 0.5f;  // off-centre, wide
  const std::vector<float> gamma = values(h, 5);
  const std::vector<float> beta = values(h, 6);
  const std::vector<float> dy = values(th, 8);
  const std::vector<float> add = values(th, 9);
  std::vector<float> y(static_cast<size_t>(th)), mean(static_cast<size_t>(t)),
      rstd(static_cast<size_t>(t));
  cpu::layernorm_forward(x.data(), t, h, gamma.data(), beta.data(), y.data(), mean.data(),
                         rstd.data());
  std::vector<float> dx = add;
  cpu::layernorm_backward_input(dy.data(), x.data(), mean.data(), rstd.data(), gamma.data(), t, h,
                                dx.data(), /*accumulate=*/true);

  const DeviceArray<float> d_x(x), d_gamma(gamma), d_beta(beta), d_dy(dy), d_add(add);
  const DeviceArray<float> d_y(static_cast<size_t>(th)), kept(static_cast<size_t>(th + 2 * t)),
      resid(static_cast<size_t>(th)), d_dx(static_cast<size_t>(th)),
      stats(static_cast<size_t>(2 * t));
  cuda::layernorm_fwd(Dtype::kFp32, d_x.get(), d_gamma.get(), d_beta.get(), t, h, d_y.get(),
                      kept.get(), kept.get() + th, resid.get(), stream_);
  cuda::layernorm_bwd_input(Dtype::kFp32, d_dy.get(), d_x.get(), d_gamma.get(), d_add.get(), t, h,
                            d_dx.get(), stats.get(), stats.get() + t, stream_);
  sync();
  const std::vector<float> got_y = d_y.host();
  const std::vector<float> got_kept = kept.host();
  const std::vector<float> got_dx = d_dx.host();
  const std::vector<float> got_stats = stats.host();
  EXPECT_EQ(resid.host(), x);
  EXPECT_EQ(std::vector<float>(got_kept.begin(), got_kept.begin() + th), x);
  for (int64_t r = 0; r < t; ++r) {
    const auto k = static_cast<size_t>(r);
    EXPECT_NEAR(got_kept[static_cast<size_t>(th) + k], mean[k], 1e-6);
    EXPECT_NEAR(got_kept[static_cast<size_t>(th + t) + k], rstd[k], 1e-6 * rstd[k]);
    EXPECT_EQ(got_stats[k], got_kept[static_cast<size_t>(th) + k]);
    EXPECT_EQ(got_stats[static_cast<size_t>(t) + k], got_kept[static_cast<size_t>(th + t) + k]);
  }
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_NEAR(got_y[i], y[i], 1e-5 * (1 + std::fabs(y[i]))) << i;
    ASSERT_NEAR(got_dx[i], dx[i], 1e-5 * (1 + std::fabs(dx[i]))) << i;
  }
}

// The embedding's weight gradient: each token's rows in row order (the
// host's chains), each position's samples in order, so the same bits as the
// cpu kernel, into gradients that already hold a micro-batch's, with a
// token repeated within a sample and across samples (the atomic adds this
// replaced gave another order on a GPU).
TEST_F(CudaKernels, EmbeddingWeightGradientIsTheCpuKernelsBitForBit) {
  const std::vector<int32_t> few = {4, 1, 4, 4, 2, 1};
  std::vector<int32_t> chains(2 * few.size());
  cuda::embedding_chains(few.data(), static_cast<int64_t>(few.size()), chains.data());
  EXPECT_EQ(chains, (std::vector<int32_t>{2, 5, 3, -1, -1, -1, 1, 1, 0, 0, 1, 0}));

  constexpr int kSeq = 7, kSamples = 3, kVocab = 5, kH = 300;
  constexpr int64_t kT = int64_t{kSamples} * kSeq;
  std::vector<int32_t> tokens(static_cast<size_t>(kT));
  for (int64_t r = 0; r < kT; ++r)
    tokens[static_cast<size_t>(r)] = static_cast<int32_t>((r * r + 3) % kVocab);
  const std::vector<float> dx = values(kT * kH, 31);
  std::vector<float> dwte = values(int64_t{kVocab} * kH, 32);
  std::vector<float> dwpe = values(int64_t{kSeq} * kH, 33);
  const DeviceArray<float> d_dwte(dwte), d_dwpe(dwpe), d_dx(dx);
  cpu::embedding_backward_weight(tokens.data(), dx.data(), kT, kSeq, kH, dwte.data(), dwpe.data());

  chains.assign(static_cast<size_t>(2 * kT), 0);
  cuda::embedding_chains(tokens.data(), kT, chains.data());
  const DeviceArray<int32_t> d_tokens(tokens), d_chains(chains);
  cuda::embedding_bwd_weight(Dtype::kFp32, d_tokens.get(), d_chains.get(), d_dx.get(), kT, kSeq, kH,
                             d_dwte.get(), d_dwpe.get(), stream_);
  sync();
  EXPECT_EQ(d_dwte.host(), dwte);
  EXPECT_EQ(d_dwpe.host(), dwpe);
}

// Causal attention of one (sample, head) in double, from packed qkv rows
// [b, s, 3h]: out and lse forward; dq, dk, dv (into dqkv's layout) from
// dout backward, through the probabilities.
struct AttentionReference {
  std::vector<double> out, lse, dqkv;
};
AttentionReference attention_reference(const std::vector<float>& qkv,
                                       const std::vector<float>& dout, int b, int s, int heads,
                                       int d) {
  const int h = heads * d;
  const auto at = [&](int sample, int row, int col) {
    return (static_cast<size_t>(sample) * s + static_cast<size_t>(row)) * 3 * h +
           static_cast<size_t>(col);
  };
  AttentionReference r;
  r.out.assign(static_cast<size_t>(b) * s * h, 0.0);
  r.lse.assign(static_cast<size_t>(b) * heads * s, 0.0);
  r.dqkv.assign(qkv.size(), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int n = 0; n < b; ++n) {
    for (int j = 0; j < heads; ++j) {
      const int q = j * d;
      const int k = h + j * d;
      const int v = 2 * h + j * d;
      std::vector<double> p(static_cast<size_t>(s) * s, 0.0);
      for (int i = 0; i < s; ++i) {
        double top = -INFINITY;
        for (int c = 0; c <= i; ++c) {
          double dot = 0;
          for (int e = 0; e < d; ++e) dot += double{qkv[at(n, i, q + e)]} * qkv[at(n, c, k + e)];
          p[static_cast<size_t>(i) * s + c] = dot * scale;
          top = std::max(top, dot * scale);
        }
        double sum = 0;
        for (int c = 0; c <= i; ++c) sum += std::exp(p[static_cast<size_t>(i) * s + c] - top);
        r.lse[(static_cast<size_t>(n) * heads + j) * s + i] = top + std::log(sum);
        for (int c = 0; c <= i; ++c) {
          double& x = p[static_cast<size_t>(i) * s + c];
          x = std::exp(x - top) / sum;
        }
      }
      for (int i = 0; i < s; ++i) {
        const size_t o = (static_cast<size_t>(n) * s + i) * h + q;
        for (int e = 0; e < d; ++e) {
          double acc = 0;
          for (int c = 0; c <= i; ++c)
            acc += p[static_cast<size_t>(i) * s + c] * qkv[at(n, c, v + e)];
          r.out[o + e] = acc;
        }
      }
      for (int i = 0; i < s; ++i) {
        const size_t o = (static_cast<size_t>(n) * s + i) * h + q;
        std::vector<double> ds(static_cast<size_t>(i) + 1);
        double row = 0;
        for (int c = 0; c <= i; ++c) {
          double dp = 0;
          for (int e = 0; e < d; ++e) dp += double{dout[o + e]} * qkv[at(n, c, v + e)];
          ds[static_cast<size_t>(c)] = dp;
          row += dp * p[static_cast<size_t>(i) * s + c];
        }
        for (int c = 0; c <= i; ++c) {
          const double pc = p[static_cast<size_t>(i) * s + c];
          const double g = pc * (ds[static_cast<size_t>(c)] - row) * scale;
          for (int e = 0; e < d; ++e) {
            r.dqkv[at(n, i, q + e)] += g * qkv[at(n, c, k + e)];
            r.dqkv[at(n, c, k + e)] += g * qkv[at(n, i, q + e)];
            r.dqkv[at(n, c, v + e)] += pc * dout[o + e];
          }
        }
      }
    }
  }
  return r;
}

// The fp32 flash attention against the double reference, forward and
// backward, on shapes whose sequence is and is not a multiple of the 64-row
// block (one block, a block and a part, three blocks, less than one warp's
// 16 rows) and head dimensions run as they are (32, 64, 128) and
// zero-padded (80 as 128, an odd 7 as 32); every gradient
// element written (the output starts as NaN), the same bits on a second run.
// The forward's tolerance is 5e-6 relative (plus as much absolute): tensor
// cores align an mma's terms to the largest and truncate (Fasi et al.,
// "Numerical behavior of NVIDIA tensor cores", 2021), not the round to
// nearest of the emulator's fp32 sums; simulated, that puts d = 128's output
// at 1.2x of 2e-6 and 0.5x of 5e-6. A wrong fragment or a 1xTF32 product
// errs by 1e-4 and more.
TEST_F(CudaKernels, FlashAttentionMatchesADoubleReferenceForwardAndBackward) {
  struct AttentionShape {
    int b, s, heads, d;
  };
  for (const AttentionShape& sh :
       {AttentionShape{2, 70, 2, 32}, AttentionShape{1, 64, 3, 64}, AttentionShape{1, 130, 1, 80},
        AttentionShape{2, 5, 2, 7}, AttentionShape{1, 40, 1, 128}}) {
    SCOPED_TRACE("b " + std::to_string(sh.b) + " s " + std::to_string(sh.s) + " heads " +
                 std::to_string(sh.heads) + " d " + std::to_string(sh.d));
    const int h = sh.heads * sh.d;
    const auto rows = static_cast<int64_t>(sh.b) * sh.s;
    std::vector<float> qkv = values(rows * 3 * h, 21);
    for (float& x : qkv) x *= 2.0f;  // scores wide enough that the softmax is not flat
    const std::vector<float> dout = values(rows * h, 22);
    const AttentionReference ref = attention_reference(qkv, dout, sh.b, sh.s, sh.heads, sh.d);

    const DeviceArray<float> d_qkv(qkv), d_dout(dout);
    const DeviceArray<float> out(static_cast<size_t>(rows * h));
    const DeviceArray<float> lse(static_cast<size_t>(sh.b) * sh.heads * sh.s);
    const DeviceArray<float> drow(static_cast<size_t>(sh.b) * sh.heads * sh.s);
    const DeviceArray<float> dqkv(std::vector<float>(qkv.size(), NAN));
    const auto run = [&] {
      cuda::flash_attention_fwd(d_qkv.get(), out.get(), lse.get(), sh.b, sh.s, sh.heads, sh.d,
                                stream_);
      cuda::flash_attention_bwd(d_qkv.get(), out.get(), lse.get(), d_dout.get(), dqkv.get(),
                                drow.get(), sh.b, sh.s, sh.heads, sh.d, stream_);
      sync();
    };
    run();
    const std::vector<float> got_out = out.host();
    const std::vector<float> got_lse = lse.host();
    const std::vector<float> got_dqkv = dqkv.host();
    for (size_t i = 0; i < got_out.size(); ++i) {
      ASSERT_NEAR(got_out[i], ref.out[i], 5e-6 * (1 + std::fabs(ref.out[i]))) << "out " << i;
    }
    for (size_t i = 0; i < got_lse.size(); ++i) {
      ASSERT_NEAR(got_lse[i], ref.lse[i], 5e-6 * (1 + std::fabs(ref.lse[i]))) << "lse " << i;
    }
    for (size_t i = 0; i < got_dqkv.size(); ++i) {
      ASSERT_NEAR(got_dqkv[i], ref.dqkv[i], 1e-5 * (1 + std::fabs(ref.dqkv[i]))) << "dqkv " << i;
    }
    run();
    EXPECT_EQ(out.host(), got_out);
    EXPECT_EQ(dqkv.host(), got_dqkv);
  }
}

// cuDNN's bf16 flash attention (the cuda backend's fused attention for
// bf16) against the double reference on the same bf16-rounded inputs: its
// output and gradients in bf16 (and its probabilities rounded to bf16 before
// their products), so within 2e-2 (out) and 4e-2 (gradients) of each
// tensor's largest element. Skips, saying why, where cuDNN cannot run (the
// emulator has none).
TEST_F(CudaKernels, CudnnFusedAttentionMatchesADoubleReferenceInBf16) {
  if (const std::string why = cuda::cudnn_unavailable_reason(); !why.empty()) {
    GTEST_SKIP() << "cuDNN's fused attention cannot run here: " << why;
  }
  struct AttentionShape {
    int b, s, heads, d;
  };
  for (const AttentionShape& sh : {AttentionShape{2, 70, 2, 32}, AttentionShape{1, 128, 2, 64}}) {
    SCOPED_TRACE("b " + std::to_string(sh.b) + " s " + std::to_string(sh.s) + " heads " +
                 std::to_string(sh.heads) + " d " + std::to_string(sh.d));
    ModelSpec spec;
    spec.micro_batch_size = sh.b;
    spec.seq = sh.s;
    spec.heads = sh.heads;
    spec.hidden = sh.heads * sh.d;
    spec.bytes_per_element = 2;
    const int h = spec.hidden;
    const auto rows = static_cast<int64_t>(sh.b) * sh.s;
    // The inputs rounded to bf16 on the device, and read back as the reference's.
    const auto bf16 = [&](const std::vector<float>& x, DeviceArray<uint16_t>& dst) {
      const DeviceArray<float> src(x);
      cuda::to_storage(Dtype::kBf16, src.get(), dst.get(), static_cast<int64_t>(x.size()), stream_);
      DeviceArray<float> back(x.size());
      cuda::to_float(Dtype::kBf16, dst.get(), back.get(), static_cast<int64_t>(x.size()), stream_);
      sync();
      return back.host();
    };
    std::vector<float> qkv = values(rows * 3 * h, 41);
    for (float& x : qkv) x *= 2.0f;
    DeviceArray<uint16_t> d_qkv(qkv.size()), d_dout(static_cast<size_t>(rows * h));
    qkv = bf16(qkv, d_qkv);
    const std::vector<float> dout = bf16(values(rows * h, 42), d_dout);
    const AttentionReference ref = attention_reference(qkv, dout, sh.b, sh.s, sh.heads, sh.d);

    const cuda::FusedAttention fused(spec, stream_, int64_t{1} << 30);
    const DeviceArray<uint8_t> work(static_cast<size_t>(
        std::max<int64_t>(1, std::max(fused.forward_workspace(), fused.backward_workspace()))));
    const DeviceArray<uint16_t> out(static_cast<size_t>(rows * h));
    const DeviceArray<float> stats(static_cast<size_t>(sh.b) * sh.heads * sh.s);
    const DeviceArray<uint16_t> dqkv(qkv.size());
    fused.forward(d_qkv.get(), out.get(), stats.get(), work.get());
    fused.backward(d_qkv.get(), out.get(), stats.get(), d_dout.get(), dqkv.get(), work.get());
    const auto host = [&](const DeviceArray<uint16_t>& x, size_t n) {
      DeviceArray<float> f(n);
      cuda::to_float(Dtype::kBf16, x.get(), f.get(), static_cast<int64_t>(n), stream_);
      sync();
      return f.host();
    };
    const auto worst = [](const std::vector<float>& got, const std::vector<double>& want) {
      double top = 0, err = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        top = std::max(top, std::fabs(want[i]));
        err = std::max(err, std::fabs(got[i] - want[i]));
      }
      return err / top;
    };
    EXPECT_LE(worst(host(out, ref.out.size()), ref.out), 2e-2);
    EXPECT_LE(worst(host(dqkv, ref.dqkv.size()), ref.dqkv), 4e-2);
  }
}

// cuDNN's graphs are built once per shape in the process and shared: a
// second object of the shape (the next chunk, the next combination) builds
// nothing, runs its forward and backward on its own stream (captured from
// that stream, they are in the capture: kernels sent to another stream
// would not be), and computes what the first computes, bit for bit; the
// first, run again after it, is bound back to its stream.
TEST_F(CudaKernels, CudnnGraphsAreBuiltOncePerShapeAndRunOnEachObjectsStream) {
  if (const std::string why = cuda::cudnn_unavailable_reason(); !why.empty()) {
    GTEST_SKIP() << "cuDNN's fused attention cannot run here: " << why;
  }
  // A shape no other test builds, and another on each pass of
  // --gtest_repeat: the graphs are kept for the process's life.
  static int pass = 0;
  ModelSpec spec;
  spec.micro_batch_size = 3;
  spec.seq = 96 + 16 * pass++;
  spec.heads = 2;
  spec.hidden = 2 * 64;
  spec.bytes_per_element = 2;
  const auto rows = static_cast<size_t>(spec.micro_batch_size) * spec.seq;
  const auto h = static_cast<size_t>(spec.hidden);
  const int64_t built = cuda::FusedAttention::graphs_built();
  const cuda::FusedAttention first(spec, stream_, int64_t{1} << 30);
  EXPECT_EQ(cuda::FusedAttention::graphs_built(), built + 1);
  const cuda::OwnedStream other;
  const cuda::FusedAttention second(spec, other.get(), int64_t{1} << 30);
  EXPECT_EQ(cuda::FusedAttention::graphs_built(), built + 1) << "the same shape built again";
  ModelSpec longer = spec;
  longer.seq += 8;
  const cuda::FusedAttention third(longer, stream_, int64_t{1} << 30);
  EXPECT_EQ(cuda::FusedAttention::graphs_built(), built + 2);

  const auto bf16 = [&](const std::vector<float>& x) {
    const DeviceArray<float> x32(x);
    auto out = std::make_unique<DeviceArray<uint16_t>>(x.size());
    cuda::to_storage(Dtype::kBf16, x32.get(), out->get(), static_cast<int64_t>(x.size()), stream_);
    sync();
    return out;
  };
  const auto qkv = bf16(values(static_cast<int64_t>(rows * 3 * h), 43));
  const auto dout = bf16(values(static_cast<int64_t>(rows * h), 44));
  const DeviceArray<uint8_t> work(static_cast<size_t>(
      std::max<int64_t>(1, std::max(first.forward_workspace(), first.backward_workspace()))));
  const DeviceArray<float> stats(static_cast<size_t>(spec.micro_batch_size) * spec.heads *
                                 spec.seq);
  struct Outputs {
    std::vector<uint16_t> out, dqkv;
  };
  const auto run = [&](const cuda::FusedAttention& f, cudaStream_t st) {
    const DeviceArray<uint16_t> out(rows * h);
    const DeviceArray<uint16_t> dqkv(rows * 3 * h);
    cudaGraph_t graph = nullptr;
    PPB_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    f.forward(qkv->get(), out.get(), stats.get(), work.get());
    f.backward(qkv->get(), out.get(), stats.get(), dout->get(), dqkv.get(), work.get());
    PPB_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    size_t nodes = 0;
    PPB_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
    EXPECT_GT(nodes, 0u) << "cuDNN's kernels ran on another stream than the object's";
    cudaGraphExec_t exec = nullptr;
    PPB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    PPB_CUDA_CHECK(cudaGraphLaunch(exec, st));
    PPB_CUDA_CHECK(cudaStreamSynchronize(st));
    PPB_CUDA_CHECK(cudaGraphExecDestroy(exec));
    PPB_CUDA_CHECK(cudaGraphDestroy(graph));
    return Outputs{out.host(), dqkv.host()};
  };
  const Outputs want = run(first, stream_);
  for (const Outputs& got : {run(second, other.get()), run(first, stream_)}) {
    EXPECT_EQ(got.out, want.out);
    EXPECT_EQ(got.dqkv, want.dqkv);
  }
}

}  // namespace
}  // namespace ppb
