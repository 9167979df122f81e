#include "ppb/pipeline/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include "ppb/pipeline/data_parallel.hpp"
#include "ppb/pipeline/memory_model.hpp"
#include "ppb/pipeline/message_plan.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

// Times are >= 0, so a negative value marks "not produced yet".
constexpr double kUnknown = -1.0;

// What the simulator knows about one (virtual stage, micro-batch) pair; the
// inputs that cross stages are the message plan's (arrival per message).
struct Slot {
  double fwd_end = kUnknown;  // this stage's own F(mb, c) done
  double inp_end = kUnknown;  // this stage's own I(mb, c) done (W's input)
};

struct StageState {
  size_t next = 0;         // index of the next action in the stage's list
  double free = 0;         // when the stage's compute is free
  double actions_end = 0;  // end of its last action (free without all-reduce waits)
  bool queued = false;     // on the worklist
  bool at_sync = false;    // registered its arrival at its current SYNC
  bool started = false;    // has run a compute action
  int syncs_done = 0;      // SYNCs left so far
};

struct SyncState {
  int arrived = 0;
  double latest = 0;
  double release = kUnknown;
};

std::string action_label(const Action& a) {
  switch (a.kind) {
    case ActionKind::kSync:
      return "SYNC";
    case ActionKind::kForward:
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
    case ActionKind::kBackwardWeight: {
      // Appended piecewise: GCC 12 warns (-Wrestrict) on "c" + std::to_string(..).
      std::string label = action_kind_name(a.kind);
      label += std::to_string(a.microbatch);
      if (a.chunk != 0) {
        label += 'c';
        label += std::to_string(a.chunk);
      }
      return label;
    }
  }
  return "?";
}

class Simulator {
 public:
  Simulator(const Schedule& schedule, const StageCosts& costs, const SimOptions& options)
      : sched_(schedule), costs_(costs), options_(options) {}

  SimResult run();

 private:
  void check_inputs() const;
  void check_action(int stage, size_t index, const Action& a) const;
  // Runs stage `s` until it finishes or waits on something not produced yet.
  void advance(int s);
  // Sends the message action `index` of stage `s` produces (if any), produced
  // at time `end`.
  void send(int s, size_t index, double end);
  // Arrival of the input message of action `index` of stage `s`: kUnknown
  // when not sent yet; 0 when the action has none.
  double input_arrival(int s, size_t index) const {
    const int32_t m = plan_.received[static_cast<size_t>(s)][index];
    return m < 0 ? 0.0 : arrival_[static_cast<size_t>(m)];
  }
  // Starts the all-reduce of chunk `chunk`'s gradients when action `index`
  // of stage `s` ends at `end` (data parallelism); returns when the stage
  // is free again.
  double allreduce(int s, size_t index, int32_t chunk, double end);
  void push(int s) {
    if (!state_[static_cast<size_t>(s)].queued) {
      state_[static_cast<size_t>(s)].queued = true;
      work_.push_back(s);
    }
  }
  Slot& slot(int v, int32_t mb) {
    return slots_[static_cast<size_t>(v) * static_cast<size_t>(total_mb_) +
                  static_cast<size_t>(mb)];
  }
  std::string describe_wait(int s);
  [[noreturn]] void throw_stuck();

  const Schedule& sched_;
  const StageCosts& costs_;
  const SimOptions& options_;
  int stages_ = 1;
  int vstages_ = 1;
  int32_t total_mb_ = 1;
  std::vector<Slot> slots_;
  std::vector<StageState> state_;
  std::vector<SyncState> syncs_;
  MessagePlan plan_;
  std::vector<double> arrival_;    // per plan message: when it is ready on its consumer
  std::vector<double> link_free_;  // per plan link: when it is free (FIFO)
  std::vector<std::vector<char>> reduce_after_;  // per stage: allreduce_points (data parallelism)
  std::vector<double> reduce_free_;              // per stage: when its all-reduces are done
  std::vector<int> work_;
  SimResult result_;
};

