// The emulator's cuBLAS (libcublas.so.13): handles bound to emulated streams
// and the GEMMs pipebench issues, with cuBLAS's column-major semantics,
// argument rules and type support (fp32 x fp32 -> fp32, bf16 x bf16 -> bf16
// or fp32, CUBLAS_COMPUTE_32F), run in stream order by OpenBLAS's SGEMM on
// fp32 copies of the operands. Every operand's extent (leading dimension,
// columns, batch stride) must lie inside one device allocation.
#include <cblas.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "emu.hpp"

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

size_t elem_bytes(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

float load(const void* base, cudaDataType t, int64_t i) {
  if (t == CUDA_R_32F) return static_cast<const float*>(base)[i];
  return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
}

// Elements an operand of `rows` x `cols` (column-major, leading dimension
// ld) spans from its first element.
int64_t span(int rows, int cols, int ld) {
  if (rows == 0 || cols == 0) return 0;
  return int64_t{cols - 1} * ld + rows;
}

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
  // The stored shapes of A and B (column-major rows x columns).
  int rows_a() const { return ta == CUBLAS_OP_N ? m : k; }
  int cols_a() const { return ta == CUBLAS_OP_N ? k : m; }
  int rows_b() const { return tb == CUBLAS_OP_N ? k : n; }
  int cols_b() const { return tb == CUBLAS_OP_N ? n : k; }
};

// fp32 copy of `n` elements (the same layout).
std::vector<float> widen(const void* p, cudaDataType t, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = load(p, t, i);
  return out;
}

void run(const Gemm& g) {
  const int ra = g.rows_a();
  const int ca = g.cols_a();
  const int rb = g.rows_b();
  const int cb = g.cols_b();
  for (int i = 0; i < g.count; ++i) {
    const auto* a = static_cast<const char*>(g.a) + i * g.sa * elem_bytes(g.at);
    const auto* b = static_cast<const char*>(g.b) + i * g.sb * elem_bytes(g.bt);
    auto* c = static_cast<char*>(g.c) + i * g.sc * elem_bytes(g.ct);
    const std::vector<float> af = widen(a, g.at, span(ra, ca, g.lda));
    const std::vector<float> bf = widen(b, g.bt, span(rb, cb, g.ldb));
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
    // Only the m x n entries: the gaps between columns are not the call's.
    for (int col = 0; col < g.n; ++col) {
      for (int row = 0; row < g.m; ++row) {
        const size_t at = size_t(col) * g.ldc + row;
        if (g.ct == CUDA_R_32F) {
          reinterpret_cast<float*>(c)[at] = cf[at];
        } else {
          reinterpret_cast<__nv_bfloat16*>(c)[at] = __float2bfloat16_rn(cf[at]);
        }
      }
    }
  }
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

cublasStatus_t submit(const char* call, cublasHandle_t handle, const Gemm& g,
                      cublasComputeType_t compute) {
  Handle* h = find(handle);
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
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
      bad_operand(call, "C", g.c, g.ct, g.m, g.n, g.ldc, g.sc, g.count)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  // One kernel to a profiler, named for its types as cuBLAS's own are.
  const char* kernel = g.at == CUDA_R_16BF ? "ppb_cudaemu_gemm_bf16" : "ppb_cudaemu_gemm_f32";
  const cudaError_t rc = enqueue_kernel(h->stream, kernel, dim3(1), dim3(1), [g] { run(g); });
  return rc == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // namespace
}  // namespace ppb::cudaemu

namespace emu = ppb::cudaemu;

// The names and signatures are CUDA's ABI.
// NOLINTBEGIN(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,readability-identifier-naming)
extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    return CUBLAS_STATUS_NOT_INITIALIZED;
  }
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
                    1};
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
                    batchCount};
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
