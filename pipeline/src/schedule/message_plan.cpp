// The message plan (message_plan.hpp): one pass to find where every F and
// backward sits, one pass to list the messages in producer order, one pass
// over each consumer's list for the receive buffers it holds (the occupancy
// walk the validator reads too).
#include "ppb/pipeline/message_plan.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "ppb/profiling/check.hpp"

namespace ppb {

const char* message_kind_name(MessageKind kind) {
  switch (kind) {
    case MessageKind::kActivation:
      return "activation";
    case MessageKind::kGradient:
      return "gradient";
  }
  return "?";
}

int MessagePlan::link_of(int from_stage, int to_stage) const {
  for (size_t i = 0; i < links.size(); ++i) {
    if (links[i].from_stage == from_stage && links[i].to_stage == to_stage)
      return static_cast<int>(i);
  }
  return -1;
}

std::vector<int32_t> MessagePlan::links_into(int stage) const {
  std::vector<int32_t> out;
  for (size_t i = 0; i < links.size(); ++i) {
    if (links[i].to_stage == stage) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

std::vector<int32_t> MessagePlan::links_out_of(int stage) const {
  std::vector<int32_t> out;
  for (size_t i = 0; i < links.size(); ++i) {
    if (links[i].from_stage == stage) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

int32_t MessagePlan::max_buffers() const {
  int32_t most = 0;
  for (const PlannedLink& l : links) most = std::max(most, l.buffers);
  return most;
}

std::string link_name(const PlannedLink& link) {
  return "s" + std::to_string(link.from_stage) + "->s" + std::to_string(link.to_stage);
}

namespace {

// Where each (virtual stage, micro-batch) has its F and its B or I.
struct Positions {
  int total_mb = 0;
  std::vector<int32_t> f, bi;
  size_t cell(int v, int mb) const {
    return static_cast<size_t>(v) * static_cast<size_t>(total_mb) + static_cast<size_t>(mb);
  }
};

Positions find_positions(const Schedule& s, const Placement& place) {
  Positions pos;
  pos.total_mb = s.total_microbatches();
  const size_t n = static_cast<size_t>(s.virtual_stages()) * static_cast<size_t>(pos.total_mb);
  pos.f.assign(n, -1);
  pos.bi.assign(n, -1);
  for (int st = 0; st < s.stages; ++st) {
    const auto& list = s.actions[static_cast<size_t>(st)];
    for (size_t k = 0; k < list.size(); ++k) {
      const Action& a = list[k];
      if (a.kind == ActionKind::kSync || a.kind == ActionKind::kBackwardWeight) continue;
      if (a.microbatch < 0 || a.microbatch >= pos.total_mb || a.chunk < 0 || a.chunk >= s.chunks)
        throw UsageError("message plan: stage " + std::to_string(st) + " action " +
                         std::to_string(k) + " is out of range");
      auto& slot = a.kind == ActionKind::kForward ? pos.f : pos.bi;
      slot[pos.cell(place.virtual_stage(st, a.chunk), a.microbatch)] = static_cast<int32_t>(k);
    }
  }
  return pos;
}

// The occupancy walk under in-order matching: each consumer's list in order,
// per link the highest message posted so far and the messages consumed
// before; fills MessagePlan::held and each link's receive buffers.
void walk_occupancy(MessagePlan& plan) {
  std::vector<int32_t> max_seq(plan.links.size(), -1);
  std::vector<int32_t> consumed(plan.links.size(), 0);
  plan.held.resize(plan.received.size());
  for (size_t st = 0; st < plan.received.size(); ++st) {
    const auto& received = plan.received[st];
    auto& held = plan.held[st];
    held.assign(received.size(), 0);
    for (size_t k = 0; k < received.size(); ++k) {
      if (received[k] < 0) continue;
      const PlannedMessage& m = plan.messages[static_cast<size_t>(received[k])];
      if (m.local()) continue;
      const auto l = static_cast<size_t>(m.link);
      max_seq[l] = std::max(max_seq[l], m.seq);
      held[k] = max_seq[l] + 1 - consumed[l];
      ++consumed[l];
      PlannedLink& link = plan.links[l];
      if (held[k] > link.buffers) {
        link.buffers = held[k];
        link.buffers_at = static_cast<int32_t>(k);
      }
    }
  }
}

}  // namespace

MessagePlan build_message_plan(const Schedule& s, std::span<const int64_t> send_bytes) {
  const int P = s.stages;
  const int VP = s.virtual_stages();
  PPB_CHECK(send_bytes.empty() || static_cast<int>(send_bytes.size()) == VP,
            "message plan: send_bytes needs one entry per virtual stage");
  MessagePlan plan;
  plan.stages = P;
  plan.chunks = s.chunks;
  if (!s.placement.empty()) {
    if (std::string e = placement_error(s.placement, P, s.chunks); !e.empty())
      throw UsageError("message plan: placement: " + e);
  }
  plan.placement = placement_of(s);
  const Placement& place = plan.placement;
  const Positions pos = find_positions(s, place);
  plan.sent.resize(static_cast<size_t>(P));
  plan.received.resize(static_cast<size_t>(P));
  for (int st = 0; st < P; ++st) {
    const size_t n = s.actions[static_cast<size_t>(st)].size();
    plan.sent[static_cast<size_t>(st)].assign(n, -1);
    plan.received[static_cast<size_t>(st)].assign(n, -1);
  }
  std::map<std::pair<int, int>, int32_t> link_index;  // (from, to) -> provisional index
  for (int st = 0; st < P; ++st) {
    const auto& list = s.actions[static_cast<size_t>(st)];
    for (size_t k = 0; k < list.size(); ++k) {
      const Action& a = list[k];
      if (a.kind == ActionKind::kSync || a.kind == ActionKind::kBackwardWeight) continue;
      const int v = place.virtual_stage(st, a.chunk);
      const bool forward = a.kind == ActionKind::kForward;
      const int to_v = forward ? v + 1 : v - 1;
      if (to_v < 0 || to_v >= VP) continue;
      PlannedMessage m;
      m.kind = forward ? MessageKind::kActivation : MessageKind::kGradient;
      m.microbatch = a.microbatch;
      m.from_virtual = v;
      m.to_virtual = to_v;
      m.from_stage = st;
      m.to_stage = place.stage_of(to_v);
      m.from_chunk = a.chunk;
      m.to_chunk = place.chunk_of(to_v);
      m.producer = static_cast<int32_t>(k);
      m.consumer = (forward ? pos.f : pos.bi)[pos.cell(to_v, a.microbatch)];
      if (m.consumer < 0) {
        throw UsageError("message plan: stage " + std::to_string(m.to_stage) + " has no " +
                         (forward ? "F" : "backward") + " for micro-batch " +
                         std::to_string(a.microbatch) + " (the schedule is incomplete)");
      }
      if (!send_bytes.empty()) m.bytes = send_bytes[static_cast<size_t>(forward ? v : to_v)];
      m.flow_id = message_flow_id(a.microbatch, v, m.kind, VP);
      if (m.to_stage != st) {
        auto [it, inserted] = link_index.try_emplace({st, m.to_stage}, 0);
        if (inserted) {
          it->second = static_cast<int32_t>(plan.links.size());
          plan.links.push_back({st, m.to_stage, {}, 0, -1});
        }
        m.link = it->second;
        PlannedLink& link = plan.links[static_cast<size_t>(m.link)];
        m.seq = static_cast<int32_t>(link.messages.size());
        link.messages.push_back(static_cast<int32_t>(plan.messages.size()));
      }
      const auto id = static_cast<int32_t>(plan.messages.size());
      plan.sent[static_cast<size_t>(st)][k] = id;
      plan.received[static_cast<size_t>(m.to_stage)][static_cast<size_t>(m.consumer)] = id;
      plan.messages.push_back(m);
    }
  }
  // Links in (from, to) order: renumber (std::map iterates in key order).
  std::vector<int32_t> renumber(plan.links.size());
  std::vector<PlannedLink> sorted;
  for (const auto& [key, old] : link_index) {
    renumber[static_cast<size_t>(old)] = static_cast<int32_t>(sorted.size());
    sorted.push_back(std::move(plan.links[static_cast<size_t>(old)]));
  }
  plan.links = std::move(sorted);
  for (PlannedMessage& m : plan.messages) {
    if (m.link >= 0) m.link = renumber[static_cast<size_t>(m.link)];
  }
  walk_occupancy(plan);
  return plan;
}

}  // namespace ppb
