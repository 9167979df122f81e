// The cuda backend's reduction kernels on a GPU (label gpu) and on the CUDA
// emulator (label emulated): the column reductions of the bias and
// LayerNorm weight gradients against the fixed order they promise and a
// double-precision host sum, bit-identical run to run, on row counts that
// are and are not a multiple of the row tile (one row, a tile and one more,
// several tiles) and column counts across several column tiles; the
// one-pass LayerNorm forward and input gradient against the cpu kernels.
// Skips, saying why, where no CUDA device is usable.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/kernels.hpp"
#include "cuda/kernels.hpp"
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

}  // namespace
}  // namespace ppb
