// Transports: how the executor moves bytes between stages. A transport is a
// point-to-point byte mover with request handles (isend/irecv/test/wait);
// the executor takes what to send from the message plan (message_plan.hpp)
// and tags each message with its position on its link (PlannedMessage::seq).
//
// Matching. A transport either matches a receive to the message with its
// (peer, tag) — `mpi` — or, like NCCL, matches the messages between two ranks
// in call order and ignores tags (matches_in_order()). The executor posts
// every link's receives in link order, so both kinds deliver the same bytes
// to the same buffers; under in-order matching a link needs the receive
// buffers the plan computes (PlannedLink::buffers).
//
// Registered transports (one file + one line in transport_registry.cpp,
// STYLE rule 8):
//   mpi          MPI_Isend / MPI_Irecv of MPI_BYTE on a duplicate of the given
//                communicator, matched by tag (MpiTransport). Moves device
//                buffers directly when MPI is CUDA-aware (mpi_cuda_aware(),
//                asked at run time), else the executor stages them.
//   mpi-ordered  the same with one tag per link and direction (the sender's
//                rank), so MPI's non-overtaking rule matches in call order
//                exactly as NCCL will (MpiTransport, Matching::kInOrder).
//   mpi-staged   MPI that moves pinned host memory only, as MPI without
//                device support next to a device backend: the executor
//                stages every message through pinned host buffers with
//                copies on the backend's copy stream (on the CPU this proves
//                the staging path).
//   nccl         ncclSend / ncclRecv on device memory, one 2-rank
//                communicator and stream per link direction
//                (nccl_transport.cpp, nccl_links.hpp); built only with NCCL.
//                Listed in every build: where it cannot run, asking for it
//                is a UsageError saying why.
//
// Staging. Where a transport cannot access the backend's memory space, the
// executor stages through pinned host buffers (step_messages.hpp); a
// transport that can access neither (nccl beside a host backend) is refused
// by the executor with a UsageError.
//
// Example:
//   auto t = ppb::make_transport("mpi", MPI_COMM_WORLD);
//   RequestId r = t->irecv(buf, n, /*peer=*/1, /*tag=*/message.seq);
//   t->wait(r, WaitStrategy::kSleep);
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ppb/exec/memory_space.hpp"
#include "ppb/pipeline/message_plan.hpp"

namespace ppb {

/// How a rank waits for a request (see executor.hpp for the measurements
/// that chose the default).
enum class WaitStrategy : uint8_t {
  kBlock,  ///< MPI_Wait: the MPI library's own (busy-polling) wait
  kYield,  ///< MPI_Test in a loop with sched_yield() between tests
  kSleep,  ///< MPI_Test spinning for kSleepSpinSeconds, then with a 20 us nanosleep between
           ///< tests; as kYield while a large message is in flight (kLargeMessageBytes)
};

/// kSleep first polls without sleeping for this long, so a message that is
/// already on its way (a ping-pong reply, a neighbour that just finished) is
/// taken at MPI latency instead of after a sleep; then it sleeps between
/// polls so a waiting rank leaves the core to the ranks with work.
inline constexpr double kSleepSpinSeconds = 10e-6;

/// kSleep yields instead of sleeping while at least this many bytes of
/// messages are in flight: MPI moves a large message in fragments, each
/// handed on only inside an MPI call of the waiting rank, so a 20 us sleep
/// between calls throttles it (staged 64 MiB device messages reached 0.65x
/// raw MPI with sleeps between tests, 0.96x yielding, on an H200 node).
inline constexpr int64_t kLargeMessageBytes = int64_t{1} << 20;

/// Calls `done()` until it returns true, waiting between calls as `strategy`
/// says (kBlock is treated as kYield here: there is no MPI_Wait for an
/// arbitrary predicate); with kSleep, it yields instead of sleeping while
/// `large_in_flight()` is true. Sleeps use the thread's timer slack: call
/// lower_timer_slack() once on the waiting thread.
template <class Done, class Busy>
void poll_until(Done&& done, WaitStrategy strategy, Busy&& large_in_flight);
/// As above, with nothing large in flight.
template <class Done>
void poll_until(Done&& done, WaitStrategy strategy);

/// Lowers the calling thread's timer slack to 1 ns (Linux default 50 us), so
/// a 20 us nanosleep lasts about 20 us, not 70.
void lower_timer_slack();
/// "block", "yield", "sleep".
const char* wait_strategy_name(WaitStrategy strategy);
/// Parses "block" | "yield" | "sleep"; throws UsageError naming `flag`.
WaitStrategy parse_wait_strategy(std::string_view text, std::string_view flag);

/// Handle of one outstanding send or receive; valid until test() returned
/// true or wait() returned. kNoRequest is never a live handle.
using RequestId = int32_t;
inline constexpr RequestId kNoRequest = -1;

/// A point-to-point byte transport between the ranks of one job.
/// Not thread-safe: one thread (the executor's) calls it.
class Transport {
 public:
  virtual ~Transport() = default;

