// The `cpu` backend's training math: the GPT model of a ModelSpec in fp32 on
// OpenBLAS, cut into contiguous unit ranges (one CpuChunk per stage or chunk).
//
// Every unit of expand_units() is computed exactly as ppb/pipeline/model.hpp
// describes it, and keeps exactly Unit::activation_bytes from its forward to
// its backward (MemCategory::kActivations). What crosses a cut placed right
// after unit u is a flat fp32 tensor of Unit::boundary_bytes, laid out as
//   embedding  x[T,h]                 attn_out   x[T,h]
//   ln1, ln2   normed[T,h] resid[T,h] fc1_gelu   gelu[T,f] resid[T,h]
//   qkv        qkv[T,3h] resid[T,h]   fc2        x[T,h]
//   attention  context[T,h] resid[T,h]  final_norm normed[T,h]   head: none
// (T = micro_batch_size*seq tokens, row t = sample*seq + position; inside
// qkv, row t holds q, k, v of h columns each, head j at columns j*h/a..). The
// gradient sent back has the same layout. The residual stream travels with
// the activation inside a layer so that a stage can start at any unit. These
// layouts, what each unit keeps and what a split backward holds follow from
// each unit kind's data flow (unit_flow.hpp), which the cuda backend follows too.
//
// Example (one process, the whole model):
//   ppb::MemoryTracker mem;
//   auto units = ppb::expand_units(spec);
//   ppb::CpuChunk model(spec, units, {0, int(units.size())}, mem);
//   model.forward(0, nullptr, nullptr);
//   model.backward(0, nullptr, nullptr);
//   double l = model.loss(0);
//   model.sgd_step(0.1f);
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "ppb/exec/microbatch_ledger.hpp"
#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/profiling/memory.hpp"

namespace ppb {

/// Options of the cpu model. Every field has a meaningful default.
struct CpuModelOptions {
  /// Seeds the parameters and the synthetic data. Parameters depend only on
  /// (seed, global unit index, tensor), so any partition of the model has
  /// the same weights as a single-process reference.
  uint64_t seed = 1234;
  /// Multiplies every micro-batch's loss gradient (the executor sets 1/M so
  /// that accumulated gradients are those of the batch-mean loss). loss()
  /// stays unscaled.
  float loss_scale = 1.0f;
  /// PipeDream weight stashing: a micro-batch's backward uses the weight
  /// version its forward used (see CpuChunk).
  bool weight_stashing = false;
};

/// Synthetic data: the token ids and next-token labels of global micro-batch
/// `mb`, T = micro_batch_size*seq each, row-major [sample][position]. A
/// counter-based hash (splitmix64) of (seed, mb, sample, position) draws a
/// sequence of seq+1 tokens per sample; labels are the tokens shifted by
/// one. Identical on every run, every rank, every partition.
/// REQUIRES: tokens and labels have spec.tokens() elements.
void synthetic_tokens(const ModelSpec& spec, uint64_t seed, int64_t mb, std::span<int32_t> tokens,
                      std::span<int32_t> labels);

/// Number of fp32 parameters of one unit (0 for attention).
int64_t unit_param_count(const ModelSpec& spec, UnitKind kind);

/// Boundary and activation bytes of one unit as this backend lays them out
/// (the binding contract with expand_units(); CpuChunk checks that the Unit
/// values agree).
int64_t cpu_boundary_bytes(const ModelSpec& spec, UnitKind kind);
int64_t cpu_activation_bytes(const ModelSpec& spec, UnitKind kind);

/// Contiguous units [range.begin, range.end) of the model on one process:
/// parameters, gradients, the kept activations of the micro-batches in
/// flight, and the forward / backward / SGD of those units. Not thread-safe.
///
/// Memory (all in the tracker given to the constructor): parameters
/// kParameters, gradients kGradients (both allocated by the constructor,
/// 4 bytes per parameter), kept activations kActivations (exactly the sum
/// of the units' activation_bytes per micro-batch after forward(mb), 0 for
/// mb after backward()/backward_weight()), stashed weight versions
/// kWeightStash, temporaries of one call kWorkspace (freed before it
/// returns).
///
/// Split backward (zb-* schedules): backward_input(mb) computes the input
/// gradient and keeps, for each unit with weights, the gradient of its
/// output, which backward_weight(mb) needs (kActivations, since it is held
/// for the backward like the activations). Between I and W a unit of the
/// micro-batch therefore holds, instead of its activation_bytes:
///   embedding, ln1, ln2, final_norm, attn_out, fc2   activation_bytes + T*h*e
///   qkv                                              activation_bytes + 3*T*h*e
///   fc1_gelu, head   activation_bytes (the pre-activation / probabilities are
///                    overwritten in place by their gradients)
///   attention        0 (no weights: freed by backward_input)
/// backward_weight(mb) consumes them and frees everything of mb. The full
/// backward() holds none of these beyond its own workspace.
class CpuChunk {
 public:
  /// REQUIRES: 0 <= range.begin < range.end <= units.size(), units ==
  /// expand_units(spec) (activation and boundary bytes are checked against
  /// this backend's layout; a mismatch is a bug and aborts).
  CpuChunk(const ModelSpec& spec, const std::vector<Unit>& units, UnitRange range,
           MemoryTracker& tracker, CpuModelOptions options = {});
  ~CpuChunk();
  CpuChunk(const CpuChunk&) = delete;
  CpuChunk& operator=(const CpuChunk&) = delete;

