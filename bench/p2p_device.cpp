#include "p2p_device.hpp"

#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/exec/gpu_ranks.hpp"
#include "ppb/exec/job_watchdog.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/exec/nccl_links.hpp"
#include "ppb/pipeline/result.hpp"
#include "ppb/profiling/check.hpp"
#if PPB_HAVE_NCCL
#include "ppb/exec/nccl_comm.hpp"
#endif

namespace ppb::cli {
namespace {

constexpr int kTag = 11;

// This rank's neighbours on the ring.
struct Ring {
  int rank = 0;
  int size = 1;
  int next() const { return (rank + 1) % size; }
  int prev() const { return (rank + size - 1) % size; }
};

// The device buffers of the exchange, their pinned host twins for staging,
// and the copy stream.
class Buffers {
 public:
  explicit Buffers(int64_t bytes) {
    const auto n = static_cast<size_t>(bytes);
    PPB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&send), n));
    PPB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&recv), n));
    PPB_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&send_host), n));
    PPB_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&recv_host), n));
    PPB_CUDA_CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  }
  ~Buffers() {
    cudaStreamDestroy(copy);
    cudaFreeHost(recv_host);
    cudaFreeHost(send_host);
    cudaFree(recv);
    cudaFree(send);
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;

  // A copy on the copy stream, waited for (the executor's staging copy).
  void stage(std::byte* dst, const std::byte* src, int64_t bytes) const {
    PPB_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDefault, copy));
    PPB_CUDA_CHECK(cudaStreamSynchronize(copy));
  }

  std::byte* send = nullptr;  // device
  std::byte* recv = nullptr;
  std::byte* send_host = nullptr;  // pinned
  std::byte* recv_host = nullptr;
  cudaStream_t copy = nullptr;
};

// `count` ring exchanges of `bytes` bytes: Buffers::send to the next rank,
// Buffers::recv from the previous one; returns when all completed.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void run(int64_t bytes, int count) = 0;
  /// "direct" or "staged".
  virtual const char* path() const = 0;
};

// Posts one message and waits for it: raw MPI or a Transport.
class Mover {
 public:
  virtual ~Mover() = default;
  virtual RequestId irecv(std::byte* p, int64_t n, int peer) = 0;
  virtual RequestId isend(const std::byte* p, int64_t n, int peer) = 0;
  virtual void wait(RequestId request) = 0;
  virtual bool reaches_device() const = 0;
};

class RawMpi final : public Mover {
 public:
  explicit RawMpi(MPI_Comm comm) : device_(mpi_cuda_aware()) {
    PPB_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  }
  ~RawMpi() override { MPI_Comm_free(&comm_); }
  RawMpi(const RawMpi&) = delete;
  RawMpi& operator=(const RawMpi&) = delete;
  RequestId irecv(std::byte* p, int64_t n, int peer) override {
    requests_.push_back(MPI_REQUEST_NULL);
    PPB_MPI_CHECK(
        MPI_Irecv(p, static_cast<int>(n), MPI_BYTE, peer, kTag, comm_, &requests_.back()));
    return static_cast<RequestId>(requests_.size() - 1);
  }
  RequestId isend(const std::byte* p, int64_t n, int peer) override {
    requests_.push_back(MPI_REQUEST_NULL);
    PPB_MPI_CHECK(
        MPI_Isend(p, static_cast<int>(n), MPI_BYTE, peer, kTag, comm_, &requests_.back()));
    return static_cast<RequestId>(requests_.size() - 1);
  }
  void wait(RequestId request) override {
    PPB_MPI_CHECK(MPI_Wait(&requests_[static_cast<size_t>(request)], MPI_STATUS_IGNORE));
    while (!requests_.empty() && requests_.back() == MPI_REQUEST_NULL) requests_.pop_back();
  }
  bool reaches_device() const override { return device_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<MPI_Request> requests_;
  bool device_ = false;
};

class ViaTransport final : public Mover {
 public:
  ViaTransport(Transport& t, WaitStrategy wait) : t_(t), wait_(wait) {}
  RequestId irecv(std::byte* p, int64_t n, int peer) override { return t_.irecv(p, n, peer, kTag); }
  RequestId isend(const std::byte* p, int64_t n, int peer) override {
    return t_.isend(p, n, peer, kTag);
  }
  void wait(RequestId request) override { t_.wait(request, wait_); }
  bool reaches_device() const override { return t_.can_access(MemorySpace::kDevice); }

