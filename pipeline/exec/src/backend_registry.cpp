// The backends `--backend` can name: one line each (STYLE rule 8).
#include <string>

#include "backend_cpu.hpp"
#include "backend_timed.hpp"
#include "ppb/exec/backend.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

using Factory = std::unique_ptr<Backend> (*)(const BackendConfig&);

struct Entry {
  BackendInfo info;
  Factory make;
};

// bf16 storage rounds every stored tensor to 8 significant bits (relative
// error up to 2^-9); docs/metrics.md derives this bound.
constexpr double kCudaBf16CheckTolerance = 5e-2;

template <class T>
std::unique_ptr<Backend> make(const BackendConfig& config) {
  return std::make_unique<T>(config);
}

// Each entry extends the backend's row of the core's traits table
// (backend_traits.hpp), found by name when backend_list() is first read.
const std::vector<Entry>& entries() {
  static const std::vector<Entry> kEntries = {
      {.info = {.name = "cpu",
                .help = "real fp32 GPT training on OpenBLAS (forward, split backward, SGD)",
                .real_gradients = true},
       .make = &make<CpuBackend>},
      {.info = {.name = "timed",
                .help = "no compute: each action sleeps its modelled time; real messages of the "
                        "modelled sizes",
                .modelled_time = true},
       .make = &make<TimedBackend>},
      {.info = {.name = "cuda",
                .help = "the cpu model on a GPU: cuBLAS GEMMs, CUDA kernels, --dtype fp32|bf16",
                .real_gradients = true,
                .bf16 = true,
                .check_tolerance_fp32 = 1e-4,
                .check_tolerance_bf16 = kCudaBf16CheckTolerance,
                .unusable = &cuda::unusable_reason},
       .make = &make_cuda_backend},
  };
  return kEntries;
}

}  // namespace

const std::vector<BackendInfo>& backend_list() {
  static const std::vector<BackendInfo> kList = [] {
    std::vector<BackendInfo> list;
    for (const Entry& e : entries()) {
      const BackendTraits* traits = find_backend_traits(e.info.name);
      PPB_CHECK(traits != nullptr,
                "backend registry: '" + e.info.name + "' has no row in the backend traits table");
      list.push_back(e.info);
      list.back().traits = *traits;
    }
    return list;
  }();
  return kList;
}

namespace {

const Entry& entry(std::string_view name) {
  std::string names;
  for (const Entry& e : entries()) {
    if (e.info.name == name) return e;
    names += (names.empty() ? "" : ", ") + e.info.name;
  }
  throw UsageError("--backend: unknown backend '" + std::string(name) + "' (backends: " + names +
                   ")");
}

}  // namespace

const BackendInfo& backend_info(std::string_view name) {
  return backend_list()[static_cast<size_t>(&entry(name) - entries().data())];
}

double check_tolerance(const BackendInfo& info, int bytes_per_element) {
  return bytes_per_element == 2 ? info.check_tolerance_bf16 : info.check_tolerance_fp32;
}

std::unique_ptr<Backend> make_backend(std::string_view name, const BackendConfig& config) {
  return entry(name).make(config);
}

}  // namespace ppb