  /// Bytes of the tensor this chunk receives: the boundary of unit
  /// range.begin-1; 0 when the chunk starts with the embedding.
  int64_t input_bytes() const;
  /// Bytes of the tensor this chunk sends: the boundary of its last unit; 0
  /// when it ends with the head.
  int64_t output_bytes() const;
  UnitRange range() const { return range_; }

  /// Forward of global micro-batch mb. `input` holds input_bytes() (null on
  /// the first chunk: the embedding draws its tokens from the seed),
  /// `output` receives output_bytes() (null on the last chunk: the head
  /// computes the loss). Keeps mb's activations until its backward.
  /// REQUIRES: mb not already in flight on this chunk.
  void forward(int64_t mb, const std::byte* input, std::byte* output);

  /// Input-gradient half of the backward of mb. `grad_output` holds
  /// output_bytes() (null on the last chunk), `grad_input` receives
  /// input_bytes() (null on the first chunk).
  /// REQUIRES: forward(mb) ran and backward_input(mb) did not.
  void backward_input(int64_t mb, const std::byte* grad_output, std::byte* grad_input);
  /// Weight-gradient half: accumulates mb's weight gradients and frees all
  /// that mb kept. REQUIRES: backward_input(mb) ran.
  void backward_weight(int64_t mb);
  /// backward_input then backward_weight; the gradients are bit-identical
  /// to the split form, and the extra output-gradient bytes of the split
  /// form are only workspace here.
  void backward(int64_t mb, const std::byte* grad_output, std::byte* grad_input);

  /// Mean token cross-entropy of mb (unscaled). REQUIRES: the chunk holds
  /// the head and forward(mb) ran (the value stays after the backward).
  double loss(int64_t mb) const;

  /// params -= lr * grads, then grads = 0; starts a new weight version.
  void sgd_step(float lr);
  void zero_grads();

  /// Flat views of the current parameters and the gradients, one per unit
  /// of the range in unit order (empty for the attention unit). Tensor
  /// order inside a unit: embedding wte[V,h] wpe[seq,h]; LayerNorm gamma,
  /// beta; qkv W[h,3h] b[3h]; attn_out W[h,h] b[h]; fc1 W[h,f] b[f]; fc2
  /// W[f,h] b[h]; head W[h,V]. Valid until the chunk is destroyed.
  std::vector<std::span<const float>> param_views() const;
  std::vector<std::span<const float>> grad_views() const;
  /// Writable parameter views (same layout), for tests and for loading
  /// weights. Writing them while micro-batches are in flight with weight
  /// stashing on changes the current version only.
  std::vector<std::span<float>> mutable_param_views();
  /// Writable gradient views (same layout): the data-parallel all-reduce
  /// sums them in place across replicas.
  std::vector<std::span<float>> mutable_grad_views();

  /// Weight stashing (options.weight_stashing): forward(mb) records the
  /// current weight version; sgd_step() first copies the current weights to
  /// the stash (kWeightStash) when a micro-batch in flight still uses them
  /// (one copy per distinct version in use, freed when its last
  /// micro-batch's backward ends), so backward_input/backward_weight(mb)
  /// compute with the weights forward(mb) used. Version numbers start at 0
  /// and grow by one per sgd_step(). REQUIRES: mb in flight.
  int weight_version_of(int64_t mb) const;
  /// The current weight version (number of sgd_step() calls so far).
  int weight_version() const { return ledger_.version(); }

  /// Seconds this chunk's units ran since the last call, by kind (indexed
  /// by UnitKind) and pass: forward, input gradient, weight gradient (a
  /// full backward's two halves apart). The call starts the sums again.
  std::vector<UnitTime> take_kind_seconds();

 private:
  struct UnitState;
  using Ledger = MicrobatchLedger<TrackedBuffer>;
  using Microbatch = Ledger::State;

  const float* params_for(int local_unit, int version) const;
  // `resid_grad` is the residual's gradient the unit passes down or adds
  // (null where it has none); inside the chunk it travels by pointer, and
  // only the chunk's input gradient carries it.
  void backward_unit_input(int local_unit, Microbatch& state, const float* grad_out,
                           const float* resid_grad, float* grad_in, bool keep_for_weight);
  void backward_unit_weight(int local_unit, Microbatch& state, const float* grad_out);
  void run_backward(Microbatch& state, const std::byte* grad_output, std::byte* grad_input,
                    bool split);

  ModelSpec spec_;
  std::vector<Unit> units_;  // the chunk's units only
  UnitRange range_;
  int64_t input_bytes_ = 0;
  MemoryTracker* tracker_;
  CpuModelOptions options_;
  std::vector<std::unique_ptr<UnitState>> state_;  // one per unit of the range
  Ledger ledger_;  // in-flight micro-batches, pass order, weight versions
  std::map<int64_t, double> losses_;
  std::vector<UnitTime> kind_seconds_ = std::vector<UnitTime>(kUnitKinds);
};

}  // namespace ppb
