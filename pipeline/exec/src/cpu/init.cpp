#include "init.hpp"

#include <cmath>
#include <numbers>

#include "ppb/exec/cpu_model.hpp"
#include "ppb/exec/unit_flow.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::cpu {
namespace {

constexpr double kInitStd = 0.02;

// Uniform in (0, 1], 53 bits.
double unit_uniform(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

uint64_t key_of(uint64_t a, uint64_t b, uint64_t c) {
  return splitmix64(splitmix64(splitmix64(a) ^ b) ^ c);
}

}  // namespace

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::vector<TensorSpec> unit_tensors(const ModelSpec& spec, UnitKind kind) {
  using Init = TensorSpec::Init;
  const int64_t h = spec.hidden;
  const int64_t f = int64_t{spec.ffn_mult} * h;
  const int64_t v = spec.padded_vocab();
  switch (kind) {
    case UnitKind::kEmbedding:
      return {{v * h, Init::kNormal}, {int64_t{spec.seq} * h, Init::kNormal}};
    case UnitKind::kLayerNorm1:
    case UnitKind::kLayerNorm2:
    case UnitKind::kFinalNorm:
      return {{h, Init::kOnes}, {h, Init::kZeros}};
    case UnitKind::kQkv:
      return {{h * 3 * h, Init::kNormal}, {3 * h, Init::kZeros}};
    case UnitKind::kAttention:
      return {};
    case UnitKind::kAttnOut:
      return {{h * h, Init::kNormal}, {h, Init::kZeros}};
    case UnitKind::kFc1Gelu:
      return {{h * f, Init::kNormal}, {f, Init::kZeros}};
    case UnitKind::kFc2:
      return {{f * h, Init::kNormal}, {h, Init::kZeros}};
    case UnitKind::kHead:
      return {{.count = h * v, .init = Init::kNormal, .width = v, .drawn = spec.vocab}};
  }
  PPB_CHECK(false, "unknown unit kind");
  return {};
}

void init_unit_params(const ModelSpec& spec, UnitKind kind, uint64_t seed, int unit_index,
                      std::span<float> out) {
  const std::vector<TensorSpec> tensors = unit_tensors(spec, kind);
  size_t offset = 0;
  for (size_t ti = 0; ti < tensors.size(); ++ti) {
    const TensorSpec& t = tensors[ti];
    PPB_CHECK(offset + static_cast<size_t>(t.count) <= out.size(), "parameter span too small");
    float* p = out.data() + offset;
    switch (t.init) {
      case TensorSpec::Init::kOnes:
        for (int64_t i = 0; i < t.count; ++i) p[i] = 1.0f;
        break;
      case TensorSpec::Init::kZeros:
        for (int64_t i = 0; i < t.count; ++i) p[i] = 0.0f;
        break;
      case TensorSpec::Init::kNormal: {
        const uint64_t key = key_of(seed, static_cast<uint64_t>(unit_index), ti);
        for (int64_t i = 0; i < t.count; ++i) {
          // The element's index in the unpadded matrix: padding moves no draw.
          int64_t drawn_index = i;
          if (t.width > 0) {
            const int64_t col = i % t.width;
            if (col >= t.drawn) {
              p[i] = 0.0f;
              continue;
            }
            drawn_index = i / t.width * t.drawn + col;
          }
          // Box-Muller on two counter-based uniforms per element.
          const uint64_t c = 2 * static_cast<uint64_t>(drawn_index);
          const double u1 = unit_uniform(splitmix64(key ^ splitmix64(c)));
          const double u2 = unit_uniform(splitmix64(key ^ splitmix64(c + 1)));
          const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
          p[i] = static_cast<float>(kInitStd * z);
        }
        break;
      }
    }
    offset += static_cast<size_t>(t.count);
  }
  PPB_CHECK(offset == out.size(), "parameter span size differs from the unit's tensors");
}

}  // namespace ppb::cpu

