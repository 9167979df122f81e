// The executor (executor.hpp). Why it is built this way:
//  * receives are listed once per step in the order this rank's actions
//    consume them and posted through a window, so the receive the next
//    action needs is always posted (no deadlock the schedule does not have)
//    while buffer memory stays bounded;
//  * sends never block: completions are tested between actions and the
//    buffers go back to the pool; the step ends after they all completed;
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
#include "ppb/exec/executor.hpp"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "ppb/exec/mpi.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/clock.hpp"
#include "ppb/profiling/log.hpp"

namespace ppb {

OptimizerPolicy optimizer_policy_for(std::string_view schedule_name) {
  return schedule_name == "pipedream" ? OptimizerPolicy::kPerBackward : OptimizerPolicy::kPerBatch;
}

namespace {

// What a rank is doing right now, for the watchdog's message.
enum class Doing : uint8_t { kIdle, kStartBarrier, kCompute, kWaitRecv, kSync, kOptimizer, kDrain };

std::string action_text(const Action& a, int chunks) {
  if (a.kind == ActionKind::kSync) return "SYNC";
  std::string s = std::string(action_kind_name(a.kind)) + std::to_string(a.microbatch);
  if (chunks > 1) s += " c" + std::to_string(a.chunk);
  return s;
}

}  // namespace

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
  void loop() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      wake_.wait_for(lock, std::chrono::milliseconds(50));
      if (stop_ || !in_step_) continue;
      const double stuck = now_seconds() - step_start_;
      // A rank that waits on another gives the rank that is stuck in its own
      // work half a second (or 10%) more, so that the culprit reports first.
      const bool waiting = doing_ != Doing::kCompute && doing_ != Doing::kOptimizer;
      if (stuck <= timeout_ + (waiting ? std::max(0.5, 0.1 * timeout_) : 0.0)) continue;
      std::string where;
      switch (doing_) {
        case Doing::kIdle:
          where = "between steps";
          break;
        case Doing::kStartBarrier:
          where = "the barrier that starts the step (a rank did not arrive)";
          break;
        case Doing::kCompute:
          where = "in " + action_text(action_, chunks_) + " (computing)";
          break;
        case Doing::kWaitRecv:
          where = "in " + action_text(action_, chunks_) + " (waiting for the " +
                  (kind_ == MessageKind::kActivation ? "activation" : "input gradient") +
                  " of mb " + std::to_string(action_.microbatch) + " from rank " +
                  std::to_string(peer_) + ")";
          break;
        case Doing::kSync:
          where = "in SYNC (a barrier: another rank did not arrive)";
          break;
        case Doing::kOptimizer:
          where = "in the optimizer step";
          break;
        case Doing::kDrain:
          where = "after its last action (waiting for its sends to complete)";
          break;
      }
      char line[512];
      std::snprintf(line, sizeof line,
                    "rank %d: step %d stuck for %.1f s %s; aborting (--timeout %.1f)", rank_, step_,
                    stuck, where.c_str(), timeout_);
      lock.unlock();
      abort_job(line, 1);
    }
  }

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

struct Executor::Impl {
  MPI_Comm control = MPI_COMM_NULL;  // a private duplicate for barriers
  Backend* backend = nullptr;
  Transport* transport = nullptr;
  ExecutorOptions options;
  std::unordered_map<int64_t, std::vector<TrackedBuffer>> pool;  // free comm buffers by size
  std::string logged_plan;  // the schedule whose link buffers were last logged

  TrackedBuffer take(int64_t bytes) {
    if (bytes == 0) return {};
    auto it = pool.find(bytes);
    if (it != pool.end() && !it->second.empty()) {
      TrackedBuffer b = std::move(it->second.back());
      it->second.pop_back();
      return b;
    }
    return TrackedBuffer(backend->memory(), MemCategory::kCommBuffers, bytes);
  }
  void give(TrackedBuffer&& b) {
    if (b.empty()) return;
    const int64_t bytes = b.size();
    pool[bytes].push_back(std::move(b));
  }

