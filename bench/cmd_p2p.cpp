// `pipebench p2p`: point-to-point figures of the executor's transports
// against the raw library each is built on, measured in the same run.
//
//   mpirun -np 2 pipebench p2p [--min 1] [--max 64MiB] [--iters 200] [--wait sleep]
//                              [--transport T] [--json F]
//   mpirun -np N pipebench p2p --memory device [--transport T,...] [-w 5] ...
//
// --memory host (the default): OSU-style latency and bandwidth on 2 ranks.
// For every power of two from --min to --max bytes:
//  * latency: ping-pong, rank 0 sends, rank 1 answers with the same size;
//    one-way latency = round-trip time / 2 (osu_latency);
//  * bandwidth: rank 0 posts a window of 64 sends, rank 1 64 receives, then
//    a 4-byte acknowledgement (osu_bw); bandwidth = bytes x window / time.
//    Above 4 MiB the window shrinks so one iteration moves at most 256 MiB
//    (osu's 64 x 64 MiB = 4 GiB per iteration takes seconds on this machine).
// Both are measured for raw MPI (MPI_Isend/MPI_Irecv/MPI_Wait on a private
// communicator) and for the transport (--transport, default the executor's
// default; one that reads host memory) with the executor's wait strategy,
// alternating which goes first, five repetitions each; the best repetition
// of each is kept (a shared 2-core machine only ever adds time). The goal:
// at 1 MiB and above the transport reaches at least 95% of raw MPI
// bandwidth; the table and the JSON say whether it did.
//
// --memory device: every transport (or those --transport names) moving
// device buffers, nccl-tests style, on any number of ranks (p2p_device.hpp).
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli.hpp"
#include "p2p_device.hpp"
#include "ppb/exec/executor.hpp"
#include "ppb/exec/job_watchdog.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/exec/transport.hpp"
#include "ppb/pipeline/result.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/output_file.hpp"
#include "run/out_dir.hpp"

namespace ppb::cli {
namespace {

struct P2pOptions {
  std::string min = "1";
  std::string max = "64MiB";
  int iters = 200;
  int warmup = 5;  // device memory only
  std::string wait = wait_strategy_name(kDefaultWaitStrategy);
  std::string memory = "host";
  std::string transport;  // "" = host: the first registered; device: all
  std::string json;
  double timeout = 0;  // --timeout: seconds per message size (0 = none)
};

constexpr int kWindow = 64;
constexpr int kRepetitions = 5;
constexpr int kTag = 7;

// The two ways of moving bytes, behind one small interface so that both
// run the identical benchmark loop.
class Mover {
 public:
  virtual ~Mover() = default;
  virtual int isend(const std::byte* p, int64_t n, int peer) = 0;
  virtual int irecv(std::byte* p, int64_t n, int peer) = 0;
  virtual void wait(int request) = 0;
};

class RawMpi final : public Mover {
 public:
  explicit RawMpi(MPI_Comm comm) { PPB_MPI_CHECK(MPI_Comm_dup(comm, &comm_)); }
  ~RawMpi() override { MPI_Comm_free(&comm_); }
  RawMpi(const RawMpi&) = delete;
  RawMpi& operator=(const RawMpi&) = delete;
  int isend(const std::byte* p, int64_t n, int peer) override {
    requests_.push_back(MPI_REQUEST_NULL);
    PPB_MPI_CHECK(
        MPI_Isend(p, static_cast<int>(n), MPI_BYTE, peer, kTag, comm_, &requests_.back()));
    return static_cast<int>(requests_.size() - 1);
  }
  int irecv(std::byte* p, int64_t n, int peer) override {
    requests_.push_back(MPI_REQUEST_NULL);
    PPB_MPI_CHECK(
        MPI_Irecv(p, static_cast<int>(n), MPI_BYTE, peer, kTag, comm_, &requests_.back()));
    return static_cast<int>(requests_.size() - 1);
  }
  void wait(int request) override {
    PPB_MPI_CHECK(MPI_Wait(&requests_[static_cast<size_t>(request)], MPI_STATUS_IGNORE));
    if (static_cast<size_t>(request) + 1 == requests_.size()) {
      while (!requests_.empty() && requests_.back() == MPI_REQUEST_NULL) requests_.pop_back();
    }
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<MPI_Request> requests_;
};

class ViaTransport final : public Mover {
 public:
  ViaTransport(std::unique_ptr<Transport> transport, WaitStrategy wait)
      : transport_(std::move(transport)), wait_(wait) {}
  int isend(const std::byte* p, int64_t n, int peer) override {
    return transport_->isend(p, n, peer, kTag);
  }
  int irecv(std::byte* p, int64_t n, int peer) override {
    return transport_->irecv(p, n, peer, kTag);
  }
  void wait(int request) override { transport_->wait(request, wait_); }

