// The launchers of the `cuda` backend's kernels (kernels.hpp); the kernels
// themselves are in kernels_device.cuh.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "cuda/flash_device.cuh"
#include "cuda/kernels.hpp"
#include "cuda/kernels_device.cuh"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::cuda {
namespace {

using device::Bf16;
using device::kThreads;

// The memory model counts the partials of these tiles.
static_assert(device::kColumnRows == kCudaColumnRows);

// --- launch helpers ----------------------------------------------------------

// Blocks of a grid-stride launch over n elements (at least 1; n > 0).
unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65536));
}

// Blocks of a one-block-per-row launch.
unsigned rows_grid(int64_t rows) {
  PPB_CHECK(rows > 0 && rows < (int64_t{1} << 31), "row kernel: row count out of range");
  return static_cast<unsigned>(rows);
}

// Calls f with a value of the storage type of dt (float or Bf16).
template <class F>
void dispatch(Dtype dt, F&& f) {
  if (dt == Dtype::kFp32) {
    f(float{});
  } else {
    f(Bf16{});
  }
}

template <class T>
T* as(void* p) {
  return static_cast<T*>(p);
}
template <class T>
const T* as(const void* p) {
  return static_cast<const T*>(p);
}

void check_launch() { PPB_CUDA_CHECK(cudaGetLastError()); }

}  // namespace

void embedding_fwd(Dtype dt, const int32_t* tokens, int64_t t, int seq, int h, const void* wte,
                   const void* wpe, void* x, cudaStream_t s) {
  if (t * h == 0) return;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    device::ppb_embedding_fwd<T>
        <<<grid_for(t * h), kThreads, 0, s>>>(tokens, t, seq, h, as<T>(wte), as<T>(wpe), as<T>(x));
  });
  check_launch();
}

void embedding_chains(const int32_t* tokens, int64_t t, int32_t* chains) {
  std::unordered_map<int32_t, int32_t> later;  // token -> its row after the current one
  for (int64_t r = t - 1; r >= 0; --r) {
    int32_t& next = later.try_emplace(tokens[r], -1).first->second;
    chains[r] = next;
    next = static_cast<int32_t>(r);
  }
  std::unordered_set<int32_t> seen;
  for (int64_t r = 0; r < t; ++r) chains[t + r] = seen.insert(tokens[r]).second ? 1 : 0;
}

void embedding_bwd_weight(Dtype dt, const int32_t* tokens, const int32_t* chains, const void* dx,
                          int64_t t, int seq, int h, float* dwte, float* dwpe, cudaStream_t s) {
  if (t * h == 0) return;
  PPB_CHECK(seq > 0 && t % seq == 0, "embedding backward: rows not whole samples");
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    device::ppb_embedding_bwd_weight<T>
        <<<grid_for(t * h), kThreads, 0, s>>>(tokens, chains, as<T>(dx), t, seq, h, dwte, dwpe);
  });
  check_launch();
}

void layernorm_stats(Dtype dt, const void* x, int64_t t, int h, float* mean, float* rstd,
                     cudaStream_t s) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    device::ppb_layernorm_stats<T><<<rows_grid(t), kThreads, 0, s>>>(as<T>(x), h, mean, rstd);
  });
  check_launch();
}

void layernorm_fwd(Dtype dt, const void* x, const void* gamma, const void* beta, int64_t t, int h,
                   void* y, void* kept_x, void* kept_stats, void* resid, cudaStream_t s) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    device::ppb_layernorm_fwd<T>
        <<<rows_grid(t), kThreads, 0, s>>>(as<T>(x), as<T>(gamma), as<T>(beta), t, h, as<T>(y),
                                           as<T>(kept_x), as<T>(kept_stats), as<T>(resid));
  });
  check_launch();
}

void layernorm_bwd_input(Dtype dt, const void* dy, const void* x, const void* gamma,
                         const void* add, int64_t t, int h, void* dx, float* mean, float* rstd,
                         cudaStream_t s) {
  PPB_CHECK((mean == nullptr) == (rstd == nullptr), "layernorm_bwd_input: mean without rstd");
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    device::ppb_layernorm_bwd_input<T><<<rows_grid(t), kThreads, 0, s>>>(
        as<T>(dy), as<T>(x), as<T>(gamma), as<T>(add), h, as<T>(dx), mean, rstd);
  });
  check_launch();
}

int64_t column_partials_floats(int64_t t, int64_t width) {
  return (t + device::kColumnRows - 1) / device::kColumnRows * width;
}

