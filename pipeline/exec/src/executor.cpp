// The executor (executor.hpp). Why it is built this way:
//  * one loop per step, on the executor's thread, that never blocks on one
//    thing: it collects completed actions from the backend's compute stream,
//    posts receives and tests messages (step_messages.hpp), and enqueues the
//    next action as soon as its input is there; so MPI makes progress while
//    the stream computes (a rendezvous message lands during an action, not
//    after it);
//  * receives are posted link by link in the message plan's order through a
//    window that covers what in-order matching needs, so the receive the
//    next action needs is always postable (no deadlock the schedule does not
//    have) while buffer memory stays bounded;
//  * sends never block: completions are tested in the loop and the buffers go
//    back to the pool; the step ends after they all completed;
//  * when nothing moved, the loop waits: on the stream's completion (woken
//    the moment an action ends), for at most 1 ms while the stream computes,
//    so messages keep progressing without waking many times per action; or,
//    with the stream idle and the next action's input missing, by the
//    WaitStrategy;
//  * waiting is a strategy (WaitStrategy): with more ranks than cores a rank
//    that busy-polls in MPI_Wait steals the core of a rank that has work.
//
// Wait strategy figures (ppb_exec_overhead: timed backend, 1f1b, P = 8 ranks
// on the 2-core machine, M = 32, F 2 ms / B 4 ms, 64 KiB messages, median of
// 5 steps; "ratio" = measured step / simulated step with the measured mean
// action times; "hand-over" = mean delay from a producer's action end to the
// start of a consumer that was waiting for it). The machine was shared with
// other builds (load average 5-15), so each row is one run of several:
//
//   situation                         wait    ratio        hand-over
//   load ~5, normal priority          block   1.017-1.019   44-45 us
//                                     yield   1.021-1.046   53-92 us
//                                     sleep   1.023-1.031   66-83 us
//   load ~10, normal priority         block   1.08-1.28    172-386 us
//                                     yield   1.09-2.20    211-4074 us
//                                     sleep   1.06-1.09    119-193 us
//   load ~10, ranks at nice -15       block   1.37-1.55    708-1542 us
//   (the 8 ranks own the cores)       yield   1.24-1.56    447-952 us
//                                     sleep   1.04-1.10    140-275 us
//
// Busy-polling (block, yield) is at best a little faster and at worst twice
// as slow: once the 8 ranks own the 2 cores, a rank polling in MPI_Wait
// takes the core from the rank whose sleep just ended. MPI_Test with a
// 20 us nanosleep is never far off and never collapses: it is the default.
// Since then kSleep first spins 10 us (kSleepSpinSeconds) and the waiting
// thread's timer slack is 1 ns: on a quiet machine `pipebench p2p` latency
// went from 47-57 us (raw MPI 0.17 us) to 0.15-0.16 us, and the executor's
// overhead (ppb_exec_overhead, 1f1b P=8 M=32) stayed at 12 us per action of
// the schedule (243.3 ms measured vs 237.2 ms simulated, 512 actions).
// While kLargeMessageBytes or more are in flight and the rank has a core to
// spare, kSleep yields instead of sleeping: a staged 64 MiB device message
// on an H200 node reached 0.65x raw staged MPI with 20 us sleeps between
// tests and 0.96x yielding (MPI hands it on a fragment per call).
#include "ppb/exec/executor.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <span>
#include <string>
#include <thread>

#include "ppb/exec/mpi.hpp"
#include "ppb/pipeline/data_parallel.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/clock.hpp"
#include "ppb/profiling/log.hpp"
#include "step_messages.hpp"
#include "watchdog.hpp"

namespace ppb {

OptimizerPolicy optimizer_policy_for(const ScheduleInfo& schedule) {
  return schedule.optimizer_per_backward ? OptimizerPolicy::kPerBackward
                                         : OptimizerPolicy::kPerBatch;
}

struct Executor::Impl {
  MPI_Comm control = MPI_COMM_NULL;  // a private duplicate for barriers
  MPI_Comm start = MPI_COMM_NULL;    // the step's start barrier (ExecutorOptions::step_comm)
  Backend* backend = nullptr;
  Transport* transport = nullptr;
  ExecutorOptions options;
  std::unique_ptr<BufferPool> pool;  // communication buffers, reused across steps
  std::string logged_plan;           // the schedule whose link buffers were last logged

