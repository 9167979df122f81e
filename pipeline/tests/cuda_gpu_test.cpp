// The cuda backend's math on a GPU (label gpu): CudaChunk against CpuChunk,
// the cpu backend's model, on the same weights and data. Loss and every
// weight gradient within the --check tolerance (fp32 1e-4, bf16 5e-2), for
// the full and the split backward, with the linear layers' cuBLASLt
// epilogues and with their kernels, and for the model cut in two at every
// unit boundary (the boundary layouts crossing in device memory); a call a
// stream capture forbids throws CaptureRefused. Skips, saying why, where no
// CUDA device is usable.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "chunk_walk.hpp"
#include "cuda/blas.hpp"
#include "cuda/cuda_chunk.hpp"
#include "cuda/device_pool.hpp"
#include "cuda/graph_cache.hpp"
#include "emulated_label.hpp"
#include "ppb/exec/cpu_model.hpp"
#include "ppb/exec/cpu_reference.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/pipeline/model.hpp"
#include "vocab_padding.hpp"

namespace ppb {
namespace {

using cuda::Dtype;

constexpr size_t kWorkspace = size_t{32} << 20;
constexpr int kMicrobatches = 2;

class CudaGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = cuda::unusable_reason();
    if (!why.empty()) PPB_SKIP_UNLESS_EMULATED("no usable CUDA device: " + why);
    const cuda::DeviceBinding b = cuda::bind_device(0, 1);
    PPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    pool_ = std::make_unique<cuda::DevicePool>(b.device, stream_, tracker_);
    PPB_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspace));
    blas_ = std::make_unique<cuda::Blas>(stream_, workspace_, kWorkspace);
  }
  void TearDown() override {
    if (stream_ == nullptr) return;
    PPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    blas_.reset();
    pool_.reset();
    PPB_CUDA_CHECK(cudaFree(workspace_));
    PPB_CUDA_CHECK(cudaStreamDestroy(stream_));
  }

  cuda::ChunkContext context(Dtype dt, bool epilogues = true) {
    return {stream_, pool_.get(), blas_.get(), dt, epilogues};
  }

  MemoryTracker tracker_;  // first: the pool's buffers count into it
  cudaStream_t stream_ = nullptr;
  void* workspace_ = nullptr;
  std::unique_ptr<cuda::DevicePool> pool_;
  std::unique_ptr<cuda::Blas> blas_;
};

ModelSpec small_spec(Dtype dt) {
  ModelSpec spec = parse_model_spec("gpt:layers=2,hidden=64,heads=4,seq=16,vocab=96,mbs=2");
  spec.bytes_per_element = static_cast<int>(cuda::dtype_bytes(dt));
  return spec;
}

double tolerance(Dtype dt) { return dt == Dtype::kFp32 ? 1e-4 : 5e-2; }

// The reference: the whole model on the CPU, loss_scale 1/M, M micro-batches.
ReferenceStep cpu_reference(const ModelSpec& spec) {
  ModelSpec fp32 = spec;
  fp32.bytes_per_element = 4;
  CpuModelOptions mo;
  mo.seed = 99;
  return reference_step(fp32, kMicrobatches, mo);
}

CpuModelOptions options() {
  CpuModelOptions mo;
  mo.seed = 99;
  mo.loss_scale = 1.0f / kMicrobatches;
  return mo;
}

void expect_gradients(const std::vector<std::vector<float>>& mine, const ReferenceStep& ref,
                      int first_unit, double tol, const std::string& what) {
  for (size_t u = 0; u < mine.size(); ++u) {
    const std::vector<float>& want = ref.grads[static_cast<size_t>(first_unit) + u];
    ASSERT_EQ(mine[u].size(), want.size()) << what << " unit " << first_unit + u;
    EXPECT_LE(max_relative_error(mine[u], want), tol) << what << " unit " << first_unit + u;
  }
}

