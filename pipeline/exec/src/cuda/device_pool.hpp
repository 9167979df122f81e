// The cuda backend's device memory: one stream-ordered pool (cudaMemPool) per
// backend, with its release threshold at UINT64_MAX so that memory freed back
// to the pool stays reserved across synchronisations (without it the pool
// returns memory to the driver at every sync and re-maps it on the next
// allocation). Every buffer is a TrackedBuffer counted in the backend's
// tracker; the pool's own high-water mark (cudaMemPoolAttrUsedMemHigh) is the
// device figure of a step. Destroying the pool gives its memory back, so a
// combination that ran out of memory leaves nothing behind for the next.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ppb/profiling/memory.hpp"

namespace ppb::cuda {

class DevicePool {
 public:
  /// A pool on `device`; stream-ordered allocations and frees go on `stream`.
  DevicePool(int device, cudaStream_t stream, MemoryTracker& tracker);
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  /// `bytes` of uninitialised device memory, usable by work enqueued on the
  /// pool's stream after this call, freed stream-ordered on that stream when
  /// the buffer dies (work enqueued before the free may still use it).
  /// Throws OutOfMemory.
  TrackedBuffer stream_ordered(int64_t bytes, MemCategory category);
  /// `bytes` of device memory as stream_ordered, not counted in the
  /// tracker (the caller counts what it places in it); freed by free().
  /// Throws OutOfMemory.
  std::byte* allocate(int64_t bytes);
  /// Frees what allocate() returned, stream-ordered on the pool's stream.
  void free(std::byte* data);
  MemoryTracker& tracker() { return *tracker_; }
  /// `bytes` of zeroed device memory usable by any stream and by the host's
  /// libraries (MPI, NCCL) when this returns: allocated and zeroed on
  /// `side` and synchronised there. Released by `release` (the caller's,
  /// which must order the free after every use). Throws OutOfMemory.
  std::byte* ready(int64_t bytes, cudaStream_t side);

  /// Bytes of the pool in use at its high-water mark since the last reset.
  int64_t used_high() const;
  /// Starts a new high-water window (per step).
  void reset_high();
  cudaMemPool_t pool() const { return pool_; }

 private:
  static void free_on_stream(void* context, std::byte* data);
  cudaMemPool_t pool_ = nullptr;
  cudaStream_t stream_ = nullptr;
  MemoryTracker* tracker_ = nullptr;
};

}  // namespace ppb::cuda
