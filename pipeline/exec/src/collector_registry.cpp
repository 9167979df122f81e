// The collectors `--profile` can name: one line each (STYLE rule 8), and the
// set that fans the executor's hooks out to the active ones.
#include <algorithm>
#include <string>

#include "collectors/collectors.hpp"
#include "ppb/exec/collector.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/log.hpp"

namespace ppb {
namespace {

struct Entry {
  const char* name;
  const char* help;  // one line
  std::string (*unavailable)();
  std::unique_ptr<Collector> (*make)(const CollectorContext&);
  bool device_profiler = false;  // CollectorInfo::device_profiler
};

// clang-format off
const std::vector<Entry>& entries() {
  static const std::vector<Entry> kEntries = {
    {.name = "nvtx", .help = "NVTX ranges per action, message, optimizer step and step (Nsight Systems)", .unavailable = &collectors::nvtx_unavailable, .make = &collectors::make_nvtx},
    {.name = "cputime", .help = "process CPU seconds per action and per step, involuntary context switches per step", .unavailable = &collectors::cputime_unavailable, .make = &collectors::make_cputime},
    {.name = "perf", .help = "hardware counters per step and rank: cycles, instructions, IPC (Linux perf_event_open)", .unavailable = &collectors::perf_unavailable, .make = &collectors::make_perf},
    {.name = "cupti", .help = "device kernels, copies and memsets per action and stream: device busy time, bubble, overlap (CUPTI)", .unavailable = &collectors::cupti_unavailable, .make = &collectors::make_cupti, .device_profiler = true},
  };
  return kEntries;
}
// clang-format on

const Entry* find(std::string_view name) {
  for (const Entry& e : entries()) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

}  // namespace

const std::vector<CollectorInfo>& collector_list() {
  static const std::vector<CollectorInfo> kList = [] {
    std::vector<CollectorInfo> list;
    for (const Entry& e : entries()) {
      std::string why = e.unavailable();
      list.push_back({e.name, e.help, why.empty(), std::move(why), e.device_profiler});
    }
    return list;
  }();
  return kList;
}

void check_collector_names(const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    if (find(n) != nullptr) continue;
    std::string available;
    std::string other;
    for (const CollectorInfo& c : collector_list())
      (c.available ? available : other) +=
          ((c.available ? available : other).empty() ? "" : ", ") + c.name;
    throw UsageError("--profile: unknown collector '" + n +
                     "' (collectors: " + (available.empty() ? "none" : available) +
                     (other.empty() ? "" : "; not available here: " + other) + ")");
  }
}

std::unique_ptr<Collector> make_collector(std::string_view name, const CollectorContext& context) {
  const Entry* e = find(name);
  if (e == nullptr) check_collector_names({std::string(name)});
  PPB_CHECK(e != nullptr, "check_collector_names accepted an unknown name");
  std::string why = e->unavailable();
  if (!why.empty()) throw CollectorUnavailable(why);
  return e->make(context);
}

CollectorSet::CollectorSet(MPI_Comm comm, const std::vector<std::string>& names,
                           const CollectorContext& context, Instrumentation* extra)
    : extra_(extra) {
  check_collector_names(names);
  int rank = 0;
  int size = 1;
  PPB_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  PPB_MPI_CHECK(MPI_Comm_size(comm, &size));
  for (const std::string& name : names) {
    const bool repeated =
        std::any_of(collectors_.begin(), collectors_.end(),
                    [&](const std::unique_ptr<Collector>& c) { return c && c->name() == name; });
    std::unique_ptr<Collector> mine;
    std::string why;
    try {
      mine = make_collector(name, context);
    } catch (const CollectorUnavailable& e) {
      why = e.what();
    }
    // On only where it started on every rank, so every stage has its figures.
    int ok = mine ? 1 : 0;
    std::vector<int> all(static_cast<size_t>(size));
    PPB_MPI_CHECK(MPI_Allgather(&ok, 1, MPI_INT, all.data(), 1, MPI_INT, comm));
    std::string off;
    for (int r = 0; r < size; ++r) {
      if (all[static_cast<size_t>(r)] == 0) off += (off.empty() ? "" : ", ") + std::to_string(r);
    }
    if (!off.empty()) {
      if (rank == 0) {
        const std::string detail = all[0] == 0 ? "rank 0: " + why : "unavailable on ranks " + off;
        log::warn_once("collector:" + name,
                       "--profile " + name + ": off (" + detail + "); the run goes on without it");
      }
      continue;
    }
    if (!repeated) collectors_.push_back(std::move(mine));
  }
}

CollectorSet::~CollectorSet() = default;

std::vector<std::string> CollectorSet::active() const {
  std::vector<std::string> out;
  for (const auto& c : collectors_) out.emplace_back(c->name());
  return out;
}

std::string CollectorSet::device_profiler() const {
  for (const auto& c : collectors_) {
    const Entry* e = find(c->name());
    if (e != nullptr && e->device_profiler) return e->name;
  }
  return "";
}

// Begin hooks: the extra hooks first, then the collectors in order; end hooks
// in reverse, so that ranges of different collectors nest.
void CollectorSet::step_begin(int step) {
  if (extra_ != nullptr) extra_->step_begin(step);
  for (auto& c : collectors_) c->step_begin(step);
}
void CollectorSet::step_end(int step) {
  for (auto it = collectors_.rbegin(); it != collectors_.rend(); ++it) (*it)->step_end(step);
  if (extra_ != nullptr) extra_->step_end(step);
}
void CollectorSet::action_begin(int stage, const Action& action) {
  if (extra_ != nullptr) extra_->action_begin(stage, action);
  for (auto& c : collectors_) c->action_begin(stage, action);
}
void CollectorSet::action_end(int stage, const Action& action) {
  for (auto it = collectors_.rbegin(); it != collectors_.rend(); ++it)
    (*it)->action_end(stage, action);
  if (extra_ != nullptr) extra_->action_end(stage, action);
}
void CollectorSet::launch_begin(int stage, const Action& action) {
  if (extra_ != nullptr) extra_->launch_begin(stage, action);
  for (auto& c : collectors_) c->launch_begin(stage, action);
}
void CollectorSet::launch_end(int stage, const Action& action) {
  for (auto it = collectors_.rbegin(); it != collectors_.rend(); ++it)
    (*it)->launch_end(stage, action);
  if (extra_ != nullptr) extra_->launch_end(stage, action);
}
void CollectorSet::comm_begin(const CommRecord& record) {
  if (extra_ != nullptr) extra_->comm_begin(record);
  for (auto& c : collectors_) c->comm_begin(record);
}
void CollectorSet::comm_end(const CommRecord& record) {
  for (auto it = collectors_.rbegin(); it != collectors_.rend(); ++it) (*it)->comm_end(record);
  if (extra_ != nullptr) extra_->comm_end(record);
}
void CollectorSet::optimizer_begin(int chunk) {
  if (extra_ != nullptr) extra_->optimizer_begin(chunk);
  for (auto& c : collectors_) c->optimizer_begin(chunk);
}
void CollectorSet::optimizer_end(int chunk) {
  for (auto it = collectors_.rbegin(); it != collectors_.rend(); ++it) (*it)->optimizer_end(chunk);
  if (extra_ != nullptr) extra_->optimizer_end(chunk);
}

CollectorStepFigures CollectorSet::finish_step(const StepRecord& record) {
  CollectorStepFigures out;
  for (auto& c : collectors_) c->finish_step(record, out[std::string(c->name())]);
  return out;
}
void CollectorSet::measure_begin() {
  for (auto& c : collectors_) c->measure_begin();
}
void CollectorSet::measure_end() {
  for (auto it = collectors_.rbegin(); it != collectors_.rend(); ++it) (*it)->measure_end();
}

}  // namespace ppb
