#include "cuda/cuda_chunk.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cpu/init.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/exec/unit_flow.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::cuda {
namespace {

float* f32(TrackedBuffer& b) { return b.as<float>(); }

}  // namespace

int64_t unit_boundary_bytes(const ModelSpec& spec, UnitKind kind, Dtype dtype) {
  return unit_flow(spec, kind).boundary() * dtype_bytes(dtype);
}

int64_t unit_activation_bytes(const ModelSpec& spec, UnitKind kind, Dtype dtype,
                              Attention attention) {
  const int64_t element = kind == UnitKind::kEmbedding ? 4 : dtype_bytes(dtype);  // int32 ids
  const UnitFlow flow = unit_flow(spec, kind, attention);
  return flow.kept() * element + flow.kept_f32 * 4;
}

struct CudaChunk::UnitState {
  UnitKind kind = UnitKind::kEmbedding;
  int64_t param_count = 0;
  TrackedBuffer master;  // fp32
  TrackedBuffer copy;    // storage dtype (bf16 only; fp32 computes on the master)
  TrackedBuffer grads;   // fp32
};

CudaChunk::CudaChunk(const ModelSpec& spec, const std::vector<Unit>& units, UnitRange range,
                     ChunkContext ctx, CpuModelOptions options)
    : spec_(spec), range_(range), ctx_(ctx), options_(options), ledger_(options.weight_stashing) {
  PPB_CHECK(
      range.begin >= 0 && range.begin < range.end && range.end <= static_cast<int>(units.size()),
      "unit range out of bounds");
  PPB_CHECK(spec.hidden % spec.heads == 0, "hidden must be a multiple of heads");
  PPB_CHECK(spec.bytes_per_element == dtype_bytes(ctx.dtype),
            "the model's bytes_per_element differs from the cuda backend's dtype");
  const bool bf16 = ctx.dtype == Dtype::kBf16;
  for (int g = range.begin; g < range.end; ++g) {
    const Unit& u = units[static_cast<size_t>(g)];
    const std::string where = "unit " + std::to_string(g) + " (" + u.name + "): ";
    PPB_CHECK(u.activation_bytes == unit_activation_bytes(spec, u.kind, ctx.dtype, ctx.attention),
              where + "activation_bytes differ from the cuda backend's layout");
    PPB_CHECK(u.boundary_bytes == unit_boundary_bytes(spec, u.kind, ctx.dtype),
              where + "boundary_bytes differ from the cuda backend's layout");
    PPB_CHECK(g == range.begin || unit_flow(spec, u.kind, ctx.attention).keeps_input,
              where + "keeps no input, but the unit before writes its output there");
    units_.push_back(u);
    auto state = std::make_unique<UnitState>();
    state->kind = u.kind;
    state->param_count = unit_param_count(spec, u.kind);
    const int64_t n = state->param_count;
    // The same initial weights as the cpu backend: drawn on the host, uploaded.
    std::vector<float> host(static_cast<size_t>(n));
    cpu::init_unit_params(spec, u.kind, options.seed, g, std::span<float>(host));
    state->master = ctx.pool->stream_ordered(
        n * 4, bf16 ? MemCategory::kOptimizerState : MemCategory::kParameters);
    state->grads = ctx.pool->stream_ordered(n * 4, MemCategory::kGradients);
    if (n > 0) {
      PPB_CUDA_CHECK(cudaMemcpyAsync(state->master.data(), host.data(), static_cast<size_t>(n) * 4,
                                     cudaMemcpyHostToDevice, ctx.stream));
      PPB_CUDA_CHECK(
          cudaMemsetAsync(state->grads.data(), 0, static_cast<size_t>(n) * 4, ctx.stream));
    }
    if (bf16) {
      state->copy = ctx.pool->stream_ordered(n * 2, MemCategory::kParameters);
      to_storage(ctx.dtype, f32(state->master), state->copy.data(), n, ctx.stream);
    }
    state_.push_back(std::move(state));
    if (u.kind == UnitKind::kAttention && ctx.attention == Attention::kFused && !fused_) {
      fused_ = std::make_unique<FusedAttention>(spec, ctx.stream, u.backward_scratch_bytes);
    }
  }
  if (range.begin > 0) {
    input_bytes_ =
        unit_boundary_bytes(spec, units[static_cast<size_t>(range.begin - 1)].kind, ctx.dtype);
    PPB_CHECK(input_bytes_ == units[static_cast<size_t>(range.begin - 1)].boundary_bytes,
              "boundary_bytes of the unit before the chunk differ from the cuda backend's layout");
  }
  // `host` above is pageable: the uploads have consumed it when they return,
  // but the weights must be in place before the first action reads them.
  PPB_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  if (!ctx.static_buffers) not_static_ = "CUDA graphs are off or cannot be captured";
}

CudaChunk::~CudaChunk() {
  // Freed stream-ordered after the work that used it; the buffers still
  // placed in it (members declared after the placement) only give their
  // span back to it.
  for (std::byte* p : {region_, staged_[0], staged_[1]}) {
    if (p != nullptr) ctx_.pool->free(p);
  }
  if (!tokens_.empty()) (void)cudaStreamSynchronize(ctx_.stream);  // no copy still reads them
  for (auto& [mb, host] : tokens_) {
    if (host.pinned) {
      (void)cudaFreeHost(host.ids);
    } else {
      std::free(host.ids);
    }
  }
}

