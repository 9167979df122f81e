// StreamBackend: the base of the backends whose streams are host threads
// (cpu, timed). Private to the exec library: code outside it makes
// backends through make_backend() and reaches them through Backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ppb/exec/backend.hpp"

namespace ppb {

class HostStream;
class ClockStream;

/// A backend whose streams are host threads (HostStream): everything lives
/// in host memory (pinned host is host memory on the CPU), counted in the
/// tracker this base holds; the compute stream runs the synchronous action
/// bodies below on its worker thread, the copy stream runs memcpy.
/// Subclasses implement the bodies.
class StreamBackend : public Backend {
 public:
  StreamBackend();
  ~StreamBackend() override;

  MemorySpace memory_space() const override { return MemorySpace::kHost; }
  TrackedBuffer allocate(int64_t bytes, MemorySpace space, MemCategory category) override;
  StreamTicket enqueue(const ActionCall& call) override;
  bool query(StreamTicket ticket, StreamTimes* times) override;
  bool wait(StreamTicket ticket, double seconds, StreamTimes* times) override;
  double stream_now() override;
  StreamTicket copy_async(std::byte* dst, const std::byte* src, int64_t bytes) override;
  bool copy_done(StreamTicket ticket) override;
  MemoryTracker& memory() final { return memory_; }
  const MemoryTracker& memory() const final { return memory_; }

  /// The action bodies, run on the compute stream's thread by enqueue();
  /// callable directly while the stream is idle (tests do).
  virtual void forward(int chunk, int64_t mb, const std::byte* in, std::byte* out) = 0;
  /// Full backward: input gradient into grad_in, weight gradients accumulated.
  virtual void backward(int chunk, int64_t mb, const std::byte* grad_out, std::byte* grad_in) = 0;
  /// Input-gradient half (zero-bubble I). REQUIRES: forward(chunk, mb) ran.
  virtual void backward_input(int chunk, int64_t mb, const std::byte* grad_out,
                              std::byte* grad_in) = 0;
  /// Weight-gradient half (zero-bubble W). REQUIRES: backward_input ran.
  virtual void backward_weight(int chunk, int64_t mb) = 0;

 protected:
  /// Subclasses call it first in their destructor: the worker must not run
  /// an action on a half-destroyed backend.
  void stop_streams();

 private:
  // First: a subclass's members count into it until they are destroyed.
  MemoryTracker memory_;
  void run(const ActionCall& call);
  std::unique_ptr<HostStream> compute_;
  std::unique_ptr<HostStream> copy_;  // started on the first copy_async
};

}  // namespace ppb
