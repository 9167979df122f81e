// The GPT-style model as a list of operator units, each with its costs. Every
// partition cuts this list into contiguous ranges; the cpu backend computes
// exactly these units; the cost model turns their FLOPs and bytes into time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ppb {

/// Megatron-LM's default for `--make-vocab-size-divisible-by`.
inline constexpr int kDefaultVocabDivisor = 128;
/// Largest divisor accepted (the padded vocabulary stays an int).
inline constexpr int kMaxVocabDivisor = 1 << 24;

/// The vocabulary the head and embedding hold: `vocab` rounded up to a
/// multiple of `divisor`, as Megatron-LM's --make-vocab-size-divisible-by
/// (so the head's GEMMs get aligned shapes). The one place that rounds.
/// REQUIRES: vocab >= 1, 1 <= divisor <= kMaxVocabDivisor (1: no padding).
/// Example: padded_vocab_size(50257, 128) == 50304; (512, 128) == 512.
int padded_vocab_size(int vocab, int divisor);

/// `--model` value. Presets (layers/hidden/heads, seq, vocab, ffn, mbs):
///   gpt-tiny   8/128/4,     seq 64,   vocab 512,   ffn 4, mbs 2 (CPU tests)
///   gpt-small  12/768/12,   seq 1024, vocab 50257, ffn 4, mbs 4 (GPT-2 small, 124M)
///   gpt-1.3b   24/2048/16,  seq 2048, vocab 50257, ffn 4, mbs 2 (GPT-3 XL shape)
///   gpt-7b     32/4096/32,  seq 2048, vocab 50257, ffn 4, mbs 1 (GPT-3 6.7B shape)
/// or "gpt:layers=12,hidden=768,heads=12,seq=512,vocab=32000,ffn=4,mbs=4"
/// (omitted keys take gpt-small's values).
struct ModelSpec {
  std::string name;  ///< preset name or the spec text as given
  int layers = 12;
  int hidden = 768;
  int heads = 12;
  int seq = 1024;
  int vocab = 50257;  ///< the true vocabulary: tokens and labels are drawn from it
  /// The head and embedding hold padded_vocab() rows (1: none). A spec as
  /// parsed is unpadded; run, simulate and plan set it from
  /// --make-vocab-size-divisible-by.
  int vocab_divisor = 1;
  int ffn_mult = 4;           ///< FFN width = ffn_mult * hidden
  int micro_batch_size = 4;   ///< samples per micro-batch
  int bytes_per_element = 4;  ///< fp32 on the cpu backend

  int64_t tokens() const { return int64_t{micro_batch_size} * seq; }
  /// The vocabulary the head and embedding hold (padded_vocab_size).
  int padded_vocab() const { return padded_vocab_size(vocab, vocab_divisor); }
};

/// Parses a preset name or a "gpt:key=value,..." spec.
/// Throws UsageError naming the key or value that is wrong (unknown preset
/// lists the presets; unknown key lists the keys; non-integer or < 1 values;
/// "--model: key 'heads': hidden 768 is not divisible by 10").
ModelSpec parse_model_spec(std::string_view text);

/// --dtype's value as bytes per stored element: "fp32" 4, "bf16" 2.
/// Throws UsageError("--dtype: expected fp32 or bf16, got 'x'").
int parse_dtype(std::string_view text);

/// Names of the presets, for `pipebench list`.
std::vector<std::string> model_preset_names();

/// Parameter count as GPT-2 reports it: the output head is counted as tied
/// to the token embedding (so counted once). gpt-small -> 124,439,808
/// unpadded; the embedding counts padded_vocab() rows, as Megatron-LM's do
/// (gpt-small padded to 50304 -> 124,475,904).
int64_t parameter_count(const ModelSpec& spec);

/// Parameters the units actually hold. The head is UNTIED (its own
/// hidden x padded_vocab() matrix on the last stage), so this is
/// parameter_count(spec) + hidden * padded_vocab() (gpt-small unpadded ->
/// 163,037,184), and
/// equals the sum of the units' param_bytes / bytes_per_element.
int64_t stored_parameter_count(const ModelSpec& spec);

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

/// Unit kinds there are (UnitKind's values are 0 .. kUnitKinds - 1).
inline constexpr int kUnitKinds = static_cast<int>(UnitKind::kHead) + 1;

const char* unit_kind_name(UnitKind kind);
/// Whether `name` is one of unit_kind_name's names.
bool is_unit_kind_name(std::string_view name);
/// Every kind's name in UnitKind order: "embedding, ln1, ..., head".
std::string unit_kind_names();