int64_t CudaChunk::output_bytes() const { return units_.back().boundary_bytes; }

int64_t CudaChunk::activation_bytes() const {
  int64_t sum = 0;
  for (const Unit& u : units_) sum += u.activation_bytes;
  return sum;
}

TrackedBuffer CudaChunk::device(int64_t bytes, MemCategory category) {
  if (bytes == 0) return ctx_.pool->stream_ordered(0, category);
  if (placement_) {
    if (const std::optional<int64_t> at = placement_->allocate(bytes)) {
      std::byte* p = region_ + *at;
      uses(p);
      return TrackedBuffer(ctx_.pool->tracker(), category, bytes, p, &release_placed, this);
    }
    if (recording_ && recorded_.eager_reason.empty()) {
      recorded_.eager_reason =
          "a buffer did not fit the chunk's static buffers (the step needs "
          "more than the first step did)";
    }
  }
  TrackedBuffer b = lasting(bytes, category);
  if (ctx_.static_buffers && !placement_) sized_.emplace(b.data(), *sizing_.allocate(bytes));
  uses(b.data());
  return b;
}

TrackedBuffer CudaChunk::lasting(int64_t bytes, MemCategory category) {
  if (bytes == 0) return ctx_.pool->stream_ordered(0, category);
  return TrackedBuffer(ctx_.pool->tracker(), category, bytes, ctx_.pool->allocate(bytes),
                       &release_pooled, this);
}

void CudaChunk::release_placed(void* context, std::byte* data) {
  auto* self = static_cast<CudaChunk*>(context);
  self->placement_->release(data - self->region_);
}

void CudaChunk::release_pooled(void* context, std::byte* data) {
  auto* self = static_cast<CudaChunk*>(context);
  if (const auto it = self->sized_.find(data); it != self->sized_.end()) {
    self->sizing_.release(it->second);
    self->sized_.erase(it);
  }
  // While recording, the recorded work (enqueued later) may still use it.
  if (self->recording_) {
    self->deferred_.push_back(data);
  } else {
    self->ctx_.pool->free(data);
  }
}

void CudaChunk::launch(std::function<void()> work) {
  if (recording_) {
    recorded_.launches.push_back(std::move(work));
  } else {
    work();
  }
}

void CudaChunk::uses(const void* p) {
  if (recording_ && p != nullptr) recorded_.pointers.push_back(p);
}

void CudaChunk::make_static_buffers() {
  if (!ctx_.static_buffers || placement_ || sizing_.high_water() == 0) return;
  const int64_t bytes = sizing_.high_water();
  const int64_t boundary = std::max(input_bytes(), output_bytes());
  try {
    region_ = ctx_.pool->allocate(bytes);
    for (std::byte*& p : staged_) {
      if (boundary > 0) p = ctx_.pool->allocate(boundary);
    }
  } catch (const OutOfMemory& e) {
    for (std::byte** p : {&region_, &staged_[0], &staged_[1]}) {
      if (*p != nullptr) ctx_.pool->free(*p);
      *p = nullptr;
    }
    ctx_.static_buffers = false;
    not_static_ = "no room for the chunk's static buffers (" +
                  std::to_string(bytes + 2 * boundary) + " bytes): " + e.what();
    return;
  }
  placement_ = std::make_unique<FirstFit>(bytes);
  not_static_.clear();
}

void CudaChunk::begin_recording() {
  PPB_CHECK(placement_ && !recording_, "begin_recording without static buffers, or twice");
  recording_ = true;
  recorded_ = RecordedWork();
}

RecordedWork CudaChunk::end_recording() {
  recording_ = false;
  return std::exchange(recorded_, RecordedWork());
}

void CudaChunk::release_deferred() {
  for (std::byte* p : deferred_) ctx_.pool->free(p);
  deferred_.clear();
}

void CudaChunk::copy(void* dst, const void* src, int64_t elements) {
  if (elements == 0) return;
  const auto bytes = static_cast<size_t>(elements * dtype_bytes(ctx_.dtype));
  const cudaStream_t st = ctx_.stream;
  launch([=] { PPB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st)); });
}

void CudaChunk::upload_tokens(int64_t mb, HostIds what, int32_t* dst) {
  const auto t = static_cast<size_t>(spec_.tokens());
  HostTokens& host = tokens_[mb];
  if (host.ids == nullptr) {
    const size_t bytes = 4 * t * sizeof(int32_t);
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) == cudaSuccess) {
      host.pinned = true;
    } else {
      // Host memory that cannot be pinned: pageable, which a graph cannot
      // copy from (its capture is refused and the action runs eagerly).
      (void)cudaGetLastError();
      p = std::malloc(bytes);
      PPB_CHECK(p != nullptr, "out of host memory for a micro-batch's tokens");
    }
    host.ids = static_cast<int32_t*>(p);
    synthetic_tokens(spec_, options_.seed, mb, std::span<int32_t>(host.ids, t),
                     std::span<int32_t>(host.ids + t, t));
    embedding_chains(host.ids, static_cast<int64_t>(t), host.ids + 2 * t);
  }
  const int32_t* src = host.ids + (what == HostIds::kTokens   ? 0
                                   : what == HostIds::kLabels ? t
                                                              : 2 * t);
  const size_t bytes = (what == HostIds::kChains ? 2 : 1) * t * sizeof(int32_t);
  uses(src);
  const cudaStream_t st = ctx_.stream;
  launch([=] { PPB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, st)); });
}

