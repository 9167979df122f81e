#include "run/rank_record.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <utility>

#include "ppb/exec/mpi.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::run {
namespace {

// The archives: Out appends, In reads back; both walk the same field lists
// below (kReading tells the containers whether to size themselves).
struct Out {
  static constexpr bool kReading = false;
  std::vector<char> bytes;
  template <class T>
  void io(T& v) {
    const auto* p = reinterpret_cast<const char*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof v);
  }
};

struct In {
  static constexpr bool kReading = true;
  const std::vector<char>& bytes;
  size_t at = 0;
  template <class T>
  void io(T& v) {
    if (at + sizeof v > bytes.size()) throw UsageError("rank record: truncated");
    std::memcpy(&v, bytes.data() + at, sizeof v);
    at += sizeof v;
  }
};

template <class A>
void fields(A& a, std::string& s);
template <class A, class T>
void fields(A& a, std::vector<T>& v);
template <class A, class K, class V>
void fields(A& a, std::map<K, V>& m);
template <class A>
void fields(A& a, Action& x);
template <class A>
void fields(A& a, ActionTiming& x);
template <class A>
void fields(A& a, CommTiming& x);
template <class A>
void fields(A& a, AllReduceTiming& x);
template <class A>
void fields(A& a, device::DeviceOp& x);
template <class A>
void fields(A& a, device::DeviceBusy& x);
template <class A>
void fields(A& a, StageStep& x);
template <class A>
void fields(A& a, CollectedFigures& x);
template <class A>
void fields(A& a, UnitTime& x);
template <class A>
void fields(A& a, RankStep& x);
template <class A>
void fields(A& a, StageMemory& x);
template <class A>
void fields(A& a, RankRecord& x);

template <class A, class T>
void io(A& a, T& x) {
  if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
    a.io(x);
  } else {
    fields(a, x);
  }
}

template <class A, class... T>
void list(A& a, T&... members) {
  (io(a, members), ...);
}

// Containers: a count, then the elements.
template <class A>
uint64_t count(A& a, uint64_t n) {
  a.io(n);
  return n;
}
template <class A>
void fields(A& a, std::string& s) {
  s.resize(count(a, s.size()));
  for (char& c : s) a.io(c);
}
template <class A, class T>
void fields(A& a, std::vector<T>& v) {
  v.resize(count(a, v.size()));
  for (T& x : v) io(a, x);
}
template <class A, class K, class V>
void fields(A& a, std::map<K, V>& m) {
  const uint64_t n = count(a, m.size());
  if constexpr (A::kReading) {
    m.clear();
    for (uint64_t i = 0; i < n; ++i) {
      K k{};
      V v{};
      io(a, k);
      io(a, v);
      m.emplace(std::move(k), std::move(v));
    }
  } else {
    for (auto& [k, v] : m) {
      K key = k;
      io(a, key);
      io(a, v);
    }
  }
}

// The field lists: one per struct, for both directions.
template <class A>
void fields(A& a, Action& x) {
  list(a, x.kind, x.microbatch, x.chunk);
}
template <class A>
void fields(A& a, ActionTiming& x) {
  list(a, x.action, x.start, x.end, x.wait);
}
template <class A>
void fields(A& a, CommTiming& x) {
  list(a, x.send, x.gradient, x.local, x.microbatch, x.from_virtual, x.to_virtual, x.start, x.end,
       x.bytes);
}
template <class A>
void fields(A& a, AllReduceTiming& x) {
  list(a, x.chunk, x.bytes, x.start, x.end);
}
template <class A>
void fields(A& a, device::DeviceOp& x) {
  list(a, x.kind, x.op_class, x.start, x.end, x.stream, x.device, x.correlation, x.action, x.name,
       x.bytes);
}
template <class A>
void fields(A& a, device::DeviceBusy& x) {
  list(a, x.compute, x.communication, x.overlap, x.optimizer, x.busy);
}
template <class A>
void fields(A& a, StageStep& x) {
  list(a, x.actions, x.comms, x.end, x.actions_end, x.allreduces, x.has_device, x.device_busy,
       x.device);
}
template <class A>
void fields(A& a, CollectedFigures& x) {
  list(a, x.step, x.action);
}
template <class A>
void fields(A& a, UnitTime& x) {
  list(a, x.fwd, x.bwd_input, x.bwd_weight);
}
template <class A>
void fields(A& a, RankStep& x) {
  list(a, x.step, x.origin, x.peak_bytes, x.peak_activation_bytes, x.device_peak_bytes,
       x.collectors, x.probe_seconds, x.kind_seconds);
}
template <class A>
void fields(A& a, StageMemory& x) {
  list(a, x.peak_total, x.peak_activations, x.peak_rss, x.device_peak);
  for (int64_t& v : x.at_peak) a.io(v);
}
template <class A>
void fields(A& a, RankRecord& x) {
  list(a, x.steps, x.memory);
}

}  // namespace