  // A barrier that waits with the configured strategy (a blocking
  // MPI_Barrier busy-polls, like MPI_Wait), calling `progress` while it
  // waits (a staged send must still start while its rank is in a SYNC).
  template <class Progress>
  void barrier(Progress&& progress) {
    MPI_Request r = MPI_REQUEST_NULL;
    PPB_MPI_CHECK(MPI_Ibarrier(control, &r));
    poll_until(
        [&] {
          int done = 0;
          PPB_MPI_CHECK(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
          if (done == 0) progress();
          return done != 0;
        },
        options.wait);
  }
  void barrier() {
    if (options.wait == WaitStrategy::kBlock) {
      PPB_MPI_CHECK(MPI_Barrier(control));
      return;
    }
    barrier([] {});
  }
  // The barrier that starts a step: a dissemination barrier (round k: an
  // empty message to rank + 2^k, one from rank - 2^k), so that a rank that
  // waits knows for whom and the watchdog can name the rank that did not
  // arrive, which a collective barrier cannot say.
  void start_barrier(Watchdog* watchdog) {
    const MPI_Comm comm = start != MPI_COMM_NULL ? start : control;
    int n = 0;
    int me = 0;
    PPB_MPI_CHECK(MPI_Comm_size(comm, &n));
    PPB_MPI_CHECK(MPI_Comm_rank(comm, &me));
    constexpr int kStartTag = 0x5057;  // the only point-to-point messages on these communicators
    for (int k = 1, round = 0; k < n; k <<= 1, ++round) {
      const int to = (me + k) % n;
      const int from = (me - k + n) % n;
      std::array<MPI_Request, 2> r = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
      PPB_MPI_CHECK(MPI_Irecv(nullptr, 0, MPI_BYTE, from, kStartTag, comm, &r[1]));
      PPB_MPI_CHECK(MPI_Isend(nullptr, 0, MPI_BYTE, to, kStartTag, comm, &r[0]));
      if (watchdog != nullptr) watchdog->start_wait(from, round);
      poll_until(
          [&] {
            int done = 0;
            PPB_MPI_CHECK(MPI_Testall(2, r.data(), &done, MPI_STATUSES_IGNORE));
            return done != 0;
          },
          options.wait);
    }
  }
};

Executor::Executor(MPI_Comm comm, Backend& backend, Transport& transport, ExecutorOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (!transport.can_access(backend.memory_space()) &&
      !transport.can_access(MemorySpace::kPinnedHost)) {
    // Staging needs a transport that reads pinned host memory.
    throw UsageError("--transport " + std::string(transport.name()) + ": cannot move the " +
                     std::string(backend.name()) + " backend's buffers (" +
                     memory_space_name(backend.memory_space()) +
                     " memory), nor stage them through pinned host memory; use a backend "
                     "with device memory or another transport");
  }
  lower_timer_slack();  // the waits below sleep 20 us at a time
  PPB_MPI_CHECK(MPI_Comm_dup(comm, &impl_->control));
  PPB_MPI_CHECK(MPI_Comm_set_errhandler(impl_->control, MPI_ERRORS_RETURN));
  PPB_MPI_CHECK(MPI_Comm_rank(impl_->control, &rank_));
  PPB_MPI_CHECK(MPI_Comm_size(impl_->control, &size_));
  PPB_CHECK(transport.rank() == rank_ && transport.size() == size_,
            "executor: transport and communicator disagree on rank or size");
  if (options.recv_window < 1) throw UsageError("executor: recv_window must be >= 1");
  if (options.queue_depth < 1) throw UsageError("executor: queue_depth must be >= 1");
  if (options.timeout_seconds < 0) throw UsageError("--timeout: must be >= 0 seconds");
  impl_->backend = &backend;
  impl_->transport = &transport;
  impl_->options = options;
  impl_->pool = std::make_unique<BufferPool>(backend);
  if (options.allreduce != nullptr && !options.allreduce->can_reduce(backend.memory_space()) &&
      !options.allreduce->can_reduce(MemorySpace::kPinnedHost)) {
    throw UsageError("--transport " + std::string(options.allreduce->name()) +
                     ": cannot all-reduce the " + std::string(backend.name()) +
                     " backend's gradients (" + memory_space_name(backend.memory_space()) +
                     " memory) across data-parallel replicas, nor stage them through pinned "
                     "host memory");
  }
  if (options.step_comm != MPI_COMM_NULL) {
    PPB_MPI_CHECK(MPI_Comm_dup(options.step_comm, &impl_->start));
    PPB_MPI_CHECK(MPI_Comm_set_errhandler(impl_->start, MPI_ERRORS_RETURN));
  }
  if (options.timeout_seconds > 0) {
    watchdog_ = std::make_unique<Watchdog>(rank_names(comm, options.step_comm), backend.chunks(),
                                           options.timeout_seconds);
  }
  static bool said = false;  // once per process: a sweep builds an executor per combination
  if (!backend.core_to_spare() && !said) {
    log::info(
        "%s backend: no core to spare beside the compute on rank %d; messages progress "
        "between actions",
        std::string(backend.name()).c_str(), rank_);
    said = true;
  }
}

Executor::~Executor() {
  watchdog_.reset();
  if (impl_->control != MPI_COMM_NULL) MPI_Comm_free(&impl_->control);
  if (impl_->start != MPI_COMM_NULL) MPI_Comm_free(&impl_->start);
}

namespace {

// The per-step memory peaks (the run-long peaks stay in the tracker): watches
// the tracker for the step's lifetime.
class StepPeaks {
 public:
  StepPeaks(MemoryTracker& mem, StepRecord& rec) : mem_(mem) {
    rec.peak_bytes = mem.current_total();
    rec.peak_activation_bytes = mem.current(MemCategory::kActivations);
    rec.peak_comm_bytes = mem.current(MemCategory::kCommBuffers);
    mem.on_change = [&rec, &mem](int64_t total) {
      rec.peak_bytes = std::max(rec.peak_bytes, total);
      rec.peak_activation_bytes =
          std::max(rec.peak_activation_bytes, mem.current(MemCategory::kActivations));
      rec.peak_comm_bytes = std::max(rec.peak_comm_bytes, mem.current(MemCategory::kCommBuffers));
    };
  }
  ~StepPeaks() { mem_.on_change = nullptr; }
  StepPeaks(const StepPeaks&) = delete;
  StepPeaks& operator=(const StepPeaks&) = delete;

