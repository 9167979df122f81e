// The cuda backend's training math: CpuChunk (cpu_model.hpp) on a GPU. The
// same units, the same boundary layouts (each element in the storage dtype
// instead of fp32), the same parameters (cpu::init_unit_params, uploaded),
// the same synthetic data (synthetic_tokens, uploaded), the same kept
// activations (Unit::activation_bytes of expand_units() for the dtype) and
// the same split backward. Every method only ENQUEUES work on the compute
// stream (host bookkeeping happens at once, in call order); loss(),
// gradients(), weights() and stale_compute_weights() synchronise the stream
// before they read back.
//
// Weights: fp32 master weights and fp32 gradients; with bf16 storage a bf16
// copy of the weights (refreshed by every SGD step) feeds the GEMMs and the
// kernels. Memory categories: the weights the kernels read are kParameters
// (the master itself in fp32; the bf16 copy in bf16, where the fp32 master
// counts as kOptimizerState, as mixed-precision accounting does), gradients
// kGradients, kept activations kActivations, stashed weight versions
// kWeightStash, temporaries kWorkspace (freed stream-ordered when the call
// that enqueued them returns).
//
// Static buffers (ChunkContext::static_buffers, for CUDA graphs of the
// actions): the buffers an action allocates (kept activations, held
// gradients, temporaries) are placed by a FirstFit. In the first step they
// come from the pool while an unbounded FirstFit records where they would
// go (the sizing pass); make_static_buffers() then takes one region of the
// pool of the size that step needed, and every later action's buffers are
// placed in it, at the same offsets wherever the step repeats the first's
// sequence. The tracker counts each placed buffer as it counted the pool's
// (the memory model is unchanged); the pool's figure holds the region and
// the two boundary-sized buffers actions are staged through
// (staged_in(), staged_out()).
// While recording (begin_recording), an action's host bookkeeping happens
// at once and its device work is recorded, not enqueued: the caller
// enqueues it eagerly, captures it into a graph, or replays the graph
// captured for the same pointers instead (graph_cache.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda/blas.hpp"
#include "cuda/device_pool.hpp"
#include "cuda/first_fit.hpp"
#include "cuda/fused_attention.hpp"
#include "cuda/kernels.hpp"
#include "ppb/exec/cpu_model.hpp"
#include "ppb/exec/microbatch_ledger.hpp"
#include "ppb/pipeline/model.hpp"

namespace ppb::cuda {

/// What a chunk computes with: the backend's compute stream, pool and cuBLAS handle.
struct ChunkContext {
  cudaStream_t stream = nullptr;
  DevicePool* pool = nullptr;
  Blas* blas = nullptr;
  Dtype dtype = Dtype::kFp32;
  /// Linear layers fold their bias (forward), bias + GeLU (fc1's forward)
  /// and bias gradient (weight pass) into the GEMM as cuBLASLt epilogues;
  /// where cuBLASLt refuses one (Blas::gemm_epilogue), or with false here,
  /// the bias, GeLU and column-reduction kernels compute them. Both paths
  /// hold the same buffers (the memory model does not tell them apart).
  bool gemm_epilogues = true;
  /// The attention unit's form (fused: cuDNN's, bf16 only; the run chose it).
  Attention attention = Attention::kNaive;
  /// Place the actions' buffers for CUDA graphs (the header's comment).
  bool static_buffers = false;
};

/// The device work of one action, recorded while CudaChunk records: what a
/// graph of it captures, and every device address that work reads or
/// writes (a graph captured with other addresses is not valid for it).
struct RecordedWork {
  std::vector<std::function<void()>> launches;  ///< in the order the action issued them
  std::vector<const void*> pointers;
  /// Non-empty: the work is not replay-safe, and why (it runs eagerly).
  std::string eager_reason;
  /// Enqueues the work (only device work: it may run more than once).
  void enqueue() const {
    for (const auto& f : launches) f();
  }
};

/// Storage bytes of a boundary / kept activation of one unit with elements
/// of `dtype` (the cpu layout with 4-byte elements scaled; the embedding's
/// int32 token ids stay 4 bytes each). Equal to expand_units() of a spec
/// whose bytes_per_element is dtype_bytes(dtype).
int64_t unit_boundary_bytes(const ModelSpec& spec, UnitKind kind, Dtype dtype);
/// (The fused attention's fp32 statistics are 4 bytes each too.)
int64_t unit_activation_bytes(const ModelSpec& spec, UnitKind kind, Dtype dtype,
                              Attention attention = Attention::kNaive);

class CudaChunk {
 public:
  /// REQUIRES: as CpuChunk; units == expand_units(spec) with
  /// spec.bytes_per_element == dtype_bytes(ctx.dtype) (checked).
  /// Everything it allocates counts in the tracker of ctx.pool.
  CudaChunk(const ModelSpec& spec, const std::vector<Unit>& units, UnitRange range,
            ChunkContext ctx, CpuModelOptions options);
  ~CudaChunk();
  CudaChunk(const CudaChunk&) = delete;
  CudaChunk& operator=(const CudaChunk&) = delete;

