// Test helper: a padded model's gradients laid out as the unpadded model's,
// so that a padded run compares element by element with an unpadded
// reference (the cpu and the cuda chunk tests both use it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ppb/pipeline/model.hpp"

namespace ppb::test {

/// What drop_vocab_padding returns.
struct Unpadded {
  std::vector<std::vector<float>> grads;  ///< as the unpadded model's units hold them
  float padding_max_abs = 0;              ///< the largest |gradient| in the padding
};

/// `grads` are those of units [first_unit, first_unit + grads.size()) of
/// expand_units(padded), in CpuChunk::param_views() order. Drops the
/// embedding's padded wte rows [vocab, padded_vocab) and the head's padded
/// columns of each of its hidden rows.
inline Unpadded drop_vocab_padding(const ModelSpec& padded,
                                   const std::vector<std::vector<float>>& grads, int first_unit) {
  const int64_t h = padded.hidden;
  const int64_t v = padded.vocab;
  const int64_t vp = padded.padded_vocab();
  const std::vector<Unit> units = expand_units(padded);
  Unpadded out;
  auto pad = [&out](float g) { out.padding_max_abs = std::max(out.padding_max_abs, std::abs(g)); };
  for (size_t u = 0; u < grads.size(); ++u) {
    const std::vector<float>& g = grads[u];
    std::vector<float> kept;
    switch (units[static_cast<size_t>(first_unit) + u].kind) {
      case UnitKind::kEmbedding:  // wte [vp, h] then wpe
        for (int64_t i = 0; i < static_cast<int64_t>(g.size()); ++i) {
          if (i >= v * h && i < vp * h) {
            pad(g[static_cast<size_t>(i)]);
          } else {
            kept.push_back(g[static_cast<size_t>(i)]);
          }
        }
        break;
      case UnitKind::kHead:  // [h, vp]
        for (int64_t i = 0; i < static_cast<int64_t>(g.size()); ++i) {
          if (i % vp >= v) {
            pad(g[static_cast<size_t>(i)]);
          } else {
            kept.push_back(g[static_cast<size_t>(i)]);
          }
        }
        break;
      default:
        kept = g;
        break;
    }
    out.grads.push_back(std::move(kept));
  }
  return out;
}

}  // namespace ppb::test
