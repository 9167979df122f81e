// The backends' traits table (backend_traits.hpp): one row per backend.
#include "ppb/pipeline/backend_traits.hpp"

#include <algorithm>

#include "ppb/pipeline/memory_model.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {

const std::vector<BackendTraits>& backend_traits_list() {
  static const std::vector<BackendTraits> kList = {
      {.name = "cpu", .kernels = Kernels::kCpu},
      {.name = "timed", .kernels = std::nullopt},  // the kernels of the device it models
      {.name = "cuda",
       .kernels = Kernels::kCuda,
       .resident_bytes = kCudaBlasWorkspaceBytes,
       .device = true},
  };
  return kList;
}

const BackendTraits* find_backend_traits(std::string_view name) {
  const auto& list = backend_traits_list();
  const auto it = std::find_if(list.begin(), list.end(),
                               [name](const BackendTraits& t) { return t.name == name; });
  return it == list.end() ? nullptr : &*it;
}

const BackendTraits& device_backend_traits() {
  const auto& list = backend_traits_list();
  PPB_CHECK(
      std::count_if(list.begin(), list.end(), [](const BackendTraits& t) { return t.device; }) == 1,
      "backend traits: exactly one backend computes on a GPU");
  return *std::find_if(list.begin(), list.end(), [](const BackendTraits& t) { return t.device; });
}

}  // namespace ppb