 private:
  Transport& t_;
  WaitStrategy wait_;
};

// A receive and a send per exchange, staged through pinned host memory when
// the mover cannot reach device memory (as the executor stages).
class PostedExchange final : public Exchange {
 public:
  PostedExchange(Mover& m, const Buffers& b, Ring ring) : m_(m), b_(b), ring_(ring) {}
  void run(int64_t bytes, int count) override {
    const bool staged = !m_.reaches_device();
    for (int i = 0; i < count; ++i) {
      if (staged) b_.stage(b_.send_host, b_.send, bytes);
      const RequestId r = m_.irecv(staged ? b_.recv_host : b_.recv, bytes, ring_.prev());
      const RequestId s = m_.isend(staged ? b_.send_host : b_.send, bytes, ring_.next());
      m_.wait(r);
      m_.wait(s);
      if (staged) b_.stage(b_.recv, b_.recv_host, bytes);
    }
  }
  const char* path() const override { return m_.reaches_device() ? "direct" : "staged"; }

 private:
  Mover& m_;
  const Buffers& b_;
  Ring ring_;
};

#if PPB_HAVE_NCCL
// nccl-tests' sendrecv: a grouped ncclSend + ncclRecv per exchange on one
// stream over a communicator of every rank, `count` launches, then one wait.
class RawNccl final : public Exchange {
 public:
  RawNccl(const Buffers& b, Ring ring, MPI_Comm comm) : b_(b), ring_(ring) {
    comm_ = nccl_comm_over(comm);
    PPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~RawNccl() override {
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }
  RawNccl(const RawNccl&) = delete;
  RawNccl& operator=(const RawNccl&) = delete;
  void run(int64_t bytes, int count) override {
    const auto n = static_cast<size_t>(bytes);
    for (int i = 0; i < count; ++i) {
      PPB_NCCL_CHECK(ncclGroupStart());
      PPB_NCCL_CHECK(ncclSend(b_.send, n, ncclUint8, ring_.next(), comm_, stream_));
      PPB_NCCL_CHECK(ncclRecv(b_.recv, n, ncclUint8, ring_.prev(), comm_, stream_));
      PPB_NCCL_CHECK(ncclGroupEnd());
    }
    // Poll rather than block, so a peer's failure shows here, not as a hang.
    poll_until(
        [&] {
          const cudaError_t rc = cudaStreamQuery(stream_);
          if (rc == cudaSuccess) return true;
          if (rc != cudaErrorNotReady) PPB_CUDA_CHECK(rc);
          (void)cudaGetLastError();
          ncclResult_t state = ncclSuccess;
          PPB_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
          if (state != ncclSuccess && state != ncclInProgress)
            nccl_call_failed(state, "ncclCommGetAsyncError", __FILE__, __LINE__);
          return false;
        },
        WaitStrategy::kYield);
  }
  const char* path() const override { return "direct"; }

 private:
  const Buffers& b_;
  Ring ring_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};
#endif

// The pattern rank `src` sends at `bytes`: never 0, so a receive buffer
// zeroed before the check shows a message that never came.
std::vector<std::byte> pattern(int src, int64_t bytes) {
  std::vector<std::byte> p(static_cast<size_t>(bytes));
  for (int64_t k = 0; k < bytes; ++k)
    p[static_cast<size_t>(k)] =
        static_cast<std::byte>(1 + (k * 131 + int64_t{src} * 29 + bytes) % 255);
  return p;
}

int iterations_for(int64_t bytes, int iters) {
  if (bytes <= (int64_t{64} << 10)) return iters;
  return std::max(4, static_cast<int>(static_cast<int64_t>(iters) * (int64_t{64} << 10) / bytes));
}

// Seconds per exchange: warm-up, then `iters` exchanges; the slowest rank's.
double time_exchange(Exchange& x, int64_t bytes, int warmup, int iters, MPI_Comm comm) {
  x.run(bytes, warmup);
  PPB_MPI_CHECK(MPI_Barrier(comm));
  const double start = MPI_Wtime();
  x.run(bytes, iters);
  double seconds = (MPI_Wtime() - start) / iters;
  PPB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, comm));
  return seconds;
}

