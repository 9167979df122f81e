#include "cuda/blas.hpp"

#include <string>

#include "ppb/exec/cuda_device.hpp"
#include "ppb/exec/mpi.hpp"

namespace ppb::cuda {
namespace {

cudaDataType_t data_type(Dtype dt) { return dt == Dtype::kFp32 ? CUDA_R_32F : CUDA_R_16BF; }
cublasOperation_t op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

}  // namespace

void cublas_call_failed(int status, const char* call, const char* file, int line) {
  const auto s = static_cast<cublasStatus_t>(status);
  const std::string where = std::string(call) + " at " + file + ":" + std::to_string(line);
  if (s == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemory("cuBLAS out of memory in " + where);
  const std::string text =
      "cuBLAS error in " + where + ": " + cublasGetStatusName(s) + ": " + cublasGetStatusString(s);
  abort_job(text.c_str(), 1);
}

Blas::Blas(cudaStream_t stream, void* workspace, size_t workspace_bytes) {
  PPB_CUBLAS_CHECK(cublasCreate(&handle_));
  // cublasSetStream resets the workspace to cuBLAS's own: set the stream first.
  PPB_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  PPB_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace, workspace_bytes));
  PPB_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
}

Blas::~Blas() {
  if (handle_ != nullptr) (void)cublasDestroy(handle_);
}

// cuBLAS is column-major; a row-major X is the column-major X^T. So the
// row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T: swap
// the operands and m with n, keep each operand's own transpose flag and
// leading dimension.
void Blas::gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, Operand a, Operand b,
                Dtype ab, float beta, void* c, int ldc, Dtype c_type) {
  PPB_CUBLAS_CHECK(cublasGemmEx(handle_, op(trans_b), op(trans_a), n, m, k, &alpha, b.data,
                                data_type(ab), b.ld, a.data, data_type(ab), a.ld, &beta, c,
                                data_type(c_type), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void Blas::gemm_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, Operand a,
                        Operand b, Dtype ab, float beta, void* c, int ldc, int64_t c_stride,
                        Dtype c_type, int count) {
  PPB_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle_, op(trans_b), op(trans_a), n, m, k, &alpha, b.data, data_type(ab), b.ld, b.stride,
      a.data, data_type(ab), a.ld, a.stride, &beta, c, data_type(c_type), ldc, c_stride, count,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace ppb::cuda