const void* CudaChunk::weights(int local_unit, int version) const {
  if (const Ledger::Stash* stash = ledger_.stash_for(version)) {
    return (*stash)[static_cast<size_t>(local_unit)].data();
  }
  const UnitState& u = *state_[static_cast<size_t>(local_unit)];
  return ctx_.dtype == Dtype::kFp32 ? u.master.data() : u.copy.data();
}

// y[t,out] = x[t,in] w[in,out] + bias (bias at w + in*out), plus add[t,out]
// when add is not null (a residual); with gelu_y, also gelu_y = gelu(y)
// (y is then the pre-activation fc1_gelu keeps).
void CudaChunk::linear_forward(const void* x, int in, const void* w, int out, void* y,
                               const void* add, void* gelu_y) {
  const Dtype dt = ctx_.dtype;
  const int64_t t = spec_.tokens();
  const int ti = static_cast<int>(t);
  void* bias = const_cast<void*>(offset(w, dt, int64_t{in} * out));
  Blas* blas = ctx_.blas;
  const cudaStream_t st = ctx_.stream;
  const auto unfused = [=] {
    bias_fill(dt, bias, add, t, out, y, st);
    blas->gemm(false, false, ti, out, in, 1.0f, {x, in}, {w, out}, dt, 1.0f, y, out, dt);
    if (gelu_y != nullptr) gelu_fwd(dt, y, gelu_y, t * out, st);
  };
  if (ctx_.gemm_epilogues) {
    const EpilogueArgs e = gelu_y != nullptr ? EpilogueArgs{Epilogue::kGeluAuxBias, bias, y}
                                             : EpilogueArgs{Epilogue::kBias, bias, nullptr};
    if (std::function<bool()> gemm = blas->plan_epilogue(
            false, false, ti, out, in, {x, in}, {w, out}, dt, add != nullptr ? 1.0f : 0.0f,
            add != nullptr ? add : y, gelu_y != nullptr ? gelu_y : y, out, dt, e)) {
      launch([=, gemm = std::move(gemm)] {
        if (!gemm()) unfused();  // cuBLASLt refused at run time
      });
      return;
    }
  }
  launch(unfused);
}

// Per sample b: scores = scale Q K^T per head (batched over heads), causal
// softmax in place, context = P V. Head j of a row is at columns j*d.. of
// q, k and v (k at +h, v at +2h in the 3h-wide qkv rows).
void CudaChunk::attention_forward(const void* qkv, void* probs, void* ctx) {
  launch([=, this] { enqueue_attention_forward(qkv, probs, ctx); });
}

void CudaChunk::enqueue_attention_forward(const void* qkv, void* probs, void* ctx) const {
  const Dtype dt = ctx_.dtype;
  const int s = spec_.seq;
  const int h = spec_.hidden;
  const int a = spec_.heads;
  const int d = h / a;
  const int ld = 3 * h;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t ss = int64_t{s} * s;
  for (int b = 0; b < spec_.micro_batch_size; ++b) {
    const void* q = offset(qkv, dt, int64_t{b} * s * ld);
    const void* k = offset(q, dt, h);
    void* p = offset(probs, dt, int64_t{b} * a * ss);
    ctx_.blas->gemm_batched(false, true, s, s, d, scale, {q, ld, d}, {k, ld, d}, dt, 0.0f, p, s, ss,
                            dt, a);
  }
  attention_softmax_fwd(dt, probs, s, int64_t{spec_.micro_batch_size} * a * s, ctx_.stream);
  for (int b = 0; b < spec_.micro_batch_size; ++b) {
    const void* v = offset(qkv, dt, int64_t{b} * s * ld + int64_t{2} * h);
    const void* p = offset(probs, dt, int64_t{b} * a * ss);
    void* o = offset(ctx, dt, int64_t{b} * s * h);
    ctx_.blas->gemm_batched(false, false, s, d, s, 1.0f, {p, s, ss}, {v, ld, d}, dt, 0.0f, o, h, d,
                            dt, a);
  }
}

// dP = dO V^T, dV = P^T dO, dS = P (dP - rowsum(P dP)), dQ = scale dS K,
// dK = scale dS^T Q; per sample, batched over heads, dS in a workspace.
void CudaChunk::attention_backward(const void* qkv, const void* probs, const void* dctx,
                                   void* dqkv) {
  TrackedBuffer ds = device(int64_t{spec_.heads} * spec_.seq * spec_.seq * dtype_bytes(ctx_.dtype),
                            MemCategory::kWorkspace);
  launch([=, this, ds = ds.data()] { enqueue_attention_backward(qkv, probs, dctx, dqkv, ds); });
}

