#include "cuda/fused_attention.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>

#include "cuda/built_once.hpp"
#include "cuda/graph_cache.hpp"
#include "cuda/kernels.hpp"
#include "cuda/owned_stream.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/log.hpp"

#if PPB_HAVE_CUDNN
#include <cudnn_frontend.h>

#include <unordered_map>
#include <vector>

// The frontend's handle to the libcudnn it loaded (dynamic loading: the
// frontend resolves every cuDNN call through it).
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend
#endif

namespace ppb::cuda {
namespace {

// A graph cuDNN could not build for this shape on this machine: not the
// program's fault, so the run ends with a usage error (exit 2) that says
// what would run instead.
class BuildRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One line (a result's attention_reason, a usage error): the frontend's
// messages may span several.
std::string refusal_words(const ModelSpec& spec, std::string why) {
  std::replace(why.begin(), why.end(), '\n', ' ');
  return "cuDNN " + loaded_cudnn_version() +
         " cannot build its bf16 flash attention for micro-batch " +
         std::to_string(spec.micro_batch_size) + ", " + std::to_string(spec.heads) +
         " heads, sequence " + std::to_string(spec.seq) + ", head dimension " +
         std::to_string(spec.hidden / spec.heads) + " (" + why +
         "; CUDNN_FRONTEND_LOG_INFO=1 CUDNN_FRONTEND_LOG_FILE=stderr say more)";
}

// The properties of the device this thread is bound to (not device 0: a
// node's GPUs may differ).
cudaError_t bound_device_properties(cudaDeviceProp& prop) {
  int device = 0;
  if (const cudaError_t rc = cudaGetDevice(&device); rc != cudaSuccess) return rc;
  return cudaGetDeviceProperties(&prop, device);
}

}  // namespace

#if !PPB_HAVE_CUDNN

std::string cudnn_unavailable_reason() {
  return "this build has no cuDNN (PPB_WITH_CUDNN=OFF, or no cudnn.h or cudnn_frontend.h at "
         "configure time)";
}

struct FusedAttention::Graphs {
  int64_t forward_workspace = 0;
  int64_t backward_workspace = 0;
  void bind(cudaStream_t /*stream*/) {}
  void unbind(cudaStream_t /*stream*/) noexcept {}
  void forward(const void* /*qkv*/, void* /*out*/, float* /*stats*/, void* /*workspace*/,
               cudaStream_t /*stream*/) {}
  void backward(const void* /*qkv*/, const void* /*out*/, const float* /*stats*/,
                const void* /*dout*/, void* /*dqkv*/, void* /*workspace*/,
                cudaStream_t /*stream*/) {}
};

std::string loaded_cudnn_version() { return ""; }

std::unique_ptr<FusedAttention::Graphs> FusedAttention::build_graphs(const ModelSpec& /*spec*/,
                                                                     cudaStream_t /*stream*/) {
  PPB_CHECK(false, "bf16 fused attention in a build without cuDNN");
  return nullptr;
}

#else

namespace fe = cudnn_frontend;

namespace {

size_t cudnn_version = 0;  // cudnnGetVersion() of the library loaded, 0: none

}  // namespace

std::string cudnn_unavailable_reason() {
  // Cached: neither the device nor the library changes while the process runs.
  static const std::string reason = []() -> std::string {
    if (std::string why = unusable_reason(); !why.empty()) return why;
    cudaDeviceProp prop{};
    if (const cudaError_t rc = bound_device_properties(prop); rc != cudaSuccess) {
      return std::string("cannot read the device's properties (") + cudaGetErrorString(rc) + ")";
    }
    if (std::string_view(prop.name).starts_with("pipebench CUDA emulator")) {
      return "the CUDA emulator has no cuDNN";
    }
    if (prop.major < 8) {
      return "compute capability " + std::to_string(prop.major) + "." + std::to_string(prop.minor) +
             ": cuDNN's flash attention needs 8.0 or later";
    }
    void* lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      return std::string("cannot load libcudnn.so.9 (") + (why != nullptr ? why : "?") + ")";
    }
    using GetVersion = size_t (*)();
    const auto get_version = reinterpret_cast<GetVersion>(dlsym(lib, "cudnnGetVersion"));
    if (get_version == nullptr) return "libcudnn.so.9 has no cudnnGetVersion: not cuDNN 9";
    const size_t version = get_version();  // major * 10000 + minor * 100 + patch
    if (version / 10000 != 9) {
      return "libcudnn.so.9 says it is cuDNN " + std::to_string(version) + ", not 9.x";
    }
    if (version == 91000 || version == 91001) {
      return "cuDNN 9.10." + std::to_string(version % 100) +
             ": the cuDNN frontend refuses its bf16 flash attention (known bugs)";
    }
    // The frontend loads a CUDA runtime of its own choosing (the first of
    // libcudart.so.12 and .13 it finds); the one pipebench runs on, unless
    // the user named one.
    const std::string cudart = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
    (void)setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", cudart.c_str(), /*overwrite=*/0);
    fe::cudnn_dlhandle = lib;
    cudnn_version = version;
    return "";
  }();
  return reason;
}

std::string loaded_cudnn_version() {
  if (cudnn_version == 0) return "";
  return std::to_string(cudnn_version / 10000) + "." + std::to_string(cudnn_version / 100 % 100) +
         "." + std::to_string(cudnn_version % 100);
}

namespace {

// The tensors' ids in the graphs' variant packs.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

void check(fe::error_object e, const char* what) {
  PPB_CHECK(e.is_good(), std::string("cuDNN fused attention, ") + what + ": " + e.get_message());
}

void built(fe::error_object e, const char* what) {
  if (!e.is_good()) throw BuildRefused(std::string(what) + ": " + e.get_message());
}

// The cuDNN handle, destroyed after the graphs whose plans were built with
// it (members are destroyed in reverse order: it is declared first).
struct CudnnHandle {
  cudnnHandle_t raw = nullptr;
  CudnnHandle() = default;
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
  ~CudnnHandle() {
    if (raw != nullptr) (void)fe::detail::destroy_handle(raw);
  }
};

}  // namespace

// Kept for the process's life (BuiltOnce) and shared by every
// FusedAttention of its shape on its device; used from one thread at a time.
struct FusedAttention::Graphs {
  CudnnHandle handle;
  cudaStream_t stream = nullptr;  // the handle's: where the graphs' kernels run
  int64_t hidden = 0;             // h: the qkv rows are 3h wide
  fe::graph::Graph forward_graph;
  fe::graph::Graph backward_graph;
  int64_t forward_workspace = 0;
  int64_t backward_workspace = 0;

