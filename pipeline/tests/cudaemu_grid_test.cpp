// The CUDA emulator's internals (label unit): a block's threads meet at
// __syncthreads() before any passes it, a barrier that not every thread
// reaches is reported, built-in indices cover the grid, dynamic shared
// memory, the warp shuffle and the tensor-core mma follow the PTX ISA, the memory
// registry bounds ranges, and a stream runs its work in order off the
// caller's thread.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "emu.hpp"

namespace ppb::cudaemu {
namespace {

TEST(CudaEmuGrid, EveryThreadReachesTheBarrierBeforeAnyPassesIt) {
  // Each thread writes its slot, waits, then reads its right neighbour's:
  // without a real barrier the early threads would read unwritten slots.
  constexpr unsigned kThreads = 256;
  std::vector<int> shared(kThreads, -1);
  std::vector<int> seen(kThreads, -2);
  const std::string why = run_grid(dim3(1), dim3(kThreads), 0, [&] {
    const unsigned i = thread_state().thread_idx.x;
    shared[i] = static_cast<int>(i) * 3;
    syncthreads();
    seen[i] = shared[(i + 1) % kThreads];
    syncthreads();
    shared[i] = 0;  // a second phase: nobody reads after this
  });
  ASSERT_EQ(why, "");
  for (unsigned i = 0; i < kThreads; ++i) {
    EXPECT_EQ(seen[i], static_cast<int>((i + 1) % kThreads) * 3) << "thread " << i;
  }
}

TEST(CudaEmuGrid, ATreeReductionSumsTheBlock) {
  // The shape of the backend's block_sum: halving strides between barriers.
  constexpr unsigned kThreads = 128;
  std::vector<double> buf(kThreads);
  double total = 0;
  const std::string why = run_grid(dim3(1), dim3(kThreads), 0, [&] {
    const unsigned i = thread_state().thread_idx.x;
    buf[i] = i + 1.0;
    syncthreads();
    for (unsigned half = kThreads / 2; half > 0; half >>= 1) {
      if (i < half) buf[i] += buf[i + half];
      syncthreads();
    }
    if (i == 0) total = buf[0];
  });
  ASSERT_EQ(why, "");
  EXPECT_EQ(total, kThreads * (kThreads + 1) / 2.0);
}

TEST(CudaEmuGrid, ABarrierSomeThreadsNeverReachIsReported) {
  const std::string why = run_grid(dim3(2), dim3(64), 0, [&] {
    if (thread_state().thread_idx.x == 5 && thread_state().block_idx.x == 1) return;
    syncthreads();
  });
  EXPECT_NE(why.find("block (1,0,0)"), std::string::npos) << why;
  EXPECT_NE(why.find("63 of the block's 64 threads wait"), std::string::npos) << why;
  // The next launch on this thread starts from fresh fibers.
  int ran = 0;
  EXPECT_EQ(run_grid(dim3(1), dim3(64), 0, [&] { ++ran; }), "");
  EXPECT_EQ(ran, 64);
}

TEST(CudaEmuGrid, IndicesCoverEveryThreadOfA3dGridOnce) {
  const dim3 grid(3, 2, 2);
  const dim3 block(4, 2, 3);
  std::vector<int> hits(3 * 2 * 2 * 4 * 2 * 3, 0);
  const std::string why = run_grid(grid, block, 0, [&] {
    const ThreadState& t = thread_state();
    EXPECT_EQ(t.block_dim.x * t.block_dim.y * t.block_dim.z, 24u);
    EXPECT_EQ(t.grid_dim.x * t.grid_dim.y * t.grid_dim.z, 12u);
    const unsigned b = t.block_idx.x + 3 * (t.block_idx.y + 2 * t.block_idx.z);
    const unsigned i = t.thread_idx.x + 4 * (t.thread_idx.y + 2 * t.thread_idx.z);
    ++hits[b * 24 + i];
  });
  ASSERT_EQ(why, "");
  for (int h : hits) EXPECT_EQ(h, 1);
}

TEST(CudaEmuGrid, DynamicSharedMemoryIsTheBlocksAndStartsAsNaN) {
  // Each block sees the launch's bytes, NaN where no thread wrote (a read
  // of unwritten shared memory shows), shared by its threads.
  std::vector<float> first(2, 0.0f);
  std::vector<float> summed(2, 0.0f);
  const std::string why = run_grid(dim3(2), dim3(32), 32 * sizeof(float), [&] {
    auto* smem = static_cast<float*>(dynamic_shared());
    const unsigned i = thread_state().thread_idx.x;
    const unsigned b = thread_state().block_idx.x;
    if (i == 0) first[b] = smem[31];
    syncthreads();
    smem[i] = static_cast<float>(i + b);
    syncthreads();
    if (i == 0) {
      for (unsigned k = 0; k < 32; ++k) summed[b] += smem[k];
    }
  });
  ASSERT_EQ(why, "");
  EXPECT_TRUE(std::isnan(first[0]) && std::isnan(first[1]));
  EXPECT_EQ(summed[0], 496.0f);  // 0 + 1 + ... + 31
  EXPECT_EQ(summed[1], 528.0f);  // each one more
}

TEST(CudaEmuGrid, ShuffleXorTradesWithinEachWarp) {
  std::vector<float> got(64);
  const std::string why = run_grid(dim3(1), dim3(64), 0, [&] {
    const unsigned i = thread_state().thread_idx.x;
    got[i] = shfl_xor(static_cast<float>(i), 5);
  });
  ASSERT_EQ(why, "");
  for (unsigned i = 0; i < 64; ++i) EXPECT_EQ(got[i], static_cast<float>(i ^ 5u)) << i;
}

TEST(CudaEmuGrid, Tf32RoundsToTenMantissaBitsTiesAway) {
  EXPECT_EQ(tf32_round(1.0f), 1.0f);
  EXPECT_EQ(tf32_round(1.0f + 0x1p-10f), 1.0f + 0x1p-10f);        // kept exactly
  EXPECT_EQ(tf32_round(1.0f + 0x1p-11f), 1.0f + 0x1p-10f);        // a tie: away from zero
  EXPECT_EQ(tf32_round(-(1.0f + 0x1p-11f)), -(1.0f + 0x1p-10f));  // and for negatives
  EXPECT_EQ(tf32_round(1.0f + 0x1p-12f), 1.0f);                   // below half: down
  const float x = 3.14159265f;
  const float big = tf32_round(x);
  const float small = tf32_round(x - big);
  EXPECT_LT(std::fabs(x - (big + small)), 0x1p-20f * x);  // the 3xTF32 split keeps ~21 bits
  EXPECT_TRUE(std::isinf(tf32_round(INFINITY)));
}

TEST(CudaEmuGrid, MmaTf32ComputesTheTileFromThePtxFragmentLayout) {
  // A 16 x 8, B 8 x 8 of small integers (exact in tf32), C starts at 1:
  // each lane hands over and gets back the elements the PTX ISA gives it.
  float a[16][8];
  float b[8][8];
  for (int r = 0; r < 16; ++r) {
    for (int k = 0; k < 8; ++k) a[r][k] = static_cast<float>((r * 3 + k * 5) % 7 - 3);
  }
  for (int k = 0; k < 8; ++k) {
    for (int n = 0; n < 8; ++n) b[k][n] = static_cast<float>((k * 2 + n * 7) % 5 - 2);
  }
  float c[16][8];
  const std::string why = run_grid(dim3(1), dim3(64), 0, [&] {
    const unsigned lane = thread_state().thread_idx.x % 32;
    const unsigned warp = thread_state().thread_idx.x / 32;
    const unsigned g = lane / 4;
    const unsigned t = lane % 4;
    const float fa[4] = {a[g][t], a[g + 8][t], a[g][t + 4], a[g + 8][t + 4]};
    const float fb[2] = {b[t][g], b[t + 4][g]};
    float fc[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    mma_tf32_m16n8k8(fc, fa, fb);
    if (warp == 1) {  // both warps compute the same tile; keep the second's
      c[g][2 * t] = fc[0];
      c[g][2 * t + 1] = fc[1];
      c[g + 8][2 * t] = fc[2];
      c[g + 8][2 * t + 1] = fc[3];
    }
  });
  ASSERT_EQ(why, "");
  for (int r = 0; r < 16; ++r) {
    for (int n = 0; n < 8; ++n) {
      float want = 1.0f;
      for (int k = 0; k < 8; ++k) want += a[r][k] * b[k][n];
      EXPECT_EQ(c[r][n], want) << "row " << r << " column " << n;
    }
  }
}

TEST(CudaEmuGrid, ATf32x3StepIsItsThreeMmasInOrder) {
  // Operands with bits below tf32 (dropped by each mma alike) and values
  // far apart in size, so that a different order would round differently.
  std::vector<float> one(32 * 4), three(32 * 4);
  const std::string why = run_grid(dim3(1), dim3(32), 0, [&] {
    const unsigned lane = thread_state().thread_idx.x;
    float ab[4], as[4], bb[2], bs[2];
    for (int k = 0; k < 4; ++k) {
      ab[k] = 1000.0f + static_cast<float>(lane * 7 + k) * 1.37f;
      as[k] = 1e-3f * static_cast<float>(lane + k) + 1e-9f;
    }
    for (int k = 0; k < 2; ++k) {
      bb[k] = 3.0f - static_cast<float>(lane + k) * 0.311f;
      bs[k] = 1e-4f * static_cast<float>(lane * 3 + k);
    }
    float c1[4] = {0.5f, -0.5f, 1.0f, 2.0f};
    float c3[4] = {0.5f, -0.5f, 1.0f, 2.0f};
    mma_tf32_m16n8k8(c1, as, bb);
    mma_tf32_m16n8k8(c1, ab, bs);
    mma_tf32_m16n8k8(c1, ab, bb);
    mma_tf32x3_row_m16n8k8(c3, 1, ab, as, bb, bs);
    for (int q = 0; q < 4; ++q) {
      one[lane * 4 + static_cast<unsigned>(q)] = c1[q];
      three[lane * 4 + static_cast<unsigned>(q)] = c3[q];
    }
  });
  ASSERT_EQ(why, "");
  EXPECT_EQ(three, one);
}

TEST(CudaEmuMemory, RangesMustLieInsideOneAllocationOfTheirSpace) {
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 1000), cudaSuccess);
  void* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, 64, cudaHostAllocDefault), cudaSuccess);
  std::vector<char> pageable(16);
  auto* d = static_cast<char*>(dev);
  std::string why;
  EXPECT_TRUE(within(d, 1000, Space::kDevice));
  EXPECT_TRUE(within(d + 999, 1, Space::kDevice));
  EXPECT_FALSE(within(d + 1, 1000, Space::kDevice, &why));
  EXPECT_NE(why.find("1 bytes past the end of its allocation of 1000 bytes"), std::string::npos)
      << why;
  EXPECT_FALSE(within(pinned, 8, Space::kDevice, &why));
  EXPECT_TRUE(within(pinned, 64, Space::kPinned));
  EXPECT_EQ(space_of(pageable.data()), Space::kPageable);
  EXPECT_EQ(space_of(d + 500), Space::kDevice);
  EXPECT_EQ(cudaFree(dev), cudaSuccess);
  EXPECT_EQ(space_of(d + 500), Space::kPageable);  // freed: no longer device memory
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

TEST(CudaEmuStream, RunsItsWorkInOrderOffTheCallersThread) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  std::vector<int> order;
  std::atomic<bool> release{false};
  const auto caller = std::this_thread::get_id();
  std::thread::id worker;
  ASSERT_EQ(enqueue(s,
                    [&] {
                      worker = std::this_thread::get_id();
                      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                      order.push_back(1);
                    }),
            cudaSuccess);
  ASSERT_EQ(enqueue(s, [&] { order.push_back(2); }), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);  // held by the first op
  release = true;
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_NE(worker, caller);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(enqueue(s, [] {}), cudaErrorInvalidResourceHandle);  // destroyed
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // read once, then cleared
}

}  // namespace
}  // namespace ppb::cudaemu
