#include "ppb/exec/cpu_model.hpp"

#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "init.hpp"
#include "kernels.hpp"
#include "ppb/exec/unit_flow.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

constexpr int64_t kFloat = 4;

float* floats(TrackedBuffer& b) { return b.as<float>(); }
// `b`'s floats from `offset` on; null where `b` holds nothing (a unit that
// keeps nothing besides: arithmetic on its null pointer is undefined).
float* floats_at(TrackedBuffer& b, int64_t offset) {
  return b.data() == nullptr ? nullptr : b.as<float>() + offset;
}
const float* floats_at(const TrackedBuffer& b, int64_t offset) {
  return b.data() == nullptr ? nullptr : b.as<float>() + offset;
}
const float* floats(const std::byte* p) { return reinterpret_cast<const float*>(p); }
float* floats(std::byte* p) { return reinterpret_cast<float*>(p); }

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void copy_floats(float* dst, const float* src, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

struct CpuChunk::UnitState {
  int global_index = 0;
  UnitKind kind = UnitKind::kEmbedding;
  int64_t param_count = 0;
  TrackedBuffer params;  // kParameters, the current version
  TrackedBuffer grads;   // kGradients
};

CpuChunk::CpuChunk(const ModelSpec& spec, const std::vector<Unit>& units, UnitRange range,
                   MemoryTracker& tracker, CpuModelOptions options)
    : spec_(spec),
      range_(range),
      tracker_(&tracker),
      options_(options),
      ledger_(options.weight_stashing) {
  PPB_CHECK(
      range.begin >= 0 && range.begin < range.end && range.end <= static_cast<int>(units.size()),
      "unit range out of bounds");
  PPB_CHECK(spec.hidden % spec.heads == 0, "hidden must be a multiple of heads");
  PPB_CHECK(spec.bytes_per_element == kFloat, "the cpu backend computes in fp32");
  for (int g = range.begin; g < range.end; ++g) {
    const Unit& u = units[static_cast<size_t>(g)];
    const std::string where = "unit " + std::to_string(g) + " (" + u.name + "): ";
    PPB_CHECK(u.activation_bytes == cpu_activation_bytes(spec, u.kind),
              where + "activation_bytes differ from the cpu backend's layout");
    PPB_CHECK(u.boundary_bytes == cpu_boundary_bytes(spec, u.kind),
              where + "boundary_bytes differ from the cpu backend's layout");
    PPB_CHECK(u.param_bytes == unit_param_count(spec, u.kind) * kFloat,
              where + "param_bytes differ from the cpu backend's parameters");
    PPB_CHECK(g == range.begin || unit_flow(spec, u.kind).keeps_input,
              where + "keeps no input, but the unit before writes its output there");
    units_.push_back(u);
    auto state = std::make_unique<UnitState>();
    state->global_index = g;
    state->kind = u.kind;
    state->param_count = unit_param_count(spec, u.kind);
    state->params = TrackedBuffer(tracker, MemCategory::kParameters, state->param_count * kFloat);
    state->grads = TrackedBuffer(tracker, MemCategory::kGradients, state->param_count * kFloat);
    cpu::init_unit_params(
        spec, u.kind, options.seed, g,
        std::span<float>(floats(state->params), static_cast<size_t>(state->param_count)));
    state_.push_back(std::move(state));
  }
  if (range.begin > 0) {
    PPB_CHECK(units[static_cast<size_t>(range.begin - 1)].boundary_bytes ==
                  cpu_boundary_bytes(spec, units[static_cast<size_t>(range.begin - 1)].kind),
              "boundary_bytes of the unit before the chunk differ from the cpu backend's layout");
    input_bytes_ = units[static_cast<size_t>(range.begin - 1)].boundary_bytes;
  }
}

CpuChunk::~CpuChunk() = default;

int64_t CpuChunk::input_bytes() const { return input_bytes_; }

int64_t CpuChunk::output_bytes() const { return units_.back().boundary_bytes; }

const float* CpuChunk::params_for(int local_unit, int version) const {
  const Ledger::Stash* stash = ledger_.stash_for(version);
  const TrackedBuffer& params = stash != nullptr ? (*stash)[static_cast<size_t>(local_unit)]
                                                 : state_[static_cast<size_t>(local_unit)]->params;
  return params.as<float>();
}

void CpuChunk::forward(int64_t mb, const std::byte* input, std::byte* output) {
  Microbatch state = ledger_.start_forward(mb, units_.size());
  PPB_CHECK((input != nullptr) == (input_bytes() > 0),
            "forward: input must be given iff the chunk has one");
  PPB_CHECK((output != nullptr) == (output_bytes() > 0),
            "forward: output must be given iff the chunk has one");

  const int64_t t = spec_.tokens();
  const int h = spec_.hidden;
  const int f = spec_.ffn_mult * spec_.hidden;
  const int v = spec_.padded_vocab();  // the head's and embedding's rows
  const int64_t tf = t * f;
  MemoryTracker& mem = *tracker_;

  const float* in = input != nullptr ? floats(input) : nullptr;
  // Inside the chunk the residual stream travels as a pointer, not in the
  // boundaries: into the chunk's input, or into the kept input of the
  // LayerNorm that began it. Only the chunk's output carries it.
  const float* resid = nullptr;
  if (const UnitFlow first = unit_flow(spec_, units_[0].kind); first.takes_residual()) {
    resid = in + first.in;
  }
  // Each unit after the first receives its input in place: the unit before
  // writes its output into the start of the next unit's kept activations
  // (allocated before it runs; model.hpp), so no boundary inside the chunk
  // is workspace and no input is copied.
  state.kept[0] = TrackedBuffer(mem, MemCategory::kActivations, units_[0].activation_bytes);
  for (size_t i = 0; i < units_.size(); ++i) {
    const auto started = std::chrono::steady_clock::now();
    const UnitKind kind = units_[i].kind;
    const bool last = i + 1 == units_.size();
    float* out = nullptr;
    if (last) {
      out = output != nullptr ? floats(output) : nullptr;
    } else {
      state.kept[i + 1] =
          TrackedBuffer(mem, MemCategory::kActivations, units_[i + 1].activation_bytes);
      out = floats(state.kept[i + 1]);
    }
    TrackedBuffer& kept = state.kept[i];
    const float* p = params_for(static_cast<int>(i), state.version);
    // The unit's data flow (unit_flow.hpp): its kept input, then what it
    // keeps besides; the residual it begins (its kept input) or carries, or
    // adds to its output.
    const UnitFlow flow = unit_flow(spec_, kind);
    PPB_CHECK(!flow.takes_residual() || resid != nullptr, "forward: a unit without its residual");
    if (flow.keeps_input && i == 0) copy_floats(floats(kept), in, flow.in);
    float* extra = floats_at(kept, flow.extra_offset());
    if (flow.residual == Residual::kBegin) resid = floats(kept);
    if (flow.residual == Residual::kAdd) copy_floats(out, resid, flow.resid);  // out +=
    if (last && flow.passes_residual()) copy_floats(out + flow.out, resid, flow.resid);
    switch (kind) {
      case UnitKind::kEmbedding: {
        TrackedBuffer labels(mem, MemCategory::kWorkspace, t * 4);
        int32_t* tokens = kept.as<int32_t>();
        synthetic_tokens(spec_, options_.seed, mb,
                         std::span<int32_t>(tokens, static_cast<size_t>(t)),
                         std::span<int32_t>(labels.as<int32_t>(), static_cast<size_t>(t)));
        cpu::embedding_forward(tokens, t, spec_.seq, h, p, p + int64_t{v} * h, out);
        break;
      }
      case UnitKind::kLayerNorm1:
      case UnitKind::kLayerNorm2:
      case UnitKind::kFinalNorm:
        cpu::layernorm_forward(in, t, h, p, p + h, out, extra, extra + t);
        break;
      case UnitKind::kQkv:
        cpu::linear_forward(in, t, h, p, p + int64_t{h} * 3 * h, 3 * h, out);
        break;
      case UnitKind::kAttention:
        cpu::attention_forward(floats(kept), spec_.micro_batch_size, spec_.seq, h, spec_.heads,
                               extra, out);
        break;
      case UnitKind::kAttnOut:
        cpu::linear_forward(in, t, h, p, p + int64_t{h} * h, h, out, /*accumulate=*/true);
        break;
      case UnitKind::kFc1Gelu:
        cpu::linear_forward(in, t, h, p, p + int64_t{h} * f, f, extra);
        cpu::gelu_forward(extra, out, tf);
        break;
      case UnitKind::kFc2:
        cpu::linear_forward(in, t, f, p, p + int64_t{f} * h, h, out, /*accumulate=*/true);
        break;
      case UnitKind::kHead: {
        cpu::linear_forward(in, t, h, p, nullptr, v, extra);
        TrackedBuffer tokens(mem, MemCategory::kWorkspace, 2 * t * 4);
        int32_t* tok = tokens.as<int32_t>();
        synthetic_tokens(spec_, options_.seed, mb, std::span<int32_t>(tok, static_cast<size_t>(t)),
                         std::span<int32_t>(tok + t, static_cast<size_t>(t)));
        const double sum = cpu::softmax_cross_entropy_forward(extra, tok + t, t, spec_.vocab, v);
        losses_[mb] = sum / static_cast<double>(t);
        break;
      }
    }
    if (!flow.passes_residual()) resid = nullptr;
    in = out;
    kind_seconds_[static_cast<size_t>(kind)].fwd += seconds_since(started);
  }
  ledger_.admit(std::move(state));
}

void CpuChunk::backward_unit_input(int local_unit, Microbatch& state, const float* grad_out,
                                   const float* resid_grad, float* grad_in, bool keep_for_weight) {
  const size_t i = static_cast<size_t>(local_unit);
  const UnitKind kind = units_[i].kind;
  const int64_t t = spec_.tokens();
  const int h = spec_.hidden;
  const int f = spec_.ffn_mult * spec_.hidden;
  const int v = spec_.padded_vocab();  // the head's and embedding's rows
  const int64_t tf = t * f;
  MemoryTracker& mem = *tracker_;
  TrackedBuffer& kept = state.kept[i];
  const float* p = params_for(local_unit, state.version);
  // The unit's data flow (unit_flow.hpp): the residual's gradient passes
  // back beside the input gradient at the chunk's input, or adds to the
  // LayerNorm's; units with weights keep the gradient of their output for
  // backward_weight (in the split form only; the full backward uses
  // grad_out directly).
  const UnitFlow flow = unit_flow(spec_, kind);
  if (flow.takes_residual() && local_unit == 0) {
    copy_floats(grad_in + flow.in, resid_grad, flow.resid);
  }
  if (flow.residual == Residual::kBegin) copy_floats(grad_in, resid_grad, flow.resid);
  // (Inside the chunk run_backward gave it the buffer its output gradient
  // arrived in; the chunk's output gradient is copied.)
  if (keep_for_weight && flow.held_gradient > 0 && state.pending[i].empty()) {
    state.pending[i] = TrackedBuffer(mem, MemCategory::kActivations, flow.held_gradient * kFloat);
    copy_floats(floats(state.pending[i]), grad_out, flow.held_gradient);
  }
  float* extra = floats_at(kept, flow.extra_offset());
  switch (kind) {
    case UnitKind::kEmbedding:
      break;
    case UnitKind::kLayerNorm1:
    case UnitKind::kLayerNorm2:
    case UnitKind::kFinalNorm: {
      const float* x = floats(kept);
      cpu::layernorm_backward_input(grad_out, x, extra, extra + t, p, t, h, grad_in,
                                    /*accumulate=*/flow.residual == Residual::kBegin);
      break;
    }
    case UnitKind::kQkv:
      cpu::linear_backward_input(grad_out, t, 3 * h, p, h, grad_in, false);
      break;
    case UnitKind::kAttention: {
      TrackedBuffer ws(mem, MemCategory::kWorkspace, int64_t{spec_.seq} * spec_.seq * kFloat);
      cpu::attention_backward(floats(kept), extra, grad_out, spec_.micro_batch_size, spec_.seq, h,
                              spec_.heads, grad_in, floats(ws));
      kept = TrackedBuffer();  // no weights: nothing of it is needed any more
      break;
    }
    case UnitKind::kAttnOut:
      cpu::linear_backward_input(grad_out, t, h, p, h, grad_in, false);
      break;
    case UnitKind::kFc1Gelu:
      cpu::gelu_backward(extra, grad_out, extra, tf);  // pre-activation -> its gradient, in place
      cpu::linear_backward_input(extra, t, f, p, h, grad_in, false);
      break;
    case UnitKind::kFc2:
      cpu::linear_backward_input(grad_out, t, h, p, f, grad_in, false);
      break;
    case UnitKind::kHead: {
      TrackedBuffer tokens(mem, MemCategory::kWorkspace, 2 * t * 4);
      int32_t* tok = tokens.as<int32_t>();
      synthetic_tokens(spec_, options_.seed, state.mb,
                       std::span<int32_t>(tok, static_cast<size_t>(t)),
                       std::span<int32_t>(tok + t, static_cast<size_t>(t)));
      // probabilities -> logits gradient, in place
      cpu::softmax_cross_entropy_backward(extra, tok + t, t, spec_.vocab, v,
                                          options_.loss_scale / static_cast<float>(t));
      cpu::linear_backward_input(extra, t, v, p, h, grad_in, false);
      break;
    }
  }
}

void CpuChunk::backward_unit_weight(int local_unit, Microbatch& state, const float* grad_out) {
  const size_t i = static_cast<size_t>(local_unit);
  const UnitKind kind = units_[i].kind;
  const int64_t t = spec_.tokens();
  const int h = spec_.hidden;
  const int f = spec_.ffn_mult * spec_.hidden;
  const int v = spec_.padded_vocab();  // the head's and embedding's rows
  const TrackedBuffer& kept = state.kept[i];
  const float* extra = floats_at(kept, unit_flow(spec_, kind).extra_offset());
  const float* dy = state.pending[i].empty() ? grad_out : state.pending[i].as<float>();
  float* g = floats(state_[i]->grads);
  switch (kind) {
    case UnitKind::kEmbedding:
      cpu::embedding_backward_weight(kept.as<int32_t>(), dy, t, spec_.seq, h, g,
                                     g + int64_t{v} * h);
      break;
    case UnitKind::kLayerNorm1:
    case UnitKind::kLayerNorm2:
    case UnitKind::kFinalNorm: {
      cpu::layernorm_backward_weight(dy, kept.as<float>(), extra, extra + t, t, h, g, g + h);
      break;
    }
    case UnitKind::kQkv:
      cpu::linear_backward_weight(kept.as<float>(), dy, t, h, 3 * h, g, g + int64_t{h} * 3 * h);
      break;
    case UnitKind::kAttention:
      break;
    case UnitKind::kAttnOut:
      cpu::linear_backward_weight(kept.as<float>(), dy, t, h, h, g, g + int64_t{h} * h);
      break;
    case UnitKind::kFc1Gelu:
      cpu::linear_backward_weight(kept.as<float>(), extra, t, h, f, g, g + int64_t{h} * f);
      break;
    case UnitKind::kFc2:
      cpu::linear_backward_weight(kept.as<float>(), dy, t, f, h, g, g + int64_t{f} * h);
      break;
    case UnitKind::kHead:
      cpu::linear_backward_weight(kept.as<float>(), extra, t, h, v, g, nullptr);
      break;
  }
}

void CpuChunk::run_backward(Microbatch& state, const std::byte* grad_output, std::byte* grad_input,
                            bool split) {
  PPB_CHECK((grad_output != nullptr) == (output_bytes() > 0),
            "backward: grad_output must be given iff the chunk has an output");
  PPB_CHECK((grad_input != nullptr) == (input_bytes() > 0),
            "backward: grad_input must be given iff the chunk has an input");
  TrackedBuffer current;  // gradient of unit i's output when it is inside the chunk
  const float* grad_out = grad_output != nullptr ? floats(grad_output) : nullptr;
  // The residual's gradient travels by pointer (model.hpp): from the
  // chunk's output gradient, or from the output gradient of the unit that
  // added the residual, held until the LayerNorm that began it.
  TrackedBuffer resid_held;
  const float* resid_grad = nullptr;
  if (const UnitFlow top = unit_flow(spec_, units_.back().kind); top.passes_residual()) {
    resid_grad = grad_out + top.out;
  }
  for (int i = static_cast<int>(units_.size()) - 1; i >= 0; --i) {
    const UnitFlow flow = unit_flow(spec_, units_[static_cast<size_t>(i)].kind);
    if (flow.residual == Residual::kAdd) resid_grad = grad_out;
    TrackedBuffer below;
    float* grad_in = nullptr;
    if (i == 0) {
      grad_in = grad_input != nullptr ? floats(grad_input) : nullptr;
    } else {
      const Unit& prev = units_[static_cast<size_t>(i - 1)];
      below = TrackedBuffer(*tracker_, MemCategory::kWorkspace,
                            prev.boundary_bytes - prev.residual_bytes);
      grad_in = floats(below);
    }
    UnitTime& spent = kind_seconds_[static_cast<size_t>(units_[static_cast<size_t>(i)].kind)];
    const auto started = std::chrono::steady_clock::now();
    if (split && flow.held_gradient > 0 && !current.empty()) {
      // W reads the output gradient: inside the chunk it keeps the buffer
      // the gradient arrived in, now kept activations (model.hpp).
      PPB_CHECK(current.size() == flow.held_gradient * kFloat, "backward: a held gradient's size");
      current.recount(MemCategory::kActivations);
      state.pending[static_cast<size_t>(i)] = std::exchange(current, TrackedBuffer());
    }
    backward_unit_input(i, state, grad_out, resid_grad, grad_in, split);
    spent.bwd_input += seconds_since(started);
    if (!split) {
      const auto weight_started = std::chrono::steady_clock::now();
      backward_unit_weight(i, state, grad_out);
      spent.bwd_weight += seconds_since(weight_started);
    }
    if (flow.residual == Residual::kAdd) {
      resid_held = std::move(current);  // the residual's gradient, for the LayerNorm below
    } else if (flow.residual == Residual::kBegin) {
      resid_held = TrackedBuffer();
      resid_grad = nullptr;
    }
    current = std::move(below);
    grad_out = grad_in;
  }
  state.input_done = true;
}

void CpuChunk::backward_input(int64_t mb, const std::byte* grad_output, std::byte* grad_input) {
  run_backward(ledger_.for_input_gradient(mb, "backward_input"), grad_output, grad_input,
               /*split=*/true);
}

void CpuChunk::backward_weight(int64_t mb) {
  Microbatch& state = ledger_.for_weight_gradient(mb);
  for (int i = static_cast<int>(units_.size()) - 1; i >= 0; --i) {
    const auto started = std::chrono::steady_clock::now();
    backward_unit_weight(i, state, nullptr);
    kind_seconds_[static_cast<size_t>(units_[static_cast<size_t>(i)].kind)].bwd_weight +=
        seconds_since(started);
  }
  ledger_.finish(mb);  // frees all mb kept, and its version's stash after its last user
}

std::vector<UnitTime> CpuChunk::take_kind_seconds() {
  std::vector<UnitTime> out(kUnitKinds);
  out.swap(kind_seconds_);
  return out;
}

void CpuChunk::backward(int64_t mb, const std::byte* grad_output, std::byte* grad_input) {
  run_backward(ledger_.for_input_gradient(mb, "backward"), grad_output, grad_input,
               /*split=*/false);
  ledger_.finish(mb);
}

double CpuChunk::loss(int64_t mb) const {
  PPB_CHECK(units_.back().kind == UnitKind::kHead, "loss() on a chunk without the head");
  const auto it = losses_.find(mb);
  PPB_CHECK(it != losses_.end(), "loss() of a micro-batch whose forward did not run");
  return it->second;
}

void CpuChunk::sgd_step(float lr) {
  // Micro-batches in flight still on this version: copy it before the update.
  ledger_.stash_current_if_in_use([&] {
    Ledger::Stash stash;
    for (const auto& u : state_) {
      TrackedBuffer copy(*tracker_, MemCategory::kWeightStash, u->params.size());
      if (u->params.size() > 0) {
        std::memcpy(copy.data(), u->params.data(), static_cast<size_t>(u->params.size()));
      }
      stash.push_back(std::move(copy));
    }
    return stash;
  });
  for (const auto& u : state_) {
    float* p = floats(u->params);
    float* g = floats(u->grads);
    for (int64_t k = 0; k < u->param_count; ++k) {
      p[k] -= lr * g[k];
      g[k] = 0.0f;
    }
  }
  ledger_.next_version();
}

void CpuChunk::zero_grads() {
  for (const auto& u : state_) {
    if (u->grads.size() > 0) std::memset(u->grads.data(), 0, static_cast<size_t>(u->grads.size()));
  }
}

std::vector<std::span<const float>> CpuChunk::param_views() const {
  std::vector<std::span<const float>> views;
  for (const auto& u : state_) {
    views.emplace_back(u->params.as<float>(), static_cast<size_t>(u->param_count));
  }
  return views;
}

std::vector<std::span<const float>> CpuChunk::grad_views() const {
  std::vector<std::span<const float>> views;
  for (const auto& u : state_) {
    views.emplace_back(u->grads.as<float>(), static_cast<size_t>(u->param_count));
  }
  return views;
}

std::vector<std::span<float>> CpuChunk::mutable_param_views() {
  std::vector<std::span<float>> views;
  for (const auto& u : state_) {
    views.emplace_back(floats(u->params), static_cast<size_t>(u->param_count));
  }
  return views;
}

std::vector<std::span<float>> CpuChunk::mutable_grad_views() {
  std::vector<std::span<float>> views;
  for (const auto& u : state_) {
    views.emplace_back(floats(u->grads), static_cast<size_t>(u->param_count));
  }
  return views;
}

int CpuChunk::weight_version_of(int64_t mb) const { return ledger_.version_of(mb); }

}  // namespace ppb
