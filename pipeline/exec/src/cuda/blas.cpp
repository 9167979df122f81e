#include "cuda/blas.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <memory>
#include <optional>
#include <string>

#include "ppb/exec/cuda_device.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::cuda {
namespace {

cudaDataType_t data_type(Dtype dt) { return dt == Dtype::kFp32 ? CUDA_R_32F : CUDA_R_16BF; }
cublasOperation_t op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::kGeluAuxBias:
      return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::kBiasGradB:
      return CUBLASLT_EPILOGUE_BGRADA;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

const char* epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::kBias:
      return "bias";
    case Epilogue::kGeluAuxBias:
      return "bias + GeLU";
    case Epilogue::kBiasGradB:
      return "bias gradient";
  }
  return "?";
}

const char* dtype_text(Dtype dt) { return dt == Dtype::kFp32 ? "fp32" : "bf16"; }

// The largest power of two (up to 256) dividing p's address: what
// cuBLASLt's choice of kernel depends on.
int64_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return a == 0 ? 256 : std::min<int64_t>(256, int64_t{1} << std::countr_zero(a));
}

// One cuBLASLt call's descriptors, in cuBLAS's column-major view of the
// row-major GEMM (as Blas::gemm: operands swapped, m with n): its A is our
// B (n x k, or k x n transposed), its B our A, its C and D n x m.
class LtCall {
 public:
  LtCall(bool trans_a, bool trans_b, int m, int n, int k, Operand a, Operand b, Dtype ab, int ldc,
         Dtype c_type, const EpilogueArgs& e) {
    PPB_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const int32_t first = op(trans_b);
    const int32_t second = op(trans_a);
    const auto epilogue = static_cast<uint32_t>(lt_epilogue(e.kind));
    attribute(CUBLASLT_MATMUL_DESC_TRANSA, &first, sizeof first);
    attribute(CUBLASLT_MATMUL_DESC_TRANSB, &second, sizeof second);
    attribute(CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
    if (e.kind == Epilogue::kGeluAuxBias) {
      const int64_t aux_ld = ldc;
      attribute(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
    }
    point_at(e);
    layout(&lt_a_, data_type(ab), trans_b ? k : n, trans_b ? n : k, b.ld);
    layout(&lt_b_, data_type(ab), trans_a ? m : k, trans_a ? k : m, a.ld);
    layout(&lt_c_, data_type(c_type), n, m, ldc);
  }
  ~LtCall() {
    for (cublasLtMatrixLayout_t l : {lt_a_, lt_b_, lt_c_}) {
      if (l != nullptr) (void)cublasLtMatrixLayoutDestroy(l);
    }
    if (desc_ != nullptr) (void)cublasLtMatmulDescDestroy(desc_);
  }
  LtCall(const LtCall&) = delete;
  LtCall& operator=(const LtCall&) = delete;

  // The epilogue's vector and aux matrix for the next call.
  void point_at(const EpilogueArgs& e) {
    attribute(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &e.vector, sizeof e.vector);
    if (e.kind == Epilogue::kGeluAuxBias) {
      attribute(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &e.aux, sizeof e.aux);
    }
  }

  // The heuristic's first algorithm within the workspace for operands of
  // these alignments (bytes; cuBLASLt's A, B, C, D: our b, a, c_in, c), if
  // any; else *why says what the heuristic answered. Unstated, cuBLASLt
  // assumes 256-byte operands and may pick a kernel that refuses ours.
  std::optional<cublasLtMatmulAlgo_t> algorithm(cublasLtHandle_t lt, size_t workspace,
                                                const std::array<int64_t, 4>& aligned,
                                                std::string* why) const {
    cublasLtMatmulPreference_t pref = nullptr;
    PPB_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t limit = workspace;
    PPB_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof limit));
    const cublasLtMatmulPreferenceAttributes_t operand[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (size_t i = 0; i < 4; ++i) {
      const auto bytes = static_cast<uint32_t>(aligned[i]);
      PPB_CUBLAS_CHECK(
          cublasLtMatmulPreferenceSetAttribute(pref, operand[i], &bytes, sizeof bytes));
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    // Not a failure: NOT_SUPPORTED (or no result) says the fused form has
    // no kernel here.
    const cublasStatus_t rc = cublasLtMatmulAlgoGetHeuristic(lt, desc_, lt_a_, lt_b_, lt_c_, lt_c_,
                                                             pref, 1, &result, &found);
    (void)cublasLtMatmulPreferenceDestroy(pref);
    if (rc != CUBLAS_STATUS_SUCCESS) {
      *why = std::string("cublasLtMatmulAlgoGetHeuristic: ") + cublasGetStatusName(rc);
      return std::nullopt;
    }
    if (found < 1) {
      *why = "cublasLtMatmulAlgoGetHeuristic found no algorithm within the " +
             std::to_string(workspace) + "-byte workspace";
      return std::nullopt;
    }
    if (result.state != CUBLAS_STATUS_SUCCESS) {
      *why = std::string("cublasLtMatmulAlgoGetHeuristic: its algorithm's state is ") +
             cublasGetStatusName(result.state);
      return std::nullopt;
    }
    return result.algo;
  }

  // Enqueues the call; false, enqueuing nothing, where cublasLtMatmul
  // answers NOT_SUPPORTED: its kernel refuses what the heuristic offered.
  // Any other failure ends the job.
  bool run(cublasLtHandle_t lt, const cublasLtMatmulAlgo_t& algo, const void* a, const void* b,
           float beta, const void* c_in, void* c, void* workspace, size_t workspace_bytes,
           cudaStream_t stream) const {
    const float alpha = 1.0f;
    const cublasStatus_t rc =
        cublasLtMatmul(lt, desc_, &alpha, b, lt_a_, a, lt_b_, &beta, c_in, lt_c_, c, lt_c_, &algo,
                       workspace, workspace_bytes, stream);
    if (rc == CUBLAS_STATUS_NOT_SUPPORTED) return false;
    if (rc != CUBLAS_STATUS_SUCCESS) cublas_call_failed(rc, "cublasLtMatmul", __FILE__, __LINE__);
    return true;
  }

 private:
  void attribute(cublasLtMatmulDescAttributes_t which, const void* value, size_t bytes) {
    PPB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, which, value, bytes));
  }
  static void layout(cublasLtMatrixLayout_t* l, cudaDataType_t t, int rows, int cols, int ld) {
    PPB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(l, t, static_cast<uint64_t>(rows),
                                                static_cast<uint64_t>(cols), ld));
  }

  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t lt_a_ = nullptr;
  cublasLtMatrixLayout_t lt_b_ = nullptr;
  cublasLtMatrixLayout_t lt_c_ = nullptr;
};

}  // namespace

