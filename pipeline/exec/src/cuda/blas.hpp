// Row-major GEMMs on one stream through cuBLAS, with the semantics of
// cpu::gemm: C[m,n] = alpha * op(A) * op(B) + beta * C. A and B are in the
// storage dtype, C in the storage dtype or fp32 (weight gradients), and every
// product accumulates in fp32 (CUBLAS_COMPUTE_32F with the default math mode,
// so fp32 GEMMs do not drop to TF32). Where cuBLAS splits K, a bf16 C may sum
// the splits' partial results in bf16 (the default math mode allows such
// reduced-precision reductions, and cuBLASLt's in-place reduction scheme adds
// in the output type), as PyTorch allows by default
// (torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction): bf16
// --check's tolerance covers it. GEMMs with a fused epilogue (bias,
// bias + GeLU, bias gradient) go through cuBLASLt on the same stream and
// workspace.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

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

/// What a GEMM does to its product P = op(A) op(B) + beta C before storing
/// it (cuBLASLt's epilogues), in the row-major terms of Blas::gemm. Vectors
/// and the aux matrix have C's dtype; arithmetic is fp32.
enum class Epilogue : uint8_t {
  kBias,         ///< C[r,c] = P[r,c] + vector[c] (CUBLASLT_EPILOGUE_BIAS)
  kGeluAuxBias,  ///< aux[r,c] = P[r,c] + vector[c], C = gelu(aux), tanh GeLU as
                 ///< kernel_math's (CUBLASLT_EPILOGUE_GELU_AUX_BIAS); aux is m x n, ld n
  kBiasGradB,    ///< C = P; vector[c] = sum over the k rows of B (REQUIRES: B not
                 ///< transposed), overwritten, deterministic: cuBLASLt's BGRADA on
                 ///< its column-major view, where row-major B is its A
};

/// The epilogue of a fused GEMM and the buffers it reads or writes.
struct EpilogueArgs {
  Epilogue kind = Epilogue::kBias;
  void* vector = nullptr;  ///< the bias (read) or the bias gradient (written)
  void* aux = nullptr;     ///< kGeluAuxBias: the pre-activation (written)
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
  /// C[m,n] = epilogue(op(A) op(B) + beta C_in) through cuBLASLt, C_in
  /// (read where beta != 0) and C in the same layout (C_in may be C). Returns
  /// false, enqueuing nothing, where cuBLASLt offers no algorithm for the
  /// call (cublasLtMatmulAlgoGetHeuristic finds none for the shape, types,
  /// alignments or epilogue) or cublasLtMatmul answers NOT_SUPPORTED for the
  /// one it offered: the caller then computes it another way. The
  /// descriptors and the answer are made once per shape, types, epilogue and
  /// pointer alignment.
  bool gemm_epilogue(bool trans_a, bool trans_b, int m, int n, int k, Operand a, Operand b,
                     Dtype ab, float beta, const void* c_in, void* c, int ldc, Dtype c_type,
                     const EpilogueArgs& epilogue);
  /// gemm_epilogue in two steps: decides now (and counts the call as fused
  /// or refused), and returns the work that enqueues the GEMM, to run when
  /// its turn on the stream comes (once, or recorded and run again);
  /// empty where cuBLASLt refuses. The work returns false, enqueuing
  /// nothing, where cublasLtMatmul refuses at run time (the call then counts
  /// as refused): the caller enqueues its other way there. The handle must
  /// outlive the work.
  std::function<bool()> plan_epilogue(bool trans_a, bool trans_b, int m, int n, int k, Operand a,
                                      Operand b, Dtype ab, float beta, const void* c_in, void* c,
                                      int ldc, Dtype c_type, const EpilogueArgs& epilogue);
  /// Fused GEMMs this handle ran, and those cuBLASLt refused (false above).
  int64_t epilogue_gemms() const { return epilogue_gemms_; }
  int64_t epilogue_refusals() const { return epilogue_refusals_; }
  /// The first refusal, "" while there was none: the epilogue, the shape
  /// and types, and cuBLASLt's answer. Example: "bias + GeLU GEMM 2 x 12 x
  /// 3 fp32: cublasLtMatmulAlgoGetHeuristic: CUBLAS_STATUS_NOT_SUPPORTED".
  const std::string& first_epilogue_refusal() const { return first_refusal_; }

 private:
  // Shape, transposes, leading dimensions, types, epilogue, beta != 0 and
  // the alignment of every pointer: what a call's descriptors and the
  // heuristic's answer depend on.
  using LtKey = std::array<int64_t, 17>;
  struct LtPlan;
  // Keeps the first refusal's text (first_epilogue_refusal).
  void refused(const LtPlan& plan, const std::string& why);
  cublasHandle_t handle_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<LtKey, std::unique_ptr<LtPlan>> lt_plans_;
  int64_t epilogue_gemms_ = 0;
  int64_t epilogue_refusals_ = 0;
  std::string first_refusal_;
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
