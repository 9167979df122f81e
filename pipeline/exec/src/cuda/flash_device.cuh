// The fp32 flash attention of the `cuda` backend: device code only,
// launched by kernels.cu (kernels.hpp's flash_attention_*). Causal
// scaled-dot-product attention over the packed qkv rows ([b, s, 3h]: head
// j of q at column j*d, of k at h + j*d, of v at 2h + j*d), as
// FlashAttention-2 computes it: one block of kFlashThreads threads per
// (64-row block, head, sample), key blocks above the diagonal skipped, the
// softmax taken online, so that only the output and one log-sum-exp per
// row (fp32, [b, a, s]) are written and the s x s probabilities never are.
// The backward recomputes them block by block: one kernel sums the key and
// value gradients over the query blocks at or below a key block, another
// the query gradient over the key blocks at or left of a query block; each
// gradient element is written once, by one thread, in a fixed order
// (deterministic, no atomics).
//
// The products run on the tensor cores as fp32-accurate 3xTF32 (as
// CUTLASS's OpMultiplyAddFastF32 and PyTorch's memory-efficient fp32
// attention do): each operand x is split into big = tf32(x) and
// small = tf32(x - big), and a*b is taken as a_s*b_b + a_b*b_s + a_b*b_b,
// which leaves out only a_s*b_s (about 2^-22 of the product). One warp
// computes a 16 x 8 tile per mma.sync.m16n8k8 (compute capability 8.0 and
// later); each thread holds the documented fragment elements of the PTX
// ISA (groupID g = lane / 4, t = lane % 4): A (16 x 8, row-major) a0 =
// (g, t), a1 = (g + 8, t), a2 = (g, t + 4), a3 = (g + 8, t + 4); B (8 x 8,
// column-major) b0 = (t, g), b1 = (t + 4, g); C (16 x 8) c0 = (g, 2t),
// c1 = (g, 2t + 1), c2 = (g + 8, 2t), c3 = (g + 8, 2t + 1).
//
// The head dimension d runs as D = flash_head_dim(d), the next of 32, 64,
// 128 (zero-padded).
// The tiles live in dynamic shared memory (flash_shared_bytes()); a warp
// exchanges values through shared memory and __syncwarp(), or the four
// threads of a row through __shfl_xor_sync. The CUDA emulator
// (pipeline/exec/cudaemu) compiles this header as host code and runs these
// kernels with its own mma, shuffle and warp barrier (device_shim.hpp),
// a k-step's 3xTF32 tiles in one exchange of the warp (warp_gemm).
#pragma once

#include <cmath>
#include <cstdint>

#include "ppb/pipeline/model.hpp"

