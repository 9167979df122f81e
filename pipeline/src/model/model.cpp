#include "ppb/pipeline/model.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/pipeline/backend_traits.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

constexpr std::string_view kSpecPrefix = "gpt:";
// Each key is capped so that every byte and FLOP count below stays far inside
// int64/double range once the product checks of check_sizes() pass.
constexpr int64_t kMaxValue = int64_t{1} << 24;
// Layers are capped lower: every layer is 7 operator units, each with a name
// and its figures (about 200 bytes), and the partitions and simulator work
// per unit. 2^17 layers are about 900,000 units.
constexpr int64_t kMaxLayers = int64_t{1} << 17;

struct Preset {
  std::string_view name;
  int layers, hidden, heads, seq, vocab, ffn, mbs;
};

// gpt-small is GPT-2 small; gpt-1.3b and gpt-7b take the GPT-3 paper's XL and
// 6.7B shapes (Brown et al. 2020, table 2.1) with seq 2048.
// clang-format off
constexpr Preset kPresets[] = {
    {.name = "gpt-tiny", .layers = 8, .hidden = 128, .heads = 4, .seq = 64, .vocab = 512, .ffn = 4, .mbs = 2},
    {.name = "gpt-small", .layers = 12, .hidden = 768, .heads = 12, .seq = 1024, .vocab = 50257, .ffn = 4, .mbs = 4},
    {.name = "gpt-1.3b", .layers = 24, .hidden = 2048, .heads = 16, .seq = 2048, .vocab = 50257, .ffn = 4, .mbs = 2},
    {.name = "gpt-7b", .layers = 32, .hidden = 4096, .heads = 32, .seq = 2048, .vocab = 50257, .ffn = 4, .mbs = 1},
};
// clang-format on

std::string preset_list() {
  std::string out;
  for (const Preset& p : kPresets) {
    if (!out.empty()) out += ", ";
    out += p.name;
  }
  return out;
}

ModelSpec from_preset(const Preset& p) {
  ModelSpec spec;
  spec.name = std::string(p.name);
  spec.layers = p.layers;
  spec.hidden = p.hidden;
  spec.heads = p.heads;
  spec.seq = p.seq;
  spec.vocab = p.vocab;
  spec.ffn_mult = p.ffn;
  spec.micro_batch_size = p.mbs;
  return spec;
}

// Rejects shapes whose largest tensor or GEMM would not fit the int64 byte
// counts (a spec like seq=16777216 passes the per-key cap but not this).
void check_sizes(const ModelSpec& s) {
  const double t = static_cast<double>(s.micro_batch_size) * s.seq;
  const double h = s.hidden;
  const double v = s.padded_vocab();
  const double largest_bytes =
      4.0 * std::max({static_cast<double>(s.micro_batch_size) * s.heads * s.seq * s.seq, t * v,
                      t * h * s.ffn_mult, h * h * s.ffn_mult, v * h});
  constexpr double kLimit = 0x1p60;
  if (largest_bytes > kLimit) {
    char size[32];
    std::snprintf(size, sizeof size, "%.3g", largest_bytes);
    throw UsageError("--model: '" + s.name + "' is too large: one tensor would take " + size +
                     " bytes");
  }
}

}  // namespace

