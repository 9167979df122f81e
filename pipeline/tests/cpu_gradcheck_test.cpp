// Finite-difference checks of the cpu backend's gradients: every parameter
// tensor of every unit kind, and the input gradient of a chunk starting at
// every unit kind, against central differences of the fp32 loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "ppb/exec/cpu_model.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/profiling/memory.hpp"

extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace ppb {
namespace {

void single_thread_blas() {
  if (openblas_set_num_threads != nullptr) openblas_set_num_threads(1);
}

ModelSpec tiny() {
  return parse_model_spec("gpt:layers=1,hidden=16,heads=2,seq=8,vocab=32,ffn=4,mbs=2");
}

// Larger weights than the N(0, 0.02) init make every unit's gradient large
// against the fp32 rounding noise of the loss, so that central differences
// are a sharp test. Biases and LayerNorm parameters move off 0 and 1 too, so
// that a kernel that ignores one of them fails.
constexpr double kWeightGain = 5.0;
void spread_weights(CpuChunk& chunk) {
  uint64_t state = 77;
  for (std::span<float> p : chunk.mutable_param_views()) {
    for (float& x : p) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      const double u = static_cast<double>(state >> 11) / 9007199254740992.0 - 0.5;
      if (x == 1.0f) {
        x = static_cast<float>(1.0 + 0.4 * u);  // LayerNorm gamma
      } else if (x == 0.0f) {
        x = static_cast<float>(0.2 * u);  // biases, LayerNorm beta
      } else {
        x = static_cast<float>(x * kWeightGain);
      }
    }
  }
}

// Loss of micro-batch 0 for the chunk's current weights and the given input;
// leaves no state behind (the backward frees mb 0, grads are zeroed).
double eval_loss(CpuChunk& chunk, const std::vector<float>& input) {
  const std::byte* in = input.empty() ? nullptr : reinterpret_cast<const std::byte*>(input.data());
  chunk.forward(0, in, nullptr);
  const double l = chunk.loss(0);
  std::vector<float> gin(input.size());
  chunk.backward(0, nullptr, gin.empty() ? nullptr : reinterpret_cast<std::byte*>(gin.data()));
  chunk.zero_grads();
  return l;
}

// Central difference of the loss along coordinate x, using the float values
// actually stored.
template <class Eval>
double central_difference(float& x, double eps, Eval eval) {
  const float saved = x;
  x = static_cast<float>(saved + eps);
  const double xp = x;
  const double lp = eval();
  x = static_cast<float>(saved - eps);
  const double xm = x;
  const double lm = eval();
  x = saved;
  return (lp - lm) / (xp - xm);
}

constexpr double kEps = 1e-3;
// |fd - analytic| <= kAbs * max|analytic| of the region + kRel * |analytic|.
constexpr double kAbs = 2e-3;
constexpr double kRel = 2e-2;

// A set of coordinates checked against one scale: a parameter tensor, a part
// of one whose gradients have their own magnitude (q, k, v columns), or a
// block of a boundary tensor (activation, residual).
struct Region {
  std::string name;
  std::vector<size_t> index;
};

Region contiguous(std::string name, size_t begin, size_t count) {
  Region r{std::move(name), {}};
  for (size_t i = 0; i < count; ++i) r.index.push_back(begin + i);
  return r;
}

// Columns [part*w, (part+1)*w) of a row-major matrix of `rows` x `cols`
// starting at `begin`.
Region columns(std::string name, size_t begin, size_t rows, size_t cols, size_t part, size_t w) {
  Region r{std::move(name), {}};
  for (size_t row = 0; row < rows; ++row) {
    for (size_t c = part * w; c < (part + 1) * w; ++c) r.index.push_back(begin + row * cols + c);
  }
  return r;
}

// The parameter regions of a unit (offsets into its flat param_views()).
std::vector<Region> param_regions(const ModelSpec& s, const Unit& u) {
  const size_t h = static_cast<size_t>(s.hidden);
  const size_t f = h * static_cast<size_t>(s.ffn_mult);
  const size_t v = static_cast<size_t>(s.vocab);
  const std::string n = u.name;
  switch (u.kind) {
    case UnitKind::kEmbedding:
      return {contiguous(n + ".wte", 0, v * h),
              contiguous(n + ".wpe", v * h, static_cast<size_t>(s.seq) * h)};
    case UnitKind::kLayerNorm1:
    case UnitKind::kLayerNorm2:
    case UnitKind::kFinalNorm:
      return {contiguous(n + ".gamma", 0, h), contiguous(n + ".beta", h, h)};
    case UnitKind::kQkv:
      // b[k] has no gradient (softmax is invariant to a per-row shift), so
      // it is checked to be zero separately.
      return {columns(n + ".w[q]", 0, h, 3 * h, 0, h), columns(n + ".w[k]", 0, h, 3 * h, 1, h),
              columns(n + ".w[v]", 0, h, 3 * h, 2, h), contiguous(n + ".b[q]", 3 * h * h, h),
              contiguous(n + ".b[v]", 3 * h * h + 2 * h, h)};
    case UnitKind::kAttention:
      return {};
    case UnitKind::kAttnOut:
      return {contiguous(n + ".w", 0, h * h), contiguous(n + ".b", h * h, h)};
    case UnitKind::kFc1Gelu:
      return {contiguous(n + ".w", 0, h * f), contiguous(n + ".b", h * f, f)};
    case UnitKind::kFc2:
      return {contiguous(n + ".w", 0, f * h), contiguous(n + ".b", f * h, h)};
    case UnitKind::kHead:
      return {contiguous(n + ".w", 0, h * v)};
  }
  return {};
}

// The blocks of the boundary tensor after unit `u` (CpuChunk's layout).
std::vector<Region> boundary_regions(const ModelSpec& s, const Unit& u) {
  const size_t t = static_cast<size_t>(s.tokens());
  const size_t h = static_cast<size_t>(s.hidden);
  const size_t th = t * h;
  const size_t tf = th * static_cast<size_t>(s.ffn_mult);
  switch (u.kind) {
    case UnitKind::kEmbedding:
    case UnitKind::kAttnOut:
    case UnitKind::kFc2:
    case UnitKind::kFinalNorm:
      return {contiguous("x", 0, th)};
    case UnitKind::kLayerNorm1:
    case UnitKind::kLayerNorm2:
      return {contiguous("normed", 0, th), contiguous("residual", th, th)};
    case UnitKind::kQkv:
      return {columns("q", 0, t, 3 * h, 0, h), columns("k", 0, t, 3 * h, 1, h),
              columns("v", 0, t, 3 * h, 2, h), contiguous("residual", 3 * th, th)};
    case UnitKind::kAttention:
      return {contiguous("context", 0, th), contiguous("residual", th, th)};
    case UnitKind::kFc1Gelu:
      return {contiguous("gelu", 0, tf), contiguous("residual", tf, th)};
    case UnitKind::kHead:
      return {};
  }
  return {};
}

// Coordinates to check in a region: evenly spread, plus the one with the
// largest analytic gradient. `scale` receives the region's max |gradient|.
std::vector<size_t> sample(const Region& r, const float* grad, size_t count, double& scale) {
  std::vector<size_t> idx;
  const size_t n = r.index.size();
  for (size_t k = 0; k < count && k < n; ++k) idx.push_back(r.index[(2 * k + 1) * n / (2 * count)]);
  size_t best = r.index[0];
  scale = 0;
  for (size_t i : r.index) {
    if (std::abs(grad[i]) > std::abs(grad[best])) best = i;
    scale = std::max(scale, static_cast<double>(std::abs(grad[i])));
  }
  idx.push_back(best);
  return idx;
}

TEST(CpuGradcheck, EveryParameterTensorMatchesCentralDifferences) {
  single_thread_blas();
  const ModelSpec spec = tiny();
  const std::vector<Unit> units = expand_units(spec);
  MemoryTracker mem;
  CpuChunk model(spec, units, {0, static_cast<int>(units.size())}, mem);
  spread_weights(model);

  model.forward(0, nullptr, nullptr);
  model.backward(0, nullptr, nullptr);
  std::vector<std::vector<float>> analytic;
  for (std::span<const float> g : model.grad_views()) analytic.emplace_back(g.begin(), g.end());
  model.zero_grads();

  std::vector<std::span<float>> params = model.mutable_param_views();
  int regions_checked = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    for (const Region& r : param_regions(spec, units[u])) {
      double scale = 0;
      for (size_t i : sample(r, analytic[u].data(), 6, scale)) {
        const double g = analytic[u][i];
        const double fd =
            central_difference(params[u][i], kEps, [&] { return eval_loss(model, {}); });
        EXPECT_NEAR(fd, g, kAbs * scale + kRel * std::abs(g))
            << r.name << " at " << i << " (max |grad| " << scale << ")";
      }
      EXPECT_GT(scale, 1e-3) << r.name << ": gradient vanishes, the check would be empty";
      ++regions_checked;
    }
    if (units[u].kind == UnitKind::kQkv) {
      const size_t h = static_cast<size_t>(spec.hidden);
      for (size_t i = 3 * h * h + h; i < 3 * h * h + 2 * h; ++i) {
        EXPECT_NEAR(analytic[u][i], 0.0f, 1e-6) << "qkv.b[k] at " << i;
      }
    }
  }
  // embedding 2, per layer ln1 2 + qkv 5 + attn_out 2 + ln2 2 + fc1 2 + fc2 2,
  // final norm 2, head 1
  EXPECT_EQ(regions_checked, 2 + 15 + 2 + 1);
}

