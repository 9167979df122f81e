// The GEMM core the emulator's cuBLAS (cublas.cpp) and cuBLASLt
// (cublaslt.cpp) share: column-major products with cuBLAS's argument rules
// and type support (fp32 x fp32 -> fp32, bf16 x bf16 -> bf16 or fp32,
// CUBLAS_COMPUTE_32F), computed by OpenBLAS's SGEMM on fp32 copies of the
// operands. Every operand's extent (leading dimension, columns, batch
// stride) must lie inside one device allocation.
#pragma once

#include <cublas_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ppb::cudaemu {

/// True when the emulated runtime has a device (a handle may be created);
/// false leaves no error behind (cudaGetLastError).
bool device_present();

size_t elem_bytes(cudaDataType t);
/// Element i of `base` (fp32 or bf16) as a float.
float load(const void* base, cudaDataType t, int64_t i);
/// Stores v (rounded to bf16 where t is) as element i of `base`.
void store(void* base, cudaDataType t, int64_t i, float v);
/// Elements an operand of `rows` x `cols` (column-major, leading dimension
/// ld) spans from its first element.
int64_t span(int64_t rows, int64_t cols, int64_t ld);

/// count GEMMs D = alpha op(A) op(B) + beta C (matrix i of each operand
/// `s*` elements after matrix i-1); C is read from c_in, D written to c
/// (cuBLAS: the same pointer; cuBLASLt: C and D may differ, same layout).
struct Gemm {
  cublasOperation_t ta, tb;
  int m, n, k;
  float alpha, beta;
  const void* a;
  cudaDataType at;
  int lda;
  int64_t sa;
  const void* b;
  cudaDataType bt;
  int ldb;
  int64_t sb;
  void* c;
  cudaDataType ct;
  int ldc;
  int64_t sc;
  int count;
  const void* c_in;
  // The stored shapes of A and B (column-major rows x columns).
  int rows_a() const { return ta == CUBLAS_OP_N ? m : k; }
  int cols_a() const { return ta == CUBLAS_OP_N ? k : m; }
  int rows_b() const { return tb == CUBLAS_OP_N ? k : n; }
  int cols_b() const { return tb == CUBLAS_OP_N ? n : k; }
};

/// Matrix i's alpha op(A) op(B) + beta C in fp32, laid out as C (ld ldc,
/// span(m, n, ldc) elements).
std::vector<float> product(const Gemm& g, int i);
/// Writes the m x n entries of `d` (as product() lays them out) into matrix
/// i of D, rounded to D's type; the gaps between columns are not the call's.
void store_result(const Gemm& g, int i, const std::vector<float>& d);

/// CUBLAS_STATUS_SUCCESS, or the status cuBLAS returns for `g` (saying
/// why on stderr, naming `call`): an unsupported compute type or type
/// combination, invalid sizes or leading dimensions, an operand outside
/// its allocation.
cublasStatus_t check_gemm(const char* call, const Gemm& g, cublasComputeType_t compute);
/// True (and says so, naming `call` and `which`) when `elements` of type t
/// from p do not lie inside one device allocation.
bool bad_vector(const char* call, const char* which, const void* p, cudaDataType t,
                int64_t elements);

}  // namespace ppb::cudaemu