 private:
  MemoryTracker& mem_;
};

}  // namespace

// One step on this rank: the action dispatch over the message side. Its
// loop (run) repeats complete -> enqueue -> progress messages -> enqueue -> wait.
class Executor::Step {
 public:
  Step(Executor& exec, const Schedule& schedule, const MessagePlan& plan, StepRecord& rec)
      : x_(*exec.impl_),
        exec_(exec),
        list_(schedule.actions[static_cast<size_t>(exec.rank_)]),
        chunks_(schedule.chunks),
        optimize_after_(optimizer_steps_after(
            schedule, list_, x_.options.optimizer == OptimizerPolicy::kPerBackward)),
        ctx_{plan,
             exec.rank_,
             *x_.backend,
             *x_.transport,
             *x_.pool,
             rec,
             x_.options.instrumentation,
             0.0,
             exec.staging()},
        recvs_(ctx_, x_.options.recv_window),
        sends_(ctx_) {
    if (x_.options.allreduce != nullptr) {
      reduce_after_ = allreduce_points(schedule, exec.rank_,
                                       x_.options.optimizer == OptimizerPolicy::kPerBackward);
      reducing_.resize(static_cast<size_t>(chunks_));
      stage_reduce_ = !x_.options.allreduce->can_reduce(x_.backend->memory_space());
    }
    // Pipedream's optimizer steps after every backward (a fence below) and
    // its weight-version probes read the chunk when the action begins: one
    // action on the stream at a time.
    depth_ = x_.options.optimizer == OptimizerPolicy::kPerBackward ? 1 : x_.options.queue_depth;
  }