  virtual std::string_view name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Largest usable tag.
  virtual int tag_ub() const = 0;
  /// True when messages between two ranks match receives in call order and
  /// tags are ignored (NCCL's rule); false when they match by (peer, tag).
  virtual bool matches_in_order() const = 0;
  /// True when isend/irecv can read/write buffers in `space` directly.
  virtual bool can_access(MemorySpace space) const = 0;

  /// Starts sending `bytes` bytes at `data` to rank `peer` with `tag`.
  /// REQUIRES: data stays valid and unmodified until the request completes;
  /// 0 <= bytes <= 2^31-1; peer != rank() (the executor copies locally).
  virtual RequestId isend(const std::byte* data, int64_t bytes, int peer, int tag) = 0;
  /// Starts receiving exactly `bytes` bytes from `peer` with `tag` into data.
  /// A message of another size is a bug (PPB_CHECK at completion).
  virtual RequestId irecv(std::byte* data, int64_t bytes, int peer, int tag) = 0;
  /// True (and the handle released) when the request has completed; makes
  /// progress on every outstanding request either way.
  virtual bool test(RequestId request) = 0;
  /// Returns once the request has completed (the handle is released).
  virtual void wait(RequestId request, WaitStrategy strategy) = 0;
  /// Number of requests not yet completed (for tests and leak checks).
  virtual int outstanding() const = 0;
  /// Bytes of the sends and receives not yet completed (what a waiting rank
  /// must keep progressing); 0 where the transport does not count them.
  virtual int64_t bytes_in_flight() const { return 0; }

  // The collective of data parallelism: a transport over the D replicas of
  // one stage sums each chunk's gradients across them. The default has
  // none (can_reduce() false); `mpi` implements it with MPI_Iallreduce on
  // host memory, and the executor stages a device backend's gradients
  // through pinned host memory for it. A GPU transport would sum device
  // memory with its own collective (ncclAllReduce).

  /// True when iallreduce_sum() can read and write buffers in `space`.
  virtual bool can_reduce(MemorySpace /*space*/) const { return false; }
  /// Starts summing `count` fp32 values at `data`, in place, across every
  /// rank of the transport's group: when test()/wait() report the request
  /// complete, every rank holds the same sum. Collective: every rank starts
  /// the same all-reduces in the same order. REQUIRES: can_reduce() of the
  /// buffer's space; 0 <= count <= 2^31-1; data untouched until complete.
  /// The default throws UsageError naming the transport.
  virtual RequestId iallreduce_sum(float* data, int64_t count);
};

/// MPI_Isend/MPI_Irecv of MPI_BYTE on a private duplicate of `comm` (so the
/// executor's tags never meet another library's messages). Every MPI call
/// goes through PPB_MPI_CHECK. With Matching::kInOrder the caller's tags are
/// ignored: every message carries the sender's rank as its tag (one tag per
/// link and direction), and MPI's non-overtaking rule matches the messages
/// of a link in the order they were sent.
class MpiTransport final : public Transport {
 public:
  enum class Matching : uint8_t { kByTag, kInOrder };
  /// `spaces`: what it moves directly (a bit per MemorySpace); the default is
  /// host and pinned host (MPI without device support).
  explicit MpiTransport(MPI_Comm comm, Matching matching = Matching::kByTag,
                        uint8_t spaces = kHostSpaces);
  static constexpr uint8_t kHostSpaces =
      memory_space_bit(MemorySpace::kHost) | memory_space_bit(MemorySpace::kPinnedHost);
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  std::string_view name() const override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int tag_ub() const override { return tag_ub_; }
  bool matches_in_order() const override { return matching_ == Matching::kInOrder; }
  bool can_access(MemorySpace space) const override {
    return (spaces_ & memory_space_bit(space)) != 0;
  }
  RequestId isend(const std::byte* data, int64_t bytes, int peer, int tag) override;
  RequestId irecv(std::byte* data, int64_t bytes, int peer, int tag) override;
  bool test(RequestId request) override;
  void wait(RequestId request, WaitStrategy strategy) override;
  int outstanding() const override { return outstanding_; }
  int64_t bytes_in_flight() const override { return bytes_in_flight_; }
  /// The host spaces it moves (MPI_Iallreduce is not CUDA-aware even where
  /// point-to-point is): the executor stages device gradients, and a host
  /// backend's under mpi-staged, through pinned host memory.
  bool can_reduce(MemorySpace space) const override;
  /// MPI_Iallreduce(MPI_IN_PLACE, MPI_FLOAT, MPI_SUM) on the transport's
  /// communicator.
  RequestId iallreduce_sum(float* data, int64_t count) override;

