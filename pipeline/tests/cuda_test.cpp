// The cuda backend's host-side logic, which runs without a GPU: its registry
// entry and --check tolerances, the one-line refusal where no device is
// usable (here: no driver; or a build without CUDA), the out-of-memory
// exception of PPB_CUDA_CHECK, and the byte layouts against expand_units().
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>

#include "ppb/exec/backend.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/exec/gemm_calls.hpp"
#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/pipeline/partition.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/profiling/check.hpp"
#if PPB_HAVE_CUDA
#include <cuda_runtime.h>

#include "cuda/cuda_chunk.hpp"
#endif

namespace ppb {
namespace {

// The GEMMs ppb_gemm_bench times are the ones the cost model counts: per
// unit and pass, their 2 m n k x count x repeat is the unit's GEMM flops
// (total less elementwise), for a square and a wide model.
TEST(GemmCalls, FlopsAreTheCostModelsGemmFlopsOfEveryUnitAndPass) {
  for (const char* name : {"gpt-tiny", "gpt-small"}) {
    const ModelSpec spec = parse_model_spec(name);
    const std::vector<Unit> units = expand_units(spec, Kernels::kCuda);
    for (const Unit& u : units) {
      double f = 0, i = 0, w = 0;
      for (const GemmCall& g : cuda_gemm_calls(spec, u.kind)) {
        EXPECT_EQ(g.unit, u.kind) << g.name;
        (g.pass == GemmPass::kForward ? f : g.pass == GemmPass::kInputGrad ? i : w) += g.flops();
      }
      EXPECT_DOUBLE_EQ(f, u.fwd_flops - u.fwd_elementwise_flops) << name << " " << u.name;
      EXPECT_DOUBLE_EQ(i, u.bwd_input_flops - u.bwd_input_elementwise_flops)
          << name << " " << u.name;
      EXPECT_DOUBLE_EQ(w, u.bwd_weight_flops - u.bwd_weight_elementwise_flops)
          << name << " " << u.name;
    }
  }
}

// Operand extents: a row-major A of op(A) m x k with leading dimension lda
// spans (rows - 1) x lda + cols elements, plus (count - 1) strides; the
// attention operands are column blocks of the 3h-wide qkv rows.
TEST(GemmCalls, OperandExtentsFollowLayoutAndTransposes) {
  const ModelSpec spec = parse_model_spec("gpt-tiny");  // h 128, 4 heads, seq 64, mbs 2
  const int t = 128, h = 128, s = 64, d = 32;
  const std::vector<GemmCall> qkv = cuda_gemm_calls(spec, UnitKind::kQkv);
  ASSERT_EQ(qkv.size(), 3U);
  EXPECT_EQ(qkv[0].name, "qkv.F");
  EXPECT_EQ(qkv[0].a_elements(), int64_t{t} * h);      // x [t, h]
  EXPECT_EQ(qkv[0].b_elements(), int64_t{h} * 3 * h);  // W [h, 3h]
  EXPECT_EQ(qkv[0].c_elements(), int64_t{t} * 3 * h);
  EXPECT_FLOAT_EQ(qkv[0].beta, 1.0f);  // the bias is written first
  EXPECT_TRUE(qkv[1].trans_b);         // dx = dy W^T
  EXPECT_EQ(qkv[1].b_elements(), int64_t{h} * 3 * h);
  EXPECT_TRUE(qkv[2].trans_a && qkv[2].c_fp32);  // dW += x^T dy, fp32
  EXPECT_EQ(qkv[2].a_elements(), int64_t{t} * h);
  const std::vector<GemmCall> attn = cuda_gemm_calls(spec, UnitKind::kAttention);
  ASSERT_EQ(attn.size(), 6U);
  const GemmCall& scores = attn[0];
  EXPECT_EQ(scores.count, 4);
  EXPECT_EQ(scores.repeat, 2);
  // Q of head j at column j*d of the qkv rows: the last head's block ends
  // (s-1) rows of 3h plus its d columns after head 0's start.
  EXPECT_EQ(scores.a_elements(), int64_t{3} * d + int64_t{s - 1} * 3 * h + d);
  EXPECT_EQ(scores.c_elements(), int64_t{4} * s * s);
  EXPECT_FLOAT_EQ(scores.alpha, 1.0f / std::sqrt(32.0f));
  EXPECT_TRUE(cuda_gemm_calls(spec, UnitKind::kLayerNorm1).empty());
  EXPECT_EQ(cuda_gemm_calls(spec).size(), 3U * 5 + 6U);
}

TEST(CudaBackend, RegistryEntrySaysDeviceBf16AndTolerances) {
  const BackendInfo& cuda = backend_info("cuda");
  EXPECT_TRUE(cuda.real_gradients);
  EXPECT_TRUE(cuda.bf16);
  EXPECT_TRUE(cuda.traits.device);
  EXPECT_FALSE(cuda.modelled_time);
  ASSERT_NE(cuda.unusable, nullptr);
  EXPECT_DOUBLE_EQ(check_tolerance(cuda, 4), 1e-4);
  EXPECT_DOUBLE_EQ(check_tolerance(cuda, 2), 5e-2);
  const BackendInfo& cpu = backend_info("cpu");
  EXPECT_FALSE(cpu.bf16);
  EXPECT_FALSE(cpu.traits.device);
  EXPECT_EQ(cpu.unusable, nullptr);
  EXPECT_DOUBLE_EQ(check_tolerance(cpu, 4), 1e-4);
  bool listed = false;
  for (const BackendInfo& b : backend_list()) listed |= b.name == "cuda";
  EXPECT_TRUE(listed);
}

// Every backend (cpu, cuda, timed) takes its chunks' units through
// BackendConfig::chunk_units: on a V placement (zb-v) stage 0 holds the
// first and the last virtual stage, so its chunk 1 ends with the head.
TEST(CudaBackend, ChunksTakeTheUnitsOfThePlacementsVirtualStages) {
  const ModelSpec spec = parse_model_spec("gpt-tiny");
  ScheduleParams p;
  p.stages = 2;
  p.microbatches = 4;
  p.chunks = 2;
  const Schedule v = generate_schedule("zb-v", p);
  BackendConfig cfg;
  cfg.spec = spec;
  cfg.units = expand_units(spec);
  cfg.stages = 2;
  cfg.chunks = 2;
  cfg.parts =
      make_partition("operator", cfg.units, unit_times(cfg.units, device_preset("cpu", 4)), 4);
  ASSERT_EQ(cfg.parts.size(), 4u);
  cfg.placement = v.placement;
  for (int stage = 0; stage < 2; ++stage) {
    cfg.stage = stage;
    for (int c = 0; c < 2; ++c) {
      const int want = stage == 0 ? (c == 0 ? 0 : 3) : (c == 0 ? 1 : 2);
      EXPECT_EQ(cfg.chunk_units(c).begin, cfg.parts[static_cast<size_t>(want)].begin)
          << "stage " << stage << " chunk " << c;
      EXPECT_EQ(cfg.chunk_units(c).end, cfg.parts[static_cast<size_t>(want)].end);
    }
  }
  cfg.stage = 0;
  EXPECT_EQ(cfg.chunk_units(1).end, static_cast<int>(cfg.units.size()));  // the head
  cfg.placement.clear();  // looping: chunk c of stage s is virtual stage c * P + s
  EXPECT_EQ(cfg.chunk_units(1).begin, cfg.parts[2].begin);
  cfg.stage = 1;
  EXPECT_EQ(cfg.chunk_units(0).begin, cfg.parts[1].begin);
}

TEST(CudaBackend, RefusedWithItsOneLineReasonWhereNoDeviceIsUsable) {
  const std::string why = cuda::unusable_reason();
  if (why.empty()) GTEST_SKIP() << "a CUDA device is usable here: nothing to refuse";
  EXPECT_EQ(why.find('\n'), std::string::npos);
  EXPECT_EQ(why, cuda::unusable_reason());  // cached, stable
#if PPB_HAVE_CUDA
  EXPECT_TRUE(std::regex_search(why, std::regex("^(no CUDA (driver|device)|CUDA is not usable)")))
      << why;
  EXPECT_EQ(why.find("cudaErrorInsufficientDriver, 35") != std::string::npos,
            why.rfind("no CUDA driver", 0) == 0)
      << why;
#else
  EXPECT_EQ(why.rfind("built without CUDA", 0), 0u) << why;
#endif
  const ModelSpec spec = parse_model_spec("gpt-tiny");
  BackendConfig cfg;
  cfg.spec = spec;
  cfg.units = expand_units(spec);
  cfg.parts = {{0, static_cast<int>(cfg.units.size())}};
  try {
    (void)make_backend("cuda", cfg);
    FAIL() << "the cuda backend was made without a usable device";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--backend cuda: " + why);
  }
  EXPECT_THROW((void)cuda::bind_device(0, 1), UsageError);
}

#if PPB_HAVE_CUDA

// Out of memory is not fatal: PPB_CUDA_CHECK throws cuda::OutOfMemory naming
// the call and the place, so a run can record status `oom` and go on.
TEST(CudaDevice, OutOfMemoryIsAnExceptionNamingTheCall) {
  PPB_CUDA_CHECK(cudaSuccess);
  try {
    PPB_CUDA_CHECK(cudaErrorMemoryAllocation);
    FAIL() << "no exception";
  } catch (const cuda::OutOfMemory& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("CUDA out of memory in cudaErrorMemoryAllocation at ", 0), 0u) << what;
    EXPECT_NE(what.find("cuda_test.cpp:"), std::string::npos) << what;
  }
}

// The cuda layouts are the cpu layouts with e-byte elements, exactly what
// expand_units() says for bytes_per_element e (token ids stay int32).
TEST(CudaLayout, BoundaryAndActivationBytesMatchExpandUnitsForFp32AndBf16) {
  for (const cuda::Dtype dt : {cuda::Dtype::kFp32, cuda::Dtype::kBf16}) {
    ModelSpec spec = parse_model_spec("gpt:layers=2,hidden=64,heads=4,seq=16,vocab=96,mbs=2");
    spec.bytes_per_element = static_cast<int>(cuda::dtype_bytes(dt));
    for (const Unit& u : expand_units(spec)) {
      EXPECT_EQ(cuda::unit_boundary_bytes(spec, u.kind, dt), u.boundary_bytes) << u.name;
      EXPECT_EQ(cuda::unit_activation_bytes(spec, u.kind, dt), u.activation_bytes) << u.name;
    }
  }
  // The fused attention (bf16): qkv and output in bf16, the statistics fp32.
  ModelSpec bf16 = parse_model_spec("gpt:layers=2,hidden=64,heads=4,seq=16,vocab=96,mbs=2");
  bf16.bytes_per_element = 2;
  for (const Unit& u : expand_units(bf16, Kernels::kCuda, Attention::kFused)) {
    EXPECT_EQ(cuda::unit_activation_bytes(bf16, u.kind, cuda::Dtype::kBf16, Attention::kFused),
              u.activation_bytes)
        << u.name;
  }
  EXPECT_EQ(cuda::unit_activation_bytes(bf16, UnitKind::kAttention, cuda::Dtype::kBf16,
                                        Attention::kFused),
            4 * 32 * 64 * 2 + 4 * 2 * 4 * 16);
  ModelSpec spec = parse_model_spec("gpt-tiny");
  spec.bytes_per_element = 2;
  const int64_t t = spec.tokens();
  EXPECT_EQ(cuda::unit_boundary_bytes(spec, UnitKind::kQkv, cuda::Dtype::kBf16), 4 * t * 128 * 2);
  EXPECT_EQ(cuda::unit_activation_bytes(spec, UnitKind::kEmbedding, cuda::Dtype::kBf16), 4 * t);
}

#endif

}  // namespace
}  // namespace ppb
