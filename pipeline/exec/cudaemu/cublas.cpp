// The emulator's cuBLAS (libcublas.so.13): handles bound to emulated streams
// and the GEMMs pipebench issues, with cuBLAS's column-major semantics,
// run in stream order by the emulator's GEMM core (gemm.hpp).
#include <cublas_v2.h>

#include <mutex>
#include <string>
#include <unordered_set>

#include "emu.hpp"
#include "gemm.hpp"

namespace ppb::cudaemu {
namespace {

struct Handle {
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

std::mutex g_m;
std::unordered_set<Handle*> g_handles;

Handle* find(cublasHandle_t h) {
  std::lock_guard<std::mutex> lock(g_m);
  auto* p = reinterpret_cast<Handle*>(h);
  return g_handles.count(p) != 0 ? p : nullptr;
}

cublasStatus_t submit(const char* call, cublasHandle_t handle, const Gemm& g,
                      cublasComputeType_t compute) {
  Handle* h = find(handle);
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const cublasStatus_t rc = check_gemm(call, g, compute);
  if (rc != CUBLAS_STATUS_SUCCESS || g.m == 0 || g.n == 0 || g.count == 0) return rc;
  // One kernel to a profiler, named for its types as cuBLAS's own are.
  const char* kernel = g.at == CUDA_R_16BF ? "ppb_cudaemu_gemm_bf16" : "ppb_cudaemu_gemm_f32";
  const cudaError_t sent = enqueue_kernel(h->stream, kernel, dim3(1), dim3(1), [g] {
    for (int i = 0; i < g.count; ++i) store_result(g, i, product(g, i));
  });
  return sent == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // namespace
}  // namespace ppb::cudaemu

namespace emu = ppb::cudaemu;

// The names and signatures are CUDA's ABI.
// NOLINTBEGIN(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,readability-identifier-naming)
extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (!emu::device_present()) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto* h = new emu::Handle();
  std::lock_guard<std::mutex> lock(emu::g_m);
  emu::g_handles.insert(h);
  *handle = reinterpret_cast<cublasHandle_t>(h);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  std::lock_guard<std::mutex> lock(emu::g_m);
  auto* h = reinterpret_cast<emu::Handle*>(handle);
  if (emu::g_handles.erase(h) == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  emu::Handle* h = emu::find(handle);
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  h->stream = stream;
  h->workspace = nullptr;  // cuBLAS returns to its own workspace on a stream change
  h->workspace_bytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  emu::Handle* h = emu::find(handle);
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  std::string why;
  if (bytes > 0 && !emu::within(workspace, bytes, emu::Space::kDevice, &why)) {
    emu::complain("cublasSetWorkspace: " + why);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  h->workspace = workspace;
  h->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t /*mode*/) {
  // Accepted, not modelled: the products are fp32 SGEMMs in every mode.
  return emu::find(handle) == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t /*algo*/) {
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const emu::Gemm g{transa,
                    transb,
                    m,
                    n,
                    k,
                    *static_cast<const float*>(alpha),
                    *static_cast<const float*>(beta),
                    A,
                    Atype,
                    lda,
                    0,
                    B,
                    Btype,
                    ldb,
                    0,
                    C,
                    Ctype,
                    ldc,
                    0,
                    1,
                    C};
  return emu::submit("cublasGemmEx", handle, g, computeType);
}

cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void* alpha, const void* A, cudaDataType Atype, int lda, long long int strideA,
    const void* B, cudaDataType Btype, int ldb, long long int strideB, const void* beta, void* C,
    cudaDataType Ctype, int ldc, long long int strideC, int batchCount,
    cublasComputeType_t computeType, cublasGemmAlgo_t /*algo*/) {
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const emu::Gemm g{transa,
                    transb,
                    m,
                    n,
                    k,
                    *static_cast<const float*>(alpha),
                    *static_cast<const float*>(beta),
                    A,
                    Atype,
                    lda,
                    strideA,
                    B,
                    Btype,
                    ldb,
                    strideB,
                    C,
                    Ctype,
                    ldc,
                    strideC,
                    batchCount,
                    C};
  return emu::submit("cublasGemmStridedBatchedEx", handle, g, computeType);
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "CUBLAS_STATUS_UNKNOWN";
  }
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid numeric value was used as an argument (the emulator said which)";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the GPU program failed to execute";
    default:
      return "unknown error";
  }
}

}  // extern "C"
// NOLINTEND(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,readability-identifier-naming)
