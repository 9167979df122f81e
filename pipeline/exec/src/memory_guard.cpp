// The adaptive schedule's memory guard (memory_guard.hpp): decisions are
// taken between steps and agreed by all ranks, never inside a step, because
// a stage that alone reorders its actions can deadlock its neighbours.
#include "ppb/exec/memory_guard.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "ppb/exec/mpi.hpp"
#include "ppb/pipeline/memory_model.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {

MemoryGuard::MemoryGuard(MPI_Comm comm, MemoryGuardOptions options, Generator generate)
    : comm_(comm), options_(options), generate_(std::move(generate)) {
  if (options_.budget_bytes <= 0)
    throw UsageError("--memory-budget: the adaptive schedule's guard needs a budget > 0");
  if (!(options_.guard > 0 && options_.guard <= 1)) {
    throw UsageError("--memory-guard: expected a fraction in (0, 1], got " +
                     std::to_string(options_.guard));
  }
  if (options_.max_inflight < 1) throw UsageError("--inflight: expected >= 1");
  cap_ = options_.max_inflight;
  inflight_ = options_.max_inflight;
}

int64_t MemoryGuard::line_bytes() const {
  return static_cast<int64_t>(
      std::floor(options_.guard * static_cast<double>(options_.budget_bytes)));
}

const Schedule& MemoryGuard::schedule_for(int n) {
  auto it = cache_.find(n);
  if (it == cache_.end()) it = cache_.emplace(n, generate_(n)).first;
  return it->second;
}

const Schedule& MemoryGuard::plan(const Backend& backend) {
  int rank = options_.stage;
  if (rank < 0) PPB_MPI_CHECK(MPI_Comm_rank(comm_, &rank));
  std::vector<ActivationProfile> bytes;  // the guarded schedules have no split backward
  bytes.reserve(static_cast<size_t>(backend.chunks()));
  for (int c = 0; c < backend.chunks(); ++c) bytes.push_back(backend.activation_bytes(c));
  const int64_t static_bytes = backend.memory().current_total();
  const int64_t line = line_bytes();
  // fits[n-1] = 1 when N = n keeps this stage under the line; MIN over ranks.
  std::vector<int> fits(static_cast<size_t>(cap_), 0);
  std::vector<int64_t> predicted(static_cast<size_t>(cap_), 0);
  for (int n = 1; n <= cap_; ++n) {
    const int64_t p = static_bytes + list_peaks(schedule_for(n), rank, bytes).activations;
    predicted[static_cast<size_t>(n - 1)] = p;
    fits[static_cast<size_t>(n - 1)] = p <= line ? 1 : 0;
  }
  PPB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, fits.data(), cap_, MPI_INT, MPI_MIN, comm_));
  int chosen = 1;  // nothing fits: the least memory there is
  for (int n = cap_; n >= 1; --n) {
    if (fits[static_cast<size_t>(n - 1)] != 0) {
      chosen = n;
      break;
    }
  }
  inflight_ = chosen;
  predicted_ = predicted[static_cast<size_t>(chosen - 1)];
  if (chosen < options_.max_inflight) ++acted_;
  history_.push_back(chosen);
  return schedule_for(chosen);
}

void MemoryGuard::observe(int64_t measured_peak_bytes) {
  int over = measured_peak_bytes > line_bytes() ? 1 : 0;
  PPB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &over, 1, MPI_INT, MPI_MAX, comm_));
  if (over != 0 && inflight_ > 1) cap_ = std::min(cap_, inflight_ - 1);
}

}  // namespace ppb