void CudaChunk::enqueue_attention_backward(const void* qkv, const void* probs, const void* dctx,
                                           void* dqkv, void* ds) const {
  const Dtype dt = ctx_.dtype;
  const int s = spec_.seq;
  const int h = spec_.hidden;
  const int a = spec_.heads;
  const int d = h / a;
  const int ld = 3 * h;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t ss = int64_t{s} * s;
  for (int b = 0; b < spec_.micro_batch_size; ++b) {
    const int64_t row0 = int64_t{b} * s * ld;
    const void* q = offset(qkv, dt, row0);
    const void* k = offset(q, dt, h);
    const void* v = offset(q, dt, int64_t{2} * h);
    void* dq = offset(dqkv, dt, row0);
    void* dk = offset(dq, dt, h);
    void* dv = offset(dq, dt, int64_t{2} * h);
    const void* p = offset(probs, dt, int64_t{b} * a * ss);
    const void* dout = offset(dctx, dt, int64_t{b} * s * h);
    Blas& blas = *ctx_.blas;
    blas.gemm_batched(false, true, s, s, d, 1.0f, {dout, h, d}, {v, ld, d}, dt, 0.0f, ds, s, ss, dt,
                      a);
    blas.gemm_batched(true, false, s, d, s, 1.0f, {p, s, ss}, {dout, h, d}, dt, 0.0f, dv, ld, d, dt,
                      a);
    attention_softmax_bwd(dt, p, ds, s, int64_t{a} * s, ctx_.stream);
    blas.gemm_batched(false, false, s, d, s, scale, {ds, s, ss}, {k, ld, d}, dt, 0.0f, dq, ld, d,
                      dt, a);
    blas.gemm_batched(true, false, s, d, s, scale, {ds, s, ss}, {q, ld, d}, dt, 0.0f, dk, ld, d, dt,
                      a);
  }
}

void CudaChunk::forward(int64_t mb, const std::byte* input, std::byte* output) {
  Microbatch state = ledger_.start_forward(mb, units_.size());
  PPB_CHECK((input != nullptr) == (input_bytes() > 0),
            "forward: input must be given iff the chunk has one");
  PPB_CHECK((output != nullptr) == (output_bytes() > 0),
            "forward: output must be given iff the chunk has one");
  uses(input);
  uses(output);
  const void* in = input;
  // Inside the chunk the residual stream travels as a pointer, not in the
  // boundaries: into the chunk's input, or into the kept input of the
  // LayerNorm that began it (both outlive the forward). Only the chunk's
  // output carries it.
  const void* resid = nullptr;
  if (const UnitFlow first = unit_flow(spec_, units_[0].kind); first.takes_residual()) {
    resid = offset(input, ctx_.dtype, first.in);
  }
  // Each unit after the first receives its input in place: the unit before
  // writes its output into the start of the next unit's kept activations
  // (allocated before it runs; model.hpp), so no boundary inside the chunk
  // is workspace and no input is copied.
  state.kept[0] = device(units_[0].activation_bytes, MemCategory::kActivations);
  for (size_t i = 0; i < units_.size(); ++i) {
    const bool last = i + 1 == units_.size();
    void* out = output;
    if (!last) {
      state.kept[i + 1] = device(units_[i + 1].activation_bytes, MemCategory::kActivations);
      out = state.kept[i + 1].data();
    }
    resid = forward_unit(i, state, in, resid, out, last);
    in = out;
  }
  ledger_.admit(std::move(state));
}