int padded_vocab_size(int vocab, int divisor) {
  PPB_CHECK(vocab >= 1 && divisor >= 1 && divisor <= kMaxVocabDivisor,
            "padded_vocab_size: vocab and divisor must be >= 1");
  const int64_t padded = (int64_t{vocab} + divisor - 1) / divisor * divisor;
  PPB_CHECK(padded <= std::numeric_limits<int>::max(), "padded_vocab_size: padded vocab overflows");
  return static_cast<int>(padded);
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

ModelSpec parse_model_spec(std::string_view text) {
  for (const Preset& p : kPresets) {
    if (text == p.name) return from_preset(p);
  }
  if (text.substr(0, kSpecPrefix.size()) != kSpecPrefix) {
    throw UsageError("--model: unknown model '" + std::string(text) +
                     "' (presets: " + preset_list() +
                     ", or gpt:layers=L,hidden=H,heads=A,seq=S,vocab=V,ffn=F,mbs=B)");
  }
  ModelSpec spec;  // defaults are gpt-small's
  spec.name = std::string(text);
  struct Key {
    std::string_view name;
    int* field;
    int64_t max;
    bool seen;
  };
  Key keys[] = {
      {"layers", &spec.layers, kMaxLayers, false},      {"hidden", &spec.hidden, kMaxValue, false},
      {"heads", &spec.heads, kMaxValue, false},         {"seq", &spec.seq, kMaxValue, false},
      {"vocab", &spec.vocab, kMaxValue, false},         {"ffn", &spec.ffn_mult, kMaxValue, false},
      {"mbs", &spec.micro_batch_size, kMaxValue, false}};
  std::string_view rest = text.substr(kSpecPrefix.size());
  if (rest.empty()) {
    throw UsageError("--model: expected key=value pairs after 'gpt:', got nothing");
  }
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const size_t eq = item.find('=');
    if (item.empty()) {
      throw UsageError("--model: empty item in '" + std::string(text) + "' (expected key=value)");
    }
    if (eq == std::string_view::npos) {
      throw UsageError("--model: item '" + std::string(item) + "': expected key=value");
    }
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    Key* match = nullptr;
    for (Key& k : keys) {
      if (k.name == key) match = &k;
    }
    if (match == nullptr) {
      throw UsageError("--model: unknown key '" + std::string(key) +
                       "' (keys: layers, hidden, heads, seq, vocab, ffn, mbs)");
    }
    if (match->seen) {
      throw UsageError("--model: key '" + std::string(key) + "' given twice");
    }
    match->seen = true;
    int64_t parsed = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
    if (value.empty() || ec != std::errc{} || end != value.data() + value.size()) {
      throw UsageError("--model: key '" + std::string(key) + "': expected an integer, got '" +
                       std::string(value) + "'");
    }
    if (parsed < 1 || parsed > match->max) {
      throw UsageError("--model: key '" + std::string(key) + "': expected 1.." +
                       std::to_string(match->max) + ", got " + std::to_string(parsed));
    }
    *match->field = static_cast<int>(parsed);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (spec.hidden % spec.heads != 0) {
    throw UsageError("--model: key 'heads': hidden " + std::to_string(spec.hidden) +
                     " is not divisible by " + std::to_string(spec.heads));
  }
  check_sizes(spec);
  return spec;
}

int64_t stored_parameter_count(const ModelSpec& spec) {
  const int64_t h = spec.hidden;
  const int64_t f = int64_t{spec.ffn_mult} * h;
  const int64_t v = spec.padded_vocab();
  const int64_t per_layer =
      2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (h * f + f) + (f * h + h);
  return (v * h + int64_t{spec.seq} * h) + spec.layers * per_layer + 2 * h + h * v;
}

int64_t parameter_count(const ModelSpec& spec) {
  return stored_parameter_count(spec) - int64_t{spec.hidden} * spec.padded_vocab();
}

int parse_dtype(std::string_view text) {
  if (text == "fp32") return 4;
  if (text == "bf16") return 2;
  throw UsageError("--dtype: expected fp32 or bf16, got '" + std::string(text) + "'");
}

Kernels kernels_for(std::string_view backend, std::string_view device) {
  if (const BackendTraits* t = find_backend_traits(backend); t != nullptr && t->kernels)
    return *t->kernels;
  return device.empty() || device == "cpu" ? Kernels::kCpu : Kernels::kCuda;
}

const char* attention_name(Attention attention) {
  switch (attention) {
    case Attention::kNaive:
      return "naive";
    case Attention::kFused:
      return "fused";
  }
  return "?";
}

AttentionWork attention_work(const ModelSpec& spec, Attention attention) {
  const int d = spec.hidden / spec.heads;
  AttentionWork w;
  w.head_dim = d;
  if (attention == Attention::kNaive) return w;
  const double s = spec.seq;
  w.bwd_per_score = 5;
  if (spec.bytes_per_element == 2) {
    w.share = (s + 1) / (2 * s);
    w.bwd_products = 5;
    return w;
  }
  const double blocks = std::ceil(s / kFlashTileRows);
  const double tile = double{kFlashTileRows} * kFlashTileRows;
  w.share = blocks * (blocks + 1) / 2 * tile / (s * s);
  w.head_dim = flash_head_dim(d);
  w.bwd_products = 7;
  w.bwd_per_score = 10;
  return w;
}

std::vector<Unit> expand_units(const ModelSpec& spec, Kernels kernels, Attention attention) {
  PPB_CHECK(attention == Attention::kNaive || kernels == Kernels::kCuda,
            "expand_units: fused attention is a cuda kernel");
  PPB_CHECK(spec.layers >= 1 && spec.hidden >= 1 && spec.heads >= 1 && spec.seq >= 1 &&
                spec.vocab >= 1 && spec.vocab_divisor >= 1 && spec.ffn_mult >= 1 &&
                spec.micro_batch_size >= 1 && spec.bytes_per_element >= 1 &&
                spec.hidden % spec.heads == 0,
            "expand_units: spec not validated by parse_model_spec");
  const int64_t t = spec.tokens();
  const int64_t h = spec.hidden;
  const int64_t a = spec.heads;
  const int64_t f = int64_t{spec.ffn_mult} * h;
  const int64_t v = spec.padded_vocab();
  const int64_t b = spec.micro_batch_size;
  const int64_t s = spec.seq;
  const int64_t e = spec.bytes_per_element;
  const double td = static_cast<double>(t);
  const double hd = static_cast<double>(h);
  const double fd = static_cast<double>(f);
  const double vd = static_cast<double>(v);
  const AttentionWork work = attention_work(spec, attention);
  const double computed_scores =
      static_cast<double>(b * a) * static_cast<double>(s * s) * work.share;
  const double product = 2.0 * computed_scores * work.head_dim;

  std::vector<Unit> units;
  units.reserve(static_cast<size_t>(3 + 7 * spec.layers));
  // Each pass is given as (GEMM flops, elementwise flops); the unit's total
  // is their sum.
  struct Pass {
    double gemm;
    double elementwise;
  };
  auto add = [&units](UnitKind kind, int layer, Pass fwd, Pass bwd_i, Pass bwd_w, int64_t act,
                      int64_t boundary, int64_t params) {
    Unit u;
    u.kind = kind;
    u.layer = layer;
    u.name = layer >= 0 ? "l" + std::to_string(layer) + "." + unit_kind_name(kind)
                        : std::string(unit_kind_name(kind));
    u.fwd_flops = fwd.gemm + fwd.elementwise;
    u.bwd_input_flops = bwd_i.gemm + bwd_i.elementwise;
    u.bwd_weight_flops = bwd_w.gemm + bwd_w.elementwise;
    u.fwd_elementwise_flops = fwd.elementwise;
    u.bwd_input_elementwise_flops = bwd_i.elementwise;
    u.bwd_weight_elementwise_flops = bwd_w.elementwise;
    u.activation_bytes = act;
    u.boundary_bytes = boundary;
    u.param_bytes = params;
    units.push_back(std::move(u));
  };
  auto gemm = [](double m, double k, double n) { return 2.0 * m * k * n; };
  const int64_t ln_act = (t * h + 2 * t) * e;
  const Pass ln_fwd{0, 8 * td * hd};
  const Pass ln_bwd_i{0, 10 * td * hd};
  const Pass ln_bwd_w{0, 3 * td * hd};

  add(UnitKind::kEmbedding, -1, {0, td * hd}, {0, 0}, {0, 2 * td * hd}, 4 * t, t * h * e,
      (v * h + s * h) * e);
  for (int l = 0; l < spec.layers; ++l) {
    add(UnitKind::kLayerNorm1, l, ln_fwd, ln_bwd_i, ln_bwd_w, ln_act, 2 * t * h * e, 2 * h * e);
    add(UnitKind::kQkv, l, {gemm(td, hd, 3 * hd), 3 * td * hd}, {gemm(td, 3 * hd, hd), 0},
        {gemm(td, hd, 3 * hd), 3 * td * hd}, t * h * e, 4 * t * h * e, (3 * h * h + 3 * h) * e);
    // scores (b*a) x s x d x s and context (b*a) x s x s x d: 2 products of
    // 2*b*a*s*s*d = 2*b*s*s*h each, over the share of the scores the
    // kernels compute (attention_work()).
    const int64_t attn_act = attention == Attention::kFused ? 4 * t * h * e + 4 * b * a * s
                                                            : (3 * t * h + b * a * s * s) * e;
    add(UnitKind::kAttention, l,
        {work.fwd_products * product, work.fwd_per_score * computed_scores},
        {work.bwd_products * product, work.bwd_per_score * computed_scores}, {0, 0}, attn_act,
        2 * t * h * e, 0);
    add(UnitKind::kAttnOut, l, {gemm(td, hd, hd), 2 * td * hd}, {gemm(td, hd, hd), 0},
        {gemm(td, hd, hd), td * hd}, t * h * e, t * h * e, (h * h + h) * e);
    add(UnitKind::kLayerNorm2, l, ln_fwd, ln_bwd_i, ln_bwd_w, ln_act, 2 * t * h * e, 2 * h * e);
    add(UnitKind::kFc1Gelu, l, {gemm(td, hd, fd), td * fd + 8 * td * fd},
        {gemm(td, fd, hd), 12 * td * fd}, {gemm(td, hd, fd), td * fd}, (t * h + t * f) * e,
        (t * f + t * h) * e, (h * f + f) * e);
    add(UnitKind::kFc2, l, {gemm(td, fd, hd), 2 * td * hd}, {gemm(td, hd, fd), 0},
        {gemm(td, fd, hd), td * hd}, t * f * e, t * h * e, (f * h + h) * e);
  }
  add(UnitKind::kFinalNorm, -1, ln_fwd, ln_bwd_i, ln_bwd_w, ln_act, t * h * e, 2 * h * e);
  add(UnitKind::kHead, -1, {gemm(td, hd, vd), 5 * td * vd}, {gemm(td, vd, hd), 2 * td * vd},
      {gemm(td, hd, vd), 0}, (t * h + t * v) * e, 0, h * v * e);
  for (Unit& u : units) {
    u.fused_products = u.kind == UnitKind::kAttention && attention == Attention::kFused;
    // The residual stream's part of the boundary: after ln1, qkv, attention,
    // ln2 and fc1_gelu (attn_out and fc2 add it back).
    if (u.kind == UnitKind::kLayerNorm1 || u.kind == UnitKind::kQkv ||
        u.kind == UnitKind::kAttention || u.kind == UnitKind::kLayerNorm2 ||
        u.kind == UnitKind::kFc1Gelu) {
      u.residual_bytes = t * h * e;
    }
    // The kernels' scratch (the tables in model.hpp).
    const bool norm = u.kind == UnitKind::kLayerNorm1 || u.kind == UnitKind::kLayerNorm2 ||
                      u.kind == UnitKind::kFinalNorm;
    if (kernels == Kernels::kCpu) {
      if (u.kind == UnitKind::kEmbedding) u.forward_scratch_bytes = 4 * t;
      if (u.kind == UnitKind::kAttention) u.backward_scratch_bytes = 4 * s * s;
      if (u.kind == UnitKind::kHead) {
        u.forward_scratch_bytes = 8 * t;
        u.backward_scratch_bytes = 8 * t;
      }
    } else {
      // Column reductions: fp32 partials per tile of kCudaColumnRows rows.
      const int64_t tiles = (t + kCudaColumnRows - 1) / kCudaColumnRows;
      if (norm) {
        u.backward_scratch_bytes = 8 * t;
        u.weight_scratch_bytes = 8 * t + tiles * 2 * h * 4;
      }
      if (u.kind == UnitKind::kQkv) u.weight_scratch_bytes = tiles * 3 * h * 4;
      if (u.kind == UnitKind::kAttnOut || u.kind == UnitKind::kFc2) {
        u.weight_scratch_bytes = tiles * h * 4;
      }
      if (u.kind == UnitKind::kFc1Gelu) u.weight_scratch_bytes = tiles * f * 4;
      if (u.kind == UnitKind::kEmbedding) u.weight_scratch_bytes = 8 * t;  // the token chains
      if (u.kind == UnitKind::kAttention) {
        // Fused: cuDNN's workspace (bf16), the flash kernels' row terms (fp32).
        const int64_t fused = (e == 2 ? 4 * t * h : 0) + 4 * b * a * s;
        u.backward_scratch_bytes = attention == Attention::kFused ? fused : a * s * s * e;
      }
      if (u.kind == UnitKind::kHead) {
        u.forward_scratch_bytes = 12 * t;
        u.backward_scratch_bytes = 4 * t;
      }
    }
    switch (u.kind) {
      case UnitKind::kAttention:
        u.split_kept_bytes = 0;
        break;
      case UnitKind::kFc1Gelu:
      case UnitKind::kHead:
        u.split_kept_bytes = u.activation_bytes;
        break;
      case UnitKind::kQkv:
        u.split_kept_bytes = u.activation_bytes + 3 * t * h * e;
        break;
      case UnitKind::kEmbedding:
      case UnitKind::kLayerNorm1:
      case UnitKind::kLayerNorm2:
      case UnitKind::kAttnOut:
      case UnitKind::kFc2:
      case UnitKind::kFinalNorm:
        u.split_kept_bytes = u.activation_bytes + t * h * e;
        break;
    }
  }
  return units;
}

}  // namespace ppb
