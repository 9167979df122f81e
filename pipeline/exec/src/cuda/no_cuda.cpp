// cuda_device.hpp and the cuda backend's factory in a build without CUDA
// (PPB_HAVE_CUDA is 0): nothing is usable, and every entry says so.
#include <memory>
#include <string>

#include "ppb/exec/backend.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/exec/gpu_probe.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace cuda {

std::string unusable_reason() {
  return "built without CUDA (PPB_WITH_CUDA=OFF or no CUDA toolkit at configure time)";
}

std::string cudnn_unavailable_reason() { return unusable_reason(); }

std::string loaded_cudnn_version() { return ""; }

std::string fused_attention_unavailable_reason(int /*bytes_per_element*/, int /*head_dim*/) {
  return unusable_reason();
}

std::string fused_attention_refusal(const ModelSpec& /*spec*/) { return unusable_reason(); }

int visible_devices() { return 0; }

DeviceBinding bind_device(int /*local_rank*/, int /*local_ranks*/) {
  throw UsageError(unusable_reason());
}

DeviceFacts device_facts(int /*local_rank*/) { throw UsageError(unusable_reason()); }

int device_count() { return 0; }

double backend_gemm_tflops(int /*device*/, const ModelSpec& /*spec*/, bool /*fp32*/,
                           int /*iters*/) {
  throw UsageError(unusable_reason());
}

double copy_gbps(Copy /*copy*/, int /*device*/, int /*peer*/, int64_t /*bytes*/, int /*iters*/) {
  throw UsageError(unusable_reason());
}

void cuda_call_failed(int code, const char* call, const char* file, int line) {
  const std::string text = std::string("CUDA error in ") + call + " at " + file + ":" +
                           std::to_string(line) + ": code " + std::to_string(code) +
                           " in a build without CUDA";
  abort_job(text.c_str(), 1);
}

}  // namespace cuda

std::unique_ptr<Backend> make_cuda_backend(const BackendConfig& /*config*/) {
  throw UsageError("--backend cuda: " + cuda::unusable_reason());
}

}  // namespace ppb
