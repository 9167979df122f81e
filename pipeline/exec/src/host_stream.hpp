// HostStream: a stream in the CUDA sense, on a host thread. Tasks run one
// after another, in the order they were enqueued, on the stream's own worker
// thread; each task's completion can be tested (or waited for, with a time
// limit) from the enqueuing thread, and records the task's start and end on
// the stream's clock (now_seconds(), the steady clock).
//
// The cpu and timed backends run their actions on one (their compute stream)
// so that the executor's thread keeps progressing MPI while OpenBLAS computes
// or a timed action sleeps; a second one is their copy stream.
//
// Thread safety: enqueue/done/wait_for/wait_idle from one thread (the
// executor's); the tasks run on the worker. An exception thrown by a task is
// rethrown by done()/wait_for() of that task's ticket.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "ppb/exec/backend.hpp"

namespace ppb {

class HostStream {
 public:
  /// Starts the worker thread (its timer slack lowered to 1 ns, so sleeps on
  /// the stream end on time).
  HostStream();
  /// Waits for the enqueued tasks, then joins the worker.
  ~HostStream();
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  /// Appends `task`; returns its ticket (1, 2, 3, ... in enqueue order).
  StreamTicket enqueue(std::function<void()> task);
  /// True when the task of `ticket` (and every earlier one) has completed;
  /// then *times (if not null) holds its start and end. Each ticket is
  /// reported once (collected); tickets may be collected in any order.
  /// Never blocks on the task.
  bool done(StreamTicket ticket, StreamTimes* times);
  /// Like done(), but waits up to `seconds` for the completion (woken the
  /// moment it happens).
  bool wait_for(StreamTicket ticket, double seconds, StreamTimes* times);
  /// Returns once every enqueued task has completed.
  void wait_idle();

 private:
  struct Done {
    StreamTicket ticket = 0;
    StreamTimes times;
    std::exception_ptr error;
  };
  void loop();
  bool collect(StreamTicket ticket, StreamTimes* times);  // REQUIRES: mutex_ held

  std::mutex mutex_;
  std::condition_variable work_;  // worker waits for tasks
  std::condition_variable done_;  // enqueuer waits for completions
  std::deque<std::pair<StreamTicket, std::function<void()>>> tasks_;
  std::deque<Done> finished_;  // completed, not yet collected (in ticket order)
  std::atomic<StreamTicket> completed_{0};
  StreamTicket issued_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace ppb
