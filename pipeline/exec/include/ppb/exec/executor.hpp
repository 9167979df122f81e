// The executor: runs one stage's action list of a validated Schedule on this
// MPI rank, with a Backend for the compute and a Transport for the messages.
//
// Communication (action.hpp's rule, derived, never listed):
//  * F(mb, c) on virtual stage v = c*P+s: if v > 0 its input is the
//    activation of v-1 (rank (v-1) % P); after it, if v < P*V-1, its output
//    goes to v+1 (rank (v+1) % P);
//  * B/I(mb, c): if v < P*V-1 its input is the gradient from v+1; after it,
//    if v > 0, the input gradient goes to v-1. W is local.
//  * a message between virtual stages on the same rank (P == 1) is a local
//    hand-over of the buffer, no transport call.
//  * the messages, their tags and flow ids are the message plan's
//    (message_plan.hpp); each incoming link's receives are posted in link
//    order (the order its sender sends them, which is how an in-order
//    transport matches them), up to max(ExecutorOptions::recv_window, the
//    buffers the link needs) ahead of consumption; a buffer returns to the
//    pool when its action has consumed it.
//    Sends are non-blocking; their completion is tested between actions and
//    their buffers recycled. All buffers come from a pool counted in
//    MemCategory::kCommBuffers. Since the receive the next action needs is
//    always postable (a link's window covers what it needs) and sends never
//    block, the run cannot deadlock unless the schedule does (the
//    validator's dry run proves it does not).
//  * SYNC: MPI_Barrier.
//  * optimizer: OptimizerPolicy::kPerBatch calls optimizer_step(c) for every
//    chunk once after the last action of each batch (flush schedules);
//    kPerBackward after every B or W of the chunk (pipedream).
////  * data parallelism (ExecutorOptions::allreduce, a transport over the D
//    replicas of this stage): after the actions allreduce_points() names
//    (data_parallel.hpp: the batch's last B or W of each chunk; every B and
//    W under kPerBackward) the chunk's Backend::gradient_buffers are summed
//    across the replicas by non-blocking all-reduces, which progress while
//    the stage's later actions run; the chunk's optimizer step, and any
//    later backward of the chunk, wait for them. While one is pending the
//    loop wakes every 100 us (kReduceNap) to progress it. A transport that
//    sums pinned host memory but not the backend's (MPI beside a device
//    backend: MPI_Iallreduce is not CUDA-aware) gets the gradients staged:
//    copied to pinned twins on the copy stream, summed there, copied back;
//    the staged collectives start in posting order on every replica,
//    whatever order their copies finish in. The all-reduce's record spans
//    the copies.
//
// A step starts with a barrier; times are seconds from this rank's step start
// (just after that barrier; ranks leave a barrier within microseconds of one
// another on one host).
//
// Wait strategy (ExecutorOptions::wait), measured on the 2-core machine with
// the timed backend, P = 8 ranks, 1f1b, M = 32, 2 ms actions (table in
// executor.cpp): busy-polling MPI_Wait is at best 1-2% faster than
// MPI_Test + 20 us nanosleep and, once 8 ranks own the 2 cores, up to 1.5x
// slower (measured/simulated step 1.37-1.55 vs 1.04-1.10); hence kSleep.
//
// Watchdog (ExecutorOptions::timeout_seconds > 0): a thread per rank watches
// the current step; when one step has run longer than the timeout it prints
//   "rank 3: step 2 stuck for 30.0 s in B5 (waiting for the input gradient of mb 5 from rank 4)"
// and ends the job with MPI_Abort(…, 1).
//
// Example:
//   ppb::MpiSession mpi;
//   auto transport = ppb::make_transport("mpi", mpi.comm());
//   auto backend = ppb::make_backend("timed", cfg);
//   ppb::Executor exec(mpi.comm(), *backend, *transport, {});
//   ppb::StepRecord r = exec.run_step(schedule);
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/exec/backend.hpp"
#include "ppb/exec/transport.hpp"
#include "ppb/pipeline/action.hpp"
#include "ppb/pipeline/message_plan.hpp"
#include "ppb/pipeline/schedule.hpp"

