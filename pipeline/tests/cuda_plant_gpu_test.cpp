// A planted slowdown on the cuda backend's stream (cuda/device_plant.hpp) on
// a GPU (label gpu) and on the CUDA emulator (label emulated): an action
// framed by a plant of factor F takes F times as long on its stream as the
// same action unframed, measured by events in one run (the median ratio of
// adjacent pairs, no absolute time); factor 1 adds nothing. Skips, saying why, where no
// CUDA device is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/device_plant.hpp"
#include "cuda/kernels.hpp"
#include "emulated_label.hpp"
#include "ppb/exec/cuda_device.hpp"

namespace ppb {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(CudaPlant, APlantedActionTakesItsFactorTimesAsLongOnItsStream) {
  const std::string why = cuda::unusable_reason();
  if (!why.empty()) PPB_SKIP_UNLESS_EMULATED("no usable CUDA device: " + why);
  const cuda::DeviceBinding b = cuda::bind_device(0, 1);
  // The action: SGD steps over n parameters, a few milliseconds of work
  // on either device (the emulator runs a CUDA thread as a fiber; enough
  // that a busy host's scheduling does not swamp it).
  const bool emulated = cuda::device_facts(0).name.find("emulator") != std::string::npos;
  const int64_t n = emulated ? int64_t{1} << 18 : int64_t{1} << 24;
  const int launches = emulated ? 2 : 8;
  cudaStream_t s = nullptr;
  PPB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* master = nullptr;
  float* grads = nullptr;
  PPB_CUDA_CHECK(cudaMalloc(&master, static_cast<size_t>(n) * sizeof(float)));
  PPB_CUDA_CHECK(cudaMalloc(&grads, static_cast<size_t>(n) * sizeof(float)));
  PPB_CUDA_CHECK(cudaMemsetAsync(master, 0, static_cast<size_t>(n) * sizeof(float), s));
  PPB_CUDA_CHECK(cudaMemsetAsync(grads, 0, static_cast<size_t>(n) * sizeof(float), s));
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
  PPB_CUDA_CHECK(cudaEventCreate(&start));
  PPB_CUDA_CHECK(cudaEventCreate(&end));
  constexpr double kFactor = 3;
  {
    cuda::DevicePlant planted(kFactor, s);
    cuda::DevicePlant none(1, s);
    // The action's time on the stream, framed by `plant` as the backend
    // frames it.
    const auto action_ms = [&](cuda::DevicePlant& plant) {
      PPB_CUDA_CHECK(cudaEventRecord(start, s));
      plant.before_action();
      for (int i = 0; i < launches; ++i)
        cuda::sgd(master, grads, n, 1e-3f, cuda::Dtype::kFp32, nullptr, s);
      plant.after_action();
      PPB_CUDA_CHECK(cudaEventRecord(end, s));
      PPB_CUDA_CHECK(cudaEventSynchronize(end));
      float ms = 0;
      PPB_CUDA_CHECK(cudaEventElapsedTime(&ms, start, end));
      return static_cast<double>(ms);
    };
    (void)action_ms(none);  // warm-up: first launches, first touches
    (void)action_ms(planted);
    std::vector<double> plain_ms;
    std::vector<double> planted_ms;
    std::vector<double> ratios;
    for (int i = 0; i < 15; ++i) {  // in adjacent pairs: both of a pair see the same load
      plain_ms.push_back(action_ms(none));
      planted_ms.push_back(action_ms(planted));
      ratios.push_back(planted_ms.back() / plain_ms.back());
    }
    const double ratio = median(ratios);
    EXPECT_NEAR(ratio, kFactor, 0.5)
        << "median ratio of 15 pairs; median " << median(planted_ms) << " ms planted, "
        << median(plain_ms) << " ms unplanted, device " << b.device;
  }
  PPB_CUDA_CHECK(cudaEventDestroy(start));
  PPB_CUDA_CHECK(cudaEventDestroy(end));
  PPB_CUDA_CHECK(cudaFree(master));
  PPB_CUDA_CHECK(cudaFree(grads));
  PPB_CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace
}  // namespace ppb