  // Runs the list; REQUIRES: called right after the start barrier.
  void run() {
    StepRecord& rec = ctx_.record;
    ctx_.origin = now_seconds();
    // The stream clock is the host's (a device backend anchors its events
    // to it, here, while the stream is idle): action times share the step's
    // origin with the messages and the collectors' records.
    (void)x_.backend->stream_now();
    rec.origin = ctx_.origin;
    while (next_ < list_.size() || !inflight_.empty()) {
      // An input that just arrived starts its action before the other
      // messages are tested (each test runs the MPI progress engine).
      bool moved = complete();
      moved |= enqueue();
      moved |= sends_.progress();
      moved |= recvs_.progress();
      moved |= test_reduces();
      moved |= enqueue();
      if (moved) {
        nap_ = kFirstNap;
      } else {
        wait();
      }
    }
    if (list_.empty()) {
      // A stage without actions still takes part in the optimizer step.
      for (int c = 0; c < chunks_ && x_.options.optimizer == OptimizerPolicy::kPerBatch; ++c)
        optimizer(c);
    }
    rec.actions_end = 0;
    for (const ActionRecord& ar : rec.actions) rec.actions_end = std::max(rec.actions_end, ar.end);
    for (int c = 0; c < static_cast<int>(reducing_.size()); ++c) wait_reduce(c);
    drain();
    rec.end = ctx_.now();
  }

 private:
  struct InFlight {
    size_t index = 0;  // in list_
    StreamTicket ticket = 0;
    double enqueued = 0;  // step clock
    bool has_input = false;
    double input_at = 0;  // step clock: when the input arrived
    bool begun = false;   // action_begin hook called
    bool finished = false;
    StreamTimes times;
    TrackedBuffer input, output;
  };
  // While the stream computes the loop wakes this often to progress
  // messages (a large message is pulled by the receiver's MPI calls), and at
  // the action's end. Shorter periods cost more wake-ups than they save on
  // 2 cores shared by 8 ranks.
  static constexpr double kFirstNap = 1e-3;
  static constexpr double kLongestNap = 1e-3;
  // The same when the action computes on every core the rank has
  // (Backend::core_to_spare): the loop wakes at the action's end, and this
  // only bounds a wait on something else (a staging copy).
  static constexpr double kNoSpareCoreNap = 50e-3;
  // While an all-reduce is pending: a non-blocking collective advances only
  // inside MPI calls (no progress thread), one round per call at best, so a
  // 1 ms nap would stretch a 2(D-1)-round ring to milliseconds.
  static constexpr double kReduceNap = 100e-6;

  Instrumentation* hooks() const { return x_.options.instrumentation; }
  // A large message is in flight and the rank has a core to spare for
  // driving it: the waits below then yield instead of sleeping (kSleep),
  // since MPI hands a large message on fragment by fragment inside this
  // rank's calls. A rank without a core to spare keeps sleeping.
  bool large_in_flight() const {
    return x_.backend->core_to_spare() && x_.transport->bytes_in_flight() >= kLargeMessageBytes;
  }
  Watchdog* watchdog() const { return exec_.watchdog_.get(); }
  int stage() const { return exec_.rank_; }
  const Action& action(size_t k) const { return list_[k]; }
  int32_t input_of(size_t k) const { return ctx_.plan.received[static_cast<size_t>(stage())][k]; }
  int32_t output_of(size_t k) const { return ctx_.plan.sent[static_cast<size_t>(stage())][k]; }

  // Collects the completed actions at the front of the stream, in order.
  bool complete() {
    bool moved = false;
    while (!inflight_.empty()) {
      InFlight& f = inflight_.front();
      if (!f.finished && !x_.backend->query(f.ticket, &f.times)) break;
      finish(f);
      inflight_.pop_front();
      moved = true;
      if (!inflight_.empty()) begin(inflight_.front());
    }
    return moved;
  }

