// The memory model (memory_model.hpp). The walk mirrors the backends'
// accounting event by event: an F allocates its pair's activations, a B (or
// the W after an I) frees them and drops its use of the weight version its F
// used, an optimizer step starts a new version; the stash holds one copy per
// older version still in use.
#include "ppb/pipeline/memory_model.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

#include "ppb/pipeline/backend_traits.hpp"
#include "ppb/pipeline/message_plan.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

constexpr int64_t kFp32Bytes = 4;
constexpr int64_t kAdamMomentBytes = 8;  // two fp32 moments per parameter

// Weight versions of one chunk: which version each micro-batch's forward
// used, and how many micro-batches in flight use each version.
struct ChunkVersions {
  int64_t version = 0;
  std::unordered_map<int32_t, int64_t> forward_version;  // micro-batch -> version
  std::map<int64_t, int> users;                          // version -> micro-batches
  int64_t stashed = 0;                                   // older versions in use

  void update() {
    stashed = 0;
    for (const auto& [v, n] : users) {
      if (v < version && n > 0) ++stashed;
    }
  }
};

// The largest message of a link.
int64_t largest_message(const MessagePlan& plan, const PlannedLink& link) {
  int64_t largest = 0;
  for (const int32_t id : link.messages)
    largest = std::max(largest, plan.messages[static_cast<size_t>(id)].bytes);
  return largest;
}

// The executor's communication buffers on `stage` (the header's rule).
int64_t comm_buffer_bytes(const MessagePlan& plan, int stage, const MemoryModelOptions& options) {
  int64_t total = 0;
  auto add = [&](const std::vector<int32_t>& links) {
    for (const int32_t li : links) {
      const PlannedLink& link = plan.links[static_cast<size_t>(li)];
      const int64_t held =
          int64_t{std::max(options.recv_window, link.buffers)} + options.queue_depth;
      total +=
          std::min(static_cast<int64_t>(link.messages.size()), held) * largest_message(plan, link);
    }
  };
  add(plan.links_into(stage));
  add(plan.links_out_of(stage));
  int64_t local = 0;
  for (const PlannedMessage& m : plan.messages) {
    if (m.local() && m.to_stage == stage) local = std::max(local, m.bytes);
  }
  return total + local;
}

// The executor's pool on `stage` as it typically runs (the header's rule):
// replays the list with the stream `queue_depth` actions deep, every input
// there in time and every send complete once the next action has finished.
// The pool keeps buffers by size, so each size needs its own high-water mark.
int64_t expected_comm_buffer_bytes(const Schedule& schedule, const MessagePlan& plan, int stage,
                                   const MemoryModelOptions& options) {
  const std::vector<Action>& list = schedule.actions[static_cast<size_t>(stage)];
  const std::vector<int32_t>& sent = plan.sent[static_cast<size_t>(stage)];
  const std::vector<int32_t>& received = plan.received[static_cast<size_t>(stage)];
  const auto n = static_cast<int32_t>(list.size());
  auto message = [&](int32_t id) -> const PlannedMessage& {
    return plan.messages[static_cast<size_t>(id)];
  };
  std::vector<const PlannedMessage*> local;
  for (const PlannedMessage& m : plan.messages) {
    if (m.local() && m.to_stage == stage) local.push_back(&m);
  }
  const std::vector<int32_t> into = plan.links_into(stage);
  std::vector<size_t> first(into.size(), 0);  // per link: messages before it are taken
  std::map<int64_t, int> most;                // bytes -> buffers of that size at one moment
  std::map<int64_t, int> now;
  auto count = [&now](int64_t bytes) {
    if (bytes > 0) ++now[bytes];
  };
  for (int32_t k = 0; k < n; ++k) {
    // Actions before k have finished; k .. end-1 are on the stream.
    if (list[static_cast<size_t>(k)].kind == ActionKind::kSync) continue;
    int32_t end = k;
    while (end < n && end - k < options.queue_depth &&
           list[static_cast<size_t>(end)].kind != ActionKind::kSync)
      ++end;
    now.clear();
    for (int32_t j = k; j < end; ++j) {
      if (received[static_cast<size_t>(j)] >= 0)
        count(message(received[static_cast<size_t>(j)]).bytes);
      if (sent[static_cast<size_t>(j)] >= 0) count(message(sent[static_cast<size_t>(j)]).bytes);
    }
    if (k > 0 && sent[static_cast<size_t>(k - 1)] >= 0 &&
        !message(sent[static_cast<size_t>(k - 1)]).local())
      count(message(sent[static_cast<size_t>(k - 1)]).bytes);  // its send is pending
    for (const PlannedMessage* m : local) {
      if (m->producer < k && m->consumer >= end) count(m->bytes);  // handed over, not taken
    }
    // Receives are posted in link order while the link holds fewer than
    // its window of messages that no action has taken.
    for (size_t l = 0; l < into.size(); ++l) {
      const PlannedLink& link = plan.links[static_cast<size_t>(into[l])];
      const int window = std::max(options.recv_window, link.buffers);
      while (first[l] < link.messages.size() && message(link.messages[first[l]]).consumer < end)
        ++first[l];
      int held = 0;
      for (size_t i = first[l]; i < link.messages.size() && held < window; ++i) {
        const PlannedMessage& m = message(link.messages[i]);
        if (m.consumer >= end) {
          ++held;
          count(m.bytes);
        }
      }
    }
    for (const auto& [bytes, buffers] : now) most[bytes] = std::max(most[bytes], buffers);
  }
  int64_t total = 0;
  for (const auto& [bytes, buffers] : most) total += bytes * buffers;
  return total;
}

}  // namespace