void Simulator::check_inputs() const {
  const int P = sched_.stages;
  const int V = sched_.chunks;
  if (P < 1) throw UsageError("simulate: schedule has " + std::to_string(P) + " stages, need >= 1");
  if (V < 1) throw UsageError("simulate: schedule has " + std::to_string(V) + " chunks, need >= 1");
  if (sched_.microbatches < 1 || sched_.batches < 1) {
    throw UsageError("simulate: schedule needs microbatches >= 1 and batches >= 1, got " +
                     std::to_string(sched_.microbatches) + " and " +
                     std::to_string(sched_.batches));
  }
  if (static_cast<int>(sched_.actions.size()) != P) {
    throw UsageError("simulate: schedule has " + std::to_string(sched_.actions.size()) +
                     " action lists for " + std::to_string(P) + " stages");
  }
  if (costs_.stages != P || costs_.chunks_per_stage != V) {
    throw UsageError("simulate: costs are for " + std::to_string(costs_.stages) + " stages x " +
                     std::to_string(costs_.chunks_per_stage) + " chunks, schedule has " +
                     std::to_string(P) + " x " + std::to_string(V));
  }
  if (costs_.chunks.size() != static_cast<size_t>(P) * static_cast<size_t>(V)) {
    throw UsageError("simulate: costs have " + std::to_string(costs_.chunks.size()) +
                     " chunk entries, need stages x chunks = " + std::to_string(P * V));
  }
  for (size_t v = 0; v < costs_.chunks.size(); ++v) {
    const ChunkCost& c = costs_.chunks[v];
    if (!(c.fwd >= 0) || !(c.bwd_input >= 0) || !(c.bwd_weight >= 0) || c.send_bytes < 0 ||
        c.activation_bytes < 0) {
      throw UsageError("simulate: virtual stage " + std::to_string(v) +
                       " has a negative or NaN cost");
    }
  }
  if (!(costs_.action_seconds >= 0))
    throw UsageError("simulate: the cost per action is negative or NaN");
  const LinkModel& l = costs_.link;
  if (!(l.comm_time >= 0) || !(l.latency >= 0) || std::isnan(l.bandwidth)) {
    throw UsageError("simulate: link comm_time and latency must be >= 0");
  }
}

void Simulator::check_action(int stage, size_t index, const Action& a) const {
  const bool sync = a.kind == ActionKind::kSync;
  const bool mb_ok = sync ? a.microbatch == -1 : (a.microbatch >= 0 && a.microbatch < total_mb_);
  const bool chunk_ok = sync ? a.chunk == -1 : (a.chunk >= 0 && a.chunk < sched_.chunks);
  if (!mb_ok || !chunk_ok) {
    throw UsageError("simulate: stage " + std::to_string(stage) + " action " +
                     std::to_string(index) + " (" + action_kind_name(a.kind) + " mb " +
                     std::to_string(a.microbatch) + " chunk " + std::to_string(a.chunk) +
                     "): " + (mb_ok ? "chunk" : "micro-batch") + " out of range for M=" +
                     std::to_string(total_mb_) + ", V=" + std::to_string(sched_.chunks));
  }
  const auto& list = sched_.actions[static_cast<size_t>(stage)];
  if (a.overlap && (a.kind != ActionKind::kForward || index + 1 >= list.size() ||
                    (list[index + 1].kind != ActionKind::kBackward &&
                     list[index + 1].kind != ActionKind::kBackwardInput))) {
    throw UsageError("simulate: stage " + std::to_string(stage) + " action " +
                     std::to_string(index) +
                     ": an overlapped pair (OVERLAP_F_B) is an F followed by a B or I");
  }
}

