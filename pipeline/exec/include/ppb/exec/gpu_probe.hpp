// The GPU health probe's measurements (`pipebench health`): the hardware's
// own speed, measured without pipebench's pipeline code, so that a slower
// night can be told from a slower GPU. Every function works on the device
// it is given and leaves it current; all time with CUDA events: the best of
// three rounds of `iters` calls after two warm-up calls.
//
// Example:
//   ppb::cuda::set_device(0);
//   double tf = ppb::cuda::backend_gemm_tflops(0, ppb::parse_model_spec("gpt-small"), false, 20);
//   double gbps = ppb::cuda::copy_gbps(ppb::cuda::Copy::kHostToDevice, 0, -1, 256 << 20, 20);
//
// In a build without CUDA every function throws UsageError(unusable_reason()).
#pragma once

#include <cstdint>

#include "ppb/pipeline/model.hpp"

namespace ppb::cuda {

/// CUDA devices visible to this process (0 when none is usable).
int device_count();

/// The backend's GEMMs of one layer and the head per micro-batch of `spec`
/// (ppb::cuda_gemm_calls: the same shapes, calls and fp32 weight gradients
/// the cuda backend issues), on `device`, in bf16 or (fp32) fp32 storage:
/// flops per micro-batch / seconds per micro-batch, in TFLOP/s. Each GEMM
/// is timed as ppb_gemm_bench times its backend column (the same function,
/// cuda/gemm_timing.hpp), twice, the lesser kept, so the figure is
/// ppb_gemm_bench's "backend" total for the same model and dtype.
/// REQUIRES: iters >= 1.
double backend_gemm_tflops(int device, const ModelSpec& spec, bool fp32, int iters);

/// A copy the probe times.
enum class Copy : uint8_t {
  kDeviceToDevice,  ///< within `device`'s memory
  kHostToDevice,    ///< from pinned host memory to `device`
  kDeviceToHost,    ///< from `device` to pinned host memory
  kPeer,            ///< from `device` to `peer` (peer access enabled where the pair has it)
};

/// The bandwidth of cudaMemcpyAsync of `bytes` on a stream of `device`, in
/// GB/s (1e9 bytes per second; the bytes once, as nvbandwidth counts them).
/// REQUIRES: bytes >= 1, iters >= 1; peer a device other than `device` for
/// kPeer (ignored otherwise).
double copy_gbps(Copy copy, int device, int peer, int64_t bytes, int iters);

}  // namespace ppb::cuda