const char* optimizer_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdam:
      return "adam";
  }
  return "?";
}

OptimizerKind parse_optimizer(std::string_view text, const std::string& what) {
  if (text == "sgd") return OptimizerKind::kSgd;
  if (text == "adam") return OptimizerKind::kAdam;
  throw UsageError(what + ": unknown optimizer '" + std::string(text) +
                   "' (optimizers: sgd, adam)");
}

ParameterState parameter_state(int64_t param_bytes, const MemoryModelOptions& options) {
  const int64_t e = options.element_bytes;
  PPB_CHECK(param_bytes >= 0 && (e == 1 || e == 2 || e == 4 || e == 8),
            "parameter_state: bytes >= 0 and an element of 1, 2, 4 or 8 bytes");
  const int64_t count = param_bytes / e;
  const bool mixed = e < kFp32Bytes;
  ParameterState s;
  s.parameters = param_bytes;
  s.gradients = mixed ? count * kFp32Bytes : param_bytes;
  s.optimizer_state = (mixed ? count * kFp32Bytes : 0) +
                      (options.optimizer == OptimizerKind::kAdam ? count * kAdamMomentBytes : 0);
  return s;
}

ListPeaks list_peaks(const Schedule& schedule, int stage,
                     const std::vector<ActivationProfile>& activation_bytes,
                     const std::vector<int64_t>& param_bytes, bool weight_stashing,
                     bool optimizer_per_backward) {
  PPB_CHECK(stage >= 0 && stage < static_cast<int>(schedule.actions.size()),
            "list_peaks: stage out of range");
  PPB_CHECK(activation_bytes.size() == static_cast<size_t>(schedule.chunks),
            "list_peaks: one activation size per chunk");
  PPB_CHECK(!weight_stashing || param_bytes.size() == static_cast<size_t>(schedule.chunks),
            "list_peaks: one parameter size per chunk with weight stashing");
  const std::vector<Action>& list = schedule.actions[static_cast<size_t>(stage)];
  std::vector<ChunkVersions> versions(weight_stashing ? activation_bytes.size() : 0);
  const std::vector<char> optimize =
      weight_stashing ? optimizer_steps_after(schedule, list, optimizer_per_backward)
                      : std::vector<char>{};
  ListPeaks peaks;
  int inflight = 0;
  int64_t acts = 0;
  int64_t stash = 0;
  // The moment an action holds `workspace` on top of `held` activations.
  auto hold = [&](int64_t held, int64_t workspace) {
    peaks.activations_and_stash = std::max(peaks.activations_and_stash, held + stash);
    peaks.workspace = std::max(peaks.workspace, workspace);
    peaks.with_workspace = std::max(peaks.with_workspace, held + stash + workspace);
  };
  auto restash = [&] {
    stash = 0;
    for (size_t c = 0; c < versions.size(); ++c) stash += versions[c].stashed * param_bytes[c];
    peaks.weight_stash = std::max(peaks.weight_stash, stash);
    hold(acts, 0);
  };
  for (size_t k = 0; k < list.size(); ++k) {
    const Action& a = list[k];
    const auto c = static_cast<size_t>(std::max(a.chunk, 0));
    switch (a.kind) {
      case ActionKind::kForward:
        acts += activation_bytes[c].held;
        ++inflight;
        peaks.peak_inflight = std::max(peaks.peak_inflight, inflight);
        peaks.activations = std::max(peaks.activations, acts);
        hold(acts, activation_bytes[c].forward_workspace);
        if (weight_stashing) {
          ChunkVersions& v = versions[c];
          v.forward_version[a.microbatch] = v.version;
          ++v.users[v.version];
        }
        break;
      case ActionKind::kBackward:
      case ActionKind::kBackwardWeight:
        hold(acts, a.kind == ActionKind::kBackward ? activation_bytes[c].backward_workspace
                                                   : activation_bytes[c].weight_workspace);
        acts -= a.kind == ActionKind::kBackward ? activation_bytes[c].held
                                                : activation_bytes[c].after_input;
        --inflight;
        if (weight_stashing) {
          ChunkVersions& v = versions[c];
          const auto it = v.forward_version.find(a.microbatch);
          PPB_CHECK(it != v.forward_version.end(), "list_peaks: backward without its forward");
          if (--v.users[it->second] == 0) v.users.erase(it->second);
          v.forward_version.erase(it);
          v.update();
          restash();
        }
        break;
      case ActionKind::kBackwardInput: {
        const ActivationProfile& p = activation_bytes[c];
        const int64_t during = acts - p.held + p.input_peak;
        peaks.activations = std::max(peaks.activations, during);
        hold(during, p.input_workspace);
        acts += p.after_input - p.held;
        break;
      }
      case ActionKind::kSync:
        break;
    }
    if (weight_stashing && optimize[k]) {
      // Per backward: the action's own chunk steps; per batch: every chunk.
      for (size_t ch = 0; ch < versions.size(); ++ch) {
        if (optimizer_per_backward && ch != c) continue;
        ++versions[ch].version;
        versions[ch].update();
      }
      restash();
    }
  }
  return peaks;
}