namespace {

// The two launches of a column reduction of t rows, n columns of dy into
// `width` outputs (n, or 2n with the LayerNorm statistics).
template <class T>
void column_reduce(const T* dy, const T* x, const float* mean, const float* rstd, int64_t t, int n,
                   float* out, float* partials, cudaStream_t s) {
  const int64_t tiles = (t + device::kColumnRows - 1) / device::kColumnRows;
  PPB_CHECK(tiles < 65536, "column reduction: too many rows for one grid");
  const int64_t width = mean != nullptr ? 2 * int64_t{n} : n;
  const dim3 grid(static_cast<unsigned>((n + device::kColumnTile - 1) / device::kColumnTile),
                  static_cast<unsigned>(tiles));
  device::ppb_column_partials<T><<<grid, kThreads, 0, s>>>(dy, x, mean, rstd, t, n, partials);
  check_launch();
  device::ppb_column_finish<<<grid_for(width), kThreads, 0, s>>>(partials, static_cast<int>(tiles),
                                                                 width, out);
  check_launch();
}

}  // namespace

void layernorm_bwd_weight(Dtype dt, const void* dy, const void* x, const float* mean,
                          const float* rstd, int64_t t, int h, float* grad, float* partials,
                          cudaStream_t s) {
  if (t * h == 0) return;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    column_reduce<T>(as<T>(dy), as<T>(x), mean, rstd, t, h, grad, partials, s);
  });
}

void bias_bwd(Dtype dt, const void* dy, int64_t t, int n, float* dbias, float* partials,
              cudaStream_t s) {
  if (t * n == 0) return;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    column_reduce<T>(as<T>(dy), nullptr, nullptr, nullptr, t, n, dbias, partials, s);
  });
}

void accumulate(const float* src, int64_t n, float* dst, cudaStream_t s) {
  if (n == 0) return;
  device::ppb_column_finish<<<grid_for(n), kThreads, 0, s>>>(src, 1, n, dst);
  check_launch();
}

void gelu_fwd(Dtype dt, const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    device::ppb_gelu_fwd<T><<<grid_for(n), kThreads, 0, s>>>(as<T>(x), as<T>(y), n);
  });
  check_launch();
}

void gelu_bwd(Dtype dt, const void* x, const void* dy, void* dx, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    device::ppb_gelu_bwd<T><<<grid_for(n), kThreads, 0, s>>>(as<T>(x), as<T>(dy), as<T>(dx), n);
  });
  check_launch();
}

void bias_fill(Dtype dt, const void* bias, const void* add, int64_t t, int n, void* y,
               cudaStream_t s) {
  if (t * n == 0) return;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    device::ppb_bias_fill<T>
        <<<grid_for(t * n), kThreads, 0, s>>>(as<T>(bias), as<T>(add), t, n, as<T>(y));
  });
  check_launch();
}

void attention_softmax_fwd(Dtype dt, void* scores, int seq, int64_t rows, cudaStream_t s) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    device::ppb_attention_softmax_fwd<T><<<rows_grid(rows), kThreads, 0, s>>>(as<T>(scores), seq);
  });
  check_launch();
}

void attention_softmax_bwd(Dtype dt, const void* probs, void* dp, int seq, int64_t rows,
                           cudaStream_t s) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    device::ppb_attention_softmax_bwd<T>
        <<<rows_grid(rows), kThreads, 0, s>>>(as<T>(probs), as<T>(dp), seq);
  });
  check_launch();
}

namespace {

// Calls f with the flash kernels' head dimension for d as a constant.
template <class F>
void flash_dispatch(int d, F&& f) {
  PPB_CHECK(d >= 1 && d <= 128, "flash attention: head dimension must be 1 to 128");
  switch (flash_head_dim(d)) {
    case 32:
      f(std::integral_constant<int, 32>{});
      break;
    case 64:
      f(std::integral_constant<int, 64>{});
      break;
    default:
      f(std::integral_constant<int, 128>{});
      break;
  }
}

// Raises the kernel's dynamic shared memory limit to `bytes`, once per
// kernel (a template argument, so that kernels of one signature each get
// theirs; the attribute stays with the kernel) and process (a rank binds
// one device for its life).
template <auto Kernel>
void raise_shared(int64_t bytes) {
  static const bool raised = [&] {
    PPB_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(Kernel),
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
    return true;
  }();
  (void)raised;
}

// The flash kernels for head dimension D, with their limits raised.
template <int D>
struct FlashKernels {
  static constexpr auto fwd = &device::ppb_flash_attention_fwd<D>;
  static constexpr auto bwd_kv = &device::ppb_flash_attention_bwd_kv<D>;
  static constexpr auto bwd_q = &device::ppb_flash_attention_bwd_q<D>;
  static constexpr int64_t fwd_bytes = device::flash_shared_bytes(D, false);
  static constexpr int64_t bwd_bytes = device::flash_shared_bytes(D, true);
  static void prepare() {
    raise_shared<fwd>(fwd_bytes);
    raise_shared<bwd_kv>(bwd_bytes);
    raise_shared<bwd_q>(bwd_bytes);
  }
};

// The grid of a flash launch: (64-row blocks, heads, samples).
dim3 flash_grid(int b, int s, int heads) {
  PPB_CHECK(b > 0 && s > 0 && heads > 0 && heads < 65536 && b < 65536,
            "flash attention: shape out of range");
  return {static_cast<unsigned>((s + device::kFlashRows - 1) / device::kFlashRows),
          static_cast<unsigned>(heads), static_cast<unsigned>(b)};
}

}  // namespace