// One exchange into a zeroed buffer; wrong bytes summed over the ranks.
int64_t check_exchange(Exchange& x, const Buffers& b, int64_t bytes, Ring ring, MPI_Comm comm) {
  // Both landing places: a staged receive lands in recv_host first, which
  // still holds the previous exchange's bytes.
  PPB_CUDA_CHECK(cudaMemset(b.recv, 0, static_cast<size_t>(bytes)));
  std::memset(b.recv_host, 0, static_cast<size_t>(bytes));
  PPB_CUDA_CHECK(cudaDeviceSynchronize());  // no message is in flight here
  x.run(bytes, 1);
  std::vector<std::byte> got(static_cast<size_t>(bytes));
  PPB_CUDA_CHECK(cudaMemcpy(got.data(), b.recv, got.size(), cudaMemcpyDeviceToHost));
  const std::vector<std::byte> want = pattern(ring.prev(), bytes);
  int64_t wrong = 0;
  for (size_t k = 0; k < got.size(); ++k) wrong += got[k] != want[k] ? 1 : 0;
  PPB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT64_T, MPI_SUM, comm));
  return wrong;
}

struct Figures {
  double seconds = 0;
  int64_t wrong = 0;
};

struct Row {
  int64_t bytes = 0;
  int iters = 0;
  Figures raw;
  std::optional<Figures> ppb;  // empty: the transport could not run
};

struct Series {
  std::string transport;
  std::string path;      // the transport's: "direct", "staged", "" when it did not run
  std::string baseline;  // "raw MPI (staged)", "raw NCCL"
  std::string skipped;   // why the transport did not run ("" = it ran)
  std::vector<Row> rows;
};

double gbps(int64_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e9; }

void print_header(const Series& s) {
  std::printf("\n# %s: %s; baseline %s\n", s.transport.c_str(),
              s.skipped.empty() ? (s.path + " path").c_str() : ("not run: " + s.skipped).c_str(),
              s.baseline.c_str());
  std::printf("%12s %6s %10s %10s %10s %10s %10s %7s %7s\n", "bytes", "iters", "raw_us",
              "raw_algbw", "time_us", "algbw", "busbw", "ratio", "#wrong");
}

void print_row(const Row& r) {
  if (r.ppb) {
    std::printf("%12lld %6d %10.2f %10.3f %10.2f %10.3f %10.3f %7.3f %7lld\n",
                static_cast<long long>(r.bytes), r.iters, r.raw.seconds * 1e6,
                gbps(r.bytes, r.raw.seconds), r.ppb->seconds * 1e6, gbps(r.bytes, r.ppb->seconds),
                gbps(r.bytes, r.ppb->seconds), r.raw.seconds / r.ppb->seconds,
                static_cast<long long>(r.raw.wrong + r.ppb->wrong));
  } else {
    std::printf("%12lld %6d %10.2f %10.3f %10s %10s %10s %7s %7lld\n",
                static_cast<long long>(r.bytes), r.iters, r.raw.seconds * 1e6,
                gbps(r.bytes, r.raw.seconds), "-", "-", "-", "-",
                static_cast<long long>(r.raw.wrong));
  }
  std::fflush(stdout);
}

