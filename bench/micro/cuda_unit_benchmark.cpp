// The cuda backend's units on the GPU, one row per unit kind and pass, so
// that a kernel regression shows on its own line (CUDA builds; needs a GPU
// or the CUDA emulator).
//
//   ppb_cuda_unit_bench [--model gpt-small] [Google Benchmark flags]
//   ppb_cuda_unit_bench --model gpt-tiny --benchmark_filter='bf16/qkv/'
//
// The units are those `run --backend cuda` computes by default: the
// vocabulary padded to a multiple of 128 (--make-vocab-size-divisible-by's
// default), and per dtype the attention `--attention auto` chooses (the
// fused attention where it runs: cuDNN's in bf16, the flash kernels in
// fp32; else the naive kernels); the JSON
// context records both (`padded_vocab`, `attention_fp32`, `attention_bf16`:
// "fused", or "naive: <why>").
//
// Rows are named <dtype>/<kind>/<pass>: fp32 and bf16, every unit kind of
// the model (its first unit of that kind), and the passes the unit has:
// F (forward), I (input gradient: every unit but the embedding, which has no
// input) and W (weight gradient: every unit with parameters, so not
// attention). Where the attention is fused, <dtype>/attention_naive/F and
// /I time the naive kernels beside it. Each row runs the backend's own code, a CudaChunk over that
// one unit, F then I then W of one micro-batch per iteration on its stream,
// and reports the pass's time between CUDA events (manual time: the device's
// time, what the host spent enqueueing shows only where the device waited
// for it). Counters per call: flops (the model's FLOPs of the unit's pass,
// Unit::fwd_flops and the like), bytes (its memory traffic as the roofline
// estimates it, unit_traffic_bytes), and FLOPs/s and bytes/s over the mean
// event time. Exit 2 with one line on a bad --model or without a usable
// device; a row the device cannot run (out of memory) says why on its line
// (Google Benchmark's error_occurred / error_message in JSON).
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cuda/blas.hpp"
#include "cuda/cuda_chunk.hpp"
#include "cuda/device_pool.hpp"
#include "cuda/kernels.hpp"
#include "ppb/exec/cpu_model.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/pipeline/attention.hpp"
#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/memory.hpp"

namespace {

using ppb::cuda::Dtype;

enum class Pass : uint8_t { kForward, kInput, kWeight };
constexpr std::array<Pass, 3> kPasses{Pass::kForward, Pass::kInput, Pass::kWeight};
constexpr std::array<const char*, 3> kPassNames{"F", "I", "W"};

// The device every row runs on: one stream, its pool and cuBLAS handle.
class Device {
 public:
  Device() {
    PPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    pool_ = std::make_unique<ppb::cuda::DevicePool>(ppb::cuda::bind_device(0, 1).device, stream_,
                                                    tracker_);
    PPB_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspace));
    blas_ = std::make_unique<ppb::cuda::Blas>(stream_, workspace_, kWorkspace);
  }
  ~Device() {
    cudaStreamSynchronize(stream_);
    blas_.reset();
    pool_.reset();
    cudaFree(workspace_);
    cudaStreamDestroy(stream_);
  }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  ppb::cuda::ChunkContext context(Dtype dt, ppb::Attention attention) const {
    ppb::cuda::ChunkContext c{stream_, pool_.get(), blas_.get(), dt};
    c.attention = attention;
    return c;
  }
  cudaStream_t stream() const { return stream_; }
  ppb::cuda::DevicePool& pool() const { return *pool_; }

 private:
  static constexpr size_t kWorkspace = static_cast<size_t>(ppb::cuda::kBlasWorkspaceBytes);
  ppb::MemoryTracker tracker_;  // first: the pool's buffers count into it
  cudaStream_t stream_ = nullptr;
  void* workspace_ = nullptr;
  std::unique_ptr<ppb::cuda::DevicePool> pool_;
  std::unique_ptr<ppb::cuda::Blas> blas_;
};

Device* g_device = nullptr;

// `bytes` of storage elements with values in [-1, 1) (a fixed sequence):
// a boundary or its gradient as a neighbouring unit would hand it over.
ppb::TrackedBuffer filled(int64_t bytes, Dtype dt) {
  if (bytes == 0) return {};
  Device& d = *g_device;
  const int64_t n = bytes / ppb::cuda::dtype_bytes(dt);
  std::vector<float> host(static_cast<size_t>(n));
  uint32_t x = 12345;
  for (float& v : host) {
    x = x * 1664525U + 1013904223U;
    v = static_cast<float>(x >> 8) / static_cast<float>(1U << 23) - 1.0f;
  }
  ppb::TrackedBuffer f32 = d.pool().stream_ordered(n * 4, ppb::MemCategory::kWorkspace);
  PPB_CUDA_CHECK(cudaMemcpyAsync(f32.data(), host.data(), host.size() * 4, cudaMemcpyHostToDevice,
                                 d.stream()));
  ppb::TrackedBuffer out = d.pool().stream_ordered(bytes, ppb::MemCategory::kWorkspace);
  ppb::cuda::to_storage(dt, f32.as<float>(), out.data(), n, d.stream());
  return out;
}

