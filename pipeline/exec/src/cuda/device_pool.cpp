#include "cuda/device_pool.hpp"

#include <cstdint>

#include "ppb/exec/cuda_device.hpp"

namespace ppb::cuda {

DevicePool::DevicePool(int device, cudaStream_t stream, MemoryTracker& tracker)
    : stream_(stream), tracker_(&tracker) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  PPB_CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
  uint64_t keep = UINT64_MAX;
  PPB_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep));
}

DevicePool::~DevicePool() {
  // Outstanding stream-ordered frees complete first; the pool's memory goes
  // back to the driver once none are pending.
  (void)cudaStreamSynchronize(stream_);
  (void)cudaMemPoolDestroy(pool_);
}

void DevicePool::free_on_stream(void* context, std::byte* data) {
  static_cast<DevicePool*>(context)->free(data);
}

std::byte* DevicePool::allocate(int64_t bytes) {
  void* p = nullptr;
  PPB_CUDA_CHECK(cudaMallocFromPoolAsync(&p, static_cast<size_t>(bytes), pool_, stream_));
  return static_cast<std::byte*>(p);
}

void DevicePool::free(std::byte* data) { PPB_CUDA_CHECK(cudaFreeAsync(data, stream_)); }

TrackedBuffer DevicePool::stream_ordered(int64_t bytes, MemCategory category) {
  if (bytes == 0) return TrackedBuffer(*tracker_, category, 0);
  return TrackedBuffer(*tracker_, category, bytes, allocate(bytes), &free_on_stream, this);
}

std::byte* DevicePool::ready(int64_t bytes, cudaStream_t side) {
  void* p = nullptr;
  PPB_CUDA_CHECK(cudaMallocFromPoolAsync(&p, static_cast<size_t>(bytes), pool_, side));
  PPB_CUDA_CHECK(cudaMemsetAsync(p, 0, static_cast<size_t>(bytes), side));
  // Once the allocating stream's work is complete the memory may be used by
  // any stream and by the host's libraries.
  PPB_CUDA_CHECK(cudaStreamSynchronize(side));
  return static_cast<std::byte*>(p);
}

int64_t DevicePool::used_high() const {
  uint64_t v = 0;
  PPB_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &v));
  return static_cast<int64_t>(v);
}

void DevicePool::reset_high() {
  uint64_t zero = 0;  // the only value the attribute accepts: it restarts at the current use
  PPB_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero));
}

}  // namespace ppb::cuda
