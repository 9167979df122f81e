#include "ppb/exec/gpu_probe.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <optional>

#include "cuda/blas.hpp"
#include "cuda/gemm_timing.hpp"
#include "cuda/owned_stream.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/exec/gemm_calls.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::cuda {

int device_count() {
  if (!unusable_reason().empty()) return 0;
  int n = 0;
  PPB_CUDA_CHECK(cudaGetDeviceCount(&n));
  return n;
}

namespace {

// Device or pinned host bytes, freed with their scope.
class Buffer {
 public:
  Buffer(int64_t bytes, bool host) : host_(host) {
    if (host) {
      PPB_CUDA_CHECK(cudaMallocHost(&p_, static_cast<size_t>(bytes)));
      std::fill_n(static_cast<unsigned char*>(p_), bytes, 1);
    } else {
      PPB_CUDA_CHECK(cudaMalloc(&p_, static_cast<size_t>(bytes)));
      PPB_CUDA_CHECK(cudaMemset(p_, 1, static_cast<size_t>(bytes)));
      // On the legacy default stream, which the non-blocking stream that
      // times the copies does not wait for: done before any is timed.
      PPB_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }
  ~Buffer() {
    if (host_) {
      cudaFreeHost(p_);
    } else {
      cudaFree(p_);
    }
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
  bool host_;
};

}  // namespace

double backend_gemm_tflops(int device, const ModelSpec& spec, bool fp32, int iters) {
  PPB_CHECK(iters >= 1, "backend_gemm_tflops: iters must be >= 1");
  PPB_CUDA_CHECK(cudaSetDevice(device));
  const Dtype dt = fp32 ? Dtype::kFp32 : Dtype::kBf16;
  const OwnedStream stream;
  const Buffer workspace(kBlasWorkspaceBytes, false);
  double flops = 0;
  double seconds = 0;
  {
    Blas blas(stream.get(), workspace.get(), static_cast<size_t>(kBlasWorkspaceBytes));
    EventTimer timer(stream.get());
    uint32_t seed = 1;
    for (const GemmCall& g : cuda_gemm_calls(spec)) {
      const GemmOperands ops(g, dt, seed);
      seed += 2;
      const double first = time_backend_gemm(blas, timer, g, dt, ops, iters);
      const double again = time_backend_gemm(blas, timer, g, dt, ops, iters);
      flops += g.flops();
      seconds += std::min(first, again) * g.repeat;
    }
  }
  return flops / seconds / 1e12;
}

double copy_gbps(Copy copy, int device, int peer, int64_t bytes, int iters) {
  PPB_CHECK(bytes >= 1 && iters >= 1, "copy_gbps: bytes and iters must be >= 1");
  PPB_CHECK(copy != Copy::kPeer || peer != device, "copy_gbps: a peer copy needs two devices");
  std::optional<Buffer> remote;
  if (copy == Copy::kPeer) {
    PPB_CUDA_CHECK(cudaSetDevice(peer));
    remote.emplace(bytes, false);
    int can = 0;
    PPB_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, peer));
    PPB_CUDA_CHECK(cudaSetDevice(device));
    if (can != 0) {
      const cudaError_t rc = cudaDeviceEnablePeerAccess(peer, 0);
      if (rc != cudaErrorPeerAccessAlreadyEnabled) PPB_CUDA_CHECK(rc);
      (void)cudaGetLastError();
    }
  }
  PPB_CUDA_CHECK(cudaSetDevice(device));
  const OwnedStream stream;
  const Buffer src(bytes, copy == Copy::kHostToDevice);
  const Buffer dst(bytes, copy == Copy::kDeviceToHost);
  void* to = copy == Copy::kPeer ? remote->get() : dst.get();
  EventTimer timer(stream.get());
  const double seconds = timer.per_call(iters, [&] {
    PPB_CUDA_CHECK(cudaMemcpyAsync(to, src.get(), static_cast<size_t>(bytes), cudaMemcpyDefault,
                                   stream.get()));
  });
  return static_cast<double>(bytes) / seconds / 1e9;
}

}  // namespace ppb::cuda
