// The backends `--backend` can name: one line each (STYLE rule 8). `cuda` is
// added by the GPU issue.
#include <string>

#include "ppb/exec/backend.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

using Factory = std::unique_ptr<Backend> (*)(const BackendConfig&);

struct Entry {
  BackendInfo info;
  Factory make;
};

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

std::unique_ptr<Backend> make_backend(std::string_view name, const BackendConfig& config) {
  return entry(name).make(config);
}

}  // namespace ppb