void Simulator::send(int s, size_t index, double end) {
  const int32_t id = plan_.sent[static_cast<size_t>(s)][index];
  if (id < 0) return;  // first/last virtual stage, or W: nothing to send
  const PlannedMessage& m = plan_.messages[static_cast<size_t>(id)];
  double arrival = end;
  if (!m.local()) {
    // Links (ordered stage pairs) serve their messages first in, first out;
    // with P == 2 activations and gradients share the one link 0 -> 1.
    double& link = link_free_[static_cast<size_t>(m.link)];
    const double start = std::max(end, link);
    arrival = start + costs_.link_between(m.from_stage, m.to_stage).transfer_time(m.bytes);
    link = arrival;
    if (options_.record_events) {
      result_.transfers.push_back({s, m.to_stage, m.microbatch, m.from_chunk,
                                   m.kind == MessageKind::kGradient, start, arrival, m.flow_id});
    }
  }
  arrival_[static_cast<size_t>(id)] = arrival;
  if (m.to_stage != s) push(m.to_stage);
}

double Simulator::allreduce(int s, size_t index, int32_t chunk, double end) {
  const auto su = static_cast<size_t>(s);
  if (reduce_after_.empty() || reduce_after_[su][index] == 0) return end;
  const int v = plan_.placement.virtual_stage(s, chunk);
  MemoryModelOptions element;
  element.element_bytes = costs_.allreduce.element_bytes;
  const int64_t bytes =
      parameter_state(costs_.chunks[static_cast<size_t>(v)].param_bytes, element).gradients;
  const double start = std::max(end, reduce_free_[su]);
  const double finish = start + costs_.allreduce.time(bytes);
  reduce_free_[su] = finish;
  SimStage& out = result_.stages[su];
  out.allreduce += finish - start;
  out.allreduce_end = std::max(out.allreduce_end, finish);
  if (options_.record_events) out.allreduces.push_back({chunk, bytes, start, finish});
  return costs_.allreduce.per_backward ? finish : end;
}

void Simulator::advance(int s) {
  const auto su = static_cast<size_t>(s);
  const std::vector<Action>& list = sched_.actions[su];
  StageState& st = state_[su];
  SimStage& out = result_.stages[su];
  while (st.next < list.size()) {
    const Action& a = list[st.next];
    double start = st.free;
    double end = st.free;
    switch (a.kind) {
      case ActionKind::kSync: {
        const auto k = static_cast<size_t>(st.syncs_done);
        if (k >= syncs_.size()) syncs_.resize(k + 1);
        SyncState& sync = syncs_[k];
        if (!st.at_sync) {
          st.at_sync = true;
          sync.latest = std::max(sync.latest, st.free);
          if (++sync.arrived == stages_) {
            sync.release = sync.latest + (stages_ > 1 ? costs_.link.latency : 0.0);
            for (int o = 0; o < stages_; ++o) {
              if (o != s) push(o);
            }
          }
        }
        if (sync.release < 0) return;  // wait for the others
        st.at_sync = false;
        ++st.syncs_done;
        end = sync.release;
        break;
      }
      case ActionKind::kForward: {
        const int v = plan_.placement.virtual_stage(s, a.chunk);
        Slot& sl = slot(v, a.microbatch);
        const double in = input_arrival(s, st.next);
        if (in < 0) return;
        start = std::max(start, in);
        if (a.overlap) {
          // One unit with the backward after it: it starts when that
          // backward's input is there too (the validator proved it comes).
          const double partner = input_arrival(s, st.next + 1);
          if (partner < 0) return;
          start = std::max(start, partner);
          ++out.overlapped;
        }
        const ChunkCost& c = costs_.chunks[static_cast<size_t>(v)];
        end = start + c.fwd + costs_.action_seconds;
        out.busy += c.fwd + costs_.action_seconds;
        sl.fwd_end = end;
        send(s, st.next, end);
        break;
      }
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput: {
        const int v = plan_.placement.virtual_stage(s, a.chunk);
        Slot& sl = slot(v, a.microbatch);
        if (sl.fwd_end < 0) return;  // its own F has not run (and never will before it)
        const double in = input_arrival(s, st.next);
        if (in < 0) return;
        start = std::max(start, in);
        const ChunkCost& c = costs_.chunks[static_cast<size_t>(v)];
        const bool full = a.kind == ActionKind::kBackward;
        const double d = (full ? c.bwd_input + c.bwd_weight : c.bwd_input) + costs_.action_seconds;
        end = start + d;
        out.busy += d;
        if (!full) sl.inp_end = end;
        send(s, st.next, end);
        break;
      }
      case ActionKind::kBackwardWeight: {
        const int v = plan_.placement.virtual_stage(s, a.chunk);
        Slot& sl = slot(v, a.microbatch);
        if (sl.inp_end < 0) return;
        const ChunkCost& c = costs_.chunks[static_cast<size_t>(v)];
        end = start + c.bwd_weight + costs_.action_seconds;
        out.busy += c.bwd_weight + costs_.action_seconds;
        break;
      }
    }
    if (a.kind != ActionKind::kSync) {
      if (!st.started) {
        st.started = true;
        out.first_start = start;
      }
      out.last_end = end;
    }
    if (options_.record_events) out.events.push_back({a, start, end});
    if (a.microbatch >= 0) {
      double& be = result_.batch_end[static_cast<size_t>(a.microbatch / sched_.microbatches)];
      be = std::max(be, end);
    }
    st.actions_end = end;
    st.free = a.kind == ActionKind::kSync ? end : allreduce(s, st.next, a.chunk, end);
    ++st.next;
  }
}

