// The emulator's cuBLASLt (libcublasLt.so.13): the calls the cuda backend's
// fused GEMMs make (cuda/blas.hpp) and nothing else. Matmul descriptors
// (transposes, epilogue, bias and aux pointers, aux leading dimension),
// matrix layouts (one matrix each: no batches), preferences (the workspace
// limit, the operands' minimum alignments), a heuristic that offers one
// algorithm where the emulator runs the call and none
// (CUBLAS_STATUS_NOT_SUPPORTED) where it does not, and cublasLtMatmul in
// stream order (refusing operands less aligned than its algorithm was
// chosen for): the product from the GEMM core the
// emulated cuBLAS uses (gemm.hpp), then the epilogue in fp32 on it, as
// cuBLASLt applies it before rounding to D's type:
//   CUBLASLT_EPILOGUE_DEFAULT         D = P (P = alpha op(A) op(B) + beta C)
//   CUBLASLT_EPILOGUE_BIAS            D = P + bias[row]
//   CUBLASLT_EPILOGUE_GELU_AUX_BIAS   aux = P + bias[row]; D = gelu(aux) (tanh GeLU)
//   CUBLASLT_EPILOGUE_BGRADA          D = P; bias[row] = sum over k of op(A)[row, k]
// Bias and aux vectors have D's type (the defaults: setting their type is
// not emulated); the bias gradient is summed in a fixed order (deterministic,
// as cuBLASLt's). Each call is one kernel to a profiler.
// PPB_CUDAEMU_LT_REFUSE=bias|gelu|bgrad|all: cublasLtMatmul answers
// CUBLAS_STATUS_NOT_SUPPORTED, enqueuing nothing, for calls with that
// epilogue (all: any but the default) although the heuristic offered an
// algorithm for them, as a cuBLASLt whose heuristic and kernels disagree
// does; unset or empty: never.
#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "cpu/kernel_math.hpp"
#include "emu.hpp"
#include "gemm.hpp"

namespace ppb::cudaemu {
namespace {

struct Desc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType scale = CUDA_R_32F;
  int32_t ta = CUBLAS_OP_N;
  int32_t tb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  void* aux = nullptr;
  int64_t aux_ld = 0;
};

struct Layout {
  cudaDataType type = CUDA_R_32F;
  uint64_t rows = 0;
  uint64_t cols = 0;
  int64_t ld = 0;
};

// The operands' alignment (bytes) an algorithm may assume: what the
// preference promised (cuBLASLt's default 256), at most the 16 bytes of
// the vector loads its kernels make. Kept in the algorithm (data[0..3]: A,
// B, C, D) for cublasLtMatmul to check, as a real kernel chosen for aligned
// operands refuses (or faults on) less aligned ones.
constexpr uint32_t kVectorBytes = 16;

struct Preference {
  uint64_t max_workspace = 0;
  uint32_t min_alignment[4] = {256, 256, 256, 256};  // A, B, C, D
};

uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return a == 0 ? 256 : static_cast<uint32_t>(std::min<uintptr_t>(256, a & (~a + 1)));
}

std::mutex g_m;
std::unordered_set<const void*> g_handles;

// PPB_CUDAEMU_LT_REFUSE: does cublasLtMatmul refuse this epilogue?
bool refused_at_run(uint32_t epilogue) {
  const uint32_t refused = [] {  // read at each call: a test may set it
    const char* v = std::getenv("PPB_CUDAEMU_LT_REFUSE");
    const std::string text = v == nullptr ? "" : v;
    if (text.empty()) return uint32_t{0};
    if (text == "bias") return uint32_t{CUBLASLT_EPILOGUE_BIAS};
    if (text == "gelu") return uint32_t{CUBLASLT_EPILOGUE_GELU_AUX_BIAS};
    if (text == "bgrad") return uint32_t{CUBLASLT_EPILOGUE_BGRADA};
    if (text == "all") return ~uint32_t{0};
    refuse_setting("PPB_CUDAEMU_LT_REFUSE: expected bias, gelu, bgrad, all or nothing, not \"" +
                   text + "\"");
  }();
  if (epilogue == CUBLASLT_EPILOGUE_DEFAULT || refused == 0) return false;
  return refused == ~uint32_t{0} || refused == epilogue;
}

bool known(cublasLtHandle_t h) {
  std::lock_guard<std::mutex> lock(g_m);
  return g_handles.count(h) != 0;
}

