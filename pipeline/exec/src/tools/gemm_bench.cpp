// ppb_gemm_bench: the cuda backend's GEMM throughput against cuBLAS alone on
// the same shapes (CUDA builds; needs a GPU).
//
//   ppb_gemm_bench [--model gpt-small] [--dtype bf16|fp32] [--iters 20] [--algos 8]
//                  [--json FILE]
//
// For every GEMM one transformer layer and the head issue per micro-batch
// (ppb::cuda_gemm_calls: shapes, transposes, leading dimensions, batch
// strides, fp32 weight gradients), on one stream:
//   backend  the backend's own call (cuda::Blas: cublasGemmEx or its strided
//            batched form, CUBLAS_GEMM_DEFAULT, fp32 compute, its workspace);
//   cuBLAS   cublasLt on the same operands, the fastest of the first
//            --algos algorithms its heuristic proposes (an autotuned
//            cuBLAS: what the library can do on the shape);
// each the best of three rounds of --iters calls timed by CUDA events after a
// warm-up. Prints a row per GEMM (microseconds per call, TFLOP/s, backend /
// cuBLAS throughput) and the totals per micro-batch (each GEMM weighted by
// its calls: attention runs once per sample). Exit 0; 2 on bad flags or
// without a usable GPU (one line saying why).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/blas.hpp"
#include "cuda/gemm_timing.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/exec/gemm_calls.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/pipeline/result.hpp"
#include "ppb/profiling/check.hpp"

namespace {

using ppb::GemmCall;
using ppb::cuda::Dtype;

struct Args {
  std::string model = "gpt-small";
  std::string dtype = "bf16";
  int vocab_divisor = ppb::kDefaultVocabDivisor;  // as pipebench run pads the head
  int iters = 20;
  int algos = 8;
  std::string json;
};

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "ppb_gemm_bench: %s\n", what.c_str());
  std::exit(2);
}

int positive(const std::string& flag, const char* v) {
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || n < 1 || n > 100000)
    usage_error(flag + ": expected an integer from 1 to 100000, got '" + v + "'");
  return static_cast<int>(n);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--help" || k == "-h") {
      std::printf(
          "usage: ppb_gemm_bench [--model gpt-small] [--make-vocab-size-divisible-by 128] "
          "[--dtype bf16|fp32] [--iters 20] [--algos 8] [--json FILE]\n");
      std::exit(0);
    }
    if (i + 1 >= argc) usage_error(k + ": needs a value");
    const char* v = argv[i + 1];
    if (k == "--model") {
      a.model = v;
    } else if (k == "--dtype") {
      a.dtype = v;
      if (a.dtype != "bf16" && a.dtype != "fp32")
        usage_error("--dtype: expected bf16 or fp32, got '" + a.dtype + "'");
    } else if (k == "--make-vocab-size-divisible-by") {
      a.vocab_divisor = positive(k, v);
    } else if (k == "--iters") {
      a.iters = positive(k, v);
    } else if (k == "--algos") {
      a.algos = positive(k, v);
    } else if (k == "--json") {
      a.json = v;
    } else {
      usage_error("unknown flag '" + k + "'");
    }
  }
  return a;
}

#define LT_CHECK(call) PPB_CUBLAS_CHECK(call)

