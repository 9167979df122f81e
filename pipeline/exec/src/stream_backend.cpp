// StreamBackend: the CPU's streams are host threads (host_stream.hpp).
#include "stream_backend.hpp"

#include <cstring>

#include "host_stream.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/clock.hpp"

namespace ppb {

Placement BackendConfig::chunk_placement() const {
  return placement.empty() ? Placement(stages, chunks) : Placement(stages, chunks, placement);
}

UnitRange BackendConfig::chunk_units(int c) const {
  PPB_CHECK(static_cast<int>(parts.size()) == stages * chunks,
            "backend config: parts must hold stages * chunks ranges");
  PPB_CHECK(c >= 0 && c < chunks, "backend config: chunk out of range");
  return parts[static_cast<size_t>(chunk_placement().virtual_stage(stage, c))];
}

const char* memory_space_name(MemorySpace space) {
  switch (space) {
    case MemorySpace::kHost:
      return "host";
    case MemorySpace::kPinnedHost:
      return "pinned-host";
    case MemorySpace::kDevice:
      return "device";
  }
  return "?";
}

StreamBackend::StreamBackend() = default;

StreamBackend::~StreamBackend() { stop_streams(); }

void StreamBackend::stop_streams() {
  compute_.reset();
  copy_.reset();
}

TrackedBuffer StreamBackend::allocate(int64_t bytes, MemorySpace space, MemCategory category) {
  PPB_CHECK(space != MemorySpace::kDevice, "a host-stream backend has no device memory");
  // Pinned host memory is ordinary host memory without a device to DMA it.
  return TrackedBuffer(memory(), category, bytes);
}

void StreamBackend::run(const ActionCall& call) {
  switch (call.kind) {
    case ActionKind::kForward:
      forward(call.chunk, call.microbatch, call.in, call.out);
      return;
    case ActionKind::kBackward:
      backward(call.chunk, call.microbatch, call.in, call.out);
      return;
    case ActionKind::kBackwardInput:
      backward_input(call.chunk, call.microbatch, call.in, call.out);
      return;
    case ActionKind::kBackwardWeight:
      backward_weight(call.chunk, call.microbatch);
      return;
    case ActionKind::kSync:
      break;
  }
  PPB_CHECK(false, "stream backend: SYNC is not a compute action");
}

StreamTicket StreamBackend::enqueue(const ActionCall& call) {
  if (!compute_) compute_ = std::make_unique<HostStream>();  // its worker starts here
  return compute_->enqueue([this, call] { run(call); });
}

bool StreamBackend::query(StreamTicket ticket, StreamTimes* times) {
  return compute_->done(ticket, times);
}

bool StreamBackend::wait(StreamTicket ticket, double seconds, StreamTimes* times) {
  return compute_->wait_for(ticket, seconds, times);
}

double StreamBackend::stream_now() { return now_seconds(); }

StreamTicket StreamBackend::copy_async(std::byte* dst, const std::byte* src, int64_t bytes) {
  if (!copy_) copy_ = std::make_unique<HostStream>();
  return copy_->enqueue([dst, src, bytes] {
    if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
  });
}

bool StreamBackend::copy_done(StreamTicket ticket) { return copy_->done(ticket, nullptr); }

}  // namespace ppb
