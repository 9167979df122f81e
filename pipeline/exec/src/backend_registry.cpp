// The backends `--backend` can name: one line each (STYLE rule 8).
#include <string>

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

const std::vector<Entry>& entries() {
  static const std::vector<Entry> kEntries = {
      {{"cpu", "real fp32 GPT training on OpenBLAS (forward, split backward, SGD)", true},
       &make<CpuBackend>},
      {{"timed",
        "no compute: each action sleeps its modelled time; real messages of the modelled sizes",
        false, true},
       &make<TimedBackend>},
      {{"cuda", "the cpu model on a GPU: cuBLAS GEMMs, CUDA kernels, --dtype fp32|bf16", true,
        false, true, 1e-4, kCudaBf16CheckTolerance, true, &cuda::unusable_reason},
       &make_cuda_backend},
  };
  return kEntries;
}

}  // namespace

const std::vector<BackendInfo>& backend_list() {
  static const std::vector<BackendInfo> kList = [] {
    std::vector<BackendInfo> list;
    for (const Entry& e : entries()) list.push_back(e.info);
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

const BackendInfo& backend_info(std::string_view name) { return entry(name).info; }

double check_tolerance(const BackendInfo& info, int bytes_per_element) {
  return bytes_per_element == 2 ? info.check_tolerance_bf16 : info.check_tolerance_fp32;
}

std::unique_ptr<Backend> make_backend(std::string_view name, const BackendConfig& config) {
  return entry(name).make(config);
}

}  // namespace ppb