class Events {
 public:
  Events() {
    for (cudaEvent_t& e : events_) PPB_CUDA_CHECK(cudaEventCreate(&e));
  }
  ~Events() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  cudaEvent_t operator[](size_t i) const { return events_[i]; }

 private:
  std::array<cudaEvent_t, kPasses.size() + 1> events_{};
};

struct Row {
  ppb::ModelSpec spec;  // bytes_per_element of the dtype
  Dtype dtype = Dtype::kFp32;
  ppb::Attention attention = ppb::Attention::kNaive;  // what --attention auto chose for dtype
  int unit = 0;  // global index of the unit in units(spec, attention)
  Pass pass = Pass::kForward;
};

// The units the cuda backend expands for a run of `spec` with `attention`.
std::vector<ppb::Unit> units_of(const ppb::ModelSpec& spec, ppb::Attention attention) {
  return ppb::expand_units(spec, ppb::Kernels::kCuda, attention);
}

// One unit's chunk and the boundaries it reads and writes. Built once per
// dtype and unit (its weights drawn on the host, which for the embedding and
// the head of a large vocabulary takes longer than timing it): the rows of
// its passes, and Google Benchmark's repeated calls of each, share it.
class UnitFixture {
 public:
  UnitFixture(const Row& row, const std::vector<ppb::Unit>& units)
      : dtype_(row.dtype),
        unit_(row.unit),
        chunk_(row.spec, units, {row.unit, row.unit + 1},
               g_device->context(row.dtype, row.attention), ppb::CpuModelOptions{}),
        input_(filled(chunk_.input_bytes(), row.dtype)),
        grad_output_(filled(chunk_.output_bytes(), row.dtype)),
        output_(
            g_device->pool().stream_ordered(chunk_.output_bytes(), ppb::MemCategory::kWorkspace)),
        grad_input_(
            g_device->pool().stream_ordered(chunk_.input_bytes(), ppb::MemCategory::kWorkspace)) {}

  bool serves(const Row& row) const { return row.dtype == dtype_ && row.unit == unit_; }

  // F, I and W of micro-batch 0 (the chunk's ledger wants all three before
  // the micro-batch runs again), with `ev` (when given) recorded before,
  // between and after them.
  void step(const Events* ev) {
    const auto mark = [&](size_t i) {
      if (ev != nullptr) PPB_CUDA_CHECK(cudaEventRecord((*ev)[i], g_device->stream()));
    };
    mark(0);
    chunk_.forward(0, or_null(input_), or_null(output_));
    mark(1);
    chunk_.backward_input(0, or_null(grad_output_), or_null(grad_input_));
    mark(2);
    chunk_.backward_weight(0);
    mark(3);
  }

 private:
  static std::byte* or_null(ppb::TrackedBuffer& b) { return b.empty() ? nullptr : b.data(); }

  Dtype dtype_;
  int unit_;
  ppb::cuda::CudaChunk chunk_;
  ppb::TrackedBuffer input_, grad_output_, output_, grad_input_;
};

std::unique_ptr<UnitFixture> g_fixture;  // the last row's

// Each iteration runs F, I and W; the row's pass is the time between its
// two events.
void time_unit_pass(benchmark::State& state, const Row& row) {
  const std::vector<ppb::Unit> units = units_of(row.spec, row.attention);
  const ppb::Unit& u = units[static_cast<size_t>(row.unit)];
  if (!g_fixture || !g_fixture->serves(row)) {
    g_fixture.reset();  // its memory back first
    g_fixture = std::make_unique<UnitFixture>(row, units);
  }
  g_fixture->step(nullptr);  // warm-up: cuBLAS's first calls, the pool's first allocations
  PPB_CUDA_CHECK(cudaStreamSynchronize(g_device->stream()));
  const Events ev;
  const auto p = static_cast<size_t>(row.pass);
  double seconds = 0;
  for (auto _ : state) {
    g_fixture->step(&ev);
    PPB_CUDA_CHECK(cudaEventSynchronize(ev[kPasses.size()]));
    float ms = 0;
    PPB_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[p], ev[p + 1]));
    const double s = static_cast<double>(ms) * 1e-3;
    state.SetIterationTime(s);
    seconds += s;
  }
  const ppb::PassBytes traffic = ppb::unit_traffic_bytes(u);
  const std::array<double, 3> flops{u.fwd_flops, u.bwd_input_flops, u.bwd_weight_flops};
  const std::array<double, 3> bytes{traffic.fwd, traffic.bwd_input, traffic.bwd_weight};
  const double mean = seconds / static_cast<double>(state.iterations());
  state.counters["flops"] = flops[p];
  state.counters["bytes"] = bytes[p];
  state.counters["FLOPs/s"] = mean > 0 ? flops[p] / mean : 0.0;
  state.counters["bytes/s"] = mean > 0 ? bytes[p] / mean : 0.0;
}

