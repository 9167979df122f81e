#include "gemm.hpp"

#include <cblas.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "emu.hpp"

namespace ppb::cudaemu {

bool device_present() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

size_t elem_bytes(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

float load(const void* base, cudaDataType t, int64_t i) {
  if (t == CUDA_R_32F) return static_cast<const float*>(base)[i];
  return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
}

void store(void* base, cudaDataType t, int64_t i, float v) {
  if (t == CUDA_R_32F) {
    static_cast<float*>(base)[i] = v;
  } else {
    static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v);
  }
}

int64_t span(int64_t rows, int64_t cols, int64_t ld) {
  if (rows == 0 || cols == 0) return 0;
  return (cols - 1) * ld + rows;
}

namespace {

// fp32 copy of `n` elements (the same layout).
std::vector<float> widen(const void* p, cudaDataType t, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = load(p, t, i);
  return out;
}

bool bad_operand(const char* call, const char* which, const void* p, cudaDataType t, int rows,
                 int cols, int ld, int64_t stride, int count) {
  if (count == 0 || rows == 0 || cols == 0) return false;
  const int64_t elems = span(rows, cols, ld) + int64_t{count - 1} * stride;
  std::string why;
  if (!within(p, static_cast<size_t>(elems) * elem_bytes(t), Space::kDevice, &why)) {
    complain(std::string(call) + ": operand " + which + " (" + std::to_string(rows) + " x " +
             std::to_string(cols) + ", ld " + std::to_string(ld) +
             (count > 1 ? ", " + std::to_string(count) + " matrices " + std::to_string(stride) +
                              " elements apart"
                        : std::string()) +
             "): " + why);
    return true;
  }
  return false;
}

}  // namespace

std::vector<float> product(const Gemm& g, int i) {
  const auto* a = static_cast<const char*>(g.a) + i * g.sa * elem_bytes(g.at);
  const auto* b = static_cast<const char*>(g.b) + i * g.sb * elem_bytes(g.bt);
  const auto* c = static_cast<const char*>(g.c_in) + i * g.sc * elem_bytes(g.ct);
  const std::vector<float> af = widen(a, g.at, span(g.rows_a(), g.cols_a(), g.lda));
  const std::vector<float> bf = widen(b, g.bt, span(g.rows_b(), g.cols_b(), g.ldb));
  std::vector<float> cf = widen(c, g.ct, span(g.m, g.n, g.ldc));
  if (g.m > 0 && g.n > 0) {
    if (g.k == 0) {
      for (int col = 0; col < g.n; ++col) {
        for (int row = 0; row < g.m; ++row) cf[size_t(col) * g.ldc + row] *= g.beta;
      }
    } else {
      cblas_sgemm(CblasColMajor, g.ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                  g.tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, g.m, g.n, g.k, g.alpha,
                  af.data(), g.lda, bf.data(), g.ldb, g.beta, cf.data(), g.ldc);
    }
  }
  return cf;
}

void store_result(const Gemm& g, int i, const std::vector<float>& d) {
  auto* c = static_cast<char*>(g.c) + i * g.sc * elem_bytes(g.ct);
  for (int col = 0; col < g.n; ++col) {
    for (int row = 0; row < g.m; ++row) {
      const int64_t at = int64_t{col} * g.ldc + row;
      store(c, g.ct, at, d[static_cast<size_t>(at)]);
    }
  }
}

cublasStatus_t check_gemm(const char* call, const Gemm& g, cublasComputeType_t compute) {
  if (compute != CUBLAS_COMPUTE_32F) {
    complain(std::string(call) + ": compute type " + std::to_string(static_cast<int>(compute)) +
             " is not emulated (CUBLAS_COMPUTE_32F is)");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const bool types =
      g.at == g.bt && ((g.at == CUDA_R_32F && g.ct == CUDA_R_32F) ||
                       (g.at == CUDA_R_16BF && (g.ct == CUDA_R_16BF || g.ct == CUDA_R_32F)));
  if (!types) {
    complain(std::string(call) + ": A/B/C types " + std::to_string(g.at) + "/" +
             std::to_string(g.bt) + "/" + std::to_string(g.ct) +
             " are not a combination cuBLAS supports with CUBLAS_COMPUTE_32F");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const int ra = g.rows_a();
  const int ca = g.cols_a();
  const int rb = g.rows_b();
  const int cb = g.cols_b();
  const bool ops =
      (g.ta == CUBLAS_OP_N || g.ta == CUBLAS_OP_T) && (g.tb == CUBLAS_OP_N || g.tb == CUBLAS_OP_T);
  if (!ops || g.m < 0 || g.n < 0 || g.k < 0 || g.count < 0 || g.lda < std::max(1, ra) ||
      g.ldb < std::max(1, rb) || g.ldc < std::max(1, g.m)) {
    complain(std::string(call) + ": invalid arguments m " + std::to_string(g.m) + " n " +
             std::to_string(g.n) + " k " + std::to_string(g.k) + " lda " + std::to_string(g.lda) +
             " ldb " + std::to_string(g.ldb) + " ldc " + std::to_string(g.ldc) +
             " (a leading dimension below its operand's rows?)");
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (g.m == 0 || g.n == 0 || g.count == 0) return CUBLAS_STATUS_SUCCESS;
  if (bad_operand(call, "A", g.a, g.at, ra, ca, g.lda, g.sa, g.count) ||
      bad_operand(call, "B", g.b, g.bt, rb, cb, g.ldb, g.sb, g.count) ||
      (g.c_in != g.c && bad_operand(call, "C", g.c_in, g.ct, g.m, g.n, g.ldc, g.sc, g.count)) ||
      bad_operand(call, g.c_in != g.c ? "D" : "C", g.c, g.ct, g.m, g.n, g.ldc, g.sc, g.count)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

bool bad_vector(const char* call, const char* which, const void* p, cudaDataType t,
                int64_t elements) {
  std::string why;
  if (within(p, static_cast<size_t>(elements) * elem_bytes(t), Space::kDevice, &why)) {
    return false;
  }
  complain(std::string(call) + ": " + which + " (" + std::to_string(elements) +
           " elements): " + why);
  return true;
}

}  // namespace ppb::cudaemu