  // Records a completed action, sends its output, runs the optimizer after it.
  void finish(InFlight& f) {
    const Action& a = action(f.index);
    ActionRecord ar;
    ar.action = a;
    ar.start = f.times.start - ctx_.origin;
    ar.end = f.times.end - ctx_.origin;
    ar.enqueued = f.enqueued;
    // Waiting for the input: from when the stream was free to when the
    // input was there (0 when it was there first; host latency is not it).
    if (f.has_input)
      ar.wait = std::clamp(f.input_at - stream_free_, 0.0, std::max(0.0, ar.start - stream_free_));
    stream_free_ = ar.end;
    StepRecord& rec = ctx_.record;
    rec.busy += ar.end - ar.start;
    rec.wait += ar.wait;
    rec.actions.push_back(ar);
    if (hooks() != nullptr) hooks()->action_end(stage(), a);
    x_.pool->give(std::move(f.input), x_.backend->memory_space());
    if (const int32_t out = output_of(f.index); out >= 0) {
      if (ctx_.plan.messages[static_cast<size_t>(out)].local())
        recvs_.hand_over(out, std::move(f.output));
      else
        sends_.send(out, std::move(f.output));
    }
    if (!reduce_after_.empty() && reduce_after_[f.index] != 0) start_reduce(a.chunk);
    if (optimize_after_[f.index] != 0) {
      // The fence in enqueue() kept the stream empty behind this action.
      if (x_.options.optimizer == OptimizerPolicy::kPerBackward) {
        optimizer(a.chunk);
      } else {
        for (int c = 0; c < chunks_; ++c) optimizer(c);
      }
    }
  }

  void begin(InFlight& f) {
    if (f.begun) return;
    f.begun = true;
    if (watchdog() != nullptr) watchdog()->set(Doing::kCompute, action(f.index));
    if (hooks() != nullptr) hooks()->action_begin(stage(), action(f.index));
  }

  // Enqueues the next action when the stream has room, no fence holds it
  // and its input is ready; runs a SYNC once the stream is empty. An
  // overlapped pair (Action::overlap) is one unit: its F waits until the
  // backward's input is there too, and the backward follows it at once.
  bool enqueue() {
    bool moved = false;
    while (next_ < list_.size() && (static_cast<int>(inflight_.size()) < depth_ || pair_open_)) {
      if (!pair_open_ && !inflight_.empty() && optimize_after_[inflight_.back().index] != 0)
        break;  // fence
      const Action& a = action(next_);
      if (a.kind == ActionKind::kSync) {
        if (!inflight_.empty()) break;
        sync(a);
        ++next_;
        moved = true;
        continue;
      }
      const int32_t in = input_of(next_);
      if (in >= 0 && !recvs_.ready(in)) break;
      // Its gradients are being summed: a backward must not add to them.
      if (a.kind != ActionKind::kForward && !reducing_.empty()) wait_reduce(a.chunk);
      if (a.overlap) {
        const int32_t partner = input_of(next_ + 1);
        if (partner >= 0 && !recvs_.ready(partner)) break;
      }
      pair_open_ = a.overlap;
      InFlight f;
      f.index = next_;
      f.enqueued = ctx_.now();
      if (in >= 0) {
        f.has_input = true;
        f.input_at = recvs_.arrival(in);
        f.input = recvs_.take(in);
      }
      if (const int32_t out = output_of(next_); out >= 0) {
        const int64_t bytes = a.kind == ActionKind::kForward ? x_.backend->output_bytes(a.chunk)
                                                             : x_.backend->input_bytes(a.chunk);
        f.output = x_.pool->take(bytes, x_.backend->memory_space());
      }
      // The hook comes before the action can start (it may read the chunk),
      // unless an earlier action still runs: then when that one completes.
      if (inflight_.empty()) begin(f);
      debug_stall();
      if (hooks() != nullptr) hooks()->launch_begin(stage(), a);
      f.ticket =
          x_.backend->enqueue({a.kind, a.chunk, a.microbatch, f.input.data(), f.output.data()});
      if (hooks() != nullptr) hooks()->launch_end(stage(), a);
      inflight_.push_back(std::move(f));
      ++next_;
      moved = true;
    }
    return moved;
  }