  int64_t input_bytes() const { return input_bytes_; }
  int64_t output_bytes() const;
  /// Sum of the units' activation_bytes: what one micro-batch keeps.
  int64_t activation_bytes() const;

  /// As CpuChunk, with device pointers, enqueued on the stream.
  void forward(int64_t mb, const std::byte* input, std::byte* output);
  void backward_input(int64_t mb, const std::byte* grad_output, std::byte* grad_input);
  void backward_weight(int64_t mb);
  void backward(int64_t mb, const std::byte* grad_output, std::byte* grad_input);
  /// How sgd_step enqueues its update kernels: calls its argument, which
  /// enqueues them (directly, or under a CUDA-graph capture).
  using KernelRunner = std::function<void(const std::function<void()>&)>;
  /// SGD on every unit (enqueued), stashing the current weights first when a
  /// micro-batch in flight still uses them (weight stashing). The update
  /// kernels go through `run` when given: they read and write only the
  /// chunk's own weight and gradient buffers (fixed for its life), allocate
  /// nothing and keep no host state, so one graph of them replays every step.
  void sgd_step(float lr, const KernelRunner& run = {});

  /// Mean token cross-entropy of mb. Synchronises the stream.
  double loss(int64_t mb) const;
  /// The fp32 gradients per unit, copied to the host. Synchronises the stream.
  std::vector<std::vector<float>> gradients() const;
  /// The fp32 master weights per unit (the live ones, never a stash),
  /// copied to the host. Synchronises the stream.
  std::vector<std::vector<float>> weights() const;
  /// bf16: elements of the compute copy that differ from the master
  /// converted to bf16 on the device as the SGD kernel's refresh converts
  /// it (a temporary of each unit's size, kWorkspace); 0 with fp32 (the
  /// kernels read the master). Synchronises the stream.
  int64_t stale_compute_weights() const;
  /// The fp32 gradients of the units with parameters, in DEVICE memory (for
  /// the data-parallel all-reduce, once the backwards that write them completed).
  std::vector<std::span<float>> gradient_buffers();
  int weight_version() const { return ledger_.version(); }
  int weight_version_of(int64_t mb) const;

  /// True once the actions' buffers are placed in the static region.
  bool static_buffers() const { return placement_ != nullptr; }
  /// With static buffers: where a recorded action reads its `in` and writes
  /// its `out` (each max(input_bytes, output_bytes) long, not counted in the
  /// tracker). The executor's message buffers move from step to step; the
  /// caller copies them in and out around the recorded work, so that its
  /// graph keeps its addresses. Null where the chunk has no boundary.
  std::byte* staged_in() const { return staged_[0]; }
  std::byte* staged_out() const { return staged_[1]; }
  /// True while the first step sizes the static buffers (they will be).
  bool sizing() const { return ctx_.static_buffers && !placement_; }
  /// Why the actions' buffers are not static, while they are not.
  const std::string& not_static_reason() const { return not_static_; }
  /// Between steps, with the stream idle: takes the static region the
  /// sizing pass measured (ChunkContext::static_buffers; once). A region
  /// the pool cannot give leaves the buffers in the pool, with the reason.
  void make_static_buffers();
  /// Records the device work of the next action instead of enqueuing it.
  /// REQUIRES: static_buffers().
  void begin_recording();
  /// Ends the recording (also after the action threw) and returns it.
  RecordedWork end_recording();
  /// Frees, stream-ordered, the pool's buffers the recorded action dropped:
  /// call it once its work is enqueued.
  void release_deferred();

 private:
  struct UnitState;
  using Ledger = MicrobatchLedger<TrackedBuffer>;  // stashes: per unit, the compute weights
  using Microbatch = Ledger::State;