// One call's descriptors, made once per key, and the heuristic's answer
// (cleared where cublasLtMatmul refused what it offered).
struct Blas::LtPlan {
  LtCall call;
  std::optional<cublasLtMatmulAlgo_t> algo;
  std::string what;  // "bias GEMM 2 x 12 x 3 fp32": for a refusal's text
};

void cublas_call_failed(int status, const char* call, const char* file, int line) {
  const auto s = static_cast<cublasStatus_t>(status);
  const std::string where = std::string(call) + " at " + file + ":" + std::to_string(line);
  if (s == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemory("cuBLAS out of memory in " + where);
  const std::string text =
      "cuBLAS error in " + where + ": " + cublasGetStatusName(s) + ": " + cublasGetStatusString(s);
  abort_job(text.c_str(), 1);
}

Blas::Blas(cudaStream_t stream, void* workspace, size_t workspace_bytes)
    : stream_(stream), workspace_(workspace), workspace_bytes_(workspace_bytes) {
  PPB_CUBLAS_CHECK(cublasCreate(&handle_));
  PPB_CUBLAS_CHECK(cublasLtCreate(&lt_));
  // cublasSetStream resets the workspace to cuBLAS's own: set the stream first.
  PPB_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  PPB_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace, workspace_bytes));
  PPB_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
}