const void* CudaChunk::forward_unit(size_t i, Microbatch& state, const void* in, const void* resid,
                                    void* out, bool last) {
  const Dtype dt = ctx_.dtype;
  const cudaStream_t st = ctx_.stream;
  const int64_t t = spec_.tokens();
  const int h = spec_.hidden;
  const int f = spec_.ffn_mult * spec_.hidden;
  const int v = spec_.padded_vocab();  // the head's and embedding's rows
  const UnitKind kind = units_[i].kind;
  void* kept = state.kept[i].data();
  const void* w = weights(static_cast<int>(i), state.version);
  uses(w);
  // The unit's data flow (unit_flow.hpp). After the chunk's first unit the
  // input is already in kept; the first unit's is copied there (a
  // LayerNorm's by its kernel, in its one pass, which also writes the
  // residual it begins at the chunk's end). The residual a unit adds is the
  // bias kernel's addend; the rest is copied here.
  const UnitFlow flow = unit_flow(spec_, kind, ctx_.attention);
  PPB_CHECK(!flow.takes_residual() || resid != nullptr, "forward: a unit without its residual");
  const bool norm = flow.residual == Residual::kBegin || kind == UnitKind::kFinalNorm;
  const bool in_place = i > 0;  // the unit before wrote its input into kept (forward)
  if (flow.keeps_input && !norm && !in_place) copy(kept, in, flow.in);
  void* extra = offset(kept, dt, flow.extra_offset());
  uses(kept);
  uses(resid);
  if (last && flow.residual == Residual::kCarry) copy(offset(out, dt, flow.out), resid, flow.resid);
  const void* add = flow.residual == Residual::kAdd ? resid : nullptr;
  switch (kind) {
    case UnitKind::kEmbedding: {
      auto* tokens = static_cast<int32_t*>(kept);
      upload_tokens(state.mb, HostIds::kTokens, tokens);
      const int seq = spec_.seq;
      launch(
          [=] { embedding_fwd(dt, tokens, t, seq, h, w, offset(w, dt, int64_t{v} * h), out, st); });
      break;
    }
    case UnitKind::kLayerNorm1:
    case UnitKind::kLayerNorm2:
    case UnitKind::kFinalNorm: {
      void* passed =
          last && flow.residual == Residual::kBegin ? offset(out, dt, flow.out) : nullptr;
      void* kept_x = in_place ? nullptr : kept;
      launch([=] {
        layernorm_fwd(dt, in, w, offset(w, dt, h), t, h, out, kept_x, extra, passed, st);
      });
      break;
    }
    case UnitKind::kQkv:
      linear_forward(in, h, w, 3 * h, out, nullptr, nullptr);
      break;
    case UnitKind::kAttention:
      if (fused_) {
        // Kept: qkv, then the output (the backward reads it), then the
        // fp32 statistics; the output is copied on to the boundary.
        TrackedBuffer workspace = device(fused_->forward_workspace(), MemCategory::kWorkspace);
        auto* stats = static_cast<float*>(offset(extra, dt, flow.kept_extra));
        launch([=, this, ws = workspace.data()] { fused_->forward(kept, extra, stats, ws); });
        copy(out, extra, flow.out);
      } else {
        attention_forward(kept, extra, out);
      }
      break;
    case UnitKind::kAttnOut:
      linear_forward(in, h, w, h, out, add, nullptr);
      break;
    case UnitKind::kFc1Gelu:
      linear_forward(in, h, w, f, extra, nullptr, out);
      break;
    case UnitKind::kFc2:
      linear_forward(in, f, w, h, out, add, nullptr);
      break;
    case UnitKind::kHead: {
      Blas* blas = ctx_.blas;
      launch([=] {
        blas->gemm(false, false, static_cast<int>(t), v, h, 1.0f, {in, h}, {w, v}, dt, 0.0f, extra,
                   v, dt);
      });
      TrackedBuffer labels = device(t * 4, MemCategory::kWorkspace);
      upload_tokens(state.mb, HostIds::kLabels, labels.as<int32_t>());
      TrackedBuffer row_loss = device(t * 8, MemCategory::kWorkspace);
      // The micro-batch's loss lives with the chunk (read by loss()), not
      // with the action: from the pool, once per micro-batch.
      TrackedBuffer& slot = losses_[state.mb];
      if (slot.empty()) slot = lasting(8, MemCategory::kWorkspace);
      uses(slot.data());
      const int vocab = spec_.vocab;
      launch([=, labels = labels.as<int32_t>(), row_loss = row_loss.as<double>(),
              sum = slot.as<double>()] {
        cross_entropy_fwd(dt, extra, labels, t, vocab, v, row_loss, st);
        loss_sum(row_loss, t, sum, st);
      });
      break;
    }
  }
  switch (flow.residual) {
    case Residual::kBegin:
      return kept;  // the LayerNorm's kept input
    case Residual::kCarry:
      return resid;
    case Residual::kNone:
    case Residual::kAdd:
      return nullptr;
  }
  return nullptr;
}

