// Memory spaces: where the buffers of actions and messages live. A backend
// allocates in its space (Backend::memory_space); a transport says which
// spaces it moves directly (Transport::can_access); the executor stages
// through pinned host buffers where the two differ.
#pragma once

#include <cstdint>

namespace ppb {

/// Where a buffer lives.
enum class MemorySpace : uint8_t {
  kHost,        ///< pageable host memory
  kPinnedHost,  ///< page-locked host memory (a device can DMA it; staging buffers)
  kDevice,      ///< device memory
};

/// "host", "pinned-host", "device".
const char* memory_space_name(MemorySpace space);

/// A set of spaces as bits: memory_space_bit(kHost) | memory_space_bit(kPinnedHost).
constexpr uint8_t memory_space_bit(MemorySpace space) {
  return static_cast<uint8_t>(1u << static_cast<unsigned>(space));
}

}  // namespace ppb
