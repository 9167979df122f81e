// The `nccl` transport: ncclSend / ncclRecv of bytes between GPUs, one
// 2-rank communicator and one CUDA stream per link direction (nccl_links.hpp
// explains why this cannot deadlock), completion by events. Built only
// where CMake found NCCL (PPB_HAVE_NCCL).
//
// What the executor must respect (it does; see step_messages.hpp):
//  * a link's sends and its receives are issued in link order (the plan's
//    seq): NCCL has no tags, the k-th send meets the k-th receive;
//  * a send's bytes are complete before isend (the executor sends an
//    output once its action's completion was observed), and a received
//    buffer is read only after test() reported it;
//  * the device is never synchronised as a whole while messages are
//    outstanding (cudaDeviceSynchronize, cudaFree, ...): a posted receive
//    is a kernel that waits for the peer, and a peer that waits for this
//    rank's next send would never get it. Synchronise streams instead.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <climits>
#include <string>
#include <vector>

#include "ppb/exec/cuda_device.hpp"
#include "ppb/exec/gpu_ranks.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/exec/nccl_comm.hpp"
#include "ppb/exec/nccl_links.hpp"
#include "ppb/profiling/check.hpp"
#include "transports.hpp"

namespace ppb {
namespace {

class NcclTransport final : public Transport {
 public:
  explicit NcclTransport(MPI_Comm comm);
  ~NcclTransport() override;
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;

  std::string_view name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int tag_ub() const override { return INT_MAX; }  // tags are not used
  bool matches_in_order() const override { return true; }
  bool can_access(MemorySpace space) const override { return space == MemorySpace::kDevice; }
  RequestId isend(const std::byte* data, int64_t bytes, int peer, int tag) override;
  RequestId irecv(std::byte* data, int64_t bytes, int peer, int tag) override;
  bool test(RequestId request) override;
  void wait(RequestId request, WaitStrategy strategy) override;
  int outstanding() const override { return outstanding_; }

 private:
  struct Channel {  // one link direction
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
  };
  struct Request {
    cudaEvent_t done = nullptr;
    ncclComm_t comm = nullptr;  // null: free
  };
  Channel& channel(std::vector<Channel>& side, int peer, const char* what);
  RequestId record(const Channel& ch);
  void connect(const std::vector<NcclLink>& links);
  static void warm_up(const Channel& ch, bool sender);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::vector<Channel> send_;  // by peer rank (comm null: no link)
  std::vector<Channel> recv_;
  std::vector<Request> requests_;
  std::vector<RequestId> free_;
  int outstanding_ = 0;
};

NcclTransport::NcclTransport(MPI_Comm comm) {
  lower_timer_slack();  // wait(kSleep) sleeps 20 us at a time on this thread
  PPB_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  PPB_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  PPB_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  PPB_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  require_gpus(comm_, "--transport nccl");
  const NodeLocal nl = node_local(comm_);
  const cuda::DeviceBinding binding = cuda::bind_device(nl.rank, nl.size);
  const std::vector<NcclLink> links = nccl_links(size_);
  require_distinct_gpus(comm_, binding.device, links, "--transport nccl");
  send_.resize(static_cast<size_t>(size_));
  recv_.resize(static_cast<size_t>(size_));
  connect(links);
}

// One MPI_Comm_split per round (nccl_links.hpp): the two ranks of each link
// of the round get a 2-rank communicator, the sender first (NCCL rank 0),
// and bootstrap their NCCL communicator over it.
void NcclTransport::connect(const std::vector<NcclLink>& links) {
  int lowest = 0;
  int greatest = 0;
  PPB_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lowest, &greatest));
  for (const std::vector<int>& round : nccl_creation_rounds(links, size_)) {
    int color = MPI_UNDEFINED;
    int key = 0;
    int peer = -1;
    for (const int li : round) {
      const NcclLink& l = links[static_cast<size_t>(li)];
      if (l.from != rank_ && l.to != rank_) continue;
      color = li;
      key = l.from == rank_ ? 0 : 1;
      peer = l.from == rank_ ? l.to : l.from;
    }
    MPI_Comm pair = MPI_COMM_NULL;
    PPB_MPI_CHECK(MPI_Comm_split(comm_, color, key, &pair));
    if (pair == MPI_COMM_NULL) continue;
    Channel ch;
    ch.comm = nccl_comm_over(pair);
    PPB_MPI_CHECK(MPI_Comm_free(&pair));
    // Highest priority: a communication kernel queued behind compute
    // kernels delays the peer, not just this rank.
    PPB_CUDA_CHECK(cudaStreamCreateWithPriority(&ch.stream, cudaStreamNonBlocking, greatest));
    warm_up(ch, key == 0);
    (key == 0 ? send_ : recv_)[static_cast<size_t>(peer)] = ch;
  }
}