  /// Makes `stream` the handle's, where it is not already. A FusedAttention
  /// binds its stream when it is made, so that its executions (possibly
  /// under a stream capture) set nothing unless another FusedAttention of
  /// the shape ran on another stream since.
  void bind(cudaStream_t s);
  /// The legacy default stream in place of `s` (a stream about to go)
  /// where the handle is on it. Never throws (destructors call it).
  void unbind(cudaStream_t s) noexcept {
    if (stream != s || s == nullptr) return;
    (void)fe::detail::set_stream(handle.raw, nullptr);
    stream = nullptr;
  }
  void forward(const void* qkv, void* out, float* stats, void* workspace, cudaStream_t s);
  void backward(const void* qkv, const void* out, const float* stats, const void* dout, void* dqkv,
                void* workspace, cudaStream_t s);
};

namespace {

// An execution's failure: under a stream capture, a refusal to run captured
// (the backend then runs the work eagerly); else a broken invariant.
void executed(cudaStream_t stream, fe::error_object e, const char* what) {
  if (e.is_good()) return;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capturing) == cudaSuccess &&
      capturing != cudaStreamCaptureStatusNone) {
    throw CaptureRefused(std::string("cuDNN fused attention, ") + what +
                         " under a CUDA graph capture: " + e.get_message());
  }
  check(e, what);
}

}  // namespace