namespace ppb::cuda::device {

// Query rows of a block, and key rows of a tile; the head dimension runs as
// ppb::flash_head_dim(d). The cost model counts the tiles (attention_work).
inline constexpr int kFlashRows = ::ppb::kFlashTileRows;
inline constexpr int kFlashWarps = 4;  // each owns 16 rows of the block
inline constexpr int kFlashThreads = 32 * kFlashWarps;

/// Floats of a shared tile row: D + 4, so that the four threads of a row
/// group and the eight groups of a warp read distinct banks.
__host__ __device__ constexpr int flash_stride(int dd) { return dd + 4; }
/// Floats of one warp's 16 x 64 exchange tile, and its row stride.
inline constexpr int kFlashStageStride = kFlashRows + 4;
inline constexpr int kFlashStageFloats = 16 * kFlashStageStride;

/// Dynamic shared memory of the forward (Q, K-or-V, exchange tiles) and of
/// each backward kernel (Q, dO, K, V, exchange tiles, two row vectors).
__host__ __device__ constexpr int64_t flash_shared_bytes(int dd, bool backward) {
  const int64_t tiles = backward ? 4 : 2;
  return 4 * (tiles * kFlashRows * flash_stride(dd) + int64_t{kFlashWarps} * kFlashStageFloats +
              (backward ? int64_t{2} * kFlashRows : 0));
}

#if defined(PPB_CUDAEMU_TWINS)
__device__ inline float* flash_shared() {
  return static_cast<float*>(::ppb::cudaemu::dynamic_shared());
}
__device__ inline float tf32_round(float x) { return ::ppb::cudaemu::tf32_round(x); }
#else
// The launch's dynamic shared memory.
__device__ inline float* flash_shared() {
  extern __shared__ float smem[];
  return smem;
}
// Both need compute capability 8.0 (the attention rule refuses older
// devices; a build for one traps rather than fails to assemble).
// cvt.rna.tf32.f32: the nearest tf32 (ties away from zero), as a float.
__device__ inline float tf32_round(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
  return x;
#else
  uint32_t r = 0;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
#endif
}
// c += a * b on the tensor cores (one warp; a and b already tf32).
__device__ inline void mma_tf32(float (&c)[4], const float (&a)[4], const float (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(__float_as_uint(a[0])), "r"(__float_as_uint(a[1])), "r"(__float_as_uint(a[2])),
        "r"(__float_as_uint(a[3])), "r"(__float_as_uint(b[0])), "r"(__float_as_uint(b[1])));
#endif
}
#endif

/// An A operand split for 3xTF32.
struct SplitA {
  float big[4];
  float small[4];
};

__device__ inline SplitA split_a(float a0, float a1, float a2, float a3) {
  SplitA r{};
  const float a[4] = {a0, a1, a2, a3};
  for (int i = 0; i < 4; ++i) {
    r.big[i] = tf32_round(a[i]);
    r.small[i] = tf32_round(a[i] - r.big[i]);
  }
  return r;
}

/// The A operand for rows [r0, r0 + 16) and columns [k0, k0 + 8) of a
/// row-major shared tile of row stride `ld`.
__device__ inline SplitA load_a(const float* tile, int ld, int r0, int k0, int g, int t) {
  const float* p = tile + static_cast<int64_t>(r0 + g) * ld + k0 + t;
  const int down = 8 * ld;  // 8 rows on
  return split_a(p[0], p[down], p[4], p[down + 4]);
}

/// The B operand's two elements for tile column j and k-step k0: B(k, j) =
/// b[j * ld_b + k] (bt: the transpose of a row-major tile: scores against
/// keys) or b[k * ld_b + j] (!bt: the tile itself: values, keys as the
/// query gradient reads them).
template <bool BT>
__device__ inline void load_b(const float* b, int ld_b, int k0, int j, int t, float& b0,
                              float& b1) {
  b0 = BT ? b[j * ld_b + k0 + t] : b[(k0 + t) * ld_b + j];
  b1 = BT ? b[j * ld_b + k0 + t + 4] : b[(k0 + t + 4) * ld_b + j];
}

/// c[n] += A(16 rows of `a` from a_row0, KK columns) * B for the N / 8
/// column tiles n of 8 (load_b's B), fp32-accurate (3xTF32): per k-step,
/// c[n] += a_small * b_big + a_big * b_small + a_big * b_big, the small
/// products first so that they are not lost against the big one.
template <int N, int KK, bool BT>
__device__ inline void warp_gemm(float (&c)[N / 8][4], const float* a, int ld_a, int a_row0,
                                 const float* b, int ld_b, int g, int t) {
  for (int k0 = 0; k0 < KK; k0 += 8) {
    const SplitA sa = load_a(a, ld_a, a_row0, k0, g, t);
#if defined(PPB_CUDAEMU_TWINS)
    // The emulator takes the k-step's tiles in one exchange of its warp:
    // the same products in the same order as the mma_tf32 calls below.
    float big[N / 8][2];
    float small[N / 8][2];
    for (int n = 0; n < N / 8; ++n) {
      float b0 = 0.0f;
      float b1 = 0.0f;
      load_b<BT>(b, ld_b, k0, n * 8 + g, t, b0, b1);
      big[n][0] = tf32_round(b0);
      big[n][1] = tf32_round(b1);
      small[n][0] = tf32_round(b0 - big[n][0]);
      small[n][1] = tf32_round(b1 - big[n][1]);
    }
    ::ppb::cudaemu::mma_tf32x3_row_m16n8k8(&c[0][0], N / 8, sa.big, sa.small, &big[0][0],
                                           &small[0][0]);
#else
    for (int n = 0; n < N / 8; ++n) {
      float b0 = 0.0f;
      float b1 = 0.0f;
      load_b<BT>(b, ld_b, k0, n * 8 + g, t, b0, b1);
      const float big[2] = {tf32_round(b0), tf32_round(b1)};
      const float small[2] = {tf32_round(b0 - big[0]), tf32_round(b1 - big[1])};
      mma_tf32(c[n], sa.small, big);
      mma_tf32(c[n], sa.big, small);
      mma_tf32(c[n], sa.big, big);
    }
#endif
  }
}

/// Copies rows [row0, row0 + 64) of one head's d columns (at `col`) of a
/// [b-sample, s, ld] tensor into a shared tile of D columns, zero beyond s
/// and beyond d. Every thread of the block takes part.
template <int D>
__device__ inline void load_tile(float* tile, const float* src, int64_t ld, int col, int row0,
                                 int s, int d) {
  for (int i = static_cast<int>(threadIdx.x); i < kFlashRows * D; i += kFlashThreads) {
    const int r = i / D;
    const int c = i % D;
    const int row = row0 + r;
    tile[r * flash_stride(D) + c] = row < s && c < d ? src[row * ld + col + c] : 0.0f;
  }
}

/// The sum (max: !sum) over the four threads of a row group.
__device__ inline float quad_reduce(float v, bool sum) {
  for (int mask = 1; mask <= 2; mask <<= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, mask);
    v = sum ? v + other : fmaxf(v, other);
  }
  return v;
}