namespace ppb {

void synthetic_tokens(const ModelSpec& spec, uint64_t seed, int64_t mb, std::span<int32_t> tokens,
                      std::span<int32_t> labels) {
  PPB_CHECK(static_cast<int64_t>(tokens.size()) == spec.tokens() &&
                static_cast<int64_t>(labels.size()) == spec.tokens(),
            "token spans must hold micro_batch_size*seq elements");
  const uint64_t key =
      cpu::splitmix64(cpu::splitmix64(seed ^ 0x5eedda7aULL) ^ static_cast<uint64_t>(mb));
  const auto draw = [&](int64_t sample, int64_t pos) {
    const uint64_t bits = cpu::splitmix64(
        key ^ cpu::splitmix64((static_cast<uint64_t>(sample) << 32) ^ static_cast<uint64_t>(pos)));
    return static_cast<int32_t>(bits % static_cast<uint64_t>(spec.vocab));
  };
  for (int64_t b = 0; b < spec.micro_batch_size; ++b) {
    for (int64_t s = 0; s < spec.seq; ++s) {
      const int64_t r = b * spec.seq + s;
      tokens[static_cast<size_t>(r)] = draw(b, s);
      labels[static_cast<size_t>(r)] = draw(b, s + 1);
    }
  }
}

int64_t unit_param_count(const ModelSpec& spec, UnitKind kind) {
  int64_t n = 0;
  for (const cpu::TensorSpec& t : cpu::unit_tensors(spec, kind)) n += t.count;
  return n;
}

UnitFlow unit_flow(const ModelSpec& spec, UnitKind kind, Attention attention) {
  const int64_t t = spec.tokens();
  const int64_t th = t * spec.hidden;
  const int64_t tf = th * spec.ffn_mult;
  UnitFlow u;
  u.resid = th;
  u.keeps_input = true;
  switch (kind) {
    case UnitKind::kEmbedding:
      u = {.in = 0, .out = th, .resid = 0, .kept_extra = t, .held_gradient = th};
      break;
    case UnitKind::kLayerNorm1:
    case UnitKind::kLayerNorm2:
      u.in = th;
      u.out = th;
      u.residual = Residual::kBegin;
      u.kept_extra = 2 * t;
      u.held_gradient = th;
      break;
    case UnitKind::kFinalNorm:
      u.in = th;
      u.out = th;
      u.resid = 0;
      u.kept_extra = 2 * t;
      u.held_gradient = th;
      break;
    case UnitKind::kQkv:
      u.in = th;
      u.out = 3 * th;
      u.residual = Residual::kCarry;
      u.held_gradient = 3 * th;
      break;
    case UnitKind::kAttention:
      u.in = 3 * th;
      u.out = th;
      u.residual = Residual::kCarry;
      if (attention == Attention::kFused) {
        u.kept_extra = th;
        u.kept_f32 = int64_t{spec.micro_batch_size} * spec.heads * spec.seq;
      } else {
        u.kept_extra = int64_t{spec.micro_batch_size} * spec.heads * spec.seq * spec.seq;
      }
      break;
    case UnitKind::kAttnOut:
      u.in = th;
      u.out = th;
      u.residual = Residual::kAdd;
      u.held_gradient = th;
      break;
    case UnitKind::kFc1Gelu:
      u.in = th;
      u.out = tf;
      u.residual = Residual::kCarry;
      u.kept_extra = tf;  // the pre-activation; I turns it into its gradient in place
      break;
    case UnitKind::kFc2:
      u.in = tf;
      u.out = th;
      u.residual = Residual::kAdd;
      u.held_gradient = th;
      break;
    case UnitKind::kHead:
      u.in = th;
      u.out = 0;
      u.resid = 0;
      // The probabilities of every padded logit; I turns them into the logits' gradient.
      u.kept_extra = t * spec.padded_vocab();
      break;
  }
  return u;
}

int64_t cpu_boundary_bytes(const ModelSpec& spec, UnitKind kind) {
  return unit_flow(spec, kind).boundary() * 4;
}

int64_t cpu_activation_bytes(const ModelSpec& spec, UnitKind kind) {
  return unit_flow(spec, kind).kept() * 4;  // fp32, or the embedding's int32 ids
}

}  // namespace ppb
