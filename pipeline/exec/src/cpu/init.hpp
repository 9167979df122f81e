// Deterministic parameter initialisation and synthetic data (counter-based,
// so every rank draws the same numbers for the same unit whatever the
// partition). Private to ppb_cpu_kernels.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ppb/pipeline/model.hpp"

namespace ppb::cpu {

/// splitmix64's finaliser: a bijective 64-bit mix.
uint64_t splitmix64(uint64_t x);

/// One parameter tensor of a unit: its element count and how it starts.
/// A matrix padded in its columns (the head's padded vocabulary) says so:
/// rows of `width` elements of which the first `drawn` are drawn as the
/// unpadded matrix's (so padding leaves them unchanged) and the rest are 0.
struct TensorSpec {
  int64_t count = 0;
  enum class Init : uint8_t { kNormal, kOnes, kZeros } init = Init::kZeros;
  int64_t width = 0;  ///< 0: not padded in its columns
  int64_t drawn = 0;  ///< columns drawn of each `width` (width > 0)
};

/// The tensors of a unit in CpuChunk::param_views() order.
std::vector<TensorSpec> unit_tensors(const ModelSpec& spec, UnitKind kind);

/// Fills `out` (the unit's flat parameters) from (seed, unit index, tensor):
/// N(0, 0.02) weights and embeddings, LayerNorm gamma 1 and beta 0, biases 0.
void init_unit_params(const ModelSpec& spec, UnitKind kind, uint64_t seed, int unit_index,
                      std::span<float> out);

}  // namespace ppb::cpu
