// The CUDA emulator's internals (label unit): a block's threads meet at
// __syncthreads() before any passes it, a barrier that not every thread
// reaches is reported, built-in indices cover the grid, the memory
// registry bounds ranges, and a stream runs its work in order off the
// caller's thread.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
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
  const std::string why = run_grid(dim3(1), dim3(kThreads), [&] {
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
  const std::string why = run_grid(dim3(1), dim3(kThreads), [&] {
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
  const std::string why = run_grid(dim3(2), dim3(64), [&] {
    if (thread_state().thread_idx.x == 5 && thread_state().block_idx.x == 1) return;
    syncthreads();
  });
  EXPECT_NE(why.find("block (1,0,0)"), std::string::npos) << why;
  EXPECT_NE(why.find("63 of the block's 64 threads wait"), std::string::npos) << why;
  // The next launch on this thread starts from fresh fibers.
  int ran = 0;
  EXPECT_EQ(run_grid(dim3(1), dim3(64), [&] { ++ran; }), "");
  EXPECT_EQ(ran, 64);
}

TEST(CudaEmuGrid, IndicesCoverEveryThreadOfA3dGridOnce) {
  const dim3 grid(3, 2, 2);
  const dim3 block(4, 2, 3);
  std::vector<int> hits(3 * 2 * 2 * 4 * 2 * 3, 0);
  const std::string why = run_grid(grid, block, [&] {
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
