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
// Thread safety: enqueue/done/wait_for from one thread (the
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

/// A stream whose items take modelled time and no host thread, as kernels
/// occupy a device: an item starts at max(its enqueue, the previous item's
/// end) and lasts its duration. Completion is a clock comparison; wait_for
/// sleeps to an absolute deadline (clock_nanosleep, TIMER_ABSTIME; the
/// caller's timer slack lowered). When an item's end passes while the
/// waiting thread sleeps, the item ends when that thread wakes, as a sleep
/// does (the accounting of sleeping in the action itself); items queued
/// behind start from there. Items are reported in order. Used by the timed backend.
class ClockStream {
 public:
  /// Appends an item of `seconds`; returns its ticket.
  StreamTicket enqueue(double seconds);
  /// True once the item of `ticket` ended; then *times holds it.
  /// REQUIRES: every earlier ticket was reported.
  bool done(StreamTicket ticket, StreamTimes* times);
  /// Like done(), sleeping up to `seconds` for the item's end.
  bool wait_for(StreamTicket ticket, double seconds, StreamTimes* times);

 private:
  struct Item {
    StreamTicket ticket = 0;
    double enqueued = 0;
    double seconds = 0;
    bool placed = false;  // times known (its predecessor was reported)
    StreamTimes times;
  };
  Item& front(StreamTicket ticket);  // places it
  std::deque<Item> items_;           // not yet reported, in order
  StreamTicket issued_ = 0;
  double free_at_ = 0;  // end of the last reported item
};

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
