#include "host_stream.hpp"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <utility>

#include "ppb/exec/transport.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/clock.hpp"

namespace ppb {

StreamTicket ClockStream::enqueue(double seconds) {
  Item item;
  item.ticket = ++issued_;
  item.enqueued = now_seconds();
  item.seconds = std::max(0.0, seconds);
  items_.push_back(item);
  return item.ticket;
}

ClockStream::Item& ClockStream::front(StreamTicket ticket) {
  PPB_CHECK(!items_.empty() && items_.front().ticket == ticket,
            "clock stream: tickets are reported once, in order");
  Item& f = items_.front();
  if (!f.placed) {
    f.times.start = std::max(f.enqueued, free_at_);
    f.times.end = f.times.start + f.seconds;
    f.placed = true;
  }
  return f;
}

bool ClockStream::done(StreamTicket ticket, StreamTimes* times) {
  Item& f = front(ticket);
  if (now_seconds() < f.times.end) return false;
  if (times != nullptr) *times = f.times;
  free_at_ = f.times.end;
  items_.pop_front();
  return true;
}

bool ClockStream::wait_for(StreamTicket ticket, double seconds, StreamTimes* times) {
  Item& f = front(ticket);
  // now_seconds() is the steady clock, CLOCK_MONOTONIC on Linux.
  const double deadline = std::min(f.times.end, now_seconds() + seconds);
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(std::floor(deadline));
  ts.tv_nsec = static_cast<long>((deadline - std::floor(deadline)) * 1e9);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
  // The item's end passed while this thread slept: it ends when the thread
  // wakes, as a sleeping action would (the scheduler's wake-up latency is
  // the action's, not the hand-over's).
  const double woke = now_seconds();
  if (woke >= f.times.end) f.times.end = woke;
  return done(ticket, times);
}

HostStream::HostStream() {
  worker_ = std::thread([this] {
    lower_timer_slack();  // timed actions sleep to absolute deadlines on this thread
    loop();
  });
}

HostStream::~HostStream() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  worker_.join();
}

StreamTicket HostStream::enqueue(std::function<void()> task) {
  StreamTicket ticket = 0;
  {
    std::lock_guard lock(mutex_);
    ticket = ++issued_;
    tasks_.emplace_back(ticket, std::move(task));
  }
  work_.notify_one();
  return ticket;
}

void HostStream::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stop_ and nothing left
    auto [ticket, task] = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    Done d;
    d.ticket = ticket;
    d.times.start = now_seconds();
    try {
      task();
    } catch (...) {
      d.error = std::current_exception();
    }
    d.times.end = now_seconds();
    lock.lock();
    finished_.push_back(std::move(d));
    completed_.store(ticket, std::memory_order_release);
    done_.notify_all();
  }
}

bool HostStream::collect(StreamTicket ticket, StreamTimes* times) {
  // Usually the oldest (a compute stream is collected in order); a copy
  // stream's receive and send copies are collected in any order.
  auto it = finished_.begin();
  while (it != finished_.end() && it->ticket != ticket) ++it;
  PPB_CHECK(it != finished_.end(), "host stream: a ticket was collected twice");
  Done d = std::move(*it);
  finished_.erase(it);
  if (d.error) std::rethrow_exception(d.error);
  if (times != nullptr) *times = d.times;
  return true;
}

bool HostStream::done(StreamTicket ticket, StreamTimes* times) {
  if (completed_.load(std::memory_order_acquire) < ticket) return false;
  std::lock_guard lock(mutex_);
  return collect(ticket, times);
}

bool HostStream::wait_for(StreamTicket ticket, double seconds, StreamTimes* times) {
  std::unique_lock lock(mutex_);
  const bool finished = done_.wait_for(lock, std::chrono::duration<double>(seconds), [&] {
    return completed_.load(std::memory_order_acquire) >= ticket;
  });
  if (!finished) return false;
  return collect(ticket, times);
}

}  // namespace ppb