template <class T>
cublasStatus_t set(T* field, const void* buf, size_t bytes) {
  if (buf == nullptr || bytes != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

bool emulated(uint32_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_DEFAULT || epilogue == CUBLASLT_EPILOGUE_BIAS ||
         epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || epilogue == CUBLASLT_EPILOGUE_BGRADA;
}

// The descriptors one call names.
struct Call {
  const Desc* desc;
  const Layout* a;
  const Layout* b;
  const Layout* c;
  const Layout* d;
  bool complete() const {
    return desc != nullptr && a != nullptr && b != nullptr && c != nullptr && d != nullptr;
  }
};

Call call_of(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
             cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d) {
  return {reinterpret_cast<const Desc*>(desc), reinterpret_cast<const Layout*>(a),
          reinterpret_cast<const Layout*>(b), reinterpret_cast<const Layout*>(c),
          reinterpret_cast<const Layout*>(d)};
}

// The GEMM of a call: cuBLASLt's D (m x n) = op(A) (m x k) op(B) (k x n).
Gemm gemm_of(const Call& call, float alpha, float beta, const void* pa, const void* pb,
             const void* pc, void* pd) {
  const Desc& d = *call.desc;
  const Layout& a = *call.a;
  const Layout& b = *call.b;
  const Layout& dl = *call.d;
  Gemm g{};
  g.ta = static_cast<cublasOperation_t>(d.ta);
  g.tb = static_cast<cublasOperation_t>(d.tb);
  g.m = static_cast<int>(dl.rows);
  g.n = static_cast<int>(dl.cols);
  g.k = static_cast<int>(g.ta == CUBLAS_OP_N ? a.cols : a.rows);
  g.alpha = alpha;
  g.beta = beta;
  g.a = pa;
  g.at = a.type;
  g.lda = static_cast<int>(a.ld);
  g.b = pb;
  g.bt = b.type;
  g.ldb = static_cast<int>(b.ld);
  g.c = pd;
  g.ct = dl.type;
  g.ldc = static_cast<int>(dl.ld);
  g.count = 1;
  g.c_in = pc == nullptr ? pd : pc;
  return g;
}

// CUBLAS_STATUS_SUCCESS where the emulator runs the call as described;
// otherwise the status cuBLASLt gives, saying why on stderr.
cublasStatus_t check_call(const char* call, const Call& described, const Gemm& g, bool pointers) {
  const Desc& d = *described.desc;
  const Layout& a = *described.a;
  const Layout& b = *described.b;
  const Layout& c = *described.c;
  const Layout& dl = *described.d;
  const auto k_b = d.tb == CUBLAS_OP_N ? b.rows : b.cols;
  const auto m_a = d.ta == CUBLAS_OP_N ? a.rows : a.cols;
  const auto n_b = d.tb == CUBLAS_OP_N ? b.cols : b.rows;
  if (m_a != dl.rows || n_b != dl.cols || static_cast<uint64_t>(g.k) != k_b || c.rows != dl.rows ||
      c.cols != dl.cols || c.ld != dl.ld || c.type != dl.type) {
    complain(std::string(call) + ": the layouts of A, B, C and D do not make one GEMM");
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (d.scale != CUDA_R_32F) {
    complain(std::string(call) + ": scale type " + std::to_string(d.scale) +
             " is not emulated (CUDA_R_32F is)");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (!emulated(d.epilogue)) {
    complain(std::string(call) + ": epilogue " + std::to_string(d.epilogue) + " is not emulated");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const bool gelu = d.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  if (gelu && (d.aux_ld < g.m || d.aux_ld % 8 != 0)) {
    complain(std::string(call) + ": aux leading dimension " + std::to_string(d.aux_ld) +
             " (must be divisible by 8 and no less than D's " + std::to_string(g.m) + " rows)");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (d.epilogue == CUBLASLT_EPILOGUE_BGRADA && d.ta != CUBLAS_OP_N) {
    complain(std::string(call) + ": CUBLASLT_EPILOGUE_BGRADA with A transposed is not emulated");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (!pointers) return CUBLAS_STATUS_SUCCESS;
  const cublasStatus_t rc = check_gemm(call, g, d.compute);
  if (rc != CUBLAS_STATUS_SUCCESS) return rc;
  if (d.epilogue != CUBLASLT_EPILOGUE_DEFAULT && g.m > 0 &&
      bad_vector(call, "the bias vector", d.bias, g.ct, g.m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (gelu && g.n > 0 &&
      bad_vector(call, "the aux matrix", d.aux, g.ct, span(g.m, g.n, d.aux_ld))) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

// The epilogue on the product p (laid out as D), in stream order.
void run(const Desc& d, const Gemm& g) {
  std::vector<float> p = product(g, 0);
  const auto at = [&](int row, int col) { return static_cast<size_t>(int64_t{col} * g.ldc + row); };
  switch (d.epilogue) {
    case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
      for (int col = 0; col < g.n; ++col) {
        for (int row = 0; row < g.m; ++row) {
          float& v = p[at(row, col)];
          v += load(d.bias, g.ct, row);
          if (d.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
            store(d.aux, g.ct, int64_t{col} * d.aux_ld + row, v);
            v = ppb::kmath::gelu(v);
          }
        }
      }
      break;
    case CUBLASLT_EPILOGUE_BGRADA: {
      // op(A) is A (m x k, ld lda): row sums over k, in column order.
      auto* bias = const_cast<void*>(d.bias);
      for (int row = 0; row < g.m; ++row) {
        float sum = 0;
        for (int col = 0; col < g.k; ++col) sum += load(g.a, g.at, int64_t{col} * g.lda + row);
        store(bias, g.ct, row, sum);
      }
      break;
    }
    default:
      break;
  }
  store_result(g, 0, p);
}

}  // namespace
}  // namespace ppb::cudaemu

namespace emu = ppb::cudaemu;

// The names and signatures are CUDA's ABI.
// NOLINTBEGIN(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,readability-identifier-naming)
extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (!emu::device_present()) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto* h = new char;  // an address of its own
  std::lock_guard<std::mutex> lock(emu::g_m);
  emu::g_handles.insert(h);
  *handle = reinterpret_cast<cublasLtHandle_t>(h);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  std::lock_guard<std::mutex> lock(emu::g_m);
  if (emu::g_handles.erase(handle) == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete reinterpret_cast<char*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* d = new emu::Desc();
  d->compute = compute;
  d->scale = scale;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete reinterpret_cast<emu::Desc*>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t bytes) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto& d = *reinterpret_cast<emu::Desc*>(desc);
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return emu::set(&d.ta, buf, bytes);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return emu::set(&d.tb, buf, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return emu::set(&d.epilogue, buf, bytes);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return emu::set(&d.bias, buf, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      return emu::set(&d.aux, buf, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
      return emu::set(&d.aux_ld, buf, bytes);
    default:
      emu::complain("cublasLtMatmulDescSetAttribute: attribute " +
                    std::to_string(static_cast<int>(attr)) + " is not emulated");
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (layout == nullptr || ld < static_cast<int64_t>(rows) || ld < 1) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(new emu::Layout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete reinterpret_cast<emu::Layout*>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new emu::Preference());
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete reinterpret_cast<emu::Preference*>(pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t bytes) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto& p = *reinterpret_cast<emu::Preference*>(pref);
  if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
    return emu::set(&p.max_workspace, buf, bytes);
  if (attr == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES)
    return emu::set(&p.min_alignment[0], buf, bytes);
  if (attr == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES)
    return emu::set(&p.min_alignment[1], buf, bytes);
  if (attr == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES)
    return emu::set(&p.min_alignment[2], buf, bytes);
  if (attr == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES)
    return emu::set(&p.min_alignment[3], buf, bytes);
  emu::complain("cublasLtMatmulPreferenceSetAttribute: attribute " +
                std::to_string(static_cast<int>(attr)) + " is not emulated");
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int* returned) {
  if (!emu::known(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  const emu::Call call = emu::call_of(desc, a, b, c, d);
  if (!call.complete() || pref == nullptr || requested < 1 || results == nullptr ||
      returned == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  *returned = 0;
  const emu::Gemm g = emu::gemm_of(call, 1, 0, nullptr, nullptr, nullptr, nullptr);
  const cublasStatus_t rc = emu::check_call("cublasLtMatmulAlgoGetHeuristic", call, g, false);
  if (rc != CUBLAS_STATUS_SUCCESS) return rc;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  const auto& promised = reinterpret_cast<const emu::Preference*>(pref)->min_alignment;
  for (size_t i = 0; i < 4; ++i) results[0].algo.data[i] = std::min(promised[i], emu::kVectorBytes);
  results[0].workspaceSize = 0;  // the CPU needs none
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t a, const void* B,
                              cublasLtMatrixLayout_t b, const void* beta, const void* C,
                              cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t* algo, void* /*workspace*/,
                              size_t /*workspace_bytes*/, cudaStream_t stream) {
  if (!emu::known(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  const emu::Call call = emu::call_of(desc, a, b, c, d);
  if (!call.complete() || alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (emu::refused_at_run(call.desc->epilogue)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (algo != nullptr) {
    const void* operand[4] = {A, B, C, D};
    for (size_t i = 0; i < 4; ++i) {
      if (emu::alignment_of(operand[i]) < algo->data[i]) {
        emu::complain("cublasLtMatmul: operand " + std::string(1, "ABCD"[i]) + " is " +
                      std::to_string(emu::alignment_of(operand[i])) +
                      "-byte aligned, its algorithm was chosen for " +
                      std::to_string(algo->data[i]) + " (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*)");
        return CUBLAS_STATUS_NOT_SUPPORTED;
      }
    }
  }
  const emu::Gemm g = emu::gemm_of(call, *static_cast<const float*>(alpha),
                                   *static_cast<const float*>(beta), A, B, C, D);
  const cublasStatus_t rc = emu::check_call("cublasLtMatmul", call, g, true);
  if (rc != CUBLAS_STATUS_SUCCESS || g.m == 0 || g.n == 0) return rc;
  const char* kernel = g.at == CUDA_R_16BF ? "ppb_cudaemu_lt_gemm_bf16" : "ppb_cudaemu_lt_gemm_f32";
  const emu::Desc copy = *call.desc;  // the descriptor may change once the call returns
  const cudaError_t sent =
      emu::enqueue_kernel(stream, kernel, dim3(1), dim3(1), [copy, g] { emu::run(copy, g); });
  return sent == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // extern "C"
// NOLINTEND(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,readability-identifier-naming)