// cublasLt's view of a row-major GEMM, as cuda::Blas issues it: the
// column-major C^T (n x m) = op(B)^T op(A)^T, operands swapped.
class LtGemm {
 public:
  LtGemm(const GemmCall& g, Dtype ab) {
    const cudaDataType_t t = ab == Dtype::kFp32 ? CUDA_R_32F : CUDA_R_16BF;
    const cudaDataType_t tc = g.c_fp32 ? CUDA_R_32F : t;
    LT_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_CHECK(
        cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &first, sizeof first));
    LT_CHECK(
        cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &second, sizeof second));
    // Stored (column-major) shapes: B is n x k, or k x n transposed; A is
    // k x m, or m x k transposed.
    layout(&b_, t, g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.ldb, g.count, g.stride_b);
    layout(&a_, t, g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.lda, g.count, g.stride_a);
    layout(&c_, tc, g.n, g.m, g.ldc, g.count, g.stride_c);
  }
  ~LtGemm() {
    for (cublasLtMatrixLayout_t l : {a_, b_, c_})
      if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
    if (desc_ != nullptr) cublasLtMatmulDescDestroy(desc_);
  }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  std::vector<cublasLtMatmulHeuristicResult_t> algos(cublasLtHandle_t lt, int wanted,
                                                     size_t workspace) const {
    cublasLtMatmulPreference_t pref = nullptr;
    LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &workspace, sizeof workspace));
    std::vector<cublasLtMatmulHeuristicResult_t> out(static_cast<size_t>(wanted));
    int got = 0;
    const cublasStatus_t rc =
        cublasLtMatmulAlgoGetHeuristic(lt, desc_, b_, a_, c_, c_, pref, wanted, out.data(), &got);
    cublasLtMatmulPreferenceDestroy(pref);
    if (rc != CUBLAS_STATUS_SUCCESS) return {};
    out.resize(static_cast<size_t>(got));
    std::erase_if(out, [](const auto& r) { return r.state != CUBLAS_STATUS_SUCCESS; });
    return out;
  }

  void run(cublasLtHandle_t lt, const cublasLtMatmulAlgo_t& algo, const GemmCall& g, const void* a,
           const void* b, void* c, void* workspace, size_t workspace_bytes,
           cudaStream_t stream) const {
    LT_CHECK(cublasLtMatmul(lt, desc_, &g.alpha, b, b_, a, a_, &g.beta, c, c_, c, c_, &algo,
                            workspace, workspace_bytes, stream));
  }

 private:
  static void layout(cublasLtMatrixLayout_t* l, cudaDataType_t t, int rows, int cols, int ld,
                     int count, int64_t stride) {
    LT_CHECK(cublasLtMatrixLayoutCreate(l, t, static_cast<uint64_t>(rows),
                                        static_cast<uint64_t>(cols), ld));
    if (count > 1) {
      const int32_t n = count;
      LT_CHECK(
          cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n));
      LT_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &stride, sizeof stride));
    }
  }

  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr;
  cublasLtMatrixLayout_t b_ = nullptr;
  cublasLtMatrixLayout_t c_ = nullptr;
};

struct Measured {
  GemmCall call;
  double backend = 0;  // seconds per call
  double best = 0;     // cuBLAS alone: the fastest algorithm tried
  int tried = 0;       // algorithms cublasLt proposed and ran
};