RankStep rank_step(const StepRecord& record, CollectorStepFigures collectors) {
  RankStep out;
  out.origin = record.origin;
  out.peak_bytes = record.peak_bytes;
  out.peak_activation_bytes = record.peak_activation_bytes;
  out.step.end = record.actions_end;
  out.step.actions_end = record.actions_end;
  for (const AllReduceRecord& r : record.allreduces) {
    out.step.allreduces.push_back({r.chunk, r.bytes, r.start, r.end});
    out.step.end = std::max(out.step.end, r.end);
  }
  for (const ActionRecord& a : record.actions)
    out.step.actions.push_back({a.action, a.start, a.end, a.wait});
  for (const CommRecord& c : record.comms) {
    CommTiming t;
    t.send = c.send;
    t.gradient = c.kind == MessageKind::kGradient;
    t.local = c.local;
    t.microbatch = c.microbatch;
    t.from_virtual = c.from_virtual;
    t.to_virtual = c.to_virtual;
    t.start = c.start;
    t.end = c.end;
    t.bytes = c.bytes;
    out.step.comms.push_back(t);
  }
  // A device profiler's operations join the step (align_steps shifts them
  // with the actions); its busy figures cover the whole step on this rank.
  for (auto& [name, figures] : collectors) {
    if (!figures.device) continue;
    out.step.has_device = true;
    out.step.device_busy = device::device_busy(figures.device->ops, 0, std::max(0.0, record.end));
    out.step.device = std::move(figures.device->ops);
    figures.device.reset();
  }
  out.collectors = std::move(collectors);
  return out;
}

std::vector<char> pack(const RankRecord& record) {
  Out out;
  RankRecord copy = record;  // the field lists take mutable references (shared with In)
  fields(out, copy);
  return std::move(out.bytes);
}

RankRecord unpack(const std::vector<char>& bytes) {
  In in{bytes};
  RankRecord r;
  fields(in, r);
  if (in.at != bytes.size()) throw UsageError("rank record: trailing bytes");
  return r;
}

std::vector<RankRecord> gather_records(const RankRecord& mine, MPI_Comm comm) {
  int rank = 0;
  int size = 1;
  PPB_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  PPB_MPI_CHECK(MPI_Comm_size(comm, &size));
  const std::vector<char> bytes = pack(mine);
  int count = static_cast<int>(bytes.size());
  std::vector<int> counts(static_cast<size_t>(size));
  PPB_MPI_CHECK(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm));
  std::vector<int> displs(static_cast<size_t>(size), 0);
  std::vector<char> all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < size; ++r) {
      displs[static_cast<size_t>(r)] = total;
      total += counts[static_cast<size_t>(r)];
    }
    all.resize(static_cast<size_t>(total));
  }
  PPB_MPI_CHECK(MPI_Gatherv(bytes.data(), count, MPI_BYTE, all.data(), counts.data(), displs.data(),
                            MPI_BYTE, 0, comm));
  std::vector<RankRecord> out;
  if (rank == 0) {
    for (int r = 0; r < size; ++r) {
      const char* begin = all.data() + displs[static_cast<size_t>(r)];
      out.push_back(unpack(std::vector<char>(begin, begin + counts[static_cast<size_t>(r)])));
    }
  }
  return out;
}

RankFailure first_failure(const std::string& mine, int rank, MPI_Comm comm) {
  constexpr int kNone = std::numeric_limits<int>::max();
  const int me = mine.empty() ? kNone : rank;
  int first = kNone;
  PPB_MPI_CHECK(MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == kNone) return {};
  int length = rank == first ? static_cast<int>(mine.size()) : 0;
  PPB_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, first, comm));
  std::string text = rank == first ? mine : std::string(static_cast<size_t>(length), '\0');
  PPB_MPI_CHECK(MPI_Bcast(text.data(), length, MPI_CHAR, first, comm));
  return {first, std::move(text)};
}

namespace {

/// Counts summed over the ranks, and the lowest rank's non-empty text.
template <size_t N>
struct RankSums {
  std::array<int64_t, N> sum{};  ///< on rank 0 (zeros elsewhere)
  RankFailure first;             ///< on every rank
};

/// Collective over `comm`: the one way a device backend's figures reach
/// rank 0 (sum_gemm_epilogues, sum_cuda_graphs).
template <size_t N>
RankSums<N> sum_over_ranks(const std::array<int64_t, N>& counts, const std::string& text, int rank,
                           MPI_Comm comm) {
  RankSums<N> out;
  PPB_MPI_CHECK(MPI_Reduce(counts.data(), out.sum.data(), static_cast<int>(N), MPI_INT64_T, MPI_SUM,
                           0, comm));
  out.first = first_failure(text, rank, comm);
  return out;
}

}  // namespace

GemmEpilogueFigures sum_gemm_epilogues(const GemmEpilogueFigures& mine, int rank, MPI_Comm comm) {
  const auto all = sum_over_ranks<2>({mine.fused, mine.refused}, mine.first_refusal, rank, comm);
  const RankFailure& first = all.first;
  return {all.sum[0], all.sum[1],
          first.rank < 0 ? "" : "rank " + std::to_string(first.rank) + ": " + first.what};
}

CudaGraphFigures sum_cuda_graphs(const CudaGraphFigures& mine, int rank, MPI_Comm comm) {
  const auto all = sum_over_ranks<4>({mine.captured, mine.replayed, mine.rebuilt, mine.eager},
                                     mine.eager_reason, rank, comm);
  return {all.sum[0], all.sum[1], all.sum[2], all.sum[3], all.first.what};
}

}  // namespace ppb::run