  // A barrier that waits with the configured strategy (a blocking
  // MPI_Barrier busy-polls, like MPI_Wait).
  void barrier() {
    if (options.wait == WaitStrategy::kBlock) {
      PPB_MPI_CHECK(MPI_Barrier(control));
      return;
    }
    MPI_Request r = MPI_REQUEST_NULL;
    PPB_MPI_CHECK(MPI_Ibarrier(control, &r));
    poll_until(
        [&] {
          int done = 0;
          PPB_MPI_CHECK(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
          return done != 0;
        },
        options.wait);
  }
};

Executor::Executor(MPI_Comm comm, Backend& backend, Transport& transport, ExecutorOptions options)
    : impl_(std::make_unique<Impl>()) {
  lower_timer_slack();  // the waits below sleep 20 us at a time
  PPB_MPI_CHECK(MPI_Comm_dup(comm, &impl_->control));
  PPB_MPI_CHECK(MPI_Comm_set_errhandler(impl_->control, MPI_ERRORS_RETURN));
  PPB_MPI_CHECK(MPI_Comm_rank(impl_->control, &rank_));
  PPB_MPI_CHECK(MPI_Comm_size(impl_->control, &size_));
  PPB_CHECK(transport.rank() == rank_ && transport.size() == size_,
            "executor: transport and communicator disagree on rank or size");
  if (options.recv_window < 1) throw UsageError("executor: recv_window must be >= 1");
  if (options.timeout_seconds < 0) throw UsageError("--timeout: must be >= 0 seconds");
  impl_->backend = &backend;
  impl_->transport = &transport;
  impl_->options = options;
  if (options.timeout_seconds > 0) {
    watchdog_ = std::make_unique<Watchdog>(rank_, backend.chunks(), options.timeout_seconds);
  }
}

Executor::~Executor() {
  watchdog_.reset();
  if (impl_->control != MPI_COMM_NULL) MPI_Comm_free(&impl_->control);
}

namespace {

// One message this rank receives in a step.
struct Recv {
  int peer = 0;
  int tag = 0;
  int link = 0;  // index into the links this rank receives on
  int64_t bytes = 0;
  RequestId request = kNoRequest;
  TrackedBuffer buffer;
  size_t record = 0;  // index into StepRecord::comms
  bool posted = false;
  bool done = false;
};

struct PendingSend {
  RequestId request = kNoRequest;
  TrackedBuffer buffer;
  size_t record = 0;
};

}  // namespace

StepRecord Executor::run_step(const Schedule& schedule) {
  Impl& x = *impl_;
  Backend& backend = *x.backend;
  Transport& transport = *x.transport;
  Instrumentation* instr = x.options.instrumentation;
  const int P = schedule.stages;
  const int V = schedule.chunks;
  if (P != size_) {
    throw UsageError("schedule " + schedule.name + " has " + std::to_string(P) +
                     " stages but the job has " + std::to_string(size_) +
                     " ranks (run with mpirun -np " + std::to_string(P) + ")");
  }
  if (V != backend.chunks()) {
    throw UsageError("schedule " + schedule.name + " has " + std::to_string(V) +
                     " chunks per stage but the " + std::string(backend.name()) +
                     " backend was built with " + std::to_string(backend.chunks()));
  }
  PPB_CHECK(static_cast<int>(schedule.actions.size()) == P, "schedule: one action list per stage");
  const int s = rank_;
  const std::vector<Action>& list = schedule.actions[static_cast<size_t>(s)];
  const MessagePlan plan = build_message_plan(schedule);
  for (const PlannedLink& l : plan.links) {
    if (static_cast<int64_t>(l.messages.size()) - 1 > transport.tag_ub()) {
      throw UsageError("link " + link_name(l) + " carries " + std::to_string(l.messages.size()) +
                       " messages per step, more than the transport's tag range (" +
                       std::to_string(transport.tag_ub()) + "); use fewer micro-batches");
    }
  }

  if (transport.matches_in_order() && schedule.name != x.logged_plan) {
    // The buffers in-order matching needs, once per schedule (rank 0 speaks).
    std::string links;
    for (const PlannedLink& l : plan.links)
      links += " " + link_name(l) + " " + std::to_string(l.buffers);
    log::info("%s: receive buffers per link for %s:%s", std::string(transport.name()).c_str(),
              schedule.name.c_str(), links.c_str());
    x.logged_plan = schedule.name;
  }

  StepRecord rec;
  rec.step = steps_;
  rec.stage = s;
  rec.actions.reserve(list.size());

  // --- Plan the receives: per incoming link, in link order. ---
  const std::vector<int32_t> in_links = plan.links_into(s);
  std::vector<std::vector<int>> link_recvs(in_links.size());  // recv indices per link, in order
  std::vector<int> window(in_links.size());
  std::vector<Recv> recvs;
  std::vector<int> recv_of_message(plan.messages.size(), -1);
  for (size_t li = 0; li < in_links.size(); ++li) {
    const PlannedLink& link = plan.links[static_cast<size_t>(in_links[li])];
    window[li] = std::max(link.buffers, x.options.recv_window);
    rec.links.push_back({link.from_stage, link.to_stage, link.buffers, window[li]});
    for (const int32_t id : link.messages) {
      const PlannedMessage& m = plan.messages[static_cast<size_t>(id)];
      const Action& a = list[static_cast<size_t>(m.consumer)];
      Recv r;
      r.peer = m.from_stage;
      r.tag = m.seq;
      r.link = static_cast<int>(li);
      r.bytes = m.kind == MessageKind::kActivation ? backend.input_bytes(a.chunk)
                                                   : backend.output_bytes(a.chunk);
      r.record = rec.comms.size();
      CommRecord c;
      c.send = false;
      c.kind = m.kind;
      c.peer = r.peer;
      c.microbatch = m.microbatch;
      c.from_virtual = m.from_virtual;
      c.to_virtual = m.to_virtual;
      c.bytes = r.bytes;
      c.flow_id = m.flow_id;
      rec.comms.push_back(c);
      recv_of_message[static_cast<size_t>(id)] = static_cast<int>(recvs.size());
      link_recvs[li].push_back(static_cast<int>(recvs.size()));
      recvs.push_back(std::move(r));
    }
  }

  // Optimizer points of flush schedules: after the last action of each batch.
  std::vector<char> step_after(list.size(), 0);
  if (x.options.optimizer == OptimizerPolicy::kPerBatch) {
    std::vector<int> last_of_batch(static_cast<size_t>(std::max(schedule.batches, 1)), -1);
    for (size_t k = 0; k < list.size(); ++k) {
      if (list[k].kind == ActionKind::kSync) continue;
      const int b =
          std::min(list[k].microbatch / std::max(schedule.microbatches, 1), schedule.batches - 1);
      last_of_batch[static_cast<size_t>(b)] = static_cast<int>(k);
    }
    for (int k : last_of_batch) {
      if (k >= 0) step_after[static_cast<size_t>(k)] = 1;
    }
  }

  // Per-step memory peaks (the run-long peaks stay in the tracker).
  MemoryTracker& mem = backend.memory();
  rec.peak_bytes = mem.current_total();
  rec.peak_activation_bytes = mem.current(MemCategory::kActivations);
  rec.peak_comm_bytes = mem.current(MemCategory::kCommBuffers);
  mem.on_change = [&rec, &mem](int64_t total) {
    rec.peak_bytes = std::max(rec.peak_bytes, total);
    rec.peak_activation_bytes =
        std::max(rec.peak_activation_bytes, mem.current(MemCategory::kActivations));
    rec.peak_comm_bytes = std::max(rec.peak_comm_bytes, mem.current(MemCategory::kCommBuffers));
  };
  struct ResetHook {
    MemoryTracker& m;
    ~ResetHook() { m.on_change = nullptr; }
  } reset_hook{mem};

  // --- Start: barrier, then the clock. ---
  if (watchdog_) watchdog_->step_begin(steps_, now_seconds());
  if (instr != nullptr) instr->step_begin(steps_);
  x.barrier();
  const double t0 = now_seconds();
  rec.origin = t0;
  auto now = [t0] { return now_seconds() - t0; };

  std::vector<PendingSend> sends;
  std::unordered_map<int32_t, TrackedBuffer> local;  // same-rank hand-overs by message id
  std::vector<size_t> next_post(in_links.size(), 0);
  std::vector<int> held(in_links.size(), 0);  // posted, not yet consumed
  auto post_receives = [&] {
    for (size_t li = 0; li < in_links.size(); ++li) {
      while (next_post[li] < link_recvs[li].size() && held[li] < window[li]) {
        Recv& r = recvs[static_cast<size_t>(link_recvs[li][next_post[li]++])];
        r.buffer = x.take(r.bytes);
        rec.comms[r.record].start = now();
        r.request = transport.irecv(r.buffer.data(), r.bytes, r.peer, r.tag);
        r.posted = true;
        ++held[li];
        if (instr != nullptr) instr->comm_begin(rec.comms[r.record]);
      }
    }
  };
  auto progress_sends = [&] {
    for (size_t i = 0; i < sends.size();) {
      if (transport.test(sends[i].request)) {
        CommRecord& c = rec.comms[sends[i].record];
        c.end = now();
        if (instr != nullptr) instr->comm_end(c);
        x.give(std::move(sends[i].buffer));
        sends[i] = std::move(sends.back());
        sends.pop_back();
      } else {
        ++i;
      }
    }
  };
  auto send = [&](TrackedBuffer&& buffer, int32_t id) {
    const PlannedMessage& m = plan.messages[static_cast<size_t>(id)];
    CommRecord c;
    c.send = true;
    c.kind = m.kind;
    c.peer = m.to_stage;
    c.microbatch = m.microbatch;
    c.from_virtual = m.from_virtual;
    c.to_virtual = m.to_virtual;
    c.bytes = buffer.size();
    c.flow_id = m.flow_id;
    c.start = now();
    if (m.local()) {  // a same-rank hand-over of the buffer
      c.local = true;
      c.end = c.start;
      rec.comms.push_back(c);
      local[id] = std::move(buffer);
      return;
    }
    const int tag = m.seq;
    PendingSend p;
    p.record = rec.comms.size();
    rec.comms.push_back(c);
    if (instr != nullptr) instr->comm_begin(rec.comms[p.record]);
    p.request = transport.isend(buffer.data(), buffer.size(), c.peer, tag);
    p.buffer = std::move(buffer);
    sends.push_back(std::move(p));
  };
  auto optimizer = [&](int chunk) {
    if (watchdog_) watchdog_->set(Doing::kOptimizer, Action{});
    if (instr != nullptr) instr->optimizer_begin(chunk);
    const double a = now();
    backend.optimizer_step(chunk);
    rec.optimizer += now() - a;
    if (instr != nullptr) instr->optimizer_end(chunk);
  };

  // --- The actions. ---
  for (size_t k = 0; k < list.size(); ++k) {
    const Action& a = list[k];
    post_receives();
    progress_sends();
    ActionRecord ar;
    ar.action = a;
    if (a.kind == ActionKind::kSync) {
      if (watchdog_) watchdog_->set(Doing::kSync, a);
      ar.start = now();
      if (instr != nullptr) instr->action_begin(s, a);
      x.barrier();
      ar.end = now();
      if (instr != nullptr) instr->action_end(s, a);
      rec.sync += ar.end - ar.start;
      rec.actions.push_back(ar);
      continue;
    }
    const bool is_forward = a.kind == ActionKind::kForward;
    const int32_t in_id = plan.received[static_cast<size_t>(s)][k];
    const MessageKind in_kind = is_forward ? MessageKind::kActivation : MessageKind::kGradient;

    // Input: a posted receive, or a local hand-over.
    TrackedBuffer input;
    if (in_id >= 0) {
      const int ri = recv_of_message[static_cast<size_t>(in_id)];
      if (ri >= 0) {
        Recv& r = recvs[static_cast<size_t>(ri)];
        PPB_CHECK(r.posted, "executor: the receive an action needs was not posted");
        if (!transport.test(r.request)) {
          if (watchdog_) watchdog_->set(Doing::kWaitRecv, a, r.peer, in_kind);
          const double w0 = now();
          transport.wait(r.request, x.options.wait);
          ar.wait = now() - w0;
        }
        CommRecord& c = rec.comms[r.record];
        c.end = now();
        if (instr != nullptr) instr->comm_end(c);
        input = std::move(r.buffer);
        r.done = true;
        --held[static_cast<size_t>(r.link)];
        post_receives();
      } else {
        auto it = local.find(in_id);
        PPB_CHECK(it != local.end(), "executor: local input missing for " + action_text(a, V));
        input = std::move(it->second);
        local.erase(it);
      }
    }

    // Output buffer, the compute, the send.
    const int32_t out_id = plan.sent[static_cast<size_t>(s)][k];
    TrackedBuffer output;
    if (out_id >= 0)
      output = x.take(is_forward ? backend.output_bytes(a.chunk) : backend.input_bytes(a.chunk));
    if (watchdog_) watchdog_->set(Doing::kCompute, a);
    if (instr != nullptr) instr->action_begin(s, a);
    ar.start = now();
    if (x.options.debug_stall_rank == s && x.options.debug_stall_step == steps_ && k == 0) {
      log::warn("test option: rank %d stalls in step %d", s, steps_);
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    switch (a.kind) {
      case ActionKind::kForward:
        backend.forward(a.chunk, a.microbatch, input.data(), output.data());
        break;
      case ActionKind::kBackward:
        backend.backward(a.chunk, a.microbatch, input.data(), output.data());
        break;
      case ActionKind::kBackwardInput:
        backend.backward_input(a.chunk, a.microbatch, input.data(), output.data());
        break;
      case ActionKind::kBackwardWeight:
        backend.backward_weight(a.chunk, a.microbatch);
        break;
      case ActionKind::kSync:
        break;
    }
    ar.end = now();
    if (instr != nullptr) instr->action_end(s, a);
    rec.busy += ar.end - ar.start;
    rec.wait += ar.wait;
    rec.actions.push_back(ar);
    x.give(std::move(input));
    if (out_id >= 0) send(std::move(output), out_id);

    if (x.options.optimizer == OptimizerPolicy::kPerBackward &&
        (a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardWeight)) {
      optimizer(a.chunk);
    }
    if (step_after[k] != 0) {
      for (int c = 0; c < V; ++c) optimizer(c);
    }
  }
  rec.actions_end = rec.actions.empty() ? 0 : rec.actions.back().end;
  for (const ActionRecord& ar : rec.actions) rec.actions_end = std::max(rec.actions_end, ar.end);
  if (list.empty()) {
    // A stage without actions still takes part in the optimizer step.
    for (int c = 0; c < V && x.options.optimizer == OptimizerPolicy::kPerBatch; ++c) optimizer(c);
  }

  // --- Drain the sends. ---
  if (watchdog_) watchdog_->set(Doing::kDrain, Action{});
  for (PendingSend& p : sends) {
    transport.wait(p.request, x.options.wait);
    CommRecord& c = rec.comms[p.record];
    c.end = now();
    if (instr != nullptr) instr->comm_end(c);
    x.give(std::move(p.buffer));
  }
  sends.clear();
  PPB_CHECK(local.empty(), "executor: a local hand-over was never consumed");
  for (const Recv& r : recvs) PPB_CHECK(r.done, "executor: a posted receive was never consumed");
  rec.end = now();
  if (watchdog_) watchdog_->step_end();
  if (instr != nullptr) instr->step_end(steps_);
  ++steps_;
  return rec;
}

}  // namespace ppb
