// The executor's watchdog (executor.hpp): a thread per rank that watches the
// current step and ends the job with MPI_Abort when one step outlives the
// timeout, naming what the rank was doing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

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
class Watchdog {
 public:
  Watchdog(int rank, int chunks, double timeout) : rank_(rank), chunks_(chunks), timeout_(timeout) {
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

  int rank_;
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
  MessageKind kind_ = MessageKind::kActivation;
  std::thread thread_;
};

}  // namespace ppb
