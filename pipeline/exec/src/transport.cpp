#include "ppb/exec/transport.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions: MPIX_Query_cuda_support
#endif
#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

#include <climits>
#include <string>

#include "ppb/exec/mpi.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {

const char* wait_strategy_name(WaitStrategy strategy) {
  switch (strategy) {
    case WaitStrategy::kBlock:
      return "block";
    case WaitStrategy::kYield:
      return "yield";
    case WaitStrategy::kSleep:
      return "sleep";
  }
  return "?";
}

WaitStrategy parse_wait_strategy(std::string_view text, std::string_view flag) {
  if (text == "block") return WaitStrategy::kBlock;
  if (text == "yield") return WaitStrategy::kYield;
  if (text == "sleep") return WaitStrategy::kSleep;
  throw UsageError(std::string(flag) + ": unknown wait strategy '" + std::string(text) +
                   "' (strategies: block, yield, sleep)");
}

MpiTransport::MpiTransport(MPI_Comm comm, Matching matching, uint8_t spaces)
    : matching_(matching), spaces_(spaces) {
  lower_timer_slack();  // wait(kSleep) sleeps 20 us at a time on this thread
  PPB_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  PPB_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  PPB_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  PPB_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  void* value = nullptr;
  int flag = 0;
  PPB_MPI_CHECK(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &value, &flag));
  if (flag != 0 && value != nullptr) tag_ub_ = *static_cast<int*>(value);
}

std::string_view MpiTransport::name() const {
  if (spaces_ == memory_space_bit(MemorySpace::kPinnedHost)) return "mpi-staged";
  return matching_ == Matching::kInOrder ? "mpi-ordered" : "mpi";
}

MpiTransport::~MpiTransport() {
  // Outstanding requests at destruction are a bug of the caller; cancel the
  // receives so MPI_Comm_free does not wait on them forever.
  for (MPI_Request& r : requests_) {
    if (r != MPI_REQUEST_NULL) {
      MPI_Cancel(&r);
      MPI_Request_free(&r);
    }
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

RequestId MpiTransport::acquire(MPI_Request request, int64_t bytes, bool receive) {
  RequestId id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<RequestId>(requests_.size());
    requests_.push_back(MPI_REQUEST_NULL);
    bytes_.push_back(0);
    receive_.push_back(0);
  }
  requests_[static_cast<size_t>(id)] = request;
  bytes_[static_cast<size_t>(id)] = bytes;
  receive_[static_cast<size_t>(id)] = receive ? 1 : 0;
  ++outstanding_;
  bytes_in_flight_ += bytes;
  return id;
}

void MpiTransport::release(RequestId request, const MPI_Status& status) {
  const int64_t expected = bytes_[static_cast<size_t>(request)];
  bytes_in_flight_ -= expected;
  if (receive_[static_cast<size_t>(request)] != 0) {
    int count = 0;
    PPB_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
    PPB_CHECK(count == expected, "received " + std::to_string(count) + " bytes, expected " +
                                     std::to_string(expected) + " (tag " +
                                     std::to_string(status.MPI_TAG) + " from rank " +
                                     std::to_string(status.MPI_SOURCE) + ")");
  }
  requests_[static_cast<size_t>(request)] = MPI_REQUEST_NULL;
  free_.push_back(request);
  --outstanding_;
}

RequestId MpiTransport::isend(const std::byte* data, int64_t bytes, int peer, int tag) {
  PPB_CHECK(bytes >= 0 && bytes <= INT_MAX, "message larger than 2 GiB");
  PPB_CHECK(peer != rank_ && peer >= 0 && peer < size_, "isend: bad peer");
  MPI_Request r = MPI_REQUEST_NULL;
  if (matching_ == Matching::kInOrder) tag = rank_;  // one tag per link and direction
  PPB_MPI_CHECK(MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, &r));
  return acquire(r, bytes, false);
}

RequestId MpiTransport::irecv(std::byte* data, int64_t bytes, int peer, int tag) {
  PPB_CHECK(bytes >= 0 && bytes <= INT_MAX, "message larger than 2 GiB");
  PPB_CHECK(peer != rank_ && peer >= 0 && peer < size_, "irecv: bad peer");
  MPI_Request r = MPI_REQUEST_NULL;
  if (matching_ == Matching::kInOrder) tag = peer;
  PPB_MPI_CHECK(MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, &r));
  return acquire(r, bytes, true);
}

bool MpiTransport::test(RequestId request) {
  PPB_CHECK(request >= 0 && static_cast<size_t>(request) < requests_.size() &&
                requests_[static_cast<size_t>(request)] != MPI_REQUEST_NULL,
            "test: not a live request");
  int done = 0;
  MPI_Status status;
  PPB_MPI_CHECK(MPI_Test(&requests_[static_cast<size_t>(request)], &done, &status));
  if (done == 0) return false;
  release(request, status);
  return true;
}

void MpiTransport::wait(RequestId request, WaitStrategy strategy) {
  PPB_CHECK(request >= 0 && static_cast<size_t>(request) < requests_.size() &&
                requests_[static_cast<size_t>(request)] != MPI_REQUEST_NULL,
            "wait: not a live request");
  switch (strategy) {
    case WaitStrategy::kBlock: {
      MPI_Status status;
      PPB_MPI_CHECK(MPI_Wait(&requests_[static_cast<size_t>(request)], &status));
      release(request, status);
      return;
    }
    case WaitStrategy::kYield:
    case WaitStrategy::kSleep:
      poll_until([&] { return test(request); }, strategy,
                 [&] { return bytes_in_flight_ >= kLargeMessageBytes; });
      return;
  }
}

RequestId Transport::iallreduce_sum(float* /*data*/, int64_t /*count*/) {
  throw UsageError("--transport " + std::string(name()) +
                   ": has no all-reduce for data parallelism (use --transport mpi)");
}

bool MpiTransport::can_reduce(MemorySpace space) const {
  // Not device memory even where MPI is CUDA-aware: Open MPI's CUDA support
  // covers point-to-point and blocking collectives, not MPI_Iallreduce.
  // Host memory only where it moves it (mpi-staged: pinned only, so a host
  // backend's all-reduce is staged as a device backend's is).
  return (space == MemorySpace::kHost || space == MemorySpace::kPinnedHost) && can_access(space);
}

RequestId MpiTransport::iallreduce_sum(float* data, int64_t count) {
  PPB_CHECK(count >= 0 && count <= INT_MAX, "all-reduce of more than 2^31-1 values");
  MPI_Request r = MPI_REQUEST_NULL;
  PPB_MPI_CHECK(
      MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm_, &r));
  return acquire(r, count * static_cast<int64_t>(sizeof(float)), false);
}

bool mpi_cuda_aware() {
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
  // Compile-time support says the headers know the call; the run-time
  // answer says whether the library loaded now was built with CUDA.
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

void lower_timer_slack() { prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); }

namespace detail {

double poll_clock_seconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void poll_pause(WaitStrategy strategy) {
  switch (strategy) {
    case WaitStrategy::kBlock:
    case WaitStrategy::kYield:
      sched_yield();
      return;
    case WaitStrategy::kSleep: {
      // 20 us: shorter pauses (5 us) made 8 ranks on 2 cores poll so often
      // that they slowed the ranks with work; longer ones (50-100 us) did
      // not measurably lower the overhead on the loaded machine (see
      // executor.cpp for the figures).
      const timespec pause{0, 20'000};
      nanosleep(&pause, nullptr);
      return;
    }
  }
}

}  // namespace detail

}  // namespace ppb