// Measures one transport (or, `t` null, its baseline alone) size by size.
Series measure(const TransportInfo& info, Transport* t, const std::string& skipped,
               const P2pDeviceOptions& o, const Buffers& b, Ring ring, MPI_Comm comm,
               JobWatchdog& watch) {
  Series s;
  s.transport = info.name;
  s.skipped = skipped;
  std::unique_ptr<Mover> raw_mpi;
  std::unique_ptr<Exchange> raw;
  switch (info.baseline) {
    case RawBaseline::kMpi:
      raw_mpi = std::make_unique<RawMpi>(comm);
      raw = std::make_unique<PostedExchange>(*raw_mpi, b, ring);
      s.baseline = std::string("raw MPI (") + raw->path() + ")";
      break;
    case RawBaseline::kNccl:
#if PPB_HAVE_NCCL
      raw = std::make_unique<RawNccl>(b, ring, comm);
      s.baseline = ring.size == 1 ? "raw NCCL (one rank, to itself)" : "raw NCCL";
#endif
      break;
  }
  PPB_CHECK(raw != nullptr, "p2p: no baseline for transport " + info.name);
  std::unique_ptr<Mover> via;
  std::unique_ptr<Exchange> ppb;
  if (t != nullptr) {
    via = std::make_unique<ViaTransport>(*t, o.wait);
    ppb = std::make_unique<PostedExchange>(*via, b, ring);
    s.path = ppb->path();
  }
  if (ring.rank == 0) print_header(s);
  for (int64_t bytes = o.lo; bytes <= o.hi; bytes *= 2) {
    const JobPhase phase(watch, "measuring " + info.name + " at " + std::to_string(bytes) +
                                    " bytes (a rank stalled, or a link is down?)");
    Row row;
    row.bytes = bytes;
    row.iters = iterations_for(bytes, o.iters);
    const std::vector<std::byte> mine = pattern(ring.rank, bytes);
    PPB_CUDA_CHECK(cudaMemcpy(b.send, mine.data(), mine.size(), cudaMemcpyHostToDevice));
    row.raw.seconds = time_exchange(*raw, bytes, o.warmup, row.iters, comm);
    row.raw.wrong = check_exchange(*raw, b, bytes, ring, comm);
    if (ppb) {
      Figures f;
      f.seconds = time_exchange(*ppb, bytes, o.warmup, row.iters, comm);
      f.wrong = check_exchange(*ppb, b, bytes, ring, comm);
      row.ppb = f;
    }
    if (ring.rank == 0) print_row(row);
    s.rows.push_back(row);
    if (bytes > o.hi / 2) break;  // no overflow past --max
  }
  return s;
}

boost::json::value series_json(const Series& s) {
  boost::json::array rows;
  for (const Row& r : s.rows) {
    boost::json::object o{{"bytes", r.bytes},
                          {"iters", r.iters},
                          {"baseline_seconds", r.raw.seconds},
                          {"baseline_algbw_GBps", gbps(r.bytes, r.raw.seconds)},
                          {"baseline_wrong", r.raw.wrong}};
    if (r.ppb) {
      o["seconds"] = r.ppb->seconds;
      o["algbw_GBps"] = gbps(r.bytes, r.ppb->seconds);
      o["busbw_GBps"] = gbps(r.bytes, r.ppb->seconds);
      o["ratio"] = r.raw.seconds / r.ppb->seconds;
      o["wrong"] = r.ppb->wrong;
    }
    rows.push_back(std::move(o));
  }
  return boost::json::object{{"transport", s.transport},
                             {"path", s.path},
                             {"baseline", s.baseline},
                             {"skipped", s.skipped},
                             {"results", std::move(rows)}};
}

// Every pair of ranks, for a check over one communicator of all of them.
std::vector<NcclLink> every_pair(int ranks) {
  std::vector<NcclLink> out;
  for (int a = 0; a < ranks; ++a) {
    for (int b = a + 1; b < ranks; ++b) out.push_back({a, b});
  }
  return out;
}

std::string device_name(int device) {
  cudaDeviceProp prop{};
  PPB_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

/// The registered transports named in `names` (every one when empty), in
/// registry order.
std::vector<TransportInfo> chosen_transports(const std::vector<std::string>& names) {
  std::vector<TransportInfo> chosen;
  for (const TransportInfo& t : transport_list()) {
    if (names.empty() || std::find(names.begin(), names.end(), t.name) != names.end())
      chosen.push_back(t);
  }
  return chosen;
}

}  // namespace

