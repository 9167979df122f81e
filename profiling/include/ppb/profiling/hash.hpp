// FNV-1a, 64 bits: the one hash pipebench uses to compare bytes across
// ranks and runs (gradients under --check, what each rank was asked to do).
// Not for security; equal inputs hash equal in every process and build.
//
// Example:
//   uint64_t h = ppb::fnv1a("run --schedule 1f1b");
//   h = ppb::fnv1a(more_bytes, h);  // continues the same hash
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ppb {

inline constexpr uint64_t kFnv1aSeed = 14695981039346656037ULL;

/// Folds `size` bytes at `data` into `hash` (kFnv1aSeed to start).
inline uint64_t fnv1a(const void* data, size_t size, uint64_t hash = kFnv1aSeed) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 1099511628211ULL;
  return hash;
}

inline uint64_t fnv1a(std::string_view text, uint64_t hash = kFnv1aSeed) {
  return fnv1a(text.data(), text.size(), hash);
}

}  // namespace ppb
