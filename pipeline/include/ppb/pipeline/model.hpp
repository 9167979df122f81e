// The GPT-style model as a list of operator units, each with its costs. Every
// partition cuts this list into contiguous ranges; the cpu backend computes
// exactly these units; the cost model turns their FLOPs and bytes into time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ppb {

/// `--model` value. Presets: gpt-tiny (8 layers, hidden 128, 4 heads, seq 64,
/// vocab 512, mbs 2), gpt-small (~124M), gpt-1.3b, gpt-7b; or
/// "gpt:layers=12,hidden=768,heads=12,seq=512,vocab=32000,ffn=4,mbs=4"
/// (omitted keys take gpt-small's values).
struct ModelSpec {
  std::string name;  ///< preset name or the spec text as given
  int layers = 12;
  int hidden = 768;
  int heads = 12;
  int seq = 1024;
  int vocab = 50257;
  int ffn_mult = 4;           ///< FFN width = ffn_mult * hidden
  int micro_batch_size = 4;   ///< samples per micro-batch
  int bytes_per_element = 4;  ///< fp32 on the cpu backend

  int64_t tokens() const { return int64_t{micro_batch_size} * seq; }
};

/// Parses a preset name or a "gpt:key=value,..." spec.
/// Throws UsageError naming the key or value that is wrong (unknown preset
/// lists the presets; hidden % heads != 0; any value < 1).
ModelSpec parse_model_spec(std::string_view text);

/// Names of the presets, for `pipebench list`.
std::vector<std::string> model_preset_names();

enum class UnitKind : uint8_t {
  kEmbedding,   ///< token + position embedding
  kLayerNorm1,  ///< LayerNorm before attention
  kQkv,         ///< QKV projection (hidden -> 3 hidden)
  kAttention,   ///< scores, causal softmax, context
  kAttnOut,     ///< output projection + residual add
  kLayerNorm2,  ///< LayerNorm before the FFN
  kFc1Gelu,     ///< FFN first projection + GeLU
  kFc2,         ///< FFN second projection + residual add
  kFinalNorm,   ///< final LayerNorm
  kHead,        ///< output projection to the vocabulary + cross-entropy loss
};

const char* unit_kind_name(UnitKind kind);

/// One operator unit. FLOPs and bytes are for ONE micro-batch.
struct Unit {
  UnitKind kind = UnitKind::kEmbedding;
  int layer = -1;    ///< transformer layer index, -1 outside layers
  std::string name;  ///< "embedding", "l3.qkv", "final_norm", "head"
  double fwd_flops = 0;
  double bwd_input_flops = 0;   ///< backward for the unit's input gradient
  double bwd_weight_flops = 0;  ///< backward for the unit's weight gradient
  int64_t activation_bytes = 0; ///< kept from forward until backward
  /// Bytes that cross a stage boundary placed right after this unit: its
  /// output plus, inside a transformer layer, the residual stream that a
  /// later unit of the layer adds back (after kAttnOut and kFc2 the residual
  /// is already folded in). Gradients crossing back have the same size.
  int64_t boundary_bytes = 0;
  int64_t param_bytes = 0;
};

/// Expands a spec into units: embedding; per layer LayerNorm1, QKV,
/// attention, attn-out, LayerNorm2, fc1+GeLU, fc2; final LayerNorm; head.
/// So units.size() == 3 + 7 * layers.
std::vector<Unit> expand_units(const ModelSpec& spec);

/// Indices [first, last) of the units of transformer layer `layer`.
struct UnitRange {
  int begin = 0;
  int end = 0;
  int size() const { return end - begin; }
  friend bool operator==(const UnitRange&, const UnitRange&) = default;
};

}  // namespace ppb