int run_p2p_device(const P2pDeviceOptions& o) {
  MpiSession mpi(o.timeout);
  const MPI_Comm comm = mpi.comm();
  const Ring ring{mpi.rank(), mpi.size()};
  check_json_on_rank_zero(o.json, ring.rank, comm);
  JobWatchdog watch(ring.rank, o.timeout);
  const std::vector<TransportInfo> chosen = chosen_transports(o.transports);
  require_gpus(comm, "p2p --memory device");
  const NodeLocal nl = node_local(comm);
  const cuda::DeviceBinding dev = cuda::bind_device(nl.rank, nl.size);
  const bool shared = ranks_per_gpu(comm, dev.device) > 1;
  const Buffers buffers(o.hi);
  const bool all = o.transports.empty();
  if (ring.rank == 0) {
    std::printf(
        "# pipebench p2p --memory device: ring send/receive over %d rank(s) on %s (rank r sends "
        "to r+1, receives from r-1), nccl-tests style: %d warm-up exchanges per size, the "
        "slowest rank's time; algbw = busbw = bytes/time in GB/s; MPI CUDA-aware: %s%s\n",
        ring.size, device_name(dev.device).c_str(), o.warmup, mpi_cuda_aware() ? "yes" : "no",
        shared ? "; ranks share a GPU" : "");
  }
  std::vector<Series> series;
  int64_t wrong = 0;
  for (const TransportInfo& info : chosen) {
    std::string skipped;
    std::unique_ptr<Transport> t;
    if (ring.size < 2) {
      skipped = "needs 2 ranks or more (a transport never sends to its own rank)";
    } else if (!info.available) {
      skipped = info.why_not;
    } else {
      try {
        // The raw NCCL baseline's communicator holds every rank, which NCCL
        // refuses when any two share a GPU, even where the transport's own
        // links (ring neighbours) are on distinct GPUs.
        if (info.baseline == RawBaseline::kNccl) {
          require_distinct_gpus(comm, dev.device, every_pair(ring.size),
                                "p2p --transport " + info.name);
        }
        t = make_transport(info.name, comm);  // collective; throws alike on every rank
      } catch (const UsageError& e) {
        if (!all) throw;
        skipped = e.what();
      }
    }
    // A baseline needs what its transport needs, bar the second rank
    // (NCCL sends to itself on one rank).
    const bool baseline_runs = skipped.empty() || (ring.size == 1 && info.available &&
                                                   info.baseline == RawBaseline::kNccl);
    if (!baseline_runs && !all) throw UsageError("--transport " + info.name + ": " + skipped);
    if (!baseline_runs) {
      if (ring.rank == 0) std::printf("\n# %s: skipped: %s\n", info.name.c_str(), skipped.c_str());
      series.push_back({info.name, "", "", skipped, {}});
      continue;
    }
    series.push_back(measure(info, t.get(), skipped, o, buffers, ring, comm, watch));
    for (const Row& r : series.back().rows) wrong += r.raw.wrong + (r.ppb ? r.ppb->wrong : 0);
  }
  if (ring.rank == 0) {
    std::printf("\n# data check: %lld wrong byte(s)%s\n", static_cast<long long>(wrong),
                wrong == 0 ? "" : " -- FAILED");
    if (!o.json.empty()) {
      boost::json::array list;
      for (const Series& s : series) list.push_back(series_json(s));
      const boost::json::object doc{{"schema", "pipebench.p2p-device/1"},
                                    {"memory", "device"},
                                    {"ranks", ring.size},
                                    {"device", device_name(dev.device)},
                                    {"ranks_share_gpu", shared},
                                    {"mpi_cuda_aware", mpi_cuda_aware()},
                                    {"warmup", o.warmup},
                                    {"wrong", wrong},
                                    {"transports", std::move(list)}};
      write_json_file(o.json, doc);
      std::printf("# wrote %s\n", o.json.c_str());
    }
  }
  return wrong == 0 ? 0 : 1;
}

}  // namespace ppb::cli