// A row that cannot run (the device out of memory for the unit) reports
// why on its line and the others go on.
void run_unit_pass(benchmark::State& state, const Row& row) {
  try {
    time_unit_pass(state, row);
  } catch (const std::exception& e) {
    g_fixture.reset();
    state.SkipWithError(e.what());
  }
}

bool has_pass(const ppb::ModelSpec& spec, ppb::UnitKind kind, Pass pass) {
  switch (pass) {
    case Pass::kForward:
      return true;
    case Pass::kInput:
      return kind != ppb::UnitKind::kEmbedding;  // the only unit without an input
    case Pass::kWeight:
      return ppb::unit_param_count(spec, kind) > 0;
  }
  return false;
}

void register_rows(const ppb::ModelSpec& model) {
  for (const Dtype dt : {Dtype::kFp32, Dtype::kBf16}) {
    ppb::ModelSpec spec = model;
    spec.bytes_per_element = static_cast<int>(ppb::cuda::dtype_bytes(dt));
    const ppb::AttentionChoice attention = ppb::choose_attention(
        ppb::AttentionRequest::kAuto,
        ppb::fused_attention_obstacle("cuda", spec.bytes_per_element, spec,
                                      ppb::cuda::fused_attention_unavailable_reason(
                                          spec.bytes_per_element, spec.hidden / spec.heads)));
    benchmark::AddCustomContext(
        dt == Dtype::kFp32 ? "attention_fp32" : "attention_bf16",
        attention.attention == ppb::Attention::kFused ? "fused" : "naive: " + attention.reason);
    const std::vector<ppb::Unit> units = units_of(spec, attention.attention);
    const std::string prefix = dt == Dtype::kFp32 ? "fp32/" : "bf16/";
    const auto add = [&](const std::string& kind_name, const Row& row) {
      const std::string name = prefix + kind_name + "/" + kPassNames[static_cast<size_t>(row.pass)];
      benchmark::RegisterBenchmark(name.c_str(),
                                   [row](benchmark::State& s) { run_unit_pass(s, row); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    };
    for (int k = 0; k < ppb::kUnitKinds; ++k) {
      const auto kind = static_cast<ppb::UnitKind>(k);
      int first = -1;
      for (size_t g = 0; g < units.size() && first < 0; ++g) {
        if (units[g].kind == kind) first = static_cast<int>(g);
      }
      if (first < 0) continue;
      for (const Pass pass : kPasses) {
        if (!has_pass(spec, kind, pass)) continue;
        add(ppb::unit_kind_name(kind), Row{spec, dt, attention.attention, first, pass});
        // Beside the fused attention, the naive kernels it replaces, on the
        // same device in the same run.
        if (kind == ppb::UnitKind::kAttention && attention.attention == ppb::Attention::kFused) {
          add("attention_naive", Row{spec, dt, ppb::Attention::kNaive, first, pass});
        }
      }
    }
  }
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "ppb_cuda_unit_bench: %s\n", what.c_str());
  std::exit(2);
}

// Takes --model NAME / --model=NAME out of argv (Google Benchmark rejects
// flags it does not know); the rest is Google Benchmark's.
std::string take_model(int& argc, char** argv) {
  std::string model = "gpt-small";
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--model") {
      if (i + 1 >= argc) fail("--model: needs a value (a preset or gpt:key=value,...)");
      model = argv[++i];
    } else if (a.starts_with("--model=")) {
      model = std::string(a.substr(8));
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = take_model(argc, argv);
  ppb::ModelSpec spec;
  try {
    spec = ppb::parse_model_spec(model);
    spec.vocab_divisor = ppb::kDefaultVocabDivisor;
  } catch (const ppb::UsageError& e) {
    fail(e.what());
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  if (const std::string why = ppb::cuda::unusable_reason(); !why.empty())
    fail("no usable GPU: " + why);
  Device device;
  g_device = &device;
  register_rows(spec);
  benchmark::AddCustomContext("model", model);
  benchmark::AddCustomContext("padded_vocab", std::to_string(spec.padded_vocab()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  g_fixture.reset();
  g_device = nullptr;
  return 0;
}
