// A non-blocking CUDA stream of the current device, destroyed with its
// scope (the health probe's measurements, cuDNN's trial build).
//
// Example:
//   const ppb::cuda::OwnedStream stream;
//   kernel<<<grid, block, 0, stream.get()>>>(...);
#pragma once

#include <cuda_runtime.h>

#include "ppb/exec/cuda_device.hpp"

namespace ppb::cuda {

class OwnedStream {
 public:
  OwnedStream() { PPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~OwnedStream() { (void)cudaStreamDestroy(stream_); }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace ppb::cuda