TrackedBuffer CudaChunk::backward_unit_input(size_t i, Microbatch& state, const void* grad_out,
                                             const void* resid_grad, void* grad_in,
                                             bool keep_for_weight) {
  const Dtype dt = ctx_.dtype;
  const cudaStream_t st = ctx_.stream;
  const int64_t t = spec_.tokens();
  const int h = spec_.hidden;
  const int f = spec_.ffn_mult * spec_.hidden;
  const int v = spec_.padded_vocab();  // the head's and embedding's rows
  const int ti = static_cast<int>(t);
  const int64_t tf = t * f;
  const UnitKind kind = units_[i].kind;
  void* kept = state.kept[i].data();
  const void* w = weights(static_cast<int>(i), state.version);
  uses(kept);
  uses(w);
  uses(grad_out);
  uses(resid_grad);
  uses(grad_in);
  Blas* blas = ctx_.blas;
  TrackedBuffer row_stats;  // LayerNorm: fp32 mean[t], rstd[t]
  // The unit's data flow (unit_flow.hpp): the residual's gradient passes
  // back beside the input gradient (it is the output gradient itself where
  // the unit added the residual), or is the LayerNorm kernel's addend; units
  // with weights keep the gradient of their output for backward_weight
  // (split form only; the full backward uses grad_out directly).
  const UnitFlow flow = unit_flow(spec_, kind, ctx_.attention);
  if (flow.takes_residual() && i == 0) copy(offset(grad_in, dt, flow.in), resid_grad, flow.resid);
  // (Inside the chunk run_backward gave it the buffer its output gradient
  // arrived in; the chunk's output gradient is copied.)
  if (keep_for_weight && flow.held_gradient > 0 && state.pending[i].empty()) {
    state.pending[i] = device(flow.held_gradient * dtype_bytes(dt), MemCategory::kActivations);
    copy(state.pending[i].data(), grad_out, flow.held_gradient);
  }
  void* extra = offset(kept, dt, flow.extra_offset());
  switch (kind) {
    case UnitKind::kEmbedding:
      break;
    case UnitKind::kLayerNorm1:
    case UnitKind::kLayerNorm2:
    case UnitKind::kFinalNorm: {
      const void* add = flow.residual == Residual::kBegin ? resid_grad : nullptr;
      // The row statistics come out of the same pass, for the weight gradient.
      row_stats = device(2 * t * 4, MemCategory::kWorkspace);
      launch([=, stats = f32(row_stats)] {
        layernorm_bwd_input(dt, grad_out, kept, w, add, t, h, grad_in, stats, stats + t, st);
      });
      break;
    }
    case UnitKind::kQkv:
      launch([=] {
        blas->gemm(false, true, ti, h, 3 * h, 1.0f, {grad_out, 3 * h}, {w, 3 * h}, dt, 0.0f,
                   grad_in, h, dt);
      });
      break;
    case UnitKind::kAttention:
      if (fused_) {
        TrackedBuffer workspace = device(fused_->backward_workspace(), MemCategory::kWorkspace);
        const auto* stats = static_cast<const float*>(offset(extra, dt, flow.kept_extra));
        launch([=, this, ws = workspace.data()] {
          fused_->backward(kept, extra, stats, grad_out, grad_in, ws);
        });
      } else {
        attention_backward(kept, extra, grad_out, grad_in);
      }
      state.kept[i] = TrackedBuffer();  // no weights: nothing of it is needed any more
      break;
    case UnitKind::kAttnOut:
      launch([=] {
        blas->gemm(false, true, ti, h, h, 1.0f, {grad_out, h}, {w, h}, dt, 0.0f, grad_in, h, dt);
      });
      break;
    case UnitKind::kFc1Gelu:
      launch([=] {
        gelu_bwd(dt, extra, grad_out, extra, tf, st);  // pre-activation -> its gradient, in place
        blas->gemm(false, true, ti, h, f, 1.0f, {extra, f}, {w, f}, dt, 0.0f, grad_in, h, dt);
      });
      break;
    case UnitKind::kFc2:
      launch([=] {
        blas->gemm(false, true, ti, f, h, 1.0f, {grad_out, h}, {w, h}, dt, 0.0f, grad_in, f, dt);
      });
      break;
    case UnitKind::kHead: {
      TrackedBuffer labels = device(t * 4, MemCategory::kWorkspace);
      upload_tokens(state.mb, HostIds::kLabels, labels.as<int32_t>());
      const int vocab = spec_.vocab;
      const float scale = options_.loss_scale / static_cast<float>(t);
      launch([=, labels = labels.as<int32_t>()] {
        // probabilities -> logits gradient, in place
        cross_entropy_bwd(dt, extra, labels, t, vocab, v, scale, st);
        blas->gemm(false, true, ti, h, v, 1.0f, {extra, v}, {w, v}, dt, 0.0f, grad_in, h, dt);
      });
      break;
    }
  }
  return row_stats;
}