/// Writes a warp's 16 x 64 tile, held as 8 C fragments, into its exchange
/// tile, so that it can be read back as A operands.
__device__ inline void stage_tile(float* stage, const float (&c)[8][4], int g, int t) {
  for (int n = 0; n < 8; ++n) {
    for (int q = 0; q < 4; ++q) {
      stage[(g + (q >> 1) * 8) * kFlashStageStride + n * 8 + 2 * t + (q & 1)] = c[n][q];
    }
  }
}

/// acc += tile * b: a warp's 16 x 64 tile (8 C fragments) through its
/// exchange tile `stage` into A operands, times 64 rows of a shared tile b
/// (D columns).
template <int D>
__device__ inline void stage_and_multiply(float (&acc)[D / 8][4], const float (&tile)[8][4],
                                          float* stage, const float* b, int g, int t) {
  __syncwarp();  // the stage's previous readers are done
  stage_tile(stage, tile, g, t);
  __syncwarp();
  warp_gemm<D, kFlashRows, false>(acc, stage, kFlashStageStride, 0, b, flash_stride(D), g, t);
}

/// What each thread of a flash block works out first: its warp and place
/// in it (g, t: the fragments' groupID and thread in group), the block's
/// head and sample, where their q, k and v columns are in the packed qkv
/// rows; and the block's dynamic shared memory: `Tiles` tiles of 64 rows
/// (flash_stride(D) floats each), the backward's two row vectors (Tiles
/// 4), then one exchange tile per warp (this warp's: stage).
template <int D, int Tiles>
struct FlashBlock {
  static constexpr int kLd = flash_stride(D);
  static constexpr int64_t kTile = int64_t{kFlashRows} * kLd;  // floats of a tile
  struct Lane {
    int warp, g, t;
  } lane;
  int head, sample, heads, h;
  int64_t ld;         // the qkv rows' stride, 3h
  const float* rows;  // the sample's first qkv row
  int q_col, k_col, v_col;
  float* tile[Tiles];
  float* lse_s = nullptr;  // backward: the 64 rows' log-sum-exp and row terms
  float* dr_s = nullptr;
  float* stage;