 private:
  RequestId acquire(MPI_Request request, int64_t bytes, bool receive);
  void release(RequestId request, const MPI_Status& status);

  MPI_Comm comm_ = MPI_COMM_NULL;
  Matching matching_ = Matching::kByTag;
  uint8_t spaces_ = kHostSpaces;
  int rank_ = 0;
  int size_ = 1;
  int tag_ub_ = 32767;
  std::vector<MPI_Request> requests_;
  std::vector<int64_t> bytes_;  // of each request's message (a receive must get exactly these)
  std::vector<uint8_t> receive_;
  std::vector<RequestId> free_;
  int outstanding_ = 0;
  int64_t bytes_in_flight_ = 0;
};

/// The library a transport is built on, whose raw calls `pipebench p2p`
/// measures it against.
enum class RawBaseline : uint8_t {
  kMpi,   ///< MPI_Isend / MPI_Irecv
  kNccl,  ///< ncclSend / ncclRecv
};

/// A registered transport, for `pipebench list` and error messages.
struct TransportInfo {
  std::string name;
  std::string help;       ///< one line
  bool available = true;  ///< can run here (built in, and its hardware is present)
  std::string why_not;    ///< when not available: why, in a few words
  RawBaseline baseline = RawBaseline::kMpi;
};
/// Every registered transport ("mpi", "mpi-ordered", "mpi-staged", "nccl").
const std::vector<TransportInfo>& transport_list();

/// Makes the transport called `name` over `comm`; collective over `comm`.
/// Throws UsageError("--transport: unknown transport 'x' (transports: mpi, ...)"),
/// or for a transport that cannot run here a UsageError saying why
/// ("--transport nccl: not available in this build (built without NCCL ...)",
/// "--transport nccl: no usable GPU on rank 0: no CUDA driver ...").
std::unique_ptr<Transport> make_transport(std::string_view name, MPI_Comm comm);

/// True when the MPI library moves device memory itself (Open MPI's
/// MPIX_Query_cuda_support(), asked at run time, so the answer is the
/// library's that runs, not the one compiled against). False where the
/// extension is missing. REQUIRES: MPI initialised.
bool mpi_cuda_aware();

namespace detail {
double poll_clock_seconds();
void poll_pause(WaitStrategy strategy);
}  // namespace detail

template <class Done, class Busy>
void poll_until(Done&& done, WaitStrategy strategy, Busy&& large_in_flight) {
  if (done()) return;
  if (strategy == WaitStrategy::kSleep) {
    const double spin_until = detail::poll_clock_seconds() + kSleepSpinSeconds;
    while (detail::poll_clock_seconds() < spin_until) {
      if (done()) return;
    }
  }
  while (!done()) {
    detail::poll_pause(strategy == WaitStrategy::kSleep && large_in_flight() ? WaitStrategy::kYield
                                                                             : strategy);
  }
}

template <class Done>
void poll_until(Done&& done, WaitStrategy strategy) {
  poll_until(std::forward<Done>(done), strategy, [] { return false; });
}

}  // namespace ppb