namespace ppb {

/// MPI_Test + 20 us nanosleep: measured on this project's 2-core machine
/// (the table is in executor.cpp's header comment); it yields instead while
/// a large message is in flight on a rank with a core to spare
/// (kLargeMessageBytes).
inline constexpr WaitStrategy kDefaultWaitStrategy = WaitStrategy::kSleep;

enum class OptimizerPolicy : uint8_t {
  kPerBatch,     ///< one SGD step per chunk at the end of each batch (flush schedules)
  kPerBackward,  ///< one SGD step on the chunk after each of its backwards (pipedream)
};
/// The policy the schedule's registry entry asks for (ScheduleInfo::
/// optimizer_per_backward: kPerBackward; otherwise kPerBatch).
OptimizerPolicy optimizer_policy_for(const ScheduleInfo& schedule);

/// One message as this rank saw it (for Chrome trace flow arrows).
struct CommRecord {
  bool send = false;  ///< true: this rank sent it; false: received it
  MessageKind kind = MessageKind::kActivation;
  int peer = 0;  ///< the other rank
  int64_t microbatch = 0;
  int from_virtual = 0;  ///< producing virtual stage
  int to_virtual = 0;    ///< consuming virtual stage
  int64_t bytes = 0;
  double start = 0;    ///< send: isend posted; recv: irecv posted
  double end = 0;      ///< when this rank saw it complete
  bool local = false;  ///< same-rank hand-over (no transport)
  /// Id shared by the send and the receive of one message, unique within a
  /// step across ranks (PlannedMessage::flow_id of the message plan).
  int64_t flow_id = 0;
};

/// One gradient all-reduce of a chunk (data parallelism), seconds from the
/// step start.
struct AllReduceRecord {
  int chunk = 0;
  int64_t bytes = 0;  ///< gradient bytes summed
  double start = 0;   ///< posted: when the chunk's last backward of the batch had ended
  double end = 0;     ///< when this rank saw it complete
};

/// Receive buffers of one link into this rank.
struct LinkBuffers {
  int from_stage = 0;
  int to_stage = 0;
  int needed = 0;  ///< what the schedule needs under in-order matching (PlannedLink::buffers)
  int posted = 0;  ///< the most receives the executor keeps posted on it
};

/// One executed action, times in seconds from the step start. start and end
/// are when the backend's compute stream ran it (its stream clock, mapped to
/// the step clock); a SYNC's are the host's around its barrier.
struct ActionRecord {
  Action action;
  double start = 0;
  double end = 0;
  /// Seconds the stream sat idle before this action because its input had
  /// not arrived (from the previous action's end, or the step start, to the
  /// input's arrival); 0 when the input was there first or there is none.
  double wait = 0;
  double enqueued = 0;  ///< when the executor enqueued it (host clock)
};

/// What one rank did in one step (seconds from its step start).
struct StepRecord {
  int step = 0;  ///< 0-based index of this run_step call
  int stage = 0;
  /// now_seconds() at this rank's step start (the origin of every time
  /// below). Ranks on one host share the steady clock, so origins of
  /// different ranks compare there; across hosts they do not.
  double origin = 0;
  std::vector<ActionRecord> actions;  ///< in list order, SYNC included
  std::vector<CommRecord> comms;
  std::vector<LinkBuffers> links;           ///< the links into this rank, by sending stage
  std::vector<AllReduceRecord> allreduces;  ///< in start order (data parallelism only)
  double allreduce = 0;                     ///< summed all-reduce seconds
  double busy = 0;                          ///< summed F/B/I/W durations (compute busy)
  double wait = 0;                          ///< summed waits for inputs
  double sync = 0;                          ///< summed time in SYNC barriers
  double optimizer = 0;                     ///< summed optimizer_step time
  double actions_end =
      0;           ///< end of the last action (docs/metrics.md: the step's end on this rank)
  double end = 0;  ///< after the optimizer and the drain of all sends
  int64_t peak_bytes = 0;             ///< tracker total's high-water mark during the step
  int64_t peak_activation_bytes = 0;  ///< kActivations high-water mark during the step
  int64_t peak_comm_bytes = 0;        ///< kCommBuffers high-water mark during the step
};

/// Hook points around every action, message and step (NVTX ranges plug in
/// here: docs/instrumentation.md's "F s2 mb3", "send act s2->s3 mb3", "step <k>").
/// Called on the executor's thread; must not call the transport. Default
/// implementations do nothing. action_begin comes when the action is
/// enqueued on an idle stream, or when the action queued before it
/// completed; action_end when the executor sees it completed: the action
/// ranges of one rank never overlap. optimizer_begin/end bracket a step of
/// the optimizer with the stream idle (gradients may be read there).
class Instrumentation {
 public:
  virtual ~Instrumentation() = default;
  virtual void step_begin(int /*step*/) {}
  virtual void step_end(int /*step*/) {}
  virtual void action_begin(int /*stage*/, const Action& /*action*/) {}
  virtual void action_end(int /*stage*/, const Action& /*action*/) {}
  /// Around Backend::enqueue() of an action: the host thread launching its
  /// work onto the compute stream (with actions queued ahead this comes
  /// before the action's action_begin). A device profiler tags the launches
  /// here (CUPTI external correlation), so that the kernels of the action
  /// carry its id whichever stream runs them. Never for SYNC.
  virtual void launch_begin(int /*stage*/, const Action& /*action*/) {}
  virtual void launch_end(int /*stage*/, const Action& /*action*/) {}
  /// A message was posted (send: isend issued; recv: irecv posted).
  virtual void comm_begin(const CommRecord& /*record*/) {}
  /// The message completed (record.end is set).
  virtual void comm_end(const CommRecord& /*record*/) {}
  virtual void optimizer_begin(int /*chunk*/) {}
  virtual void optimizer_end(int /*chunk*/) {}
};

struct ExecutorOptions {
  WaitStrategy wait = kDefaultWaitStrategy;
  OptimizerPolicy optimizer = OptimizerPolicy::kPerBatch;
  /// Receives kept posted ahead of need per incoming link (>= 1); a link
  /// whose schedule needs more under in-order matching gets what it needs.
  int recv_window = 4;
  /// Actions queued on the backend's compute stream at once (>= 1): with 2
  /// the next action, when its input is there, starts the moment the
  /// previous one ends. OptimizerPolicy::kPerBackward runs with 1.
  int queue_depth = 2;
  /// Per-step watchdog; 0 = off.
  double timeout_seconds = 0;
  /// Not owned; may be null.
  Instrumentation* instrumentation = nullptr;
  /// Data parallelism: a transport over the D replicas of this stage whose
  /// iallreduce_sum() sums each chunk's gradients (see the file comment);
  /// not owned; null = one replica, nothing reduced. The executor stages
  /// the gradients through pinned host memory when it cannot reduce the
  /// backend's memory space, and refuses one that can reduce neither
  /// (UsageError).
  Transport* allreduce = nullptr;
  /// The communicator whose barrier starts every step (the whole job under
  /// data parallelism, so that the replicas' steps start together);
  /// MPI_COMM_NULL = the executor's `comm`. SYNC stays on `comm`.
  MPI_Comm step_comm = MPI_COMM_NULL;
  /// TEST ONLY: rank `debug_stall_rank` never finishes the first action of
  /// step `debug_stall_step` (it sleeps in it), so the watchdog can be tested.
  int debug_stall_rank = -1;
  int debug_stall_step = 0;
};

class Watchdog;

/// Runs schedules on this rank. One Executor per (backend, transport) pair;
/// run_step may be called with different schedules of the same P and V (the
/// adaptive schedule changes its in-flight limit between steps).
class Executor {
 public:
  /// `comm` is the job's communicator (rank = stage); backend and transport
  /// must outlive the executor. Starts the watchdog thread when
  /// options.timeout_seconds > 0. Throws UsageError when the transport can
  /// move neither the backend's memory space nor pinned host memory.
  Executor(MPI_Comm comm, Backend& backend, Transport& transport, ExecutorOptions options);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// Runs this rank's list schedule.actions[rank] once: barrier, the actions
  /// with their messages, the optimizer steps, then waits for its sends.
  /// Collective over `comm`. REQUIRES: the schedule is validated;
  /// schedule.stages == comm size (else UsageError naming both), schedule
  /// .chunks == backend.chunks().
  StepRecord run_step(const Schedule& schedule);

  int rank() const { return rank_; }
  int steps_run() const { return steps_; }
  /// True when messages are staged through pinned host buffers (the
  /// transport cannot access the backend's memory space); false when the
  /// transport moves the backend's buffers directly.
  bool staging() const;

 private:
  struct Impl;
  class Step;
  MessagePlan plan_step(const Schedule& schedule);
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<Watchdog> watchdog_;
  int rank_ = 0;
  int size_ = 1;
  int steps_ = 0;
};

}  // namespace ppb