  __device__ FlashBlock(const float* qkv, int s, int head_count, int d)
      : lane{static_cast<int>(threadIdx.x) / 32, static_cast<int>(threadIdx.x) % 32 / 4,
             static_cast<int>(threadIdx.x) % 4},
        head(static_cast<int>(blockIdx.y)),
        sample(static_cast<int>(blockIdx.z)),
        heads(head_count),
        h(head_count * d),
        ld(3 * int64_t{head_count} * d),
        rows(qkv + int64_t{sample} * s * ld),
        q_col(head * d),
        k_col(h + head * d),
        v_col(2 * h + head * d) {
    float* next = flash_shared();
    for (float*& p : tile) {
      p = next;
      next += kTile;
    }
    if (Tiles == 4) {
      lse_s = next;
      dr_s = next + kFlashRows;
      next += int64_t{2} * kFlashRows;
    }
    stage = next + int64_t{lane.warp} * kFlashStageFloats;
  }

  /// Rows [64 block, 64 block + 64) of this head's columns at `col` (q_col,
  /// k_col or v_col) of the sample's qkv rows into `dst`.
  __device__ void load(float* dst, int col, int block, int s, int d) const {
    load_tile<D>(dst, rows, ld, col, block * kFlashRows, s, d);
  }

  /// The backward's query-side rows of query block `block`: this head's
  /// output gradient (dout[b, s, h]) into `dst`, and the log-sum-exp and
  /// row terms ([b, a, s]) into lse_s and dr_s, 0 past s (whose
  /// probabilities are masked anyway).
  __device__ void load_rows(float* dst, const float* lse, const float* dout, const float* drow,
                            int block, int s, int d) const {
    const int row0 = block * kFlashRows;
    load_tile<D>(dst, dout + int64_t{sample} * s * h, h, q_col, row0, s, d);
    const int64_t at = (int64_t{sample} * heads + head) * s + row0;
    for (int i = static_cast<int>(threadIdx.x); i < kFlashRows; i += kFlashThreads) {
      const bool in = row0 + i < s;
      lse_s[i] = in ? lse[at + i] : 0.0f;
      dr_s[i] = in ? drow[at + i] : 0.0f;
    }
  }
};

/// Forward: out[b, s, h] (head j at column j*d) and lse[b, a, s] from qkv.
/// grid (ceil(s / 64), a, b), kFlashThreads threads, flash_shared_bytes(D,
/// false) of dynamic shared memory. scale = 1/sqrt(d).
template <int D>
__global__ void ppb_flash_attention_fwd(const float* qkv, float* out, float* lse, int s, int heads,
                                        int d, float scale) {
  constexpr int kLd = flash_stride(D);
  const FlashBlock<D, 2> fb(qkv, s, heads, d);
  const auto [q_s, kv_s] = fb.tile;  // kv_s: K, then V
  const auto [warp, g, t] = fb.lane;
  // The last query block, which has the most key blocks, first: the long
  // blocks start in the first wave rather than trail the last.
  const int qb = static_cast<int>(gridDim.x - 1 - blockIdx.x);

  fb.load(q_s, fb.q_col, qb, s, d);
  float o[D / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  const int row0 = qb * kFlashRows + warp * 16 + g;  // rows row0 and row0 + 8
  for (int kb = 0; kb <= qb; ++kb) {
    __syncthreads();  // the previous tile's readers are done
    fb.load(kv_s, fb.k_col, kb, s, d);
    __syncthreads();
    float sc[8][4] = {};
    warp_gemm<kFlashRows, D, true>(sc, q_s, kLd, warp * 16, kv_s, kLd, g, t);
    float top[2] = {-INFINITY, -INFINITY};
    for (int n = 0; n < 8; ++n) {
      for (int q = 0; q < 4; ++q) {
        const int row = row0 + (q >> 1) * 8;
        const int col = kb * kFlashRows + n * 8 + 2 * t + (q & 1);
        sc[n][q] = col <= row && col < s ? sc[n][q] * scale : -INFINITY;
        top[q >> 1] = fmaxf(top[q >> 1], sc[n][q]);
      }
    }
    float alpha[2];
    for (int r = 0; r < 2; ++r) {
      const float m_new = fmaxf(m[r], quad_reduce(top[r], false));
      // A row with no key yet (only past s) keeps m = -inf: nothing to scale.
      alpha[r] = m_new == -INFINITY ? 1.0f : expf(m[r] - m_new);
      m[r] = m_new;
      l[r] *= alpha[r];
    }
    for (int n = 0; n < 8; ++n) {
      for (int q = 0; q < 4; ++q) {
        const int r = q >> 1;
        sc[n][q] = sc[n][q] == -INFINITY ? 0.0f : expf(sc[n][q] - m[r]);
        l[r] += sc[n][q];
      }
    }
    for (int n = 0; n < D / 8; ++n) {
      for (int q = 0; q < 4; ++q) o[n][q] *= alpha[q >> 1];
    }
    stage_tile(fb.stage, sc, g, t);
    __syncthreads();  // every warp is done with K; the stage is written
    fb.load(kv_s, fb.v_col, kb, s, d);
    __syncthreads();
    warp_gemm<D, kFlashRows, false>(o, fb.stage, kFlashStageStride, 0, kv_s, kLd, g, t);
  }
  for (int r = 0; r < 2; ++r) l[r] = quad_reduce(l[r], true);
  for (int n = 0; n < D / 8; ++n) {
    for (int q = 0; q < 4; ++q) {
      const int row = row0 + (q >> 1) * 8;
      const int col = n * 8 + 2 * t + (q & 1);
      if (row < s && col < d) {
        out[(int64_t{fb.sample} * s + row) * fb.h + int64_t{fb.head} * d + col] =
            o[n][q] / l[q >> 1];
      }
    }
  }
  if (t == 0) {
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + r * 8;
      if (row < s) lse[(int64_t{fb.sample} * heads + fb.head) * s + row] = m[r] + logf(l[r]);
    }
  }
}