// A chunk that starts at unit u receives the boundary tensor of unit u-1;
// its grad_input must be the loss's gradient with respect to that tensor.
TEST(CpuGradcheck, InputGradientOfEveryUnitKindMatchesCentralDifferences) {
  single_thread_blas();
  const ModelSpec spec = tiny();
  const std::vector<Unit> units = expand_units(spec);
  const int n = static_cast<int>(units.size());
  for (int start = 1; start < n; ++start) {
    SCOPED_TRACE("chunk starts at " + units[static_cast<size_t>(start)].name);
    MemoryTracker mem;
    CpuChunk front(spec, units, {0, start}, mem);
    CpuChunk back(spec, units, {start, n}, mem);
    spread_weights(front);
    spread_weights(back);
    std::vector<float> input(static_cast<size_t>(front.output_bytes() / 4));
    front.forward(0, nullptr, reinterpret_cast<std::byte*>(input.data()));
    ASSERT_EQ(back.input_bytes(), front.output_bytes());

    std::vector<float> grad(input.size());
    back.forward(0, reinterpret_cast<const std::byte*>(input.data()), nullptr);
    back.backward(0, nullptr, reinterpret_cast<std::byte*>(grad.data()));
    back.zero_grads();
    for (const Region& r : boundary_regions(spec, units[static_cast<size_t>(start - 1)])) {
      double scale = 0;
      for (size_t i : sample(r, grad.data(), 8, scale)) {
        const double fd =
            central_difference(input[i], kEps, [&] { return eval_loss(back, input); });
        EXPECT_NEAR(fd, grad[i], kAbs * scale + kRel * std::abs(grad[i]))
            << r.name << " at " << i << " (max |grad| " << scale << ")";
      }
      EXPECT_GT(scale, 1e-3) << r.name << ": gradient vanishes, the check would be empty";
    }
  }
}

}  // namespace
}  // namespace ppb