  // Nothing moved: wait for the stream's next completion or for the input
  // the next action needs.
  void wait() {
    if (!inflight_.empty()) {
      InFlight& f = inflight_.front();
      const double nap = reduce_pending()              ? kReduceNap
                         : x_.backend->core_to_spare() ? nap_
                                                       : kNoSpareCoreNap;
      f.finished = x_.backend->wait(f.ticket, nap, &f.times);
      nap_ = std::min(2 * nap_, kLongestNap);
      return;
    }
    int32_t in = input_of(next_);
    // An overlapped pair waits for whichever of its two inputs is missing.
    if (action(next_).overlap && (in < 0 || recvs_.ready(in))) in = input_of(next_ + 1);
    PPB_CHECK(in >= 0, "executor: stuck with an empty stream and no input to wait for");
    const Action& a = action(next_);
    if (watchdog() != nullptr) {
      watchdog()->set(Doing::kWaitRecv, a, recvs_.peer(in),
                      ctx_.plan.messages[static_cast<size_t>(in)].kind);
    }
    // Each poll tests this input (which progresses every MPI message) and the
    // pending sends (a staged send starts when its copy is done); the other
    // receives are timed when the loop turns again.
    recvs_.progress();
    poll_until(
        [&] {
          if (recvs_.ready(in)) return true;
          if (sends_.pending() > 0) sends_.progress();
          if (reduce_pending()) test_reduces();  // records its end when it ends
          return false;
        },
        x_.options.wait, [this] { return large_in_flight(); });
  }

  // --- data parallelism: the gradient all-reduces ---------------------------

  // A chunk's all-reduce: direct (the transport sums the backend's
  // gradient buffers in place) or staged (the transport cannot reach the
  // backend's memory: the gradients are copied to pinned host twins on the
  // copy stream, summed there, and copied back before anything reads them).
  enum class Phase : uint8_t { kIdle, kToHost, kReducing, kToBackend };
  struct Reduction {
    Phase phase = Phase::kIdle;
    std::vector<RequestId> requests;    // still outstanding
    std::vector<TrackedBuffer> staged;  // pinned twins of the gradient buffers (staged only)
    std::vector<StreamTicket> copies;   // staging copies not yet seen done, in issue order
    size_t record = 0;                  // in the step record's allreduces
  };

  bool reduce_pending() const {
    return std::any_of(reducing_.begin(), reducing_.end(),
                       [](const Reduction& r) { return r.phase != Phase::kIdle; });
  }

  // Starts summing the chunk's gradients across the replicas (REQUIRES:
  // its backwards of this optimizer step completed, as observed here).
  void start_reduce(int chunk) {
    wait_reduce(chunk);
    Reduction& r = reducing_[static_cast<size_t>(chunk)];
    AllReduceRecord ar;
    ar.chunk = chunk;
    ar.start = ctx_.now();
    for (std::span<float> g : x_.backend->gradient_buffers(chunk)) {
      ar.bytes += static_cast<int64_t>(g.size_bytes());
    }
    r.record = ctx_.record.allreduces.size();
    ctx_.record.allreduces.push_back(ar);
    if (stage_reduce_) {
      for (std::span<float> g : x_.backend->gradient_buffers(chunk)) {
        const auto bytes = static_cast<int64_t>(g.size_bytes());
        r.staged.push_back(x_.pool->take(bytes, MemorySpace::kPinnedHost));
        r.copies.push_back(x_.backend->copy_async(
            r.staged.back().data(), reinterpret_cast<const std::byte*>(g.data()), bytes));
      }
      r.phase = Phase::kToHost;
      to_reduce_.push_back(chunk);
    } else {
      for (std::span<float> g : x_.backend->gradient_buffers(chunk)) {
        r.requests.push_back(
            x_.options.allreduce->iallreduce_sum(g.data(), static_cast<int64_t>(g.size())));
      }
      r.phase = Phase::kReducing;
    }
    test_reduce(chunk);
  }

  // True once every staging copy of `r` is done (each ticket is reported
  // once, so the done ones leave the list).
  bool copies_done(Reduction& r) {
    while (!r.copies.empty()) {
      if (!x_.backend->copy_done(r.copies.front())) return false;
      r.copies.erase(r.copies.begin());
    }
    return true;
  }

