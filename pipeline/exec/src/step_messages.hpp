// The message side of one step of the executor (executor.hpp): a pool of
// communication buffers, the receive poster and the send tracker. All three
// work from the message plan (message_plan.hpp) and run on the executor's
// thread; none of them ever blocks.
//
// Staging. When the transport cannot access the backend's memory space
// (Transport::can_access), a received message lands in a pinned host buffer
// and is copied into a backend buffer on the backend's copy stream before
// its action may use it; an output is copied into a pinned host buffer on
// the copy stream and sent from there once the copy completed. Pinned
// buffers are counted as communication buffers like the others.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ppb/exec/backend.hpp"
#include "ppb/exec/executor.hpp"
#include "ppb/exec/transport.hpp"
#include "ppb/pipeline/message_plan.hpp"

namespace ppb {

/// Communication buffers by (space, size), allocated by the backend in
/// MemCategory::kCommBuffers and reused across steps.
class BufferPool {
 public:
  explicit BufferPool(Backend& backend) : backend_(backend) {}
  /// A buffer of `bytes` in `space` (an empty one for 0 bytes).
  TrackedBuffer take(int64_t bytes, MemorySpace space);
  /// Returns `buffer` (of `space`) to the pool.
  void give(TrackedBuffer&& buffer, MemorySpace space);

 private:
  Backend& backend_;
  std::map<std::pair<MemorySpace, int64_t>, std::vector<TrackedBuffer>> free_;
};

/// What the message side of a step shares: the plan, this rank, the
/// endpoints, the record it fills and the step clock.
struct StepContext {
  const MessagePlan& plan;
  int stage = 0;
  Backend& backend;
  Transport& transport;
  BufferPool& pool;
  StepRecord& record;
  Instrumentation* instrumentation = nullptr;
  double origin = 0;     ///< now_seconds() at the step start
  bool staging = false;  ///< transport cannot access the backend's space

  double now() const;
  MemorySpace wire_space() const {
    return staging ? MemorySpace::kPinnedHost : backend.memory_space();
  }
};

/// Posts this rank's receives link by link in link order, keeping up to
/// max(window, PlannedLink::buffers) of each link posted and unconsumed, and
/// hands each message to its action once its bytes are in a backend buffer.
class ReceivePoster {
 public:
  /// Lists the receives of ctx.stage and records them (StepRecord::comms,
  /// StepRecord::links). Bytes come from the backend (input_bytes of F's
  /// chunk, output_bytes of B/I's).
  ReceivePoster(StepContext& ctx, int window);
  /// Posts what the links' windows allow, and tests each link's posted
  /// receives in order up to the first that has not arrived (so each arrival
  /// is seen, and timed, within one turn of the loop). True when something
  /// arrived.
  bool progress();
  /// Moves message `id` on (arrival test, staging copy); true when its bytes
  /// are ready for its action. REQUIRES: id is a message into this stage.
  bool ready(int32_t id);
  /// When message `id` arrived (step clock; a hand-over: when it was handed
  /// over). REQUIRES: ready(id).
  double arrival(int32_t id) const;
  /// The ready message's buffer, for its action; frees its window slot.
  /// A local hand-over (same stage) is taken here too.
  TrackedBuffer take(int32_t id);
  /// Keeps a same-stage hand-over until its action takes it.
  void hand_over(int32_t id, TrackedBuffer&& buffer);
  /// The rank a message into this stage comes from.
  int peer(int32_t id) const;
  /// PPB_CHECKs that every receive and hand-over was consumed.
  void check_consumed() const;

 private:
  enum class State : uint8_t { kPlanned, kPosted, kCopying, kReady, kTaken };
  struct Recv {
    int32_t message = 0;
    double arrived = 0;  // step clock
    int link = 0;        // index into links_
    int64_t bytes = 0;
    State state = State::kPlanned;
    RequestId request = kNoRequest;
    StreamTicket copy = 0;
    TrackedBuffer wire;    // what the transport writes (pinned when staging)
    TrackedBuffer buffer;  // what the action reads
    size_t record = 0;     // index into StepRecord::comms
  };
  struct Link {
    std::vector<size_t> recvs;  // indices into recvs_, link order
    size_t next = 0;            // next to post
    size_t open = 0;            // first not yet taken
    int held = 0;               // posted and not yet taken
    int window = 1;
  };
  StepContext& ctx_;
  std::vector<Recv> recvs_;
  std::vector<Link> links_;
  std::unordered_map<int32_t, size_t> of_message_;  // message id -> recvs_ index
  void post();
  bool test(Recv& r);  // kPosted -> arrived (staging copy started); true when it arrived
  std::unordered_map<int32_t, std::pair<TrackedBuffer, double>> hand_overs_;  // same-stage
};

/// Starts each output's send (after its staging copy when staging), tests
/// the sends' completions and returns their buffers to the pool.
class SendTracker {
 public:
  explicit SendTracker(StepContext& ctx) : ctx_(ctx) {}
  /// Sends `buffer` (a backend buffer) as message `id` of the plan.
  void send(int32_t id, TrackedBuffer&& buffer);
  /// Tests staging copies and sends; true when something completed.
  bool progress();
  /// Sends not yet completed.
  size_t pending() const { return pending_.size(); }
  /// The stage the oldest send not yet completed goes to; -1 when none.
  int first_pending_peer() const;

 private:
  struct Pending {
    int32_t message = 0;
    StreamTicket copy = 0;  // staging copy in flight (0: none)
    RequestId request = kNoRequest;
    TrackedBuffer buffer;  // the action's output
    TrackedBuffer wire;    // pinned copy when staging
    size_t record = 0;
  };
  void start(Pending& p);
  StepContext& ctx_;
  std::vector<Pending> pending_;
};

}  // namespace ppb