// Forward and backward (full, or split into I then W) of every micro-batch
// through a chunk holding the whole model; returns the mean loss.
double forward_backward(cuda::CudaChunk& chunk, bool split) {
  double loss = 0;
  for (int mb = 0; mb < kMicrobatches; ++mb) {
    chunk.forward(mb, nullptr, nullptr);
    if (split) {
      chunk.backward_input(mb, nullptr, nullptr);
      chunk.backward_weight(mb);
    } else {
      chunk.backward(mb, nullptr, nullptr);
    }
    loss += chunk.loss(mb) / kMicrobatches;
  }
  return loss;
}

// Both paths of the linear layers: bias, bias + GeLU and bias gradient as
// cuBLASLt epilogues of the GEMMs (each of the 4 linear layers' forward and
// weight GEMMs tried; on the emulator none refused), and as the bias, GeLU
// and column reduction kernels (no epilogue GEMM tried).
TEST_F(CudaGpu, WholeModelMatchesTheCpuModelFullAndSplitBackward) {
  for (const Dtype dt : {Dtype::kFp32, Dtype::kBf16}) {
    for (const bool epilogues : {true, false}) {
      for (const bool split : {false, true}) {
        const std::string what = std::string(dt == Dtype::kFp32 ? "fp32" : "bf16") +
                                 (split ? " split" : " full") +
                                 (epilogues ? " epilogues" : " kernels");
        const ModelSpec spec = small_spec(dt);
        const std::vector<Unit> units = expand_units(spec);
        const ReferenceStep ref = cpu_reference(spec);
        const int64_t fused = blas_->epilogue_gemms();
        const int64_t refusals = blas_->epilogue_refusals();
        cuda::CudaChunk chunk(spec, units, {0, static_cast<int>(units.size())},
                              context(dt, epilogues), options());
        const double loss = forward_backward(chunk, split);
        EXPECT_NEAR(loss, ref.loss, tolerance(dt) * ref.loss) << what;
        expect_gradients(chunk.gradients(), ref, 0, tolerance(dt), what);
        // On the emulator every fused call runs; on a GPU cuBLASLt may refuse
        // some (they then ran the kernels, and the counts say how many).
        const int64_t linear_gemms = int64_t{4} * spec.layers * 2 * kMicrobatches;
        const int64_t ran = blas_->epilogue_gemms() - fused;
        const int64_t refused = blas_->epilogue_refusals() - refusals;
        EXPECT_EQ(ran + refused, epilogues ? linear_gemms : 0) << what;
        if (::ppb::testing::emulator_required()) {
          EXPECT_EQ(refused, 0) << what;
        }
        RecordProperty(what + " fused GEMMs", std::to_string(ran));
        RecordProperty(what + " refused", std::to_string(refused));
      }
    }
  }
}

// The two paths against each other, closer than either is to the CPU: the
// same products, the bias gradients summed in another fixed order, and (bf16)
// the GeLU of fc1 taken on its fp32 pre-activation instead of the rounded one.
// Biases start at zero: the second step's, after one SGD step, are not, so
// that a bias the forward epilogues dropped would show.
TEST_F(CudaGpu, GemmEpiloguesMatchTheKernelPath) {
  for (const Dtype dt : {Dtype::kFp32, Dtype::kBf16}) {
    const ModelSpec spec = small_spec(dt);
    const std::vector<Unit> units = expand_units(spec);
    const int n = static_cast<int>(units.size());
    std::vector<std::vector<float>> grads[2];
    double loss[2] = {0, 0};
    for (const bool epilogues : {true, false}) {
      cuda::CudaChunk chunk(spec, units, {0, n}, context(dt, epilogues), options());
      for (int step = 0; step < 2; ++step) {
        if (step == 1) chunk.sgd_step(0.5f);
        for (int mb = 0; mb < kMicrobatches; ++mb) {
          const int64_t id = int64_t{step} * kMicrobatches + mb;
          chunk.forward(id, nullptr, nullptr);
          chunk.backward(id, nullptr, nullptr);
          if (step == 1) loss[epilogues ? 1 : 0] += chunk.loss(id);
        }
      }
      grads[epilogues ? 1 : 0] = chunk.gradients();
    }
    EXPECT_NEAR(loss[1], loss[0], (dt == Dtype::kFp32 ? 1e-6 : 1e-3) * loss[0]);
    const double tol = dt == Dtype::kFp32 ? 1e-5 : 2e-2;
    for (size_t u = 0; u < grads[0].size(); ++u) {
      EXPECT_LE(max_relative_error(grads[1][u], grads[0][u]), tol)
          << (dt == Dtype::kFp32 ? "fp32" : "bf16") << " unit " << units[u].name;
    }
  }
}