Blas::~Blas() {
  if (lt_ != nullptr) (void)cublasLtDestroy(lt_);
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

std::function<bool()> Blas::plan_epilogue(bool trans_a, bool trans_b, int m, int n, int k,
                                          Operand a, Operand b, Dtype ab, float beta,
                                          const void* c_in, void* c, int ldc, Dtype c_type,
                                          const EpilogueArgs& epilogue) {
  PPB_CHECK(epilogue.kind != Epilogue::kBiasGradB || !trans_b,
            "a bias gradient epilogue sums B's rows: B must not be transposed");
  const LtKey key{m,
                  n,
                  k,
                  int64_t{trans_a} + 2 * int64_t{trans_b},
                  a.ld,
                  b.ld,
                  ldc,
                  static_cast<int64_t>(ab),
                  static_cast<int64_t>(c_type),
                  static_cast<int64_t>(epilogue.kind),
                  beta != 0.0f ? 1 : 0,
                  alignment(a.data),
                  alignment(b.data),
                  alignment(c_in),
                  alignment(c),
                  alignment(epilogue.vector),
                  alignment(epilogue.aux)};
  auto it = lt_plans_.find(key);
  if (it == lt_plans_.end()) {
    auto plan = std::unique_ptr<LtPlan>(new LtPlan{
        LtCall(trans_a, trans_b, m, n, k, a, b, ab, ldc, c_type, epilogue),
        {},
        std::string(epilogue_name(epilogue.kind)) + " GEMM " + std::to_string(m) + " x " +
            std::to_string(n) + " x " + std::to_string(k) + " " + dtype_text(ab) +
            (c_type == ab ? "" : std::string(" -> ") + dtype_text(c_type))});
    std::string why;
    plan->algo = plan->call.algorithm(
        lt_, workspace_bytes_,
        {alignment(b.data), alignment(a.data), alignment(c_in), alignment(c)}, &why);
    if (!plan->algo) refused(*plan, why);
    it = lt_plans_.emplace(key, std::move(plan)).first;
  }
  LtPlan* plan = it->second.get();
  if (!plan->algo) {
    ++epilogue_refusals_;
    return {};
  }
  ++epilogue_gemms_;
  // The plan's descriptor holds the epilogue's pointers: set at each launch,
  // since calls of one shape share it. Where cublasLtMatmul refuses at run
  // time, the call counts as refused (once, however often the work runs,
  // even after it ran fused: its latest run was not), the plan is refused
  // from then on, and the caller computes it another way.
  auto counted = std::make_shared<bool>(false);
  return [this, plan, a = a.data, b = b.data, beta, c_in, c, epilogue, counted] {
    bool ran = false;
    if (plan->algo) {
      plan->call.point_at(epilogue);
      ran = plan->call.run(lt_, *plan->algo, a, b, beta, c_in, c, workspace_, workspace_bytes_,
                           stream_);
      if (!ran) {
        plan->algo.reset();
        refused(*plan,
                "cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED for the algorithm "
                "cublasLtMatmulAlgoGetHeuristic offered");
      }
    }
    if (!ran && !*counted) {
      --epilogue_gemms_;
      ++epilogue_refusals_;
      *counted = true;
    }
    return ran;
  };
}

void Blas::refused(const LtPlan& plan, const std::string& why) {
  if (first_refusal_.empty()) first_refusal_ = plan.what + ": " + why;
}

bool Blas::gemm_epilogue(bool trans_a, bool trans_b, int m, int n, int k, Operand a, Operand b,
                         Dtype ab, float beta, const void* c_in, void* c, int ldc, Dtype c_type,
                         const EpilogueArgs& epilogue) {
  const std::function<bool()> run =
      plan_epilogue(trans_a, trans_b, m, n, k, a, b, ab, beta, c_in, c, ldc, c_type, epilogue);
  return run && run();
}

}  // namespace ppb::cuda
