// The CUDA runtime as the executor sees it: whether a device is usable here,
// which device this rank binds to, and the checked-call macro of STYLE.md
// rule 5. Every build has these functions; a build without CUDA (PPB_HAVE_CUDA
// is 0) says so in unusable_reason() and never binds a device.
//
// Example (a rank of an MPI job):
//   if (std::string why = ppb::cuda::unusable_reason(); !why.empty())
//     throw ppb::UsageError("--backend cuda: " + why);
//   ppb::NodeLocal local = ppb::node_local(MPI_COMM_WORLD);
//   ppb::cuda::DeviceBinding b = ppb::cuda::bind_device(local.rank, local.size);
//   PPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace ppb {
struct ModelSpec;
}  // namespace ppb

namespace ppb::cuda {

/// "" when a CUDA device is usable from this process; otherwise ONE line
/// saying why not, e.g.
///   "no CUDA driver (cudaGetDeviceCount: cudaErrorInsufficientDriver, 35)"
///   "no CUDA device (cudaGetDeviceCount: cudaErrorNoDevice, 100)"
///   "built without CUDA (PPB_WITH_CUDA=OFF or no CUDA toolkit at configure time)"
/// Cheap after the first call (the answer is cached: it cannot change while
/// the process runs).
std::string unusable_reason();

/// "" when cuDNN's fused flash attention can run here (a build with cuDNN,
/// a real device of compute capability 8.0 or later, libcudnn.so.9
/// loadable and not 9.10.0 or 9.10.1, whose SDPA the frontend refuses);
/// otherwise ONE line saying why not, e.g.
///   "the CUDA emulator has no cuDNN"
///   "this build has no cuDNN (PPB_WITH_CUDNN=OFF, ...)"
/// Cached after the first call. Looks at device 0 (a node's GPUs are alike).
std::string cudnn_unavailable_reason();

/// The version of the cuDNN cudnn_unavailable_reason() loaded, "9.19.0";
/// "" where it loaded none (not called, or cuDNN unusable).
std::string loaded_cudnn_version();

/// "" when the fused attention (`run --attention fused`) can run here for
/// this storage (bytes_per_element 2: bf16, 4: fp32) and head dimension;
/// otherwise ONE line saying why not. bf16 runs cuDNN's
/// (cudnn_unavailable_reason()); fp32 runs the backend's own flash kernels,
/// which need a real device of compute capability 8.0 or later (their
/// tensor-core mma) with the shared memory per block they take, e.g.
///   "compute capability 7.5: the fp32 flash attention's tensor-core mma
///    needs 8.0 or later"
/// Looks at device 0. The head dimension's own limits are the attention
/// rule's (ppb/pipeline/attention.hpp).
std::string fused_attention_unavailable_reason(int bytes_per_element, int head_dim);

/// "" when cuDNN builds the bf16 fused attention's graphs for `spec`'s shape
/// on the device this process is bound to (built once here and dropped),
/// and for fp32 storage, whose flash kernels build nothing; otherwise ONE
/// line: "cuDNN 9.19.0 cannot build its bf16 flash attention for
/// micro-batch 4, 12 heads, sequence 1024, head dimension 64 (...)".
/// cuDNN can only say so on a bound device, after the attention rule
/// chose fused: the run asks before it expands its units, so that
/// `--attention auto` runs naive, saying why. REQUIRES: bind_device()
/// called.
std::string fused_attention_refusal(const ModelSpec& spec);

/// The CUDA devices visible to this process (CUDA_VISIBLE_DEVICES applies);
/// 0 when none is usable (unusable_reason() says why).
int visible_devices();

/// The device a rank computes on.
struct DeviceBinding {
  int device = -1;      ///< the CUDA device index this process uses
  int devices = 0;      ///< CUDA devices visible to this process
  int local_rank = 0;   ///< this rank among the ranks of its node
  int local_ranks = 1;  ///< ranks on this node
};

/// Binds this process to device local_rank % devices (cudaSetDevice) and
/// says how. Whether ranks share a GPU is a question over the job's ranks
/// (ranks_per_gpu in gpu_ranks.hpp): with one visible device per rank
/// (CUDA_VISIBLE_DEVICES set per rank) every rank binds device 0 of its own.
/// Throws ppb::UsageError(unusable_reason()) when no device is usable.
/// REQUIRES: 0 <= local_rank < local_ranks.
DeviceBinding bind_device(int local_rank, int local_ranks);

/// What a result records of the GPU a rank computes on.
struct DeviceFacts {
  int device = -1;      ///< the index bind_device(local_rank, ...) binds
  std::string name;     ///< "NVIDIA H200"
  std::string bus;      ///< PCI bus id, "0000:3B:00.0"
  std::string runtime;  ///< CUDA runtime version, "13.0"
  /// The driver's version from NVML ("580.95.05"), or, where NVML cannot be
  /// loaded, the CUDA version the driver supports ("CUDA 13.0").
  std::string driver;
};

/// The facts of the device bind_device(local_rank, ...) binds, without
/// binding it. Throws ppb::UsageError(unusable_reason()) when no device is
/// usable. REQUIRES: local_rank >= 0.
DeviceFacts device_facts(int local_rank);

/// A CUDA call ran out of device memory (cudaErrorMemoryAllocation). Thrown
/// by PPB_CUDA_CHECK instead of ending the job, so that a run can record the
/// combination as status `oom` and go on.
class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Used by PPB_CUDA_CHECK. cudaErrorMemoryAllocation throws OutOfMemory
/// ("CUDA out of memory in <call> at <file>:<line>: <free> of <total> bytes
/// free"); the errors only a stream capture gives throw
/// cuda::CaptureRefused (cuda/graph_cache.hpp: the work then runs
/// eagerly); every other code prints
///   "pipebench[r<rank>]: CUDA error on GPU <d> (<bus id>) in <call> at <file>:<line>: <name>
///   (<code>): <string>" (the GPU once bind_device bound one)
/// and ends the job (MPI_Abort when MPI is up, else exit 1).
[[noreturn]] void cuda_call_failed(int code, const char* call, const char* file, int line);

}  // namespace ppb::cuda

/// Checks a CUDA runtime call (anything returning cudaError_t).
/// Example: PPB_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, stream));
#define PPB_CUDA_CHECK(call)                                                  \
  do {                                                                        \
    const int ppb_cuda_rc_ = static_cast<int>(call);                          \
    if (ppb_cuda_rc_ != 0) [[unlikely]] {                                     \
      ::ppb::cuda::cuda_call_failed(ppb_cuda_rc_, #call, __FILE__, __LINE__); \
    }                                                                         \
  } while (false)