int64_t flash_attention_shared_bytes(int d) {
  PPB_CHECK(d >= 1 && d <= 128, "flash attention: head dimension must be 1 to 128");
  const int dd = flash_head_dim(d);
  return std::max(device::flash_shared_bytes(dd, false), device::flash_shared_bytes(dd, true));
}

void flash_attention_prepare(int d) {
  flash_dispatch(d, [&](auto dd) { FlashKernels<decltype(dd)::value>::prepare(); });
}

void flash_attention_fwd(const float* qkv, float* out, float* lse, int b, int s, int heads, int d,
                         cudaStream_t st) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  flash_dispatch(d, [&](auto dd) {
    using K = FlashKernels<decltype(dd)::value>;
    K::prepare();
    K::fwd<<<flash_grid(b, s, heads), device::kFlashThreads, K::fwd_bytes, st>>>(qkv, out, lse, s,
                                                                                 heads, d, scale);
  });
  check_launch();
}

void flash_attention_bwd(const float* qkv, const float* out, const float* lse, const float* dout,
                         float* dqkv, float* drow, int b, int s, int heads, int d,
                         cudaStream_t st) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t rows = int64_t{b} * heads * s;
  device::ppb_flash_attention_rowdot<<<grid_for(rows), kThreads, 0, st>>>(out, dout, drow, rows, s,
                                                                          heads, d);
  check_launch();
  flash_dispatch(d, [&](auto dd) {
    using K = FlashKernels<decltype(dd)::value>;
    K::prepare();
    const dim3 grid = flash_grid(b, s, heads);
    K::bwd_kv<<<grid, device::kFlashThreads, K::bwd_bytes, st>>>(qkv, dout, lse, drow, dqkv, s,
                                                                 heads, d, scale);
    check_launch();
    K::bwd_q<<<grid, device::kFlashThreads, K::bwd_bytes, st>>>(qkv, dout, lse, drow, dqkv, s,
                                                                heads, d, scale);
  });
  check_launch();
}

void cross_entropy_fwd(Dtype dt, void* logits, const int32_t* labels, int64_t t, int v, int ld,
                       double* row_loss, cudaStream_t s) {
  PPB_CHECK(v >= 1 && v <= ld, "cross_entropy_fwd: need 1 <= v <= ld");
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    device::ppb_cross_entropy_fwd<T>
        <<<rows_grid(t), kThreads, 0, s>>>(as<T>(logits), labels, v, ld, row_loss);
  });
  check_launch();
}

void loss_sum(const double* row_loss, int64_t t, double* out, cudaStream_t s) {
  device::ppb_loss_sum<<<1, kThreads, 0, s>>>(row_loss, t, out);
  check_launch();
}

void cross_entropy_bwd(Dtype dt, void* probs, const int32_t* labels, int64_t t, int v, int ld,
                       float scale, cudaStream_t s) {
  if (t * ld == 0) return;
  PPB_CHECK(v >= 1 && v <= ld, "cross_entropy_bwd: need 1 <= v <= ld");
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    device::ppb_cross_entropy_bwd<T>
        <<<rows_grid(t), kThreads, 0, s>>>(as<T>(probs), labels, v, ld, scale);
  });
  check_launch();
}

void sgd(float* master, float* grads, int64_t n, float lr, Dtype dt, void* copy, cudaStream_t s) {
  if (n == 0) return;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    device::ppb_sgd<T><<<grid_for(n), kThreads, 0, s>>>(master, grads, n, lr, as<T>(copy));
  });
  check_launch();
}

void to_storage(Dtype dt, const float* src, void* dst, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    device::ppb_to_storage<T><<<grid_for(n), kThreads, 0, s>>>(src, as<T>(dst), n);
  });
  check_launch();
}

void to_float(Dtype dt, const void* src, float* dst, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    device::ppb_to_float<T><<<grid_for(n), kThreads, 0, s>>>(as<T>(src), dst, n);
  });
  check_launch();
}

void plant_mark(uint64_t* slot, cudaStream_t s) {
  device::ppb_plant_mark<<<1, kThreads, 0, s>>>(slot);
  check_launch();
}

void plant_spin(const uint64_t* slot, double extra, cudaStream_t s) {
  PPB_CHECK(extra >= 0, "plant_spin: extra must be >= 0");
  device::ppb_plant_spin<<<1, kThreads, 0, s>>>(slot, extra);
  check_launch();
}

}  // namespace ppb::cuda