 private:
  std::unique_ptr<Transport> transport_;
  WaitStrategy wait_;
};

int iterations_for(int64_t bytes, int iters) {
  // osu: fewer iterations for large messages.
  if (bytes <= (int64_t{64} << 10)) return iters;
  return std::max(4, static_cast<int>(static_cast<int64_t>(iters) * (int64_t{64} << 10) / bytes));
}

int window_for(int64_t bytes) {
  return static_cast<int>(std::clamp<int64_t>((int64_t{256} << 20) / bytes, 4, kWindow));
}

int bandwidth_iterations_for(int64_t bytes, int iters) {
  const int64_t per_iteration = bytes * window_for(bytes);
  return static_cast<int>(
      std::clamp<int64_t>((int64_t{512} << 20) / per_iteration, 1, std::max(1, iters / 4)));
}

// One-way latency in seconds.
double latency(Mover& m, int rank, int64_t bytes, int iters, std::vector<std::byte>& sbuf,
               std::vector<std::byte>& rbuf) {
  const int peer = 1 - rank;
  const int warm = std::max(2, iters / 10);
  double start = 0;
  for (int i = 0; i < warm + iters; ++i) {
    if (i == warm) {
      PPB_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
      start = MPI_Wtime();
    }
    if (rank == 0) {
      m.wait(m.isend(sbuf.data(), bytes, peer));
      m.wait(m.irecv(rbuf.data(), bytes, peer));
    } else {
      m.wait(m.irecv(rbuf.data(), bytes, peer));
      m.wait(m.isend(sbuf.data(), bytes, peer));
    }
  }
  return (MPI_Wtime() - start) / (2.0 * iters);
}

// Bandwidth in bytes per second (valid on rank 0).
double bandwidth(Mover& m, int rank, int64_t bytes, int iters, std::vector<std::byte>& sbuf,
                 std::vector<std::byte>& rbuf) {
  const int peer = 1 - rank;
  const int warm = std::max(1, iters / 10);
  const int window = window_for(bytes);
  std::vector<int> requests(static_cast<size_t>(window));
  std::byte ack[4] = {};
  double start = 0;
  for (int i = 0; i < warm + iters; ++i) {
    if (i == warm) {
      PPB_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
      start = MPI_Wtime();
    }
    if (rank == 0) {
      for (int w = 0; w < window; ++w)
        requests[static_cast<size_t>(w)] = m.isend(sbuf.data(), bytes, peer);
      for (int w = window - 1; w >= 0; --w) m.wait(requests[static_cast<size_t>(w)]);
      m.wait(m.irecv(ack, 4, peer));
    } else {
      for (int w = 0; w < window; ++w)
        requests[static_cast<size_t>(w)] = m.irecv(rbuf.data(), bytes, peer);
      for (int w = window - 1; w >= 0; --w) m.wait(requests[static_cast<size_t>(w)]);
      m.wait(m.isend(ack, 4, peer));
    }
  }
  const double seconds = MPI_Wtime() - start;
  return static_cast<double>(bytes) * window * iters / seconds;
}

struct Row {
  int64_t bytes = 0;
  double raw_latency = 1e30, latency = 1e30;  // seconds
  double raw_bandwidth = 0, bandwidth = 0;    // bytes/s
};

struct P2pRange {
  int64_t lo = 0;
  int64_t hi = 0;
  WaitStrategy wait = kDefaultWaitStrategy;
  bool device = false;                  // --memory device
  std::vector<std::string> transports;  // registered names; empty = all (device)
};

// The flags' checks, alike on every rank: a FlagError, printed by rank 0 only.
P2pRange check_flags(const P2pOptions& o) {
  try {
    P2pRange r;
    r.lo = parse_bytes(o.min, "--min");
    r.hi = parse_bytes(o.max, "--max");
    if (r.lo < 1) throw UsageError("--min: expected >= 1 byte, got " + o.min);
    if (r.hi < r.lo) throw UsageError("--max: must be >= --min (" + o.max + " < " + o.min + ")");
    if (r.hi > (int64_t{1} << 30)) throw UsageError("--max: at most 1GiB, got " + o.max);
    if (o.iters < 1) throw UsageError("--iters: expected >= 1, got " + std::to_string(o.iters));
    check_timeout_flag(o.timeout);
    r.wait = parse_wait_strategy(o.wait, "--wait");
    if (o.memory != "host" && o.memory != "device")
      throw UsageError("--memory: expected host or device, got '" + o.memory + "'");
    r.device = o.memory == "device";
    if (o.warmup < 0) throw UsageError("--warmup: expected >= 0, got " + std::to_string(o.warmup));
    std::string names;
    for (const TransportInfo& t : transport_list()) names += (names.empty() ? "" : ", ") + t.name;
    for (const std::string& name : split_list(o.transport)) {
      bool known = false;
      for (const TransportInfo& t : transport_list()) known = known || t.name == name;
      if (!known) {
        throw UsageError("--transport: unknown transport '" + name + "' (transports: " + names +
                         ")");
      }
      r.transports.push_back(name);
    }
    if (!r.device && r.transports.size() > 1)
      throw UsageError("--transport: host memory measures one transport at a time, got " +
                       o.transport);
    if (!r.device && r.transports.empty()) r.transports.push_back(transport_list().front().name);
    return r;
  } catch (const UsageError& e) {
    throw FlagError(e.what());
  }
}

void run_p2p_host(const P2pOptions& o, const P2pRange& range);

}  // namespace

void check_json_on_rank_zero(const std::string& json, int rank, MPI_Comm comm) {
  std::string why;
  if (rank == 0 && !json.empty()) {
    try {
      check_output_path(json);
    } catch (const UsageError& e) {
      why = std::string("--json: ") + e.what();
    }
  }
  run::agree_with_rank_zero(why, rank, comm);
}

namespace {

void run_p2p(const P2pOptions& o) {
  const P2pRange range = check_flags(o);
  if (!range.device) {
    run_p2p_host(o, range);
    return;
  }
#if PPB_HAVE_CUDA
  P2pDeviceOptions d;
  d.lo = range.lo;
  d.hi = range.hi;
  d.iters = o.iters;
  d.warmup = o.warmup;
  d.wait = range.wait;
  d.transports = range.transports;
  d.json = o.json;
  d.timeout = o.timeout;
  int code = 0;
  try {
    code = run_p2p_device(d);
  } catch (const FlagError&) {
    throw;
  } catch (const UsageError& e) {
    throw FlagError(e.what());  // its refusals are alike on every rank
  }
  if (code != 0) throw ExitCode{code};
#else
  throw FlagError("--memory device: this pipebench was built without CUDA");
#endif
}

/// One message size, raw MPI and the transport in turn (which goes first
/// alternates per repetition): the best latency and bandwidth of each over
/// kRepetitions.
Row measure_row(Mover& raw, Mover& ppb, int rank, int64_t bytes, int iters_flag,
                std::vector<std::byte>& sbuf, std::vector<std::byte>& rbuf) {
  Row row;
  row.bytes = bytes;
  const int iters = iterations_for(bytes, iters_flag);
  const int bw_iters = bandwidth_iterations_for(bytes, iters);
  for (int rep = 0; rep < kRepetitions; ++rep) {
    Mover& first = rep % 2 == 0 ? raw : ppb;
    Mover& second = rep % 2 == 0 ? ppb : raw;
    const double l1 = latency(first, rank, bytes, iters, sbuf, rbuf);
    const double l2 = latency(second, rank, bytes, iters, sbuf, rbuf);
    const double b1 = bandwidth(first, rank, bytes, bw_iters, sbuf, rbuf);
    const double b2 = bandwidth(second, rank, bytes, bw_iters, sbuf, rbuf);
    row.raw_latency = std::min(row.raw_latency, rep % 2 == 0 ? l1 : l2);
    row.latency = std::min(row.latency, rep % 2 == 0 ? l2 : l1);
    row.raw_bandwidth = std::max(row.raw_bandwidth, rep % 2 == 0 ? b1 : b2);
    row.bandwidth = std::max(row.bandwidth, rep % 2 == 0 ? b2 : b1);
  }
  return row;
}

/// Rank 0, after the host rows: the goal line and, with --json, the file.
void report_host(const std::vector<Row>& rows, const P2pOptions& o, const std::string& name,
                 WaitStrategy wait) {
  double worst_ratio = -1;
  for (const Row& r : rows) {
    if (r.bytes >= (int64_t{1} << 20)) {
      const double ratio = r.bandwidth / r.raw_bandwidth;
      worst_ratio = worst_ratio < 0 ? ratio : std::min(worst_ratio, ratio);
    }
  }
  if (worst_ratio >= 0) {
    std::printf(
        "# goal: transport >= 95%% of raw MPI bandwidth at >= 1 MiB: worst ratio %.3f (%s)\n",
        worst_ratio, worst_ratio >= 0.95 ? "met" : "NOT met");
  }
  if (!o.json.empty()) {
    boost::json::array results;
    for (const Row& r : rows) {
      results.push_back({{"bytes", r.bytes},
                         {"raw_latency_us", r.raw_latency * 1e6},
                         {"latency_us", r.latency * 1e6},
                         {"raw_bandwidth_bytes_per_second", r.raw_bandwidth},
                         {"bandwidth_bytes_per_second", r.bandwidth},
                         {"bandwidth_ratio", r.bandwidth / r.raw_bandwidth}});
    }
    boost::json::object doc{
        {"schema", "pipebench.p2p/1"},
        {"transport", name},
        {"memory", "host"},
        {"wait", wait_strategy_name(wait)},
        {"ranks", 2},
        {"window", kWindow},
        {"window_note", "shrinks above 4 MiB so one iteration moves <= 256 MiB"},
        {"repetitions", kRepetitions},
        {"results", std::move(results)}};
    if (worst_ratio >= 0) {
      doc["min_bandwidth_ratio_at_1MiB_and_above"] = worst_ratio;
      doc["goal_met"] = worst_ratio >= 0.95;
    }
    write_json_file(o.json, doc);
    std::printf("# wrote %s\n", o.json.c_str());
  }
}

void run_p2p_host(const P2pOptions& o, const P2pRange& range) {
  const int64_t lo = range.lo;
  const int64_t hi = range.hi;
  const WaitStrategy wait = range.wait;
  const std::string& name = range.transports.front();

  MpiSession mpi(o.timeout);
  if (mpi.size() != 2) {
    throw FlagError("p2p: needs exactly 2 ranks (mpirun -np 2 pipebench p2p), got " +
                    std::to_string(mpi.size()));
  }
  const int rank = mpi.rank();
  check_json_on_rank_zero(o.json, rank, mpi.comm());
  // Collective and alike on every rank: a refusal is one line from rank 0.
  std::unique_ptr<Transport> transport;
  try {
    transport = make_transport(name, mpi.comm());
  } catch (const UsageError& e) {
    throw FlagError(e.what());
  }
  if (!transport->can_access(MemorySpace::kHost)) {
    throw FlagError("--transport " + name +
                    ": cannot move host memory (measure it with --memory device)");
  }
  std::vector<Row> rows;
  JobWatchdog watch(rank, o.timeout);
  run_or_abort([&] {
    std::vector<std::byte> sbuf(static_cast<size_t>(hi), std::byte{1});
    std::vector<std::byte> rbuf(static_cast<size_t>(hi));
    RawMpi raw(mpi.comm());
    ViaTransport ppb(std::move(transport), wait);
    if (rank == 0) {
      std::printf("# pipebench p2p: MPI %s vs the executor's transport (%s, wait %s), best of %d\n",
                  "ping-pong", name.c_str(), wait_strategy_name(wait), kRepetitions);
      std::printf("%12s %14s %14s %16s %16s %8s\n", "bytes", "raw_lat_us", "ppb_lat_us",
                  "raw_bw_MB/s", "ppb_bw_MB/s", "bw_ratio");
    }
    for (int64_t bytes = lo; bytes <= hi; bytes *= 2) {
      const JobPhase phase(watch, "measuring " + std::to_string(bytes) +
                                      " bytes (the other rank stalled, or the link is down?)");
      const Row row = measure_row(raw, ppb, rank, bytes, o.iters, sbuf, rbuf);
      if (rank == 0) {
        std::printf("%12lld %14.2f %14.2f %16.1f %16.1f %8.3f\n", static_cast<long long>(bytes),
                    row.raw_latency * 1e6, row.latency * 1e6, row.raw_bandwidth / 1e6,
                    row.bandwidth / 1e6, row.bandwidth / row.raw_bandwidth);
        std::fflush(stdout);
      }
      rows.push_back(row);
      if (bytes > hi / 2) break;  // no overflow past --max
    }
  });
  if (rank == 0) report_host(rows, o, name, wait);
}

}  // namespace

void register_p2p(CLI::App& app) {
  auto options = std::make_shared<P2pOptions>();
  CLI::App* cmd = app.add_subcommand(
      "p2p",
      "Point-to-point figures of the executor's transports vs the raw library: OSU-style on host "
      "memory (mpirun -np 2), nccl-tests-style on device memory (--memory device)");
  cmd->add_option("--min", options->min, "Smallest message (bytes, e.g. 1, 4KiB)")
      ->capture_default_str();
  cmd->add_option("--max", options->max, "Largest message (e.g. 64MiB)")->capture_default_str();
  cmd->add_option("-n,--iters", options->iters,
                  "Iterations per size (fewer above 64 KiB, as osu does)")
      ->capture_default_str();
  cmd->add_option("--wait", options->wait, "Transport wait strategy: block, yield, sleep")
      ->capture_default_str();
  cmd->add_option("--memory", options->memory,
                  "Buffers in host memory (OSU-style latency and bandwidth, 2 ranks) or device "
                  "memory (nccl-tests-style send/receive ring, any ranks)")
      ->capture_default_str();
  cmd->add_option("--transport", options->transport,
                  "Transports to measure (comma list): host memory one, default the first "
                  "registered; device memory default every one");
  cmd->add_option("-w,--warmup", options->warmup, "Device memory: warm-up exchanges per size")
      ->capture_default_str();
  cmd->add_option("--json", options->json, "Also write the figures as JSON to this file")
      ->check(non_empty("a file"));
  cmd->add_option("-T,--timeout", options->timeout,
                  "Seconds one message size may take before the job ends, naming the rank "
                  "(0 = none)")
      ->capture_default_str();
  cmd->callback([options] { run_p2p(*options); });
}

}  // namespace ppb::cli