void CudaChunk::backward_unit_weight(size_t i, Microbatch& state, const void* grad_out,
                                     const float* row_stats) {
  const Dtype dt = ctx_.dtype;
  const cudaStream_t st = ctx_.stream;
  const int64_t t = spec_.tokens();
  const int h = spec_.hidden;
  const int f = spec_.ffn_mult * spec_.hidden;
  const int v = spec_.padded_vocab();  // the head's and embedding's rows
  const int ti = static_cast<int>(t);
  const void* kept = state.kept[i].data();
  const void* extra = offset(kept, dt, unit_flow(spec_, units_[i].kind).extra_offset());
  const void* dy = state.pending[i].empty() ? grad_out : state.pending[i].data();
  float* g = f32(state_[i]->grads);
  uses(kept);
  uses(dy);
  uses(g);
  Blas* blas = ctx_.blas;
  // dW[in,out] += x^T dy (fp32 accumulation into the fp32 gradients).
  const auto weight_grad = [=](const void* x, int in, const void* d, int out) {
    blas->gemm(true, false, in, out, ti, 1.0f, {x, in}, {d, out}, dt, 1.0f, g, out, Dtype::kFp32);
  };
  // A linear layer's: dW as above, db[out] (after dW in g) += the column
  // sums of dy, summed by the GEMM's epilogue into the first `out` floats of
  // the partials a column reduction would hold, or by that reduction.
  const auto linear_grad = [&](const void* x, int in, const void* d, int out) {
    float* db = g + int64_t{in} * out;
    TrackedBuffer partials = device(column_partials_floats(t, out) * 4, MemCategory::kWorkspace);
    float* sums = f32(partials);
    const auto unfused = [=] {
      weight_grad(x, in, d, out);
      bias_bwd(dt, d, t, out, db, sums, st);
    };
    if (ctx_.gemm_epilogues) {
      if (std::function<bool()> gemm =
              blas->plan_epilogue(true, false, in, out, ti, {x, in}, {d, out}, dt, 1.0f, g, g, out,
                                  Dtype::kFp32, {Epilogue::kBiasGradB, sums, nullptr})) {
        launch([=, gemm = std::move(gemm)] {
          if (gemm()) {
            accumulate(sums, out, db, st);
          } else {
            unfused();  // cuBLASLt refused at run time
          }
        });
        return;
      }
    }
    launch(unfused);
  };
  switch (units_[i].kind) {
    case UnitKind::kEmbedding: {
      const int seq = spec_.seq;
      TrackedBuffer chains = device(8 * t, MemCategory::kWorkspace);
      upload_tokens(state.mb, HostIds::kChains, chains.as<int32_t>());
      const int32_t* rows = chains.as<int32_t>();
      launch([=] {
        embedding_bwd_weight(dt, static_cast<const int32_t*>(kept), rows, dy, t, seq, h, g,
                             g + int64_t{v} * h, st);
      });
      break;
    }
    case UnitKind::kLayerNorm1:
    case UnitKind::kLayerNorm2:
    case UnitKind::kFinalNorm: {
      // The statistics of the input-gradient pass, or recomputed (split backward).
      TrackedBuffer stats;
      if (row_stats == nullptr) {
        stats = device(2 * t * 4, MemCategory::kWorkspace);
        launch([=, mean = f32(stats)] { layernorm_stats(dt, kept, t, h, mean, mean + t, st); });
        row_stats = f32(stats);
      }
      uses(row_stats);
      TrackedBuffer partials =
          device(column_partials_floats(t, int64_t{2} * h) * 4, MemCategory::kWorkspace);
      launch([=, sums = f32(partials)] {
        layernorm_bwd_weight(dt, dy, kept, row_stats, row_stats + t, t, h, g, sums, st);
      });
      break;
    }
    case UnitKind::kQkv:
      linear_grad(kept, h, dy, 3 * h);
      break;
    case UnitKind::kAttention:
      break;
    case UnitKind::kAttnOut:
      linear_grad(kept, h, dy, h);
      break;
    case UnitKind::kFc1Gelu:  // the pre-activation's gradient, in place of it
      linear_grad(kept, h, extra, f);
      break;
    case UnitKind::kFc2:
      linear_grad(kept, f, dy, h);
      break;
    case UnitKind::kHead:
      launch([=] { weight_grad(kept, h, extra, v); });
      break;
  }
}

void CudaChunk::run_backward(Microbatch& state, const std::byte* grad_output, std::byte* grad_input,
                             bool split) {
  PPB_CHECK((grad_output != nullptr) == (output_bytes() > 0),
            "backward: grad_output must be given iff the chunk has an output");
  PPB_CHECK((grad_input != nullptr) == (input_bytes() > 0),
            "backward: grad_input must be given iff the chunk has an input");
  TrackedBuffer current;  // the gradient of unit i's output when it is inside the chunk
  const void* grad_out = grad_output;
  // The residual's gradient travels by pointer (model.hpp): from the
  // chunk's output gradient, or from the output gradient of the unit that
  // added the residual, held until the LayerNorm that began it.
  TrackedBuffer resid_held;
  const void* resid_grad = nullptr;
  if (const UnitFlow top = unit_flow(spec_, units_.back().kind); top.passes_residual()) {
    resid_grad = offset(grad_output, ctx_.dtype, top.out);
  }
  for (int i = static_cast<int>(units_.size()) - 1; i >= 0; --i) {
    const UnitFlow flow = unit_flow(spec_, units_[static_cast<size_t>(i)].kind, ctx_.attention);
    const Residual residual = flow.residual;
    if (residual == Residual::kAdd) resid_grad = grad_out;
    if (split && flow.held_gradient > 0 && !current.empty()) {
      // W reads the output gradient: inside the chunk it keeps the buffer
      // the gradient arrived in, now kept activations (model.hpp).
      PPB_CHECK(current.size() == flow.held_gradient * dtype_bytes(ctx_.dtype),
                "backward: a held gradient's size");
      current.recount(MemCategory::kActivations);
      state.pending[static_cast<size_t>(i)] = std::exchange(current, TrackedBuffer());
    }
    TrackedBuffer below;
    void* grad_in = grad_input;
    if (i > 0) {
      const Unit& prev = units_[static_cast<size_t>(i - 1)];
      below = device(prev.boundary_bytes - prev.residual_bytes, MemCategory::kWorkspace);
      grad_in = below.data();
    }
    const TrackedBuffer row_stats =
        backward_unit_input(static_cast<size_t>(i), state, grad_out, resid_grad, grad_in, split);
    if (!split) {
      backward_unit_weight(static_cast<size_t>(i), state, grad_out,
                           row_stats.empty() ? nullptr : row_stats.as<float>());
    }
    if (residual == Residual::kAdd) {
      resid_held = std::move(current);  // the residual's gradient, for the LayerNorm below
    } else if (residual == Residual::kBegin) {
      resid_held = TrackedBuffer();  // frees (stream-ordered) after its last reader
      resid_grad = nullptr;
    }
    current = std::move(below);  // frees (stream-ordered) the gradient unit i consumed
    grad_out = grad_in;
  }
  state.input_done = true;
}

