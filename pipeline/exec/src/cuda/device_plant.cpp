#include "cuda/device_plant.hpp"

#include "cuda/kernels.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::cuda {

DevicePlant::DevicePlant(double factor, cudaStream_t stream) : extra_(factor - 1), stream_(stream) {
  PPB_CHECK(factor >= 1, "a planted cuda slowdown needs a factor >= 1");
  // Eight bytes outside the pool: the plant leaves the memory figures as
  // they are without it.
  if (extra_ > 0) PPB_CUDA_CHECK(cudaMalloc(&start_, sizeof *start_));
}

DevicePlant::~DevicePlant() {
  if (start_ != nullptr) (void)cudaFree(start_);
}

void DevicePlant::before_action() {
  if (start_ != nullptr) plant_mark(start_, stream_);
}

void DevicePlant::after_action() {
  if (start_ != nullptr) plant_spin(start_, extra_, stream_);
}

}  // namespace ppb::cuda
