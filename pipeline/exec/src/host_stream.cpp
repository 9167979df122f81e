#include "host_stream.hpp"

#include <chrono>
#include <utility>

#include "ppb/exec/transport.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/clock.hpp"

namespace ppb {

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
  // Tickets are collected in order, so the finished one sits at the front
  // (earlier ones nobody asked for are dropped).
  while (!finished_.empty() && finished_.front().ticket < ticket) finished_.pop_front();
  PPB_CHECK(!finished_.empty() && finished_.front().ticket == ticket,
            "host stream: a ticket was collected twice or out of order");
  Done d = std::move(finished_.front());
  finished_.pop_front();
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

void HostStream::wait_idle() {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return completed_.load(std::memory_order_acquire) >= issued_; });
}

}  // namespace ppb