std::string Simulator::describe_wait(int s) {
  const auto su = static_cast<size_t>(s);
  const StageState& st = state_[su];
  const Action& a = sched_.actions[su][st.next];
  std::string what = "stage " + std::to_string(s) + " step " + std::to_string(st.next) + " " +
                     action_label(a) + " waits for ";
  switch (a.kind) {
    case ActionKind::kSync:
      return what + "SYNC " + std::to_string(st.syncs_done) + " (" +
             std::to_string(syncs_[static_cast<size_t>(st.syncs_done)].arrived) + "/" +
             std::to_string(stages_) + " stages arrived)";
    case ActionKind::kForward: {
      if (a.overlap && input_arrival(s, st.next) >= 0) {
        return what + "the input gradient of " + action_label(sched_.actions[su][st.next + 1]) +
               ", one OVERLAP_F_B unit with it";
      }
      const int v = plan_.placement.virtual_stage(s, a.chunk);
      return what + "the activation from stage " + std::to_string(plan_.placement.stage_of(v - 1));
    }
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput: {
      const int v = plan_.placement.virtual_stage(s, a.chunk);
      if (slot(v, a.microbatch).fwd_end < 0)
        return what + "its own F" + std::to_string(a.microbatch);
      return what + "the gradient from stage " + std::to_string(plan_.placement.stage_of(v + 1));
    }
    case ActionKind::kBackwardWeight:
      return what + "its own I" + std::to_string(a.microbatch);
  }
  return what + "?";
}

void Simulator::throw_stuck() {
  std::string msg = "simulate: not progressing at ";
  int shown = 0;
  int stuck = 0;
  for (int s = 0; s < stages_; ++s) {
    if (state_[static_cast<size_t>(s)].next >= sched_.actions[static_cast<size_t>(s)].size())
      continue;
    ++stuck;
    if (shown < 6) {
      msg += (shown ? "; " : "") + describe_wait(s);
      ++shown;
    }
  }
  if (stuck > shown) msg += "; and " + std::to_string(stuck - shown) + " more stages";
  msg += " (schedule " + (sched_.name.empty() ? std::string("<unnamed>") : sched_.name) +
         " deadlocks)";
  throw UsageError(msg);
}