  // Staged all-reduces start in the order their chunks were posted, on
  // every replica the same (a collective must be started in the same order
  // everywhere), whatever order their copies complete in.
  void start_staged() {
    while (!to_reduce_.empty()) {
      Reduction& r = reducing_[static_cast<size_t>(to_reduce_.front())];
      if (!copies_done(r)) return;
      for (TrackedBuffer& b : r.staged) {
        r.requests.push_back(x_.options.allreduce->iallreduce_sum(
            reinterpret_cast<float*>(b.data()), b.size() / static_cast<int64_t>(sizeof(float))));
      }
      r.phase = Phase::kReducing;
      to_reduce_.pop_front();
    }
  }

  // Tests the chunk's all-reduce; true when it completed just now.
  bool test_reduce(int chunk) {
    Reduction& r = reducing_[static_cast<size_t>(chunk)];
    if (r.phase == Phase::kIdle) return false;
    if (r.phase == Phase::kToHost) start_staged();
    if (r.phase == Phase::kReducing) {
      std::erase_if(r.requests, [this](RequestId id) { return x_.options.allreduce->test(id); });
      if (!r.requests.empty()) return false;
      if (!r.staged.empty()) {
        size_t i = 0;
        for (std::span<float> g : x_.backend->gradient_buffers(chunk)) {
          const TrackedBuffer& b = r.staged[i++];
          r.copies.push_back(
              x_.backend->copy_async(reinterpret_cast<std::byte*>(g.data()), b.data(), b.size()));
        }
        r.phase = Phase::kToBackend;
      }
    }
    if (r.phase == Phase::kToBackend) {
      if (!copies_done(r)) return false;
      for (TrackedBuffer& b : r.staged) x_.pool->give(std::move(b), MemorySpace::kPinnedHost);
      r.staged.clear();
    }
    if (r.phase == Phase::kToHost) return false;
    r.phase = Phase::kIdle;
    AllReduceRecord& ar = ctx_.record.allreduces[r.record];
    ar.end = ctx_.now();
    ctx_.record.allreduce += ar.end - ar.start;
    return true;
  }

  bool test_reduces() {
    bool moved = false;
    for (int c = 0; c < static_cast<int>(reducing_.size()); ++c) moved |= test_reduce(c);
    return moved;
  }

  // Waits for the chunk's all-reduce, progressing the messages meanwhile.
  void wait_reduce(int chunk) {
    if (reducing_.empty() || reducing_[static_cast<size_t>(chunk)].phase == Phase::kIdle) return;
    if (watchdog() != nullptr) watchdog()->set(Doing::kAllReduce, Action{}, chunk);
    poll_until(
        [&] {
          if (test_reduce(chunk)) return true;
          sends_.progress();
          recvs_.progress();
          return false;
        },
        x_.options.wait, [this] { return large_in_flight(); });
  }

  void sync(const Action& a) {
    if (watchdog() != nullptr) watchdog()->set(Doing::kSync, a);
    ActionRecord ar;
    ar.action = a;
    ar.start = ctx_.now();
    ar.enqueued = ar.start;
    if (hooks() != nullptr) hooks()->action_begin(stage(), a);
    x_.barrier([this] {
      sends_.progress();
      recvs_.progress();
    });
    ar.end = ctx_.now();
    if (hooks() != nullptr) hooks()->action_end(stage(), a);
    ctx_.record.sync += ar.end - ar.start;
    ctx_.record.actions.push_back(ar);
    stream_free_ = ar.end;
  }

  void optimizer(int chunk) {
    wait_reduce(chunk);
    if (watchdog() != nullptr) watchdog()->set(Doing::kOptimizer, Action{});
    if (hooks() != nullptr) hooks()->optimizer_begin(chunk);
    const double t = ctx_.now();
    x_.backend->optimizer_step(chunk);
    ctx_.record.optimizer += ctx_.now() - t;
    if (hooks() != nullptr) hooks()->optimizer_end(chunk);
    stream_free_ = std::max(stream_free_, ctx_.now());
  }

  void drain() {
    // Names the rank the oldest unfinished send goes to, as it changes.
    int named = -2;
    poll_until(
        [&] {
          sends_.progress();
          if (const int peer = sends_.first_pending_peer();
              peer != named && watchdog() != nullptr) {
            watchdog()->set(Doing::kDrain, Action{}, peer);
            named = peer;
          }
          return sends_.pending() == 0;
        },
        x_.options.wait, [this] { return large_in_flight(); });
    recvs_.check_consumed();
  }