/// drow[b, a, s] = sum over the head's d columns of out * dout: the row
/// term of the softmax backward. Grid-stride over b*a*s rows.
__global__ void ppb_flash_attention_rowdot(const float* out, const float* dout, float* drow,
                                           int64_t rows, int s, int heads, int d) {
  const int64_t h = int64_t{heads} * d;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i % s;
    const int64_t head = (i / s) % heads;
    const int64_t sample = i / (int64_t{s} * heads);
    const int64_t at = (sample * s + row) * h + head * d;
    float sum = 0.0f;
    for (int c = 0; c < d; ++c) sum += out[at + c] * dout[at + c];
    drow[i] = sum;
  }
}

/// Backward, key and value gradients: dqkv's k and v columns of key rows
/// [64 kb, 64 kb + 64), summed over the query blocks from kb on. Grid
/// (ceil(s / 64), a, b), kFlashThreads threads, flash_shared_bytes(D, true).
/// A warp computes the transposed tiles (its 16 keys by 64 queries), so
/// that its sums run along its own rows.
template <int D>
__global__ void ppb_flash_attention_bwd_kv(const float* qkv, const float* dout, const float* lse,
                                           const float* drow, float* dqkv, int s, int heads, int d,
                                           float scale) {
  constexpr int kLd = flash_stride(D);
  const FlashBlock<D, 4> fb(qkv, s, heads, d);
  const auto [q_s, do_s, k_s, v_s] = fb.tile;
  const auto [warp, g, t] = fb.lane;
  const int kb = static_cast<int>(blockIdx.x);  // the first key block, the longest, first

  fb.load(k_s, fb.k_col, kb, s, d);
  fb.load(v_s, fb.v_col, kb, s, d);
  float dk[D / 8][4] = {};
  float dv[D / 8][4] = {};
  const int key0 = kb * kFlashRows + warp * 16 + g;  // keys key0 and key0 + 8
  const int blocks = (s + kFlashRows - 1) / kFlashRows;
  for (int qb = kb; qb < blocks; ++qb) {
    __syncthreads();  // the previous query block's readers are done
    fb.load(q_s, fb.q_col, qb, s, d);
    fb.load_rows(do_s, lse, dout, drow, qb, s, d);
    __syncthreads();
    float p[8][4] = {};   // P^T: this warp's keys by the block's queries
    float dp[8][4] = {};  // dP^T
    warp_gemm<kFlashRows, D, true>(p, k_s, kLd, warp * 16, q_s, kLd, g, t);
    warp_gemm<kFlashRows, D, true>(dp, v_s, kLd, warp * 16, do_s, kLd, g, t);
    for (int n = 0; n < 8; ++n) {
      for (int q = 0; q < 4; ++q) {
        const int key = key0 + (q >> 1) * 8;
        const int i = n * 8 + 2 * t + (q & 1);  // the query, within the block
        const int query = qb * kFlashRows + i;
        const bool live = key <= query && query < s && key < s;
        p[n][q] = live ? expf(p[n][q] * scale - fb.lse_s[i]) : 0.0f;
        dp[n][q] = p[n][q] * (dp[n][q] - fb.dr_s[i]);  // dS^T
      }
    }
    stage_and_multiply<D>(dv, p, fb.stage, do_s, g, t);  // dV += P^T dO
    stage_and_multiply<D>(dk, dp, fb.stage, q_s, g, t);  // dK += dS^T Q (scaled below)
  }
  for (int n = 0; n < D / 8; ++n) {
    for (int q = 0; q < 4; ++q) {
      const int key = key0 + (q >> 1) * 8;
      const int col = n * 8 + 2 * t + (q & 1);
      if (key < s && col < d) {
        float* row = dqkv + (int64_t{fb.sample} * s + key) * fb.ld;
        row[fb.k_col + col] = dk[n][q] * scale;
        row[fb.v_col + col] = dv[n][q];
      }
    }
  }
}