SimResult Simulator::run() {
  check_inputs();
  stages_ = sched_.stages;
  vstages_ = sched_.stages * sched_.chunks;
  total_mb_ = sched_.microbatches * sched_.batches;
  slots_.assign(static_cast<size_t>(vstages_) * static_cast<size_t>(total_mb_), Slot{});
  state_.assign(static_cast<size_t>(stages_), StageState{});
  for (int s = 0; s < stages_; ++s) {
    const auto& list = sched_.actions[static_cast<size_t>(s)];
    for (size_t k = 0; k < list.size(); ++k) check_action(s, k, list[k]);
  }
  // Message sizes: F of v sends send_bytes of v; the gradient back to v-1
  // has the size of v-1's output (the plan's rule).
  std::vector<int64_t> bytes(static_cast<size_t>(vstages_));
  for (size_t v = 0; v < bytes.size(); ++v) bytes[v] = costs_.chunks[v].send_bytes;
  plan_ = build_message_plan(sched_, bytes);
  arrival_.assign(plan_.messages.size(), kUnknown);
  link_free_.assign(plan_.links.size(), 0.0);
  result_.stages.assign(static_cast<size_t>(stages_), SimStage{});
  result_.batch_end.assign(static_cast<size_t>(sched_.batches), 0.0);
  if (costs_.allreduce.replicas > 1) {
    for (int s = 0; s < stages_; ++s)
      reduce_after_.push_back(allreduce_points(sched_, s, costs_.allreduce.per_backward));
    reduce_free_.assign(static_cast<size_t>(stages_), 0.0);
  }
  if (options_.record_events) {
    size_t sends = 0;
    for (int s = 0; s < stages_; ++s) {
      const auto n = sched_.actions[static_cast<size_t>(s)].size();
      result_.stages[static_cast<size_t>(s)].events.reserve(n);
      sends += n;
    }
    result_.transfers.reserve(sends);
  }

  work_.reserve(static_cast<size_t>(stages_) * 2);
  for (int s = stages_ - 1; s >= 0; --s) push(s);
  while (!work_.empty()) {
    const int s = work_.back();
    work_.pop_back();
    state_[static_cast<size_t>(s)].queued = false;
    advance(s);
  }
  for (int s = 0; s < stages_; ++s) {
    if (state_[static_cast<size_t>(s)].next < sched_.actions[static_cast<size_t>(s)].size())
      throw_stuck();
  }

  double makespan = 0;
  double pipeline = 0;
  for (const StageState& st : state_) {
    makespan = std::max(makespan, st.free);
    pipeline = std::max(pipeline, st.actions_end);
  }
  for (const SimStage& st : result_.stages) makespan = std::max(makespan, st.allreduce_end);
  result_.step_time = makespan;
  result_.pipeline_time = pipeline;
  double sum_busy = 0;
  double sum_idle = 0;
  double sum_ratio = 0;
  double sum_ratio_pipeline = 0;
  for (SimStage& st : result_.stages) {
    st.idle = makespan - st.busy;
    sum_busy += st.busy;
    result_.stage_span = std::max(result_.stage_span, st.span());
    sum_idle += st.idle;
    if (makespan > 0) sum_ratio += st.idle / makespan;
    if (pipeline > 0) sum_ratio_pipeline += (pipeline - st.busy) / pipeline;
  }
  result_.bubble_ratio = sum_ratio / static_cast<double>(stages_);
  result_.bubble_ratio_pipeline = sum_ratio_pipeline / static_cast<double>(stages_);
  result_.bubble_overhead = sum_busy > 0 ? sum_idle / sum_busy : 0.0;
  // In-flight pairs and their activations follow each list in order: the
  // memory model's walk (memory_model.hpp), the one rule the executor's
  // accounting and the run's memory prediction share.
  for (int s = 0; s < stages_; ++s) {
    std::vector<ActivationProfile> chunk_bytes;
    for (int c = 0; c < sched_.chunks; ++c)
      chunk_bytes.push_back(ActivationProfile::of(
          costs_.chunks[static_cast<size_t>(plan_.placement.virtual_stage(s, c))]));
    const ListPeaks peaks = list_peaks(sched_, s, chunk_bytes);
    SimStage& st = result_.stages[static_cast<size_t>(s)];
    st.peak_inflight = peaks.peak_inflight;
    st.peak_activation_bytes = costs_.has_bytes ? peaks.activations : 0;
  }
  return std::move(result_);
}

}  // namespace

SimResult simulate(const Schedule& schedule, const StageCosts& costs, const SimOptions& options) {
  Simulator sim(schedule, costs, options);
  return sim.run();
}

}  // namespace ppb