/// Rows per tile of the cuda kernels' column reductions (the bias and
/// LayerNorm weight gradients): each tile of this many rows leaves one fp32
/// partial sum per column, summed in tile order afterwards.
inline constexpr int64_t kCudaColumnRows = 128;

/// Whose kernels a unit's scratch follows (the workspace tables below).
enum class Kernels : uint8_t {
  kCpu,   ///< the cpu backend's (OpenBLAS, one attention head at a time)
  kCuda,  ///< the cuda backend's (cuBLAS, every head of a sample at once)
};

/// The kernels a run uses: its backend's (BackendTraits::kernels), or where
/// the backend has none of its own (timed) or is not named (a plan, a
/// simulation), those of the device it models: cuda's for any device but
/// "cpu", else the cpu backend's.
/// Example: kernels_for("timed", "h100") == Kernels::kCuda;
///          kernels_for("cpu", "") == Kernels::kCpu.
Kernels kernels_for(std::string_view backend, std::string_view device);

/// How the attention unit computes (the cuda backend's --attention): the
/// naive form materialises the b x a x s x s probabilities and keeps them
/// for the backward; the fused form (cuDNN's flash attention for bf16, the
/// cuda backend's own flash kernels for fp32) keeps its
/// output and the fp32 softmax statistics (one per row: b x a x s) instead,
/// and recomputes the scores in its backward.
enum class Attention : uint8_t {
  kNaive,
  kFused,
};

/// "naive" or "fused", as the flag and the result file spell them.
const char* attention_name(Attention attention);

/// The cuda backend's fp32 flash kernels' tiling: a block takes this many
/// query rows and a tile as many key rows; the head dimension d
/// (1 <= d <= 128) runs zero-padded to flash_head_dim(d): 32, 64 or 128.
inline constexpr int kFlashTileRows = 64;
constexpr int flash_head_dim(int d) { return d <= 32 ? 32 : d <= 64 ? 64 : 128; }

/// What the attention unit's kernels compute, as the cost model counts it
/// (per micro-batch; "a product" is one b*a x s x s x D batch of
/// multiply-adds, 2*b*a*s*s*D FLOPs over the whole square):
///
///  attention            share of the s x s scores     D     products F / B  per score F / B
///  naive                1 (the mask is applied)       d     2 / 4           5 / 4
///  fused, bf16 (cuDNN)  (s + 1) / (2s), the causal    d     2 / 5           5 / 5
///                       triangle with its diagonal
///  fused, fp32 (flash)  the 64 x 64 tiles on or       32,   2 / 7           5 / 10
///                       below the diagonal            64,
///                                                     128
///
/// The forward's products are the scores and the context; the naive
/// backward's dV, dP, dQ and dK; a flash backward recomputes the scores
/// from the softmax statistics (FlashAttention-2: 5 products, 2.5 times the
/// forward), and pipebench's fp32 kernels compute the scores and dP twice,
/// once for dK and dV and once for dQ, so that each gradient is written by
/// one block without atomics (7). Per score, the forward takes the softmax
/// (scale, max, subtract, exp, normalise: 5) and the backward its gradient
/// (naive: P * (dP - rowsum(P * dP)), 4; flash: P recomputed as
/// exp(scale * S - lse), 3, then P * (dP - D), 2, in each pass that forms
/// dS). cuDNN does not publish its tiles; the triangle leaves out the
/// diagonal tiles' upper halves (at 64-row tiles and s = 1024, 3% of the
/// scores).
struct AttentionWork {
  double share = 1;       ///< of the s x s scores
  int head_dim = 0;       ///< D
  int fwd_products = 2;   ///< score-sized products of the forward
  int bwd_products = 4;   ///< of the input-gradient backward
  int fwd_per_score = 5;  ///< elementwise FLOPs per computed score, forward
  int bwd_per_score = 4;  ///< and backward
};
AttentionWork attention_work(const ModelSpec& spec, Attention attention);