std::unique_ptr<FusedAttention::Graphs> FusedAttention::build_graphs(const ModelSpec& spec,
                                                                     cudaStream_t stream) {
  PPB_CHECK(cudnn_unavailable_reason().empty(), "fused attention without a usable cuDNN");
  auto graphs = std::make_unique<Graphs>();
  const int64_t b = spec.micro_batch_size;
  const int64_t a = spec.heads;
  const int64_t s = spec.seq;
  const int64_t h = spec.hidden;
  const int64_t d = h / a;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  Graphs& g = *graphs;
  g.stream = stream;
  g.hidden = h;
  if (const cudnnStatus_t rc = fe::detail::create_handle(&g.handle.raw);
      rc != CUDNN_STATUS_SUCCESS) {
    throw BuildRefused(std::string("cudnnCreate: ") + fe::detail::get_error_string(rc));
  }
  if (const cudnnStatus_t rc = fe::detail::set_stream(g.handle.raw, stream);
      rc != CUDNN_STATUS_SUCCESS) {
    throw BuildRefused(std::string("cudnnSetStream: ") + fe::detail::get_error_string(rc));
  }

  // [b, a, s, d] views: Q, K, V inside the packed qkv rows, O and dO in the
  // [b, s, h] context; the statistics [b, a, s, 1] fp32.
  const std::vector<int64_t> dim{b, a, s, d};
  const std::vector<int64_t> qkv_stride{s * 3 * h, d, 3 * h, 1};
  const std::vector<int64_t> out_stride{s * h, d, h, 1};
  const std::vector<int64_t> stats_dim{b, a, s, 1};
  const std::vector<int64_t> stats_stride{a * s, s, 1, 1};
  const auto input = [&](fe::graph::Graph& graph, const char* name, Uid uid,
                         const std::vector<int64_t>& stride) {
    return graph.tensor(
        fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dim).set_stride(stride));
  };
  const auto stats_input = [&](fe::graph::Graph& graph) {
    return graph.tensor(fe::graph::Tensor_attributes()
                            .set_name("stats")
                            .set_uid(kStats)
                            .set_dim(stats_dim)
                            .set_stride(stats_stride)
                            .set_data_type(fe::DataType_t::FLOAT));
  };
  for (fe::graph::Graph* graph : {&g.forward_graph, &g.backward_graph}) {
    graph->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
  }

  {
    fe::graph::Graph& f = g.forward_graph;
    auto q = input(f, "q", kQ, qkv_stride);
    auto k = input(f, "k", kK, qkv_stride);
    auto v = input(f, "v", kV, qkv_stride);
    auto [o, stats] = f.sdpa(q, k, v,
                             fe::graph::SDPA_attributes()
                                 .set_name("sdpa")
                                 .set_generate_stats(true)
                                 .set_causal_mask(true)
                                 .set_attn_scale(scale));
    o->set_output(true).set_uid(kO).set_dim(dim).set_stride(out_stride);
    stats->set_output(true)
        .set_uid(kStats)
        .set_dim(stats_dim)
        .set_stride(stats_stride)
        .set_data_type(fe::DataType_t::FLOAT);
    built(f.build(g.handle.raw, {fe::HeurMode_t::A}), "building the forward graph");
    built(f.get_workspace_size(g.forward_workspace), "the forward's workspace");
  }
  {
    fe::graph::Graph& bw = g.backward_graph;
    auto q = input(bw, "q", kQ, qkv_stride);
    auto k = input(bw, "k", kK, qkv_stride);
    auto v = input(bw, "v", kV, qkv_stride);
    auto o = input(bw, "o", kO, out_stride);
    auto dout = input(bw, "do", kDO, out_stride);
    auto stats = stats_input(bw);
    auto [dq, dk, dv] = bw.sdpa_backward(q, k, v, o, dout, stats,
                                         fe::graph::SDPA_backward_attributes()
                                             .set_name("sdpa_backward")
                                             .set_causal_mask(true)
                                             .set_attn_scale(scale));
    dq->set_output(true).set_uid(kDQ).set_dim(dim).set_stride(qkv_stride);
    dk->set_output(true).set_uid(kDK).set_dim(dim).set_stride(qkv_stride);
    dv->set_output(true).set_uid(kDV).set_dim(dim).set_stride(qkv_stride);
    built(bw.build(g.handle.raw, {fe::HeurMode_t::A}), "building the backward graph");
    built(bw.get_workspace_size(g.backward_workspace), "the backward's workspace");
  }
  return graphs;
}

namespace {

// The element `columns` bf16 values after p (k at +h, v at +2h in a qkv row).
void* at(const void* p, int64_t columns) {
  return const_cast<std::byte*>(static_cast<const std::byte*>(p) + columns * 2);
}

}  // namespace