// A fused GEMM on operands 4 bytes past an allocation's start (as an
// activation at an odd row offset is): the heuristic is told their
// alignment, so the algorithm it offers runs them (the emulator, like a
// kernel chosen for 16-byte operands, refuses less aligned ones), or it
// offers none, or its kernel refuses them at run time, and the call falls
// back. Where it runs: C = A B + bias.
TEST_F(CudaGpu, AFusedGemmOnOperandsOffTheirAlignmentRunsOrIsRefused) {
  constexpr int kM = 3, kN = 5, kK = 7;
  std::vector<float> host(1 + kM * kK + 1 + kK * kN + 1 + kN + 1 + kM * kN);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 13) / 8.0f - 0.5f;
  float* dev = nullptr;
  PPB_CUDA_CHECK(cudaMalloc(&dev, host.size() * 4));
  PPB_CUDA_CHECK(cudaMemcpy(dev, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
  const size_t a = 1, b = a + kM * kK + 1, bias = b + kK * kN + 1, c = bias + kN + 1;
  const std::function<bool()> gemm = blas_->plan_epilogue(
      false, false, kM, kN, kK, {dev + a, kK}, {dev + b, kN}, Dtype::kFp32, 0.0f, nullptr, dev + c,
      kN, Dtype::kFp32, {cuda::Epilogue::kBias, dev + bias, nullptr});
  if (cuda::unusable_reason().empty() && !gemm) {
    EXPECT_EQ(blas_->epilogue_refusals(), 1);  // a GPU's cuBLASLt may offer none
  } else {
    ASSERT_TRUE(gemm) << blas_->first_epilogue_refusal();
    if (!gemm()) {  // the kernel refused what the heuristic offered: counted, nothing ran
      EXPECT_EQ(blas_->epilogue_refusals(), 1);
      EXPECT_NE(blas_->first_epilogue_refusal().find("cublasLtMatmul: "), std::string::npos)
          << blas_->first_epilogue_refusal();
      PPB_CUDA_CHECK(cudaFree(dev));
      return;
    }
    std::vector<float> got(kM * kN);
    PPB_CUDA_CHECK(
        cudaMemcpyAsync(got.data(), dev + c, got.size() * 4, cudaMemcpyDeviceToHost, stream_));
    PPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (int i = 0; i < kM; ++i) {
      for (int j = 0; j < kN; ++j) {
        double want = host[bias + j];
        for (int l = 0; l < kK; ++l) want += double{host[a + i * kK + l]} * host[b + l * kN + j];
        EXPECT_NEAR(got[static_cast<size_t>(i * kN + j)], want, 1e-5) << i << "," << j;
      }
    }
  }
  PPB_CUDA_CHECK(cudaFree(dev));
}

// The vocabulary padded (60 -> 64 at divisor 32): the padded logits are
// masked out of the loss, so loss and the true rows' gradients are the
// unpadded cpu model's, and the padding gets exactly zero gradient. Tiny,
// so that the emulator runs it in a moment.
TEST_F(CudaGpu, PaddedVocabMatchesTheUnpaddedCpuModel) {
  ModelSpec plain = parse_model_spec("gpt:layers=1,hidden=32,heads=2,seq=8,vocab=60,mbs=2");
  const ReferenceStep ref = cpu_reference(plain);
  for (const Dtype dt : {Dtype::kFp32, Dtype::kBf16}) {
    for (const bool split : {false, true}) {
      const std::string what =
          std::string(dt == Dtype::kFp32 ? "fp32" : "bf16") + (split ? " split" : " full");
      ModelSpec spec = plain;
      spec.vocab_divisor = 32;
      spec.bytes_per_element = static_cast<int>(cuda::dtype_bytes(dt));
      ASSERT_EQ(spec.padded_vocab(), 64);
      const std::vector<Unit> units = expand_units(spec);
      cuda::CudaChunk chunk(spec, units, {0, static_cast<int>(units.size())}, context(dt),
                            options());
      const double loss = forward_backward(chunk, split);
      EXPECT_NEAR(loss, ref.loss, tolerance(dt) * ref.loss) << what;
      const std::vector<std::vector<float>> grads = chunk.gradients();
      EXPECT_EQ(grads.back().size(), 32U * 64U) << what;
      const test::Unpadded unpadded = test::drop_vocab_padding(spec, grads, 0);
      EXPECT_EQ(unpadded.padding_max_abs, 0.0f) << what;
      expect_gradients(unpadded.grads, ref, 0, tolerance(dt), what);
    }
  }
}

// Two chunks, cut after unit `cut`: the forward output and the backward
// input gradient cross in a device buffer of the boundary's bytes.
TEST_F(CudaGpu, ModelCutAtEveryUnitMatchesTheCpuModel) {
  for (const Dtype dt : {Dtype::kFp32, Dtype::kBf16}) {
    const ModelSpec spec = small_spec(dt);
    const std::vector<Unit> units = expand_units(spec);
    const ReferenceStep ref = cpu_reference(spec);
    const int n = static_cast<int>(units.size());
    for (int cut = 1; cut < n; ++cut) {
      const std::string what = std::string(dt == Dtype::kFp32 ? "fp32" : "bf16") + " cut after " +
                               units[static_cast<size_t>(cut - 1)].name;
      cuda::CudaChunk a(spec, units, {0, cut}, context(dt), options());
      cuda::CudaChunk b(spec, units, {cut, n}, context(dt), options());
      ASSERT_EQ(a.output_bytes(), b.input_bytes()) << what;
      TrackedBuffer act = pool_->stream_ordered(a.output_bytes(), MemCategory::kCommBuffers);
      TrackedBuffer grad = pool_->stream_ordered(a.output_bytes(), MemCategory::kCommBuffers);
      double loss = 0;
      for (int mb = 0; mb < kMicrobatches; ++mb) {
        a.forward(mb, nullptr, act.data());
        b.forward(mb, act.data(), nullptr);
        b.backward(mb, nullptr, grad.data());
        a.backward(mb, grad.data(), nullptr);
        loss += b.loss(mb) / kMicrobatches;
      }
      EXPECT_NEAR(loss, ref.loss, tolerance(dt) * ref.loss) << what;
      expect_gradients(a.gradients(), ref, 0, tolerance(dt), what);
      expect_gradients(b.gradients(), ref, cut, tolerance(dt), what);
    }
  }
}

// Each pass peaks at the memory model's chunk walk to the byte, with the
// cuda kernels' scratch (expand_units for Kernels::kCuda): F at
// activation_bytes + forward_workspace (every unit after the chunk's first
// receives its input in place), B at backward_workspace, I at
// peak_during_input + input_workspace over the chunk without the
// micro-batch, W at weight_workspace.
TEST_F(CudaGpu, EachPassPeaksAtTheModelsChunkWalk) {
  for (const Dtype dt : {Dtype::kFp32, Dtype::kBf16}) {
    const ModelSpec spec = small_spec(dt);
    const std::vector<Unit> units = expand_units(spec, Kernels::kCuda);
    const auto n = static_cast<int>(units.size());
    const std::vector<UnitTime> times = unit_times(units, device_preset("h100", 2));
    for (const UnitRange r :
         {UnitRange{0, n}, UnitRange{2, 10}, UnitRange{3, 5}, UnitRange{n - 2, n}}) {
      SCOPED_TRACE(std::string(dt == Dtype::kFp32 ? "fp32" : "bf16") + " units " +
                   std::to_string(r.begin) + ".." + std::to_string(r.end));
      const ChunkCost c = test::chunk_cost(units, times, r);
      cuda::CudaChunk chunk(spec, units, r, context(dt), options());
      TrackedBuffer in = pool_->stream_ordered(chunk.input_bytes(), MemCategory::kCommBuffers);
      TrackedBuffer out = pool_->stream_ordered(chunk.output_bytes(), MemCategory::kCommBuffers);
      TrackedBuffer gin = pool_->stream_ordered(chunk.input_bytes(), MemCategory::kCommBuffers);
      TrackedBuffer gout = pool_->stream_ordered(chunk.output_bytes(), MemCategory::kCommBuffers);
      if (!in.empty())
        PPB_CUDA_CHECK(cudaMemsetAsync(in.data(), 0, static_cast<size_t>(in.size()), stream_));
      if (!gout.empty())
        PPB_CUDA_CHECK(cudaMemsetAsync(gout.data(), 0, static_cast<size_t>(gout.size()), stream_));
      // + the head's loss accumulator of the micro-batch, 8 device bytes the
      // chunk keeps for loss() past the step (outside the model).
      const int64_t loss_slot = r.end == n ? 8 : 0;
      EXPECT_EQ(test::pass_peak(tracker_, [&] { chunk.forward(0, in.data(), out.data()); }),
                c.activation_bytes + c.forward_workspace_bytes + loss_slot);
      EXPECT_EQ(test::pass_peak(tracker_, [&] { chunk.backward(0, gout.data(), gin.data()); }),
                c.backward_workspace_bytes);
      chunk.forward(1, in.data(), out.data());
      EXPECT_EQ(
          test::pass_peak(tracker_, [&] { chunk.backward_input(1, gout.data(), gin.data()); }),
          c.peak_during_input() + c.input_workspace_bytes - c.activation_bytes);
      EXPECT_EQ(test::pass_peak(tracker_, [&] { chunk.backward_weight(1); }),
                c.weight_workspace_bytes);
      PPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
  }
}

// SGD moves the fp32 master by -lr * grad and zeroes the gradients: one step,
// then the next forward's loss on the GPU equals the CPU's after its step.
TEST_F(CudaGpu, SgdStepMatchesTheCpuModel) {
  const Dtype dt = Dtype::kFp32;
  const ModelSpec spec = small_spec(dt);
  const std::vector<Unit> units = expand_units(spec);
  const int n = static_cast<int>(units.size());
  MemoryTracker cpu_mem;
  CpuChunk cpu(spec, units, {0, n}, cpu_mem, options());
  cuda::CudaChunk gpu(spec, units, {0, n}, context(dt), options());
  for (int mb = 0; mb < kMicrobatches; ++mb) {
    cpu.forward(mb, nullptr, nullptr);
    cpu.backward(mb, nullptr, nullptr);
    gpu.forward(mb, nullptr, nullptr);
    gpu.backward(mb, nullptr, nullptr);
  }
  cpu.sgd_step(0.5f);
  gpu.sgd_step(0.5f);
  for (const std::vector<float>& g : gpu.gradients()) {
    for (float v : g) ASSERT_EQ(v, 0.0f);
  }
  cpu.forward(kMicrobatches, nullptr, nullptr);
  gpu.forward(kMicrobatches, nullptr, nullptr);
  EXPECT_NEAR(gpu.loss(kMicrobatches), cpu.loss(kMicrobatches), 1e-4 * cpu.loss(kMicrobatches));
  EXPECT_EQ(gpu.weight_version(), 1);
}

// A CUDA call that fails only because its stream captures throws
// CaptureRefused (the backend then runs the work eagerly) instead of ending
// the job; the capture, abandoned, leaves the stream usable.
TEST_F(CudaGpu, ACallACaptureForbidsThrowsCaptureRefused) {
  PPB_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  EXPECT_THROW(PPB_CUDA_CHECK(cudaStreamSynchronize(stream_)), cuda::CaptureRefused);
  cudaGraph_t graph = nullptr;
  EXPECT_NE(cudaStreamEndCapture(stream_, &graph), cudaSuccess);  // invalidated: no graph
  (void)cudaGetLastError();
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  PPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace
}  // namespace ppb