double tflops(double flops, double seconds) { return flops / seconds / 1e12; }

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  ppb::ModelSpec spec;
  try {
    spec = ppb::parse_model_spec(args.model);
    spec.vocab_divisor = args.vocab_divisor;
  } catch (const ppb::UsageError& e) {
    usage_error(e.what());
  }
  const Dtype dt = args.dtype == "bf16" ? Dtype::kBf16 : Dtype::kFp32;
  if (const std::string why = ppb::cuda::unusable_reason(); !why.empty())
    usage_error("no usable GPU: " + why);
  const ppb::cuda::DeviceBinding dev = ppb::cuda::bind_device(0, 1);
  const ppb::cuda::DeviceFacts facts = ppb::cuda::device_facts(0);

  cudaStream_t stream = nullptr;
  PPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* workspace = nullptr;
  const auto ws_bytes = static_cast<size_t>(ppb::cuda::kBlasWorkspaceBytes);
  PPB_CUDA_CHECK(cudaMalloc(&workspace, ws_bytes));
  std::vector<Measured> rows;
  {
    ppb::cuda::Blas blas(stream, workspace, ws_bytes);
    cublasLtHandle_t lt = nullptr;
    LT_CHECK(cublasLtCreate(&lt));
    ppb::cuda::EventTimer timer(stream);
    uint32_t seed = 1;
    for (const GemmCall& g : ppb::cuda_gemm_calls(spec)) {
      const ppb::cuda::GemmOperands ops(g, dt, seed);
      seed += 2;
      Measured m;
      m.call = g;
      // The backend's own call: the measurement the GPU health probe makes.
      m.backend = ppb::cuda::time_backend_gemm(blas, timer, g, dt, ops, args.iters);
      const LtGemm lg(g, dt);
      m.best = std::numeric_limits<double>::infinity();
      for (const cublasLtMatmulHeuristicResult_t& r : lg.algos(lt, args.algos, ws_bytes)) {
        m.best = std::min(m.best, timer.per_call(args.iters, [&] {
          lg.run(lt, r.algo, g, ops.a(), ops.b(), ops.c(), workspace, ws_bytes, stream);
        }));
        ++m.tried;
      }
      // Again after the others, so that a clock still rising at the first
      // measurement does not count against the backend.
      m.backend =
          std::min(m.backend, ppb::cuda::time_backend_gemm(blas, timer, g, dt, ops, args.iters));
      rows.push_back(m);
    }
    cublasLtDestroy(lt);
  }
  PPB_CUDA_CHECK(cudaFree(workspace));
  PPB_CUDA_CHECK(cudaStreamDestroy(stream));

  std::printf(
      "# ppb_gemm_bench: the cuda backend's GEMMs (one layer and the head, per micro-batch) on "
      "%s, model %s, %s, %d calls x 3 rounds; cuBLAS = cublasLt's fastest of %d proposed "
      "algorithms\n",
      facts.name.c_str(), args.model.c_str(), args.dtype.c_str(), args.iters, args.algos);
  std::printf("%-20s %6s %6s %6s %5s %5s %11s %9s %11s %9s %7s\n", "gemm", "m", "n", "k", "batch",
              "calls", "backend_us", "TFLOP/s", "cublas_us", "TFLOP/s", "ratio");
  double flops = 0, backend = 0, best = 0;
  boost::json::array calls;
  for (const Measured& m : rows) {
    const GemmCall& g = m.call;
    const double per_call = g.flops() / g.repeat;
    const bool have_best = m.tried > 0;
    char cublas[64];
    std::snprintf(cublas, sizeof cublas, "%11s %9s %7s", "-", "-", "-");
    if (have_best) {
      std::snprintf(cublas, sizeof cublas, "%11.2f %9.2f %7.3f", m.best * 1e6,
                    tflops(per_call, m.best), m.best / m.backend);
    }
    std::printf("%-20s %6d %6d %6d %5d %5d %11.2f %9.2f %s\n", g.name.c_str(), g.m, g.n, g.k,
                g.count, g.repeat, m.backend * 1e6, tflops(per_call, m.backend), cublas);
    flops += g.flops();
    backend += m.backend * g.repeat;
    best += (have_best ? std::min(m.best, m.backend) : m.backend) * g.repeat;
    calls.push_back(boost::json::object{
        {"name", g.name},
        {"pass", ppb::gemm_pass_name(g.pass)},
        {"m", g.m},
        {"n", g.n},
        {"k", g.k},
        {"batch", g.count},
        {"calls", g.repeat},
        {"flops", g.flops()},
        {"backend_seconds", m.backend},
        {"cublas_seconds", have_best ? boost::json::value(m.best) : boost::json::value(nullptr)},
        {"cublas_algorithms_tried", m.tried}});
  }
  std::printf(
      "# per micro-batch: backend %.2f TFLOP/s, cuBLAS alone %.2f TFLOP/s (the better of it and "
      "the backend per GEMM): the backend runs at %.3f of cuBLAS's throughput on these shapes\n",
      tflops(flops, backend), tflops(flops, best), best / backend);
  if (!args.json.empty()) {
    const boost::json::object doc{{"schema", "pipebench.gemm/1"},
                                  {"device", facts.name},
                                  {"cuda", facts.runtime},
                                  {"driver", facts.driver},
                                  {"device_index", dev.device},
                                  {"model", args.model},
                                  {"padded_vocab", spec.padded_vocab()},
                                  {"dtype", args.dtype},
                                  {"iters", args.iters},
                                  {"algorithms", args.algos},
                                  {"backend_tflops", tflops(flops, backend)},
                                  {"cublas_tflops", tflops(flops, best)},
                                  {"ratio", best / backend},
                                  {"gemms", calls}};
    try {
      ppb::write_json_file(args.json, doc);
    } catch (const ppb::UsageError& e) {
      usage_error(std::string("--json: ") + e.what());
    }
    std::printf("# wrote %s\n", args.json.c_str());
  }
  return 0;
}
