// The data flow of each unit kind, the one description the cpu backend
// (CpuChunk) and the cuda backend (CudaChunk) both follow: what a unit
// reads, what it writes, where the residual stream travels, what it keeps
// from its forward for its backward and what a split backward holds from I
// to W. The boundary and activation layouts of cpu_model.hpp are derived
// from it (cpu_boundary_bytes, cpu_activation_bytes), in elements here and
// in bytes of the backend's element there.
//
// A boundary (what crosses a cut after a unit, and its gradient) is the
// unit's main output, then, where the residual passes on (kBegin, kCarry),
// the residual: [out][resid]. A unit's input is the boundary of the unit
// before it: [in][resid] where it takes a residual (kCarry, kAdd).
//
// Example: the qkv unit of gpt-small (T = 4096, h = 768):
//   UnitFlow q = unit_flow(spec, UnitKind::kQkv);
//   q.in == T*h, q.out == 3*T*h, q.residual == Residual::kCarry,
//   q.boundary() == 4*T*h, q.kept() == T*h (its input), q.held_gradient == 3*T*h.
#pragma once

#include <cstdint>

#include "ppb/pipeline/model.hpp"

namespace ppb {

/// What a unit does with the residual stream of its layer.
enum class Residual : uint8_t {
  kNone,   ///< none in, none out (embedding, final_norm, head)
  kBegin,  ///< its main input becomes the residual it passes on (ln1, ln2)
  kCarry,  ///< passes the residual on unchanged (qkv, attention, fc1_gelu)
  kAdd,    ///< adds the residual to its output and ends it (attn_out, fc2)
};

/// One unit kind's tensors, in elements (see the file comment).
struct UnitFlow {
  int64_t in = 0;     ///< main input; 0 for the embedding (its token ids come from the seed)
  int64_t out = 0;    ///< main output; 0 for the head (it ends in the loss)
  int64_t resid = 0;  ///< the residual stream, T*h, where it travels (0: kNone)
  Residual residual = Residual::kNone;
  bool keeps_input = false;  ///< kept begins with the main input, `in` elements
  /// Kept after that: the LayerNorm statistics (mean[T], rstd[T]), the
  /// attention probabilities, fc1_gelu's pre-activation, the head's
  /// probabilities; the embedding's T token ids (int32, 4 bytes each).
  int64_t kept_extra = 0;
  /// fp32 values kept after kept_extra, 4 bytes each whatever the element:
  /// the fused attention's softmax statistics (one per row, b*a*s).
  int64_t kept_f32 = 0;
  /// A split backward's I keeps this much of the output gradient for W
  /// (0: W reads only what the unit kept, or the unit has no weights).
  int64_t held_gradient = 0;

  /// The residual arrives after the main input.
  bool takes_residual() const { return residual == Residual::kCarry || residual == Residual::kAdd; }
  /// The residual leaves after the main output.
  bool passes_residual() const {
    return residual == Residual::kBegin || residual == Residual::kCarry;
  }
  /// Elements of the boundary after the unit (its output and output gradient).
  int64_t boundary() const { return out + (passes_residual() ? resid : 0); }
  /// Elements of the unit's input (and input gradient).
  int64_t input() const { return in + (takes_residual() ? resid : 0); }
  /// Where kept_extra starts in the kept activations.
  int64_t extra_offset() const { return keeps_input ? in : 0; }
  /// Elements kept from the forward to the backward.
  int64_t kept() const { return extra_offset() + kept_extra; }
};

/// The data flow of `kind` in a model of `spec`. With Attention::kFused the
/// attention unit keeps its input (qkv), then its output (kept_extra = T*h,
/// which the backward reads) and the softmax statistics (kept_f32 = b*a*s)
/// instead of the b*a*s*s probabilities.
UnitFlow unit_flow(const ModelSpec& spec, UnitKind kind, Attention attention = Attention::kNaive);

}  // namespace ppb
