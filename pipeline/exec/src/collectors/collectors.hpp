// The collectors' factories and availability probes, one pair per file in
// this folder; collector_registry.cpp lists them (one line each).
#pragma once

#include <memory>
#include <string>

#include "ppb/exec/collector.hpp"

namespace ppb::collectors {

/// Each probe returns "" when the collector can run here, else why not.
std::string nvtx_unavailable();
std::unique_ptr<Collector> make_nvtx(const CollectorContext& context);

std::string cputime_unavailable();
std::unique_ptr<Collector> make_cputime(const CollectorContext& context);

std::string perf_unavailable();
std::unique_ptr<Collector> make_perf(const CollectorContext& context);

std::string cupti_unavailable();
std::unique_ptr<Collector> make_cupti(const CollectorContext& context);

}  // namespace ppb::collectors
