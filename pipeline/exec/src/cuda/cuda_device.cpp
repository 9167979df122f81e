// The CUDA runtime side of cuda_device.hpp (compiled when PPB_HAVE_CUDA).
#include "ppb/exec/cuda_device.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cuda/graph_cache.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/exec/nvml.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/log.hpp"

namespace ppb::cuda {
namespace {

std::string error_text(cudaError_t rc) {
  return std::string(cudaGetErrorName(rc)) + ", " + std::to_string(static_cast<int>(rc));
}

// Why cudaGetDeviceCount failed, in words a user can act on. Without a driver
// the runtime answers cudaErrorInsufficientDriver (35), not cudaErrorNoDevice.
std::string probe() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();  // a failed probe must not linger as the last error
  switch (rc) {
    case cudaSuccess:
      return count > 0 ? std::string() : "no CUDA device (cudaGetDeviceCount found 0)";
    case cudaErrorInsufficientDriver:
      return "no CUDA driver (cudaGetDeviceCount: " + error_text(rc) +
             "): the NVIDIA driver is missing or older than the CUDA runtime";
    case cudaErrorNoDevice:
      return "no CUDA device (cudaGetDeviceCount: " + error_text(rc) + ")";
    default:
      return "CUDA is not usable (cudaGetDeviceCount: " + error_text(rc) +
             "): " + cudaGetErrorString(rc);
  }
}

// 13000 -> "13.0" (cudaRuntimeGetVersion's and cudaDriverGetVersion's
// 1000 x major + 10 x minor).
std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// The driver's own version ("580.95.05") from NVML, which comes with the
// driver (nvml.hpp); "" when NVML cannot say.
std::string nvml_driver_version() {
  const std::shared_ptr<nvml::Library> lib = nvml::Library::open(nullptr);
  return lib ? lib->driver_version() : std::string();
}

// The device bind_device bound, for the message of a failed call: "GPU 0
// (0000:3B:00.0)"; "" before binding. Set once per process, before any
// call that can fail on the device.
std::string& bound_device() {
  static std::string text;
  return text;
}

}  // namespace

std::string unusable_reason() {
  static const std::string kWhy = probe();
  return kWhy;
}

int visible_devices() {
  if (!unusable_reason().empty()) return 0;
  int devices = 0;
  PPB_CUDA_CHECK(cudaGetDeviceCount(&devices));
  return devices;
}

DeviceBinding bind_device(int local_rank, int local_ranks) {
  PPB_CHECK(local_rank >= 0 && local_rank < local_ranks, "bind_device: local rank out of range");
  const std::string why = unusable_reason();
  if (!why.empty()) throw UsageError(why);
  DeviceBinding b;
  b.local_rank = local_rank;
  b.local_ranks = local_ranks;
  PPB_CUDA_CHECK(cudaGetDeviceCount(&b.devices));
  b.device = local_rank % b.devices;
  PPB_CUDA_CHECK(cudaSetDevice(b.device));
  char bus[64] = {};
  PPB_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, b.device));
  bound_device() = "GPU " + std::to_string(b.device) + " (" + bus + ")";
  return b;
}

DeviceFacts device_facts(int local_rank) {
  PPB_CHECK(local_rank >= 0, "device_facts: negative local rank");
  const std::string why = unusable_reason();
  if (!why.empty()) throw UsageError(why);
  DeviceFacts f;
  int devices = 0;
  PPB_CUDA_CHECK(cudaGetDeviceCount(&devices));
  f.device = local_rank % devices;  // bind_device's choice
  cudaDeviceProp prop{};
  PPB_CUDA_CHECK(cudaGetDeviceProperties(&prop, f.device));
  f.name = prop.name;
  char bus[64] = {};
  PPB_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, f.device));
  f.bus = bus;
  int runtime = 0;
  PPB_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  f.runtime = cuda_version_text(runtime);
  f.driver = nvml_driver_version();
  if (f.driver.empty()) {
    int driver = 0;
    PPB_CUDA_CHECK(cudaDriverGetVersion(&driver));
    f.driver = "CUDA " + cuda_version_text(driver);
  }
  return f;
}

void cuda_call_failed(int code, const char* call, const char* file, int line) {
  const auto rc = static_cast<cudaError_t>(code);
  (void)cudaGetLastError();
  if (rc == cudaErrorMemoryAllocation) {
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    const bool known = cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess;
    (void)cudaGetLastError();
    std::string what =
        std::string("CUDA out of memory in ") + call + " at " + file + ":" + std::to_string(line);
    if (known) {
      what += ": " + std::to_string(free_bytes) + " of " + std::to_string(total_bytes) +
              " device bytes free";
    }
    throw OutOfMemory(what);
  }
  const std::string on = bound_device().empty() ? "" : " on " + bound_device();
  switch (rc) {
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorCapturedEvent:
    case cudaErrorStreamCaptureWrongThread:
      // Only a capture fails these: the caller runs the work eagerly.
      throw CaptureRefused(std::string(call) + ": " + cudaGetErrorString(rc));
    default:
      break;
  }
  char text[1024];
  std::snprintf(text, sizeof text, "CUDA error%s in %s at %s:%d: %s (%d): %s", on.c_str(), call,
                file, line, cudaGetErrorName(rc), code, cudaGetErrorString(rc));
  abort_job(text, 1);
}

}  // namespace ppb::cuda