/// Backward, query gradient: dqkv's q columns of query rows [64 qb,
/// 64 qb + 64), summed over the key blocks up to qb. Same launch shape as
/// ppb_flash_attention_bwd_kv.
template <int D>
__global__ void ppb_flash_attention_bwd_q(const float* qkv, const float* dout, const float* lse,
                                          const float* drow, float* dqkv, int s, int heads, int d,
                                          float scale) {
  constexpr int kLd = flash_stride(D);
  const FlashBlock<D, 4> fb(qkv, s, heads, d);
  const auto [q_s, do_s, k_s, v_s] = fb.tile;
  const auto [warp, g, t] = fb.lane;
  const int qb = static_cast<int>(gridDim.x - 1 - blockIdx.x);  // the longest first

  fb.load(q_s, fb.q_col, qb, s, d);
  fb.load_rows(do_s, lse, dout, drow, qb, s, d);
  float dq[D / 8][4] = {};
  const int row0 = qb * kFlashRows + warp * 16 + g;  // rows row0 and row0 + 8
  for (int kb = 0; kb <= qb; ++kb) {
    __syncthreads();  // the previous key block's readers are done
    fb.load(k_s, fb.k_col, kb, s, d);
    fb.load(v_s, fb.v_col, kb, s, d);
    __syncthreads();
    float p[8][4] = {};
    float dp[8][4] = {};
    warp_gemm<kFlashRows, D, true>(p, q_s, kLd, warp * 16, k_s, kLd, g, t);
    warp_gemm<kFlashRows, D, true>(dp, do_s, kLd, warp * 16, v_s, kLd, g, t);
    for (int n = 0; n < 8; ++n) {
      for (int q = 0; q < 4; ++q) {
        const int i = warp * 16 + g + (q >> 1) * 8;  // the query, within the block
        const int row = row0 + (q >> 1) * 8;
        const int col = kb * kFlashRows + n * 8 + 2 * t + (q & 1);
        const bool live = col <= row && row < s && col < s;
        p[n][q] = live ? expf(p[n][q] * scale - fb.lse_s[i]) : 0.0f;
        dp[n][q] = p[n][q] * (dp[n][q] - fb.dr_s[i]);  // dS
      }
    }
    stage_and_multiply<D>(dq, dp, fb.stage, k_s, g, t);  // dQ += dS K (scaled below)
  }
  for (int n = 0; n < D / 8; ++n) {
    for (int q = 0; q < 4; ++q) {
      const int row = row0 + (q >> 1) * 8;
      const int col = n * 8 + 2 * t + (q & 1);
      if (row < s && col < d) {
        dqkv[(int64_t{fb.sample} * s + row) * fb.ld + fb.q_col + col] = dq[n][q] * scale;
      }
    }
  }
}

}  // namespace ppb::cuda::device