void FusedAttention::Graphs::bind(cudaStream_t s) {
  if (s == stream) return;
  const cudnnStatus_t rc = fe::detail::set_stream(handle.raw, s);
  PPB_CHECK(rc == CUDNN_STATUS_SUCCESS, std::string("cuDNN fused attention, cudnnSetStream: ") +
                                            fe::detail::get_error_string(rc));
  stream = s;
}

void FusedAttention::Graphs::forward(const void* qkv, void* out, float* stats, void* workspace,
                                     cudaStream_t s) {
  bind(s);
  const int64_t h = hidden;
  std::unordered_map<int64_t, void*> pack{
      {kQ, at(qkv, 0)}, {kK, at(qkv, h)}, {kV, at(qkv, 2 * h)}, {kO, out}, {kStats, stats}};
  executed(stream, forward_graph.execute(handle.raw, pack, workspace), "forward");
}

void FusedAttention::Graphs::backward(const void* qkv, const void* out, const float* stats,
                                      const void* dout, void* dqkv, void* workspace,
                                      cudaStream_t s) {
  bind(s);
  const int64_t h = hidden;
  std::unordered_map<int64_t, void*> pack{
      {kQ, at(qkv, 0)},   {kK, at(qkv, h)},       {kV, at(qkv, 2 * h)},
      {kO, at(out, 0)},   {kStats, at(stats, 0)}, {kDO, at(dout, 0)},
      {kDQ, at(dqkv, 0)}, {kDK, at(dqkv, h)},     {kDV, at(dqkv, 2 * h)}};
  executed(stream, backward_graph.execute(handle.raw, pack, workspace), "backward");
}

#endif

std::string fused_attention_unavailable_reason(int bytes_per_element, int head_dim) {
  if (bytes_per_element == 2) return cudnn_unavailable_reason();
  if (std::string why = unusable_reason(); !why.empty()) return why;
  cudaDeviceProp prop{};
  if (const cudaError_t rc = bound_device_properties(prop); rc != cudaSuccess) {
    return std::string("cannot read the device's properties (") + cudaGetErrorString(rc) + ")";
  }
  if (prop.major < 8) {
    return "compute capability " + std::to_string(prop.major) + "." + std::to_string(prop.minor) +
           ": the fp32 flash attention's tensor-core mma needs 8.0 or later";
  }
  if (head_dim < 1 || head_dim > 128) return "";  // the attention rule's to refuse
  const int64_t need = flash_attention_shared_bytes(head_dim);
  if (static_cast<int64_t>(prop.sharedMemPerBlockOptin) < need) {
    return "the fp32 flash attention takes " + std::to_string(need / 1024) +
           " KiB of shared memory per block for head dimension " + std::to_string(head_dim) +
           ", this device allows " + std::to_string(prop.sharedMemPerBlockOptin / 1024);
  }
  return "";
}

struct FusedAttention::Kept {
  // The graphs' identity: a handle belongs to the device current when it
  // was made, and the graphs to the shape they were built for.
  struct Key {
    int device = 0;
    int64_t b = 0, a = 0, s = 0, d = 0;
    bool operator<(const Key& o) const {
      return std::tie(device, b, a, s, d) < std::tie(o.device, o.b, o.a, o.s, o.d);
    }
  };
  BuiltOnce<Key, Graphs> graphs;
};

FusedAttention::Kept& FusedAttention::kept() {
  // Never destroyed: the handles would be destroyed after the CUDA runtime
  // let go of the device at exit.
  static Kept& built = *new Kept;
  return built;
}

std::shared_ptr<FusedAttention::Graphs> FusedAttention::shared_graphs(const ModelSpec& spec,
                                                                      cudaStream_t stream) {
  // The graphs' strides are the spec's hidden size, the key's its head
  // dimension: one determines the other only where the heads divide it.
  PPB_CHECK(spec.heads > 0 && spec.hidden % spec.heads == 0,
            "fused attention: the heads must divide the hidden size");
  Kept::Key key;
  PPB_CUDA_CHECK(cudaGetDevice(&key.device));
  key.b = spec.micro_batch_size;
  key.a = spec.heads;
  key.s = spec.seq;
  key.d = spec.hidden / spec.heads;
  std::shared_ptr<Graphs> graphs =
      kept().graphs.get(key, [&] { return build_graphs(spec, stream); });
  graphs->bind(stream);
  return graphs;
}

