// Row-major GEMMs on one stream through cuBLAS, with the semantics of
// cpu::gemm: C[m,n] = alpha * op(A) * op(B) + beta * C. A and B are in the
// storage dtype, C in the storage dtype or fp32 (weight gradients), and every
// product accumulates in fp32 (CUBLAS_COMPUTE_32F with the default math mode,
// so fp32 GEMMs do not drop to TF32).
#pragma once

#include <cublas_v2.h>

#include <cstdint>

#include "cuda/kernels.hpp"
#include "ppb/pipeline/memory_model.hpp"

namespace ppb::cuda {

/// Used by PPB_CUBLAS_CHECK: CUBLAS_STATUS_ALLOC_FAILED throws OutOfMemory,
/// any other failure ends the job naming the call and cuBLAS's status string.
[[noreturn]] void cublas_call_failed(int status, const char* call, const char* file, int line);

/// `p` advanced by `elements` elements of `dt`; null stays null (a buffer
/// that holds nothing: arithmetic on a null pointer is undefined).
inline void* offset(void* p, Dtype dt, int64_t elements) {
  return p == nullptr ? nullptr : static_cast<char*>(p) + elements * dtype_bytes(dt);
}
inline const void* offset(const void* p, Dtype dt, int64_t elements) {
  return p == nullptr ? nullptr : static_cast<const char*>(p) + elements * dtype_bytes(dt);
}

/// The workspace the backend gives cuBLAS (the memory model counts it as
/// the backend's resident bytes).
inline constexpr int64_t kBlasWorkspaceBytes = kCudaBlasWorkspaceBytes;

/// One operand of a GEMM: where it starts, its row-major leading dimension,
/// and (batched) the element stride between consecutive matrices.
struct Operand {
  const void* data = nullptr;
  int ld = 0;
  int64_t stride = 0;
};

/// A cuBLAS handle bound to one stream and a caller-owned workspace.
class Blas {
 public:
  /// REQUIRES: the workspace stays allocated for the life of the handle.
  Blas(cudaStream_t stream, void* workspace, size_t workspace_bytes);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  /// C[m,n] = alpha op(A) op(B) + beta C (row-major); A, B in `ab`, C in `c_type`.
  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, Operand a, Operand b,
            Dtype ab, float beta, void* c, int ldc, Dtype c_type);
  /// `count` GEMMs of the same shape: matrix i of each operand starts
  /// `stride` elements after matrix i-1 (C's stride is c_stride).
  void gemm_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, Operand a,
                    Operand b, Dtype ab, float beta, void* c, int ldc, int64_t c_stride,
                    Dtype c_type, int count);

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace ppb::cuda

/// Checks a cuBLAS call (anything returning cublasStatus_t).
#define PPB_CUBLAS_CHECK(call)                                                    \
  do {                                                                            \
    const int ppb_cublas_rc_ = static_cast<int>(call);                            \
    if (ppb_cublas_rc_ != 0) [[unlikely]] {                                       \
      ::ppb::cuda::cublas_call_failed(ppb_cublas_rc_, #call, __FILE__, __LINE__); \
    }                                                                             \
  } while (false)