  // TEST ONLY (ExecutorOptions::debug_stall_rank): never finish the first action.
  void debug_stall() const {
    if (x_.options.debug_stall_rank != stage() || x_.options.debug_stall_step != exec_.steps_ ||
        next_ != 0)
      return;
    if (watchdog() != nullptr) watchdog()->set(Doing::kCompute, action(0));
    log::warn("test option: rank %d stalls in step %d", stage(), exec_.steps_);
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }

  Impl& x_;
  Executor& exec_;
  const std::vector<Action>& list_;
  int chunks_;
  std::vector<char> optimize_after_;
  std::vector<char> reduce_after_;   // allreduce_points (data parallelism; else empty)
  std::vector<Reduction> reducing_;  // per chunk (data parallelism; else empty)
  bool stage_reduce_ = false;        // the all-reduce transport cannot reach the backend's memory
  std::deque<int> to_reduce_;        // staged chunks whose all-reduce has not started, in order
  StepContext ctx_;
  ReceivePoster recvs_;
  SendTracker sends_;
  int depth_ = 1;
  size_t next_ = 0;         // next action of list_ to enqueue
  bool pair_open_ = false;  // the F of an overlapped pair is enqueued, its backward not yet
  std::deque<InFlight> inflight_;
  double stream_free_ = 0;  // step clock: when the stream last became free
  double nap_ = kFirstNap;
};

MessagePlan Executor::plan_step(const Schedule& schedule) {
  Impl& x = *impl_;
  const int P = schedule.stages;
  const int V = schedule.chunks;
  if (P != size_) {
    throw UsageError("schedule " + schedule.name + " has " + std::to_string(P) +
                     " stages but the job has " + std::to_string(size_) +
                     " ranks (run with mpirun -np " + std::to_string(P) + ")");
  }
  if (V != x.backend->chunks()) {
    throw UsageError("schedule " + schedule.name + " has " + std::to_string(V) +
                     " chunks per stage but the " + std::string(x.backend->name()) +
                     " backend was built with " + std::to_string(x.backend->chunks()));
  }
  PPB_CHECK(static_cast<int>(schedule.actions.size()) == P, "schedule: one action list per stage");
  MessagePlan plan = build_message_plan(schedule);
  for (const PlannedLink& l : plan.links) {
    if (static_cast<int64_t>(l.messages.size()) - 1 > x.transport->tag_ub()) {
      throw UsageError("link " + link_name(l) + " carries " + std::to_string(l.messages.size()) +
                       " messages per step, more than the transport's tag range (" +
                       std::to_string(x.transport->tag_ub()) + "); use fewer micro-batches");
    }
  }
  if (x.transport->matches_in_order() && schedule.name != x.logged_plan) {
    // The buffers in-order matching needs, once per schedule (rank 0 speaks).
    std::string links;
    for (const PlannedLink& l : plan.links)
      links += " " + link_name(l) + " " + std::to_string(l.buffers);
    log::info("%s: receive buffers per link for %s:%s", std::string(x.transport->name()).c_str(),
              schedule.name.c_str(), links.c_str());
    x.logged_plan = schedule.name;
  }
  return plan;
}

bool Executor::staging() const {
  return !impl_->transport->can_access(impl_->backend->memory_space());
}

StepRecord Executor::run_step(const Schedule& schedule) {
  const MessagePlan plan = plan_step(schedule);
  StepRecord rec;
  rec.step = steps_;
  rec.stage = rank_;
  rec.actions.reserve(schedule.actions[static_cast<size_t>(rank_)].size());
  Instrumentation* hooks = impl_->options.instrumentation;
  {
    const StepPeaks peaks(impl_->backend->memory(), rec);
    Step step(*this, schedule, plan, rec);
    if (watchdog_) watchdog_->step_begin(steps_, now_seconds());
    if (hooks != nullptr) hooks->step_begin(steps_);
    impl_->start_barrier(watchdog_.get());
    step.run();
  }
  if (watchdog_) watchdog_->step_end();
  if (hooks != nullptr) hooks->step_end(steps_);
  ++steps_;
  return rec;
}

}  // namespace ppb