void CudaChunk::backward_input(int64_t mb, const std::byte* grad_output, std::byte* grad_input) {
  run_backward(ledger_.for_input_gradient(mb, "backward_input"), grad_output, grad_input,
               /*split=*/true);
}

void CudaChunk::backward_weight(int64_t mb) {
  Microbatch& state = ledger_.for_weight_gradient(mb);
  for (int i = static_cast<int>(units_.size()) - 1; i >= 0; --i) {
    backward_unit_weight(static_cast<size_t>(i), state, nullptr, nullptr);
  }
  ledger_.finish(mb);  // frees (stream-ordered) all mb kept, and a stash after its last user
}

void CudaChunk::backward(int64_t mb, const std::byte* grad_output, std::byte* grad_input) {
  run_backward(ledger_.for_input_gradient(mb, "backward"), grad_output, grad_input,
               /*split=*/false);
  ledger_.finish(mb);
}

void CudaChunk::sgd_step(float lr, const KernelRunner& run) {
  const Dtype dt = ctx_.dtype;
  // Micro-batches in flight still on this version: copy it before the update.
  ledger_.stash_current_if_in_use([&] {
    Ledger::Stash stash;
    for (size_t i = 0; i < state_.size(); ++i) {
      const int64_t n = state_[i]->param_count;
      TrackedBuffer b = lasting(n * dtype_bytes(dt), MemCategory::kWeightStash);
      copy(b.data(), weights(static_cast<int>(i), ledger_.version()), n);
      stash.push_back(std::move(b));
    }
    return stash;
  });
  const auto update = [&] {
    for (const auto& u : state_) {
      sgd(f32(u->master), f32(u->grads), u->param_count, lr, dt,
          dt == Dtype::kFp32 ? nullptr : u->copy.data(), ctx_.stream);
    }
  };
  if (run) {
    run(update);
  } else {
    update();
  }
  ledger_.next_version();
}

double CudaChunk::loss(int64_t mb) const {
  PPB_CHECK(units_.back().kind == UnitKind::kHead, "loss() on a chunk without the head");
  const auto it = losses_.find(mb);
  PPB_CHECK(it != losses_.end(), "loss() of a micro-batch whose forward did not run");
  double sum = 0;
  PPB_CUDA_CHECK(
      cudaMemcpyAsync(&sum, it->second.data(), sizeof sum, cudaMemcpyDeviceToHost, ctx_.stream));
  PPB_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  return sum / static_cast<double>(spec_.tokens());
}

std::vector<std::vector<float>> CudaChunk::to_host(TrackedBuffer UnitState::*buffer) const {
  std::vector<std::vector<float>> out;
  for (const auto& u : state_) {
    out.emplace_back(static_cast<size_t>(u->param_count));
    if (u->param_count == 0) continue;
    PPB_CUDA_CHECK(cudaMemcpyAsync(out.back().data(), ((*u).*buffer).data(),
                                   static_cast<size_t>(u->param_count) * 4, cudaMemcpyDeviceToHost,
                                   ctx_.stream));
  }
  PPB_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  return out;
}

std::vector<std::vector<float>> CudaChunk::gradients() const { return to_host(&UnitState::grads); }

std::vector<std::vector<float>> CudaChunk::weights() const { return to_host(&UnitState::master); }

int64_t CudaChunk::stale_compute_weights() const {
  if (ctx_.dtype == Dtype::kFp32) return 0;  // the kernels read the master itself
  int64_t stale = 0;
  for (const auto& u : state_) {
    const int64_t n = u->param_count;
    if (n == 0) continue;
    // The master converted by the same kernel conversion the SGD refresh
    // uses, so a refreshed copy matches it bit for bit.
    TrackedBuffer want = ctx_.pool->stream_ordered(n * 2, MemCategory::kWorkspace);
    to_storage(ctx_.dtype, f32(u->master), want.data(), n, ctx_.stream);
    std::vector<uint16_t> expected(static_cast<size_t>(n));
    std::vector<uint16_t> held(static_cast<size_t>(n));
    PPB_CUDA_CHECK(cudaMemcpyAsync(expected.data(), want.data(), static_cast<size_t>(n) * 2,
                                   cudaMemcpyDeviceToHost, ctx_.stream));
    PPB_CUDA_CHECK(cudaMemcpyAsync(held.data(), u->copy.data(), static_cast<size_t>(n) * 2,
                                   cudaMemcpyDeviceToHost, ctx_.stream));
    PPB_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
    for (size_t i = 0; i < expected.size(); ++i) stale += expected[i] != held[i] ? 1 : 0;
  }
  return stale;
}

std::vector<std::span<float>> CudaChunk::gradient_buffers() {
  std::vector<std::span<float>> out;
  for (const auto& u : state_) {
    if (u->param_count > 0)
      out.emplace_back(u->grads.as<float>(), static_cast<size_t>(u->param_count));
  }
  return out;
}

int CudaChunk::weight_version_of(int64_t mb) const { return ledger_.version_of(mb); }

}  // namespace ppb::cuda
