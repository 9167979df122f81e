#include "ppb/pipeline/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

// Times are >= 0, so a negative value marks "not produced yet".
constexpr double kUnknown = -1.0;

// Everything the simulator knows about one (virtual stage, micro-batch) pair.
// One struct instead of four arrays: an action touches one cache line.
struct Slot {
  double act_in = kUnknown;   // activation from v-1 ready on v (F's input)
  double grad_in = kUnknown;  // input gradient from v+1 ready on v (B/I's input)
  double fwd_end = kUnknown;  // this stage's own F(mb, c) done
  double inp_end = kUnknown;  // this stage's own I(mb, c) done (W's input)
};

struct StageState {
  size_t next = 0;       // index of the next action in the stage's list
  double free = 0;       // when the stage's compute is free
  bool queued = false;   // on the worklist
  bool at_sync = false;  // registered its arrival at its current SYNC
  bool started = false;  // has run a compute action
  int syncs_done = 0;    // SYNCs left so far
  int inflight = 0;
  int64_t act_bytes = 0;
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
  // Sends F's output (gradient = false) or B/I's input gradient from virtual
  // stage v, produced at time `end`.
  void send(int s, int v, int32_t mb, int32_t chunk, bool gradient, double end);
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
  std::vector<double> link_free_;      // [2 * from + (to is from+1 mod P ? 0 : 1)]
  std::vector<double> send_time_fwd_;  // transfer time of F's output from v
  std::vector<double> send_time_bwd_;  // transfer time of B/I's gradient from v
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
}

void Simulator::send(int s, int v, int32_t mb, int32_t chunk, bool gradient, double end) {
  const int to_v = gradient ? v - 1 : v + 1;
  if (to_v < 0 || to_v >= vstages_) return;  // first/last virtual stage: nothing to send
  const int t = to_v % stages_;
  double arrival = end;
  if (t != s) {
    // A stage only ever sends to its two ring neighbours (v -> v+1 lands on
    // s+1 mod P, v -> v-1 on s-1 mod P), so two links per stage cover every
    // ordered pair in use; with P == 2 both neighbours are the same stage and
    // activations and gradients share that one link.
    const size_t li = 2 * static_cast<size_t>(s) + (t == (s + 1) % stages_ ? 0 : 1);
    double& link = link_free_[li];
    const double start = std::max(end, link);
    arrival = start + (gradient ? send_time_bwd_[static_cast<size_t>(v)]
                                : send_time_fwd_[static_cast<size_t>(v)]);
    link = arrival;
    if (options_.record_events) {
      result_.transfers.push_back({s, t, mb, chunk, gradient, start, arrival});
    }
  }
  Slot& dst = slot(to_v, mb);
  (gradient ? dst.grad_in : dst.act_in) = arrival;
  if (t != s) push(t);
}

void Simulator::advance(int s) {
  const auto su = static_cast<size_t>(s);
  const std::vector<Action>& list = sched_.actions[su];
  StageState& st = state_[su];
  SimStage& out = result_.stages[su];
  const int last_v = vstages_ - 1;
  while (st.next < list.size()) {
    const Action& a = list[st.next];
    check_action(s, st.next, a);
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
        const int v = virtual_stage(s, a.chunk, stages_);
        Slot& sl = slot(v, a.microbatch);
        if (v > 0) {
          if (sl.act_in < 0) return;
          start = std::max(start, sl.act_in);
        }
        const ChunkCost& c = costs_.chunks[static_cast<size_t>(v)];
        end = start + c.fwd;
        out.busy += c.fwd;
        sl.fwd_end = end;
        ++st.inflight;
        st.act_bytes += c.activation_bytes;
        out.peak_inflight = std::max(out.peak_inflight, st.inflight);
        out.peak_activation_bytes = std::max(out.peak_activation_bytes, st.act_bytes);
        send(s, v, a.microbatch, a.chunk, false, end);
        break;
      }
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput: {
        const int v = virtual_stage(s, a.chunk, stages_);
        Slot& sl = slot(v, a.microbatch);
        if (sl.fwd_end < 0) return;  // its own F has not run (and never will before it)
        if (v < last_v) {
          if (sl.grad_in < 0) return;
          start = std::max(start, sl.grad_in);
        }
        const ChunkCost& c = costs_.chunks[static_cast<size_t>(v)];
        const bool full = a.kind == ActionKind::kBackward;
        const double d = full ? c.bwd_input + c.bwd_weight : c.bwd_input;
        end = start + d;
        out.busy += d;
        if (full) {
          --st.inflight;
          st.act_bytes -= c.activation_bytes;
        } else {
          sl.inp_end = end;
        }
        send(s, v, a.microbatch, a.chunk, true, end);
        break;
      }
      case ActionKind::kBackwardWeight: {
        const int v = virtual_stage(s, a.chunk, stages_);
        Slot& sl = slot(v, a.microbatch);
        if (sl.inp_end < 0) return;
        const ChunkCost& c = costs_.chunks[static_cast<size_t>(v)];
        end = start + c.bwd_weight;
        out.busy += c.bwd_weight;
        --st.inflight;
        st.act_bytes -= c.activation_bytes;
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
    st.free = end;
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
      const int v = virtual_stage(s, a.chunk, stages_);
      return what + "the activation from stage " + std::to_string((v - 1) % stages_);
    }
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput: {
      const int v = virtual_stage(s, a.chunk, stages_);
      if (slot(v, a.microbatch).fwd_end < 0)
        return what + "its own F" + std::to_string(a.microbatch);
      return what + "the gradient from stage " + std::to_string((v + 1) % stages_);
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
  link_free_.assign(2 * static_cast<size_t>(stages_), 0.0);
  send_time_fwd_.resize(static_cast<size_t>(vstages_));
  send_time_bwd_.resize(static_cast<size_t>(vstages_));
  for (int v = 0; v < vstages_; ++v) {
    const auto vu = static_cast<size_t>(v);
    send_time_fwd_[vu] = costs_.link.transfer_time(costs_.chunks[vu].send_bytes);
    // The gradient sent back from v to v-1 has the size of v-1's output.
    send_time_bwd_[vu] = v > 0 ? costs_.link.transfer_time(costs_.chunks[vu - 1].send_bytes) : 0.0;
  }
  result_.stages.assign(static_cast<size_t>(stages_), SimStage{});
  result_.batch_end.assign(static_cast<size_t>(sched_.batches), 0.0);
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
  for (const StageState& st : state_) makespan = std::max(makespan, st.free);
  result_.step_time = makespan;
  double sum_busy = 0;
  double sum_idle = 0;
  double sum_ratio = 0;
  for (SimStage& st : result_.stages) {
    st.idle = makespan - st.busy;
    sum_busy += st.busy;
    result_.stage_span = std::max(result_.stage_span, st.span());
    sum_idle += st.idle;
    if (makespan > 0) sum_ratio += st.idle / makespan;
  }
  result_.bubble_ratio = sum_ratio / static_cast<double>(stages_);
  result_.bubble_overhead = sum_busy > 0 ? sum_idle / sum_busy : 0.0;
  if (!costs_.has_bytes) {
    for (SimStage& st : result_.stages) st.peak_activation_bytes = 0;
  }
  return std::move(result_);
}

}  // namespace

SimResult simulate(const Schedule& schedule, const StageCosts& costs, const SimOptions& options) {
  Simulator sim(schedule, costs, options);
  return sim.run();
}

}  // namespace ppb