std::vector<PredictedMemory> predict_memory(const Schedule& schedule, const StageCosts& costs,
                                            const MemoryModelOptions& options) {
  if (costs.stages != schedule.stages || costs.chunks_per_stage != schedule.chunks ||
      costs.chunks.size() !=
          static_cast<size_t>(schedule.stages) * static_cast<size_t>(schedule.chunks)) {
    throw UsageError("memory model: costs for P=" + std::to_string(costs.stages) +
                     " V=" + std::to_string(costs.chunks_per_stage) + " do not match schedule " +
                     schedule.name + " (P=" + std::to_string(schedule.stages) +
                     " V=" + std::to_string(schedule.chunks) + ")");
  }
  if (options.data_parallel < 1 || options.recv_window < 1 || options.queue_depth < 1 ||
      options.allreduce_buffer_bytes < 0) {
    throw UsageError(
        "memory model: data_parallel, recv_window and queue_depth >= 1, buffer bytes >= 0");
  }
  const ScheduleInfo* info = find_schedule_info(schedule.name);
  const bool stashing = info != nullptr && info->weight_stashing;
  const bool per_backward = info != nullptr && info->optimizer_per_backward;
  std::vector<int64_t> send_bytes;
  send_bytes.reserve(costs.chunks.size());
  for (const ChunkCost& c : costs.chunks) send_bytes.push_back(c.send_bytes);
  const MessagePlan plan = build_message_plan(schedule, send_bytes);
  const Placement place = placement_of(schedule);

  std::vector<PredictedMemory> out(static_cast<size_t>(schedule.stages));
  for (int s = 0; s < schedule.stages; ++s) {
    std::vector<ActivationProfile> acts;
    std::vector<int64_t> params;
    int64_t param_bytes = 0;
    for (int c = 0; c < schedule.chunks; ++c) {
      const ChunkCost& cc = costs.at(place, s, c);
      acts.push_back(ActivationProfile::of(cc));
      params.push_back(cc.param_bytes);
      param_bytes += cc.param_bytes;
    }
    const ListPeaks peaks = list_peaks(schedule, s, acts, params, stashing, per_backward);
    PredictedMemory& m = out[static_cast<size_t>(s)];
    m.state = parameter_state(param_bytes, options);
    m.activations = peaks.activations;
    m.weight_stash = peaks.weight_stash;
    m.peak_inflight = peaks.peak_inflight;
    const int64_t allreduce = options.data_parallel > 1 ? options.allreduce_buffer_bytes : 0;
    m.workspace = peaks.workspace;
    m.comm_buffers = comm_buffer_bytes(plan, s, options) + allreduce;
    m.expected_comm_buffers = expected_comm_buffer_bytes(schedule, plan, s, options) + allreduce;
    m.resident = options.resident_bytes;
    m.peak_bytes = m.state.total() + peaks.with_workspace + m.resident + m.comm_buffers;
    m.expected_peak_bytes =
        m.state.total() + peaks.with_workspace + m.resident + m.expected_comm_buffers;
  }
  return out;
}

int64_t backend_resident_bytes(std::string_view backend) {
  const BackendTraits* t = find_backend_traits(backend);
  return t != nullptr ? t->resident_bytes : 0;
}

int worst_stage(const std::vector<PredictedMemory>& stages) {
  PPB_CHECK(!stages.empty(), "worst_stage: no stages");
  int worst = 0;
  for (size_t s = 1; s < stages.size(); ++s) {
    if (stages[s].peak_bytes > stages[static_cast<size_t>(worst)].peak_bytes)
      worst = static_cast<int>(s);
  }
  return worst;
}

}  // namespace ppb