/// One operator unit. FLOPs and bytes are for ONE micro-batch.
///
/// The formulas (a binding contract with the cpu backend, which allocates and
/// tracks exactly these bytes). T = mbs * seq tokens, h hidden, a heads,
/// d = h / a, f = ffn * h, V the padded vocabulary (padded_vocab(): the
/// head computes and keeps every padded logit, whose probability and
/// gradient are zero), b = mbs, s = seq, e = bytes_per_element.
/// A GEMM m x k x n costs 2mkn forward, 2mkn backward-input, 2mkn
/// backward-weight; a bias adds m*n forward and m*n backward-weight.
///
///  unit        activation_bytes        boundary_bytes   param_bytes
///  embedding   4 * T (int32 ids)       T*h*e            (V*h + s*h)*e
///  ln1, ln2    (T*h + 2*T)*e           2*T*h*e          2*h*e
///  qkv         T*h*e                   4*T*h*e          (3*h*h + 3*h)*e
///  attention   (3*T*h + b*a*s*s)*e     2*T*h*e          0
///   (fused)    4*T*h*e + 4*b*a*s       2*T*h*e          0
///              (qkv, output, fp32 softmax statistics)
///  attn_out    T*h*e                   T*h*e            (h*h + h)*e
///  fc1_gelu    (T*h + T*f)*e           (T*f + T*h)*e    (h*f + f)*e
///  fc2         T*f*e                   T*h*e            (f*h + h)*e
///  final_norm  (T*h + 2*T)*e           T*h*e            2*h*e
///  head        (T*h + T*V)*e           0                h*V*e
///
/// In a split backward the input-gradient half (I) keeps what the
/// weight-gradient half (W) reads: a unit with weights keeps its
/// activations and the gradient of its output (T*h*e; 3*T*h*e for qkv),
/// except fc1_gelu and head, whose output gradient replaces their kept
/// pre-activation or probabilities in place; attention (no weights) frees
/// its activations at I. split_kept_bytes = activation_bytes + that
/// gradient (embedding, ln, qkv, attn_out, fc2, final_norm), activation_bytes
/// (fc1_gelu, head) or 0 (attention). Inside a chunk the kept output
/// gradient is the buffer it arrived in (counted as activations from then
/// on); only the chunk's last unit copies its output gradient.
///
/// Every unit but the embedding keeps its input, and inside a chunk the
/// unit before writes its output straight into that kept input: a forward
/// holds no boundary as workspace (the next unit's activations are
/// allocated before the unit that writes them runs). A backward holds the
/// output gradient of the unit it runs and its input gradient, each the
/// main part of a boundary (boundary_bytes - residual_bytes: inside a
/// chunk the residual's gradient travels by pointer), and, from the unit
/// that added the residual (attn_out, fc2) down to the LayerNorm that
/// began it, that unit's output gradient, which is the residual's gradient
/// (T*h*e). The chunk's first input and last output are communication
/// buffers, not workspace. Every pass also holds the unit's own scratch,
/// which depends on the kernels (Kernels). The cpu backend's, one head at a
/// time:
///
///  unit        forward_scratch_bytes   backward_scratch_bytes      weight_scratch_bytes
///  embedding   4 * T (int32 labels)    0                           0
///  attention   0                       4 * s * s (one head's dS)   0
///  head        8 * T (ids, labels)     8 * T (ids, labels)         0
///  the rest    0                       0                           0
///
/// The cuda backend's, every head of a sample at once; a LayerNorm's
/// forward computes its statistics in its one pass, its input gradient
/// recomputes them (fp32 mean, rstd) for the weight gradient of a full
/// backward, a split W recomputes them; the column reductions of the bias
/// and LayerNorm weight gradients hold fp32 partials, one per column and
/// tile of R = kCudaColumnRows rows (ceil(T / R) tiles, written P below;
/// a bias gradient summed by its GEMM's cuBLASLt epilogue holds the same
/// buffer and writes its first row):
///
///  unit        forward_scratch_bytes   backward_scratch_bytes      weight_scratch_bytes
///  ln1/ln2/fn  0                       8 * T (fp32 mean, rstd)     8 * T + 4 * P * 2h
///  qkv         0                       0                           4 * P * 3h
///  attn_out    0                       0                           4 * P * h
///  fc1_gelu    0                       0                           4 * P * f
///  fc2         0                       0                           4 * P * h
///  attention   0                       a * s * s * e (dS)          0
///   (fused)    0                       4*T*h + 4*b*a*s (bf16:      0
///                                      cuDNN's workspace), 4*b*a*s
///                                      (fp32: the row terms)
///  head        12 * T (labels, fp64    4 * T (labels)              0
///              per-row losses)
///  embedding   0                       0                           8 * T (int32 rows per
///                                                                  token, in order)
///
///  unit        fwd_flops                   bwd_input_flops            bwd_weight_flops
///  embedding   T*h (position add)          0 (ids have no gradient)   2*T*h (scatter-add wte, wpe)
///  ln1/ln2/fn  8*T*h                       10*T*h                     3*T*h (dgamma 2, dbeta 1)
///  qkv         2*T*h*3h + 3*T*h            2*T*3h*h                   2*T*h*3h + 3*T*h
///  attention   4*b*s*s*h + 5*b*a*s*s       8*b*s*s*h + 4*b*a*s*s      0
///   (fused)    attention_work(): the share of the scores its kernels compute
///  attn_out    2*T*h*h + 2*T*h (+resid)    2*T*h*h                    2*T*h*h + T*h
///  fc1_gelu    2*T*h*f + T*f + 8*T*f       2*T*f*h + 12*T*f           2*T*h*f + T*f
///  fc2         2*T*f*h + 2*T*h (+resid)    2*T*f*h                    2*T*f*h + T*h
///  head        2*T*h*V + 5*T*V             2*T*V*h + 2*T*V            2*T*h*V
/// Elementwise counts: LayerNorm 8 flops/element forward, 10 backward-input,
/// 3 backward-weight; GeLU (tanh form) 8 forward, 12 backward; softmax 5 per
/// score forward (scale, max, subtract, exp, normalise) and 4 backward;
/// cross-entropy 5 per logit forward, 2 backward. The naive attention's
/// scores and context GEMMs (2 * 2*b*a*s*s*d) count the full s x s square
/// (the causal mask is applied, not skipped); the fused attention's counts
/// are what its kernels compute (AttentionWork: the causal triangle, the
/// backward's recomputed scores), so that the roofline prices the kernels
/// that run. The `*_elementwise_flops` fields hold the
/// part of each total that is not a GEMM's 2mkn (bias, residual, LayerNorm,
/// GeLU, softmax, cross-entropy, embedding), so a device can run the two at
/// different rates (DeviceSpec::vector_flops).
struct Unit {
  UnitKind kind = UnitKind::kEmbedding;
  int layer = -1;    ///< transformer layer index, -1 outside layers
  std::string name;  ///< "embedding", "l3.qkv", "final_norm", "head"
  double fwd_flops = 0;
  double bwd_input_flops = 0;    ///< backward for the unit's input gradient
  double bwd_weight_flops = 0;   ///< backward for the unit's weight gradient
  int64_t activation_bytes = 0;  ///< kept from forward until backward
  /// Kept from the split backward's I until its W (see the table above).
  int64_t split_kept_bytes = 0;
  /// Bytes that cross a stage boundary placed right after this unit: its
  /// output plus, inside a transformer layer, the residual stream that a
  /// later unit of the layer adds back (after kAttnOut and kFc2 the residual
  /// is already folded in). Gradients crossing back have the same size.
  int64_t boundary_bytes = 0;
  /// Of boundary_bytes, the residual stream's part (T*h*e after ln1, qkv,
  /// attention, ln2 and fc1_gelu; 0 elsewhere). Inside a chunk the residual
  /// and its gradient travel by pointer, not in the boundaries.
  int64_t residual_bytes = 0;
  int64_t param_bytes = 0;
  int64_t forward_scratch_bytes = 0;        ///< scratch while F runs the unit (see above)
  int64_t backward_scratch_bytes = 0;       ///< scratch while B or I runs its input gradient
  int64_t weight_scratch_bytes = 0;         ///< scratch while B or W runs its weight gradient
  double fwd_elementwise_flops = 0;         ///< non-GEMM part of fwd_flops
  double bwd_input_elementwise_flops = 0;   ///< non-GEMM part of bwd_input_flops
  double bwd_weight_elementwise_flops = 0;  ///< non-GEMM part of bwd_weight_flops
  /// Its products run inside a fused kernel (the fused attention: cuDNN's
  /// or the flash kernels), at the device's DeviceSpec::fused_flops rather
  /// than as cuBLAS GEMMs.
  bool fused_products = false;
};

/// Expands a spec into units: embedding; per layer LayerNorm1, QKV,
/// attention, attn-out, LayerNorm2, fc1+GeLU, fc2; final LayerNorm; head.
/// So units.size() == 3 + 7 * layers.
/// `attention` applies to the cuda kernels only (the cpu backend has no
/// fused form). REQUIRES: attention == kNaive unless kernels == kCuda.
std::vector<Unit> expand_units(const ModelSpec& spec, Kernels kernels = Kernels::kCpu,
                               Attention attention = Attention::kNaive);

/// A contiguous range of units [begin, end).
struct UnitRange {
  int begin = 0;
  int end = 0;
  int size() const { return end - begin; }
  friend bool operator==(const UnitRange&, const UnitRange&) = default;
};

/// Units of transformer layer `layer`: [1 + 7*layer, 8 + 7*layer).
inline UnitRange layer_unit_range(int layer) { return {1 + 7 * layer, 8 + 7 * layer}; }

}  // namespace ppb