int64_t FusedAttention::graphs_built() { return kept().graphs.builds(); }

std::string FusedAttention::build_or_why(const ModelSpec& spec, cudaStream_t stream,
                                         std::shared_ptr<Graphs>& out) {
  try {
    out = shared_graphs(spec, stream);
    return "";
  } catch (const BuildRefused& e) {
    return e.what();
  } catch (const UsageError&) {
    throw;
  } catch (const OutOfMemory&) {
    throw;
  } catch (const CaptureRefused&) {
    throw;
  } catch (const std::exception& e) {  // the frontend's own: loading its CUDA runtime, ...
    return e.what();
  }
}

std::string FusedAttention::refusal(const ModelSpec& spec) {
  const OwnedStream stream;
  std::shared_ptr<Graphs> graphs;
  const std::string why = build_or_why(spec, stream.get(), graphs);
  if (!why.empty()) return refusal_words(spec, why);
  graphs->unbind(stream.get());  // the graphs are kept: their handle outlives the trial's stream
  return "";
}

std::string fused_attention_refusal(const ModelSpec& spec) {
  if (spec.bytes_per_element != 2) return "";
  if (std::string why = cudnn_unavailable_reason(); !why.empty()) return why;
  return FusedAttention::refusal(spec);
}

FusedAttention::FusedAttention(const ModelSpec& spec, cudaStream_t stream,
                               int64_t modelled_workspace)
    : b_(spec.micro_batch_size),
      s_(spec.seq),
      heads_(spec.heads),
      d_(spec.hidden / spec.heads),
      stream_(stream) {
  if (spec.bytes_per_element == 2) {
    // The run asked cuDNN before it chose (fused_attention_refusal): a
    // refusal here is one the trial build did not meet.
    if (const std::string why = build_or_why(spec, stream, graphs_); !why.empty()) {
      throw UsageError("--attention: " + refusal_words(spec, why) +
                       "; --attention naive runs without it");
    }
    const int64_t most = std::max(forward_workspace(), backward_workspace());
    if (most > modelled_workspace) {
      log::warn(
          "fused attention: cuDNN's graphs ask %lld bytes of workspace, the memory model "
          "counts %lld",
          static_cast<long long>(most), static_cast<long long>(modelled_workspace));
    }
    return;
  }
  PPB_CHECK(spec.bytes_per_element == 4, "fused attention: storage must be fp32 or bf16");
  flash_attention_prepare(d_);
  if (backward_workspace() > modelled_workspace) {
    log::warn(
        "fused attention: the flash kernels take %lld bytes of workspace, the memory model "
        "counts %lld",
        static_cast<long long>(backward_workspace()), static_cast<long long>(modelled_workspace));
  }
}

FusedAttention::~FusedAttention() {
  // The kept graphs outlive this object's stream: their handle holds none.
  if (graphs_) graphs_->unbind(stream_);
}

int64_t FusedAttention::forward_workspace() const {
  return graphs_ ? graphs_->forward_workspace : 0;
}

int64_t FusedAttention::backward_workspace() const {
  // fp32: the softmax backward's row terms, one float per row and head.
  return graphs_ ? graphs_->backward_workspace : int64_t{4} * b_ * heads_ * s_;
}

void FusedAttention::forward(const void* qkv, void* out, float* stats, void* workspace) const {
  if (graphs_) {
    graphs_->forward(qkv, out, stats, workspace, stream_);
    return;
  }
  flash_attention_fwd(static_cast<const float*>(qkv), static_cast<float*>(out), stats, b_, s_,
                      heads_, d_, stream_);
}

void FusedAttention::backward(const void* qkv, const void* out, const float* stats,
                              const void* dout, void* dqkv, void* workspace) const {
  if (graphs_) {
    graphs_->backward(qkv, out, stats, dout, dqkv, workspace, stream_);
    return;
  }
  flash_attention_bwd(static_cast<const float*>(qkv), static_cast<const float*>(out), stats,
                      static_cast<const float*>(dout), static_cast<float*>(dqkv),
                      static_cast<float*>(workspace), b_, s_, heads_, d_, stream_);
}

}  // namespace ppb::cuda
