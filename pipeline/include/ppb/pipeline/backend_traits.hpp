// What the planner, the memory model and the report know of a backend
// without running it: one row per backend. The exec registry
// (ppb/exec/backend.hpp, backend_list) extends each row with what running
// the backend takes; a backend's name is spelled in these two tables and
// nowhere else, and code that depends on the backend reads its row.
//
//   const BackendTraits* t = find_backend_traits("cuda");
//   t->resident_bytes == kCudaBlasWorkspaceBytes; t->device == true
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/pipeline/model.hpp"

namespace ppb {

/// One backend's row.
struct BackendTraits {
  std::string name;
  /// Whose kernels its units' scratch follows (kernels_for); empty: those of
  /// the device it models (the timed backend: cuda's on a GPU, cpu's on "cpu").
  std::optional<Kernels> kernels = std::nullopt;
  /// Bytes it holds on each stage beside the model for as long as it lives
  /// (MemoryModelOptions::resident_bytes; the cuda backend's cuBLAS workspace).
  int64_t resident_bytes = 0;
  /// Computes on a GPU: device memory figures, out of memory as status `oom`,
  /// and the backend a plan for a GPU cluster assumes (device_backend_traits).
  bool device = false;
};

/// Every backend's row, in the exec registry's order ("cpu", "timed", "cuda").
const std::vector<BackendTraits>& backend_traits_list();

/// The row of `name`, or nullptr (an empty name: a plan or a simulation,
/// which model a device, not a backend).
const BackendTraits* find_backend_traits(std::string_view name);

/// The backend a plan's GPUs run: the one row with `device`.
const BackendTraits& device_backend_traits();

}  // namespace ppb