  // An action's buffer: placed (static buffers), else from the pool.
  TrackedBuffer device(int64_t bytes, MemCategory category);
  // A buffer from the pool, never placed (a weight stash, a loss, and
  // device()'s pool buffers); freed after the recorded work when dropped
  // while recording.
  TrackedBuffer lasting(int64_t bytes, MemCategory category);
  static void release_placed(void* context, std::byte* data);
  static void release_pooled(void* context, std::byte* data);
  // Enqueues device work, or records it while recording.
  void launch(std::function<void()> work);
  // Adds a device address the recorded work uses to its graph's key.
  void uses(const void* p);
  // Host copies of one fp32 buffer of every unit, stream-ordered after the
  // work enqueued so far (synchronises the stream).
  std::vector<std::vector<float>> to_host(TrackedBuffer UnitState::*buffer) const;
  // Copies n storage elements (stream-ordered).
  void copy(void* dst, const void* src, int64_t elements);
  // What upload_tokens copies: t int32 (tokens, labels) or 2t (the
  // tokens' embedding_chains).
  enum class HostIds : uint8_t { kTokens, kLabels, kChains };
  // dst (device, int32) <- `what` of mb, from pinned host memory made once
  // per micro-batch (a graph can copy from it; the tokens of mb are the
  // same every step), pageable where it cannot be pinned.
  void upload_tokens(int64_t mb, HostIds what, int32_t* dst);
  const void* weights(int local_unit, int version) const;  // the compute copy
  // One unit's forward; `resid` is the residual stream it reads (null where
  // none), `last` says its output leaves the chunk. Returns the residual
  // stream after it (null where none).
  const void* forward_unit(size_t i, Microbatch& state, const void* in, const void* resid,
                           void* out, bool last);
  void attention_forward(const void* qkv, void* probs, void* ctx);
  void attention_backward(const void* qkv, const void* probs, const void* dctx, void* dqkv);
  // Their device work (`ds`: the backward's s x s workspace per head).
  void enqueue_attention_forward(const void* qkv, void* probs, void* ctx) const;
  void enqueue_attention_backward(const void* qkv, const void* probs, const void* dctx, void* dqkv,
                                  void* ds) const;
  void linear_forward(const void* x, int in, const void* w, int out, void* y, const void* add,
                      void* gelu_y);
  // Returns the LayerNorm row statistics it computed (fp32 mean[t], rstd[t];
  // empty for other units), which backward_unit_weight reads in a full
  // backward; given none (null), it recomputes them.
  // `resid_grad` is the residual's gradient the unit passes down or adds
  // (null where it has none); inside the chunk it travels by pointer, and
  // only the chunk's input gradient carries it.
  TrackedBuffer backward_unit_input(size_t i, Microbatch& state, const void* grad_out,
                                    const void* resid_grad, void* grad_in, bool keep_for_weight);
  void backward_unit_weight(size_t i, Microbatch& state, const void* grad_out,
                            const float* row_stats);
  void run_backward(Microbatch& state, const std::byte* grad_output, std::byte* grad_input,
                    bool split);

  ModelSpec spec_;
  std::vector<Unit> units_;
  UnitRange range_;
  int64_t input_bytes_ = 0;
  ChunkContext ctx_;
  CpuModelOptions options_;
  // Static buffers (the header's comment). Declared before everything that
  // holds buffers placed or sized here, so that they outlive them.
  std::string not_static_;
  FirstFit sizing_;                                      // the sizing pass
  std::unordered_map<const std::byte*, int64_t> sized_;  // pool buffer -> its sizing offset
  std::byte* region_ = nullptr;                          // the static region (from the pool)
  std::byte* staged_[2] = {nullptr, nullptr};            // staged_in(), staged_out()
  std::unique_ptr<FirstFit> placement_;                  // in region_
  bool recording_ = false;
  RecordedWork recorded_;
  std::vector<std::byte*> deferred_;  // pool buffers dropped while recording
  std::vector<std::unique_ptr<UnitState>> state_;
  Ledger ledger_;                            // in-flight micro-batches, pass order, weight versions
  std::map<int64_t, TrackedBuffer> losses_;  // mb -> device double: summed token loss
  std::unique_ptr<FusedAttention> fused_;    // the chunk's cuDNN graphs (fused attention only)
  struct HostTokens {
    int32_t* ids = nullptr;  // the tokens, the labels, then their chains (4t)
    bool pinned = false;     // else pageable (std::malloc)
  };
  std::map<int64_t, HostTokens> tokens_;  // per micro-batch
};

}  // namespace ppb::cuda
