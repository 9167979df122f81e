// The executor's watchdog (executor.hpp): a thread per rank that watches the
// current step and ends the job with MPI_Abort when one step outlives the
// timeout, naming what the rank was doing.
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ppb/pipeline/action.hpp"
#include "ppb/pipeline/message_plan.hpp"

namespace ppb {

// What a rank is doing right now, for the watchdog's message.
enum class Doing : uint8_t {
  kIdle,
  kStartBarrier,
  kCompute,
  kWaitRecv,
  kSync,
  kOptimizer,
  kAllReduce,  // waiting for a gradient all-reduce across the replicas (peer_ = chunk)
  kDrain,
};

std::string action_text(const Action& a, int chunks);

// Watches one rank's steps; aborts the job when a step outlives the timeout.
// How the watchdog names ranks: by their MPI rank in the job (the number
// mpirun and the launcher know), with the stage and replica they run.
struct RankNames {
  std::string self;                ///< "rank 3 (stage 1, replica 1)", or "rank 1"
  std::vector<std::string> peers;  ///< by pipeline rank: "rank 2 (stage 1)"
  std::string replicas;            ///< this stage's other replicas: "rank 2 (stage 1, replica 0)"
  /// By rank of the communicator whose barrier starts a step (the job's
  /// with replicas, else the pipeline's): "rank 2 (stage 1, replica 0)".
  std::vector<std::string> step_peers;
};

/// The names of this rank and its peers: `comm` the pipeline's ranks (the
/// executor's), `job` every rank of the job (MPI_COMM_NULL or `comm` itself
/// without data parallelism). Collective over `job`.
RankNames rank_names(MPI_Comm comm, MPI_Comm job);

class Watchdog {
 public:
  Watchdog(RankNames names, int chunks, double timeout)
      : names_(std::move(names)), chunks_(chunks), timeout_(timeout) {
    thread_ = std::thread([this] { loop(); });
  }
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void step_begin(int step, double start) {
    std::lock_guard lock(mutex_);
    step_ = step;
    step_start_ = start;
    in_step_ = true;
    doing_ = Doing::kStartBarrier;
    peer_ = -1;
    round_ = 0;
  }
  /// In the barrier that starts the step, round `round` of its exchange:
  /// waiting for the rank `peer` of the step's communicator (step_peers).
  void start_wait(int peer, int round) {
    std::lock_guard lock(mutex_);
    doing_ = Doing::kStartBarrier;
    peer_ = peer;
    round_ = round;
  }
  void step_end() {
    std::lock_guard lock(mutex_);
    in_step_ = false;
    doing_ = Doing::kIdle;
  }
  void set(Doing doing, const Action& action, int peer = -1,
           MessageKind kind = MessageKind::kActivation) {
    std::lock_guard lock(mutex_);
    doing_ = doing;
    action_ = action;
    peer_ = peer;
    kind_ = kind;
  }

 private:
  void loop();
  std::string peer_name(int peer) const;  ///< a pipeline rank, named by names_

  RankNames names_;
  int chunks_;
  double timeout_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool in_step_ = false;
  int step_ = 0;
  double step_start_ = 0;
  Doing doing_ = Doing::kIdle;
  Action action_;
  int peer_ = -1;
  int round_ = 0;  // kStartBarrier: the round of the start barrier it waits in
  MessageKind kind_ = MessageKind::kActivation;
  std::thread thread_;
};

}  // namespace ppb