// NCCL connects a send/receive pair at its first ncclSend / ncclRecv, on the
// host, and a blocking communicator's first call waits there for the peer's
// first call. The executor posts a step's receives before its sends, so
// two neighbours whose first calls are receives on different links would
// wait for each other. One byte each way, while both ends of the link are
// in the same creation round, makes every later call enqueue-only.
void NcclTransport::warm_up(const Channel& ch, bool sender) {
  void* byte = nullptr;
  PPB_CUDA_CHECK(cudaMallocAsync(&byte, 1, ch.stream));
  PPB_CUDA_CHECK(cudaMemsetAsync(byte, 0, 1, ch.stream));
  if (sender) {
    PPB_NCCL_CHECK(ncclSend(byte, 1, ncclUint8, /*peer=*/1, ch.comm, ch.stream));
  } else {
    PPB_NCCL_CHECK(ncclRecv(byte, 1, ncclUint8, /*peer=*/0, ch.comm, ch.stream));
  }
  PPB_CUDA_CHECK(cudaFreeAsync(byte, ch.stream));
  PPB_CUDA_CHECK(cudaStreamSynchronize(ch.stream));
}

NcclTransport::~NcclTransport() {
  // Outstanding requests here are a bug of the caller (or a failing job):
  // abort the communicators instead of waiting for peers that may be gone.
  for (std::vector<Channel>* side : {&send_, &recv_}) {
    for (Channel& ch : *side) {
      if (ch.comm != nullptr) {
        if (outstanding_ > 0) {
          ncclCommAbort(ch.comm);
        } else {
          ncclCommDestroy(ch.comm);
        }
      }
      if (ch.stream != nullptr) cudaStreamDestroy(ch.stream);
    }
  }
  for (Request& r : requests_) cudaEventDestroy(r.done);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

NcclTransport::Channel& NcclTransport::channel(std::vector<Channel>& side, int peer,
                                               const char* what) {
  PPB_CHECK(peer >= 0 && peer < size_ && peer != rank_, std::string(what) + ": bad peer");
  Channel& ch = side[static_cast<size_t>(peer)];
  PPB_CHECK(ch.comm != nullptr, std::string(what) + ": no link between ranks " +
                                    std::to_string(rank_) + " and " + std::to_string(peer) +
                                    " (the nccl transport connects neighbouring stages only)");
  return ch;
}

RequestId NcclTransport::record(const Channel& ch) {
  RequestId id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<RequestId>(requests_.size());
    Request r;
    PPB_CUDA_CHECK(cudaEventCreateWithFlags(&r.done, cudaEventDisableTiming));
    requests_.push_back(r);
  }
  Request& r = requests_[static_cast<size_t>(id)];
  r.comm = ch.comm;
  PPB_CUDA_CHECK(cudaEventRecord(r.done, ch.stream));
  ++outstanding_;
  return id;
}

// A 0-byte message issues nothing on either end (both ends know its size),
// so the communicator's order stays the same on both.
RequestId NcclTransport::isend(const std::byte* data, int64_t bytes, int peer, int /*tag*/) {
  PPB_CHECK(bytes >= 0, "isend: negative size");
  const Channel& ch = channel(send_, peer, "isend");
  if (bytes > 0) {
    PPB_NCCL_CHECK(
        ncclSend(data, static_cast<size_t>(bytes), ncclUint8, /*peer=*/1, ch.comm, ch.stream));
  }
  return record(ch);
}

RequestId NcclTransport::irecv(std::byte* data, int64_t bytes, int peer, int /*tag*/) {
  PPB_CHECK(bytes >= 0, "irecv: negative size");
  const Channel& ch = channel(recv_, peer, "irecv");
  if (bytes > 0) {
    PPB_NCCL_CHECK(
        ncclRecv(data, static_cast<size_t>(bytes), ncclUint8, /*peer=*/0, ch.comm, ch.stream));
  }
  return record(ch);
}

bool NcclTransport::test(RequestId request) {
  PPB_CHECK(request >= 0 && static_cast<size_t>(request) < requests_.size() &&
                requests_[static_cast<size_t>(request)].comm != nullptr,
            "test: not a live request");
  Request& r = requests_[static_cast<size_t>(request)];
  const cudaError_t rc = cudaEventQuery(r.done);
  if (rc == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not an error; keep it out of the next launch check
    // A peer that failed leaves its partner's kernel waiting: NCCL reports
    // it here (network errors, an aborted peer) instead of a hang.
    ncclResult_t state = ncclSuccess;
    PPB_NCCL_CHECK(ncclCommGetAsyncError(r.comm, &state));
    if (state != ncclSuccess && state != ncclInProgress)
      nccl_call_failed(state, "ncclCommGetAsyncError", __FILE__, __LINE__);
    return false;
  }
  PPB_CUDA_CHECK(rc);
  r.comm = nullptr;
  free_.push_back(request);
  --outstanding_;
  return true;
}

void NcclTransport::wait(RequestId request, WaitStrategy strategy) {
  // kBlock too polls: a blocking cudaEventSynchronize could not see a
  // peer's failure (ncclCommGetAsyncError).
  poll_until([&] { return test(request); },
             strategy == WaitStrategy::kBlock ? WaitStrategy::kYield : strategy);
}

}  // namespace

namespace transports {

std::string nccl_unavailable() { return cuda::unusable_reason(); }

std::unique_ptr<Transport> make_nccl(MPI_Comm comm) {
  return std::make_unique<NcclTransport>(comm);
}

}  // namespace transports
}  // namespace ppb
