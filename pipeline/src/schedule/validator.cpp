// The validator: static completeness checks, then an O(actions) dry run.
//
// The dry run is event driven: each stage advances along its list until an
// action's dependency is missing, then parks on exactly that dependency (an
// intrusive wait list per key); completing an action wakes the stages parked
// on it. Every action is executed once and every stage parks at most once per
// action, so the cost is linear in the schedule's size.
#include "ppb/pipeline/validator.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ppb/pipeline/schedule_io.hpp"

namespace ppb {
namespace {

ValidationResult failure(std::string message, std::string grid = {}) {
  ValidationResult r;
  r.ok = false;
  r.error = std::move(message);
  r.grid = std::move(grid);
  return r;
}

// Sizes and index helpers shared by both passes.
struct Shape {
  int stages;
  int chunks;
  int total;  // micro-batches over all batches
  bool show_chunk;
  const Placement* place;

  size_t cells() const {
    return static_cast<size_t>(stages) * static_cast<size_t>(chunks) * static_cast<size_t>(total);
  }
  int virtual_of(int stage, int chunk) const { return place->virtual_stage(stage, chunk); }
  size_t cell(int v, int mb) const {
    return static_cast<size_t>(v) * static_cast<size_t>(total) + static_cast<size_t>(mb);
  }
};

std::string text(const Action& a, const Shape& sh) { return action_to_text(a, sh.show_chunk); }
std::string stage_name(int st) { return "stage " + std::to_string(st); }

// Where each (virtual stage, micro-batch) has its F, B/I and W in its stage's list.
struct Positions {
  std::vector<int32_t> f, bi, w;
  std::vector<uint8_t> bi_is_input;  // 1 when the backward is I (split), 0 for B
};

// Shape, range, duplicate, completeness and local-order checks. Returns an
// error message, or empty when the lists are complete.
std::string check_static(const Schedule& s, const Shape& sh, Positions& pos,
                         std::vector<int>& syncs) {
  const size_t n = sh.cells();
  pos.f.assign(n, -1);
  pos.bi.assign(n, -1);
  pos.w.assign(n, -1);
  pos.bi_is_input.assign(n, 0);
  syncs.assign(static_cast<size_t>(sh.stages), 0);
  for (int st = 0; st < sh.stages; ++st) {
    const auto& list = s.actions[static_cast<size_t>(st)];
    for (size_t k = 0; k < list.size(); ++k) {
      const Action& a = list[k];
      auto where = [&] {
        return stage_name(st) + ", action " + std::to_string(k) + " (" + text(a, sh) + ")";
      };
      if (a.kind == ActionKind::kSync) {
        ++syncs[static_cast<size_t>(st)];
        continue;
      }
      if (a.microbatch < 0 || a.microbatch >= sh.total) {
        return where() + ": micro-batch " + std::to_string(a.microbatch) + " out of range 0.." +
               std::to_string(sh.total - 1);
      }
      if (a.chunk < 0 || a.chunk >= sh.chunks) {
        return where() + ": chunk " + std::to_string(a.chunk) + " out of range 0.." +
               std::to_string(sh.chunks - 1);
      }
      if (a.overlap && (a.kind != ActionKind::kForward || k + 1 >= list.size() ||
                        (list[k + 1].kind != ActionKind::kBackward &&
                         list[k + 1].kind != ActionKind::kBackwardInput))) {
        return where() +
               ": an overlapped pair (OVERLAP_F_B) is an F followed by a B or I in the same list";
      }
      if (a.overlap && list[k + 1].chunk == a.chunk && list[k + 1].microbatch == a.microbatch) {
        // The pair runs as one: its backward would need the forward's output
        // (and the loss behind it) before the forward has run.
        return where() + ": overlapped with its own backward (" + text(list[k + 1], sh) +
               "), which needs this forward's output; OVERLAP_F_B pairs the forward of one "
               "micro-batch with the backward of another";
      }
      const size_t c = sh.cell(sh.virtual_of(st, a.chunk), a.microbatch);
      const auto at = static_cast<int32_t>(k);
      switch (a.kind) {
        case ActionKind::kForward:
          if (pos.f[c] >= 0) return stage_name(st) + ": " + text(a, sh) + " appears twice";
          pos.f[c] = at;
          break;
        case ActionKind::kBackward:
        case ActionKind::kBackwardInput: {
          const bool input = a.kind == ActionKind::kBackwardInput;
          if (pos.bi[c] >= 0) {
            if ((pos.bi_is_input[c] != 0) == input)
              return stage_name(st) + ": " + text(a, sh) + " appears twice";
            return stage_name(st) + ": micro-batch " + std::to_string(a.microbatch) +
                   (sh.show_chunk ? " chunk " + std::to_string(a.chunk) : std::string()) +
                   " has both B and I (a backward is either B, or I and W)";
          }
          pos.bi[c] = at;
          pos.bi_is_input[c] = input ? 1 : 0;
          break;
        }
        case ActionKind::kBackwardWeight:
          if (pos.w[c] >= 0) return stage_name(st) + ": " + text(a, sh) + " appears twice";
          pos.w[c] = at;
          break;
        case ActionKind::kSync:
          break;
      }
    }
  }
  for (int st = 0; st < sh.stages; ++st) {
    for (int ch = 0; ch < sh.chunks; ++ch) {
      for (int mb = 0; mb < sh.total; ++mb) {
        const size_t c = sh.cell(sh.virtual_of(st, ch), mb);
        auto who = [st] { return stage_name(st) + ": "; };
        if (pos.f[c] < 0)
          return who() + text(F(mb, ch), sh) +
                 " is missing (every micro-batch needs one F per chunk)";
        if (pos.bi[c] < 0) {
          return who() + "micro-batch " + std::to_string(mb) +
                 (sh.show_chunk ? " chunk " + std::to_string(ch) : "") + " has no backward (" +
                 text(B(mb, ch), sh) + ", or " + text(I(mb, ch), sh) + " and " +
                 text(W(mb, ch), sh) + ")";
        }
        const bool split = pos.bi_is_input[c] != 0;
        if (!split && pos.w[c] >= 0) {
          return who() + text(W(mb, ch), sh) + " given with a full " + text(B(mb, ch), sh) +
                 " (use B, or I and W)";
        }
        if (split && pos.w[c] < 0)
          return who() + text(I(mb, ch), sh) + " has no " + text(W(mb, ch), sh);
        if (pos.bi[c] < pos.f[c]) {
          const Action back = split ? I(mb, ch) : B(mb, ch);
          return who() + text(back, sh) + " comes before its " + text(F(mb, ch), sh);
        }
        if (split && pos.w[c] < pos.bi[c])
          return who() + text(W(mb, ch), sh) + " comes before its " + text(I(mb, ch), sh);
      }
    }
  }
  for (int st = 1; st < sh.stages; ++st) {
    if (syncs[static_cast<size_t>(st)] != syncs[0]) {
      return stage_name(st) + " has " + std::to_string(syncs[static_cast<size_t>(st)]) +
             " SYNC barriers, stage 0 has " + std::to_string(syncs[0]) +
             " (every stage must reach every barrier)";
    }
  }
  return {};
}

// The stage x step grid around the stuck actions: '>' marks a stuck stage,
// '*' the action it is stuck on.
std::string stuck_grid(const Schedule& s, const Shape& sh, const std::vector<size_t>& ptr) {
  size_t first = SIZE_MAX;
  size_t longest = 0;
  for (int st = 0; st < sh.stages; ++st) {
    const auto& list = s.actions[static_cast<size_t>(st)];
    longest = std::max(longest, list.size());
    if (ptr[static_cast<size_t>(st)] < list.size())
      first = std::min(first, ptr[static_cast<size_t>(st)]);
  }
  constexpr size_t kColumns = 24;
  const size_t begin = first > 6 ? first - 6 : 0;
  const size_t end = std::min(longest, begin + kColumns);
  size_t width = 4;
  for (const auto& list : s.actions) {
    for (size_t k = begin; k < std::min(end, list.size()); ++k)
      width = std::max(width, text(list[k], sh).size() + 2);
  }
  auto pad = [width](std::string cell) {
    while (cell.size() < width) cell.insert(cell.begin(), ' ');
    return cell;
  };
  constexpr int kMaxRows = 32;
  std::string grid = "step    ";
  for (size_t k = begin; k < end; ++k) grid += pad(std::to_string(k));
  grid += '\n';
  int rows = 0;
  for (int st = 0; st < sh.stages; ++st) {
    const auto& list = s.actions[static_cast<size_t>(st)];
    const size_t p = ptr[static_cast<size_t>(st)];
    const bool stuck = p < list.size();
    if (rows >= kMaxRows && !stuck) continue;
    ++rows;
    std::string row = (stuck ? ">s" : " s") + std::to_string(st);
    row.resize(8, ' ');
    for (size_t k = begin; k < end && k < list.size(); ++k)
      row += pad((k == p ? "*" : "") + text(list[k], sh));
    if (!stuck) row += "  (done)";
    grid += row + '\n';
  }
  grid += "(> stuck stage, * the action it waits at; steps " + std::to_string(begin) + ".." +
          std::to_string(end == 0 ? 0 : end - 1) + " of " + std::to_string(longest) + ")\n";
  return grid;
}

// Under in-order matching with `allowed` receive buffers per link: the first
// action of each stage whose input cannot be posted (SIZE_MAX: none), and why.
struct InOrderBlocks {
  std::vector<size_t> at;        // per stage
  std::vector<std::string> why;  // per stage, for the error line
};

InOrderBlocks in_order_blocks(const Schedule& s, const Shape& sh, int allowed) {
  InOrderBlocks blocks;
  const auto P = static_cast<size_t>(s.stages);
  blocks.at.assign(P, SIZE_MAX);
  blocks.why.assign(P, {});
  if (allowed <= 0) return blocks;
  const MessagePlan plan = build_message_plan(s);
  for (size_t st = 0; st < P; ++st) {
    const auto& held = plan.held[st];
    const auto k = static_cast<size_t>(
        std::find_if(held.begin(), held.end(), [allowed](int32_t h) { return h > allowed; }) -
        held.begin());
    if (k == held.size()) continue;
    const PlannedMessage& m = plan.messages[static_cast<size_t>(plan.received[st][k])];
    const PlannedLink& link = plan.links[static_cast<size_t>(m.link)];
    const int32_t waiting = held[k] - 1;
    blocks.at[st] = k;
    blocks.why[st] = "under in-order matching link " + link_name(link) + " needs " +
                     std::to_string(link.buffers) + " receive buffers, " + std::to_string(allowed) +
                     " allowed (" + text(s.actions[st][k], sh) + " consumes message " +
                     std::to_string(m.seq) + " of the link while " + std::to_string(waiting) +
                     " earlier message" + (waiting == 1 ? "" : "s") + " wait" +
                     (waiting == 1 ? "s" : "") + " for a later action)";
  }
  return blocks;
}

}  // namespace

ValidationResult validate_schedule(const Schedule& s, const ValidateOptions& options) {
  if (s.stages < 1 || s.microbatches < 1 || s.chunks < 1 || s.batches < 1) {
    return failure("schedule sizes must be >= 1: stages=" + std::to_string(s.stages) +
                   " microbatches=" + std::to_string(s.microbatches) +
                   " chunks=" + std::to_string(s.chunks) + " batches=" + std::to_string(s.batches));
  }
  if (s.actions.size() != static_cast<size_t>(s.stages)) {
    return failure("schedule has " + std::to_string(s.actions.size()) +
                   " stage lists, expected stages = " + std::to_string(s.stages));
  }
  // Every stage needs an F and a backward per (micro-batch, chunk). When the
  // declared sizes need far more actions than the lists hold (a file may
  // declare huge P, M or V), say so before allocating the dry run's tables,
  // which are sized P x V x M x batches; otherwise the precise checks below
  // name the first missing action.
  const int64_t pairs = int64_t{s.chunks} * s.microbatches * s.batches;
  int64_t work_total = 0;
  for (const auto& list : s.actions) {
    work_total += std::count_if(list.begin(), list.end(),
                                [](const Action& a) { return a.kind != ActionKind::kSync; });
  }
  if (pairs * s.stages > work_total + 4096) {
    for (size_t st = 0; st < s.actions.size(); ++st) {
      const auto& list = s.actions[st];
      const auto work = static_cast<int64_t>(std::count_if(
          list.begin(), list.end(), [](const Action& a) { return a.kind != ActionKind::kSync; }));
      if (work < 2 * pairs) {
        return failure(
            "stage " + std::to_string(st) + " has " + std::to_string(work) +
            " actions, fewer than the " + std::to_string(2 * pairs) +
            " it needs (an F and a backward for each of chunks x microbatches x batches = " +
            std::to_string(pairs) + ")");
      }
    }
  }
  if (!s.placement.empty()) {
    if (std::string e = placement_error(s.placement, s.stages, s.chunks); !e.empty())
      return failure("placement: " + e);
  }
  const Placement place = placement_of(s);
  const Shape sh{s.stages, s.chunks, s.total_microbatches(), s.chunks > 1, &place};
  const int vp = s.stages * s.chunks;
  Positions pos;
  std::vector<int> syncs;
  if (std::string e = check_static(s, sh, pos, syncs); !e.empty()) return failure(std::move(e));
  const InOrderBlocks blocks = in_order_blocks(s, sh, options.link_buffers);

  // Dry run.
  const size_t n = sh.cells();
  const auto P = static_cast<size_t>(s.stages);
  std::vector<uint8_t> f_done(n, 0), g_done(n, 0);  // g: B or I done (gradient sent)
  std::vector<int32_t> head(2 * n, -1);  // wait lists: [0, n) F keys, [n, 2n) gradient keys
  const auto n_sync = static_cast<size_t>(syncs[0]);
  std::vector<int32_t> sync_head(n_sync, -1);
  std::vector<int> arrived(n_sync, 0);
  std::vector<int32_t> next_waiter(P, -1);
  std::vector<int> arrived_at(P, -1), passed(P, 0);
  std::vector<size_t> ptr(P, 0);
  std::vector<int32_t> ready;
  ready.reserve(P);
  for (size_t st = P; st-- > 0;) ready.push_back(static_cast<int32_t>(st));

  auto park = [&](int32_t& list_head, int32_t st) {
    next_waiter[static_cast<size_t>(st)] = list_head;
    list_head = st;
  };
  auto wake = [&](int32_t& list_head) {
    for (int32_t w = list_head; w >= 0; w = next_waiter[static_cast<size_t>(w)]) ready.push_back(w);
    list_head = -1;
  };

  while (!ready.empty()) {
    const int32_t st = ready.back();
    ready.pop_back();
    const auto u = static_cast<size_t>(st);
    const auto& list = s.actions[u];
    bool parked = false;
    while (!parked && ptr[u] < list.size()) {
      if (ptr[u] == blocks.at[u]) break;  // a receive it can never post: stuck for good
      const Action& a = list[ptr[u]];
      switch (a.kind) {
        case ActionKind::kForward: {
          const int v = sh.virtual_of(st, a.chunk);
          if (v > 0 && !f_done[sh.cell(v - 1, a.microbatch)]) {
            park(head[sh.cell(v - 1, a.microbatch)], st);
            parked = true;
            break;
          }
          if (a.overlap) {
            // One unit with the backward after it: that backward's input
            // gradient must be there before either runs.
            const Action& b = list[ptr[u] + 1];
            const int bv = sh.virtual_of(st, b.chunk);
            if (bv < vp - 1 && !g_done[sh.cell(bv + 1, b.microbatch)]) {
              park(head[n + sh.cell(bv + 1, b.microbatch)], st);
              parked = true;
              break;
            }
          }
          f_done[sh.cell(v, a.microbatch)] = 1;
          wake(head[sh.cell(v, a.microbatch)]);
          break;
        }
        case ActionKind::kBackward:
        case ActionKind::kBackwardInput: {
          const int v = sh.virtual_of(st, a.chunk);
          if (!f_done[sh.cell(v, a.microbatch)]) {
            park(head[sh.cell(v, a.microbatch)], st);
            parked = true;
            break;
          }
          if (v < vp - 1 && !g_done[sh.cell(v + 1, a.microbatch)]) {
            park(head[n + sh.cell(v + 1, a.microbatch)], st);
            parked = true;
            break;
          }
          g_done[sh.cell(v, a.microbatch)] = 1;
          wake(head[n + sh.cell(v, a.microbatch)]);
          break;
        }
        case ActionKind::kBackwardWeight: {
          const size_t c = sh.cell(sh.virtual_of(st, a.chunk), a.microbatch);
          if (!g_done[c]) {
            park(head[n + c], st);
            parked = true;
          }
          break;
        }
        case ActionKind::kSync: {
          const int k = passed[u];
          const auto uk = static_cast<size_t>(k);
          if (arrived_at[u] != k) {
            arrived_at[u] = k;
            if (++arrived[uk] == s.stages) wake(sync_head[uk]);
          }
          if (arrived[uk] < s.stages) {
            park(sync_head[uk], st);
            parked = true;
            break;
          }
          ++passed[u];
          break;
        }
      }
      if (!parked) ++ptr[u];
    }
  }

  int stuck = -1;
  for (size_t st = 0; st < P; ++st) {
    if (ptr[st] < s.actions[st].size()) {
      stuck = static_cast<int>(st);
      break;
    }
  }
  if (stuck < 0) return {};
  // A stage stuck on a receive it cannot post is the cause; name it first.
  for (size_t st = 0; st < P; ++st) {
    if (ptr[st] == blocks.at[st]) {
      return failure("deadlock: stage " + std::to_string(st) + " stuck at " +
                         text(s.actions[st][ptr[st]], sh) + ": " + blocks.why[st],
                     stuck_grid(s, sh, ptr));
    }
  }

  // Name the first stuck stage, what it waits for, and where the provider is stuck.
  const auto u = static_cast<size_t>(stuck);
  const Action& a = s.actions[u][ptr[u]];
  auto at_of = [&](int st) {
    return text(s.actions[static_cast<size_t>(st)][ptr[static_cast<size_t>(st)]], sh);
  };
  std::string why;
  switch (a.kind) {
    case ActionKind::kForward: {
      const int v = sh.virtual_of(stuck, a.chunk) - 1;
      if (v < 0 || f_done[sh.cell(v, a.microbatch)]) {
        // Its own input is there: it waits, as one unit, for its partner's.
        const Action& b = s.actions[u][ptr[u] + 1];
        const int bv = sh.virtual_of(stuck, b.chunk) + 1;
        why = "is one unit (OVERLAP_F_B) with " + text(b, sh) +
              ", which waits for the input gradient of micro-batch " +
              std::to_string(b.microbatch) + " from stage " + std::to_string(place.stage_of(bv)) +
              ", stuck at " + at_of(place.stage_of(bv));
        break;
      }
      const int ps = place.stage_of(v);
      const Action need = F(a.microbatch, place.chunk_of(v));
      why = ps == stuck
                ? "waits for its own " + text(need, sh) +
                      " (the previous chunk), which comes later in its list"
                : "waits for the activation of micro-batch " + std::to_string(a.microbatch) +
                      " from stage " + std::to_string(ps) + " (" + text(need, sh) +
                      "), which is stuck at " + at_of(ps) + " before it";
      break;
    }
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput: {
      const int v = sh.virtual_of(stuck, a.chunk) + 1;
      const int ps = place.stage_of(v);
      const size_t c = sh.cell(v, a.microbatch);
      const int chunk = place.chunk_of(v);
      const Action need = pos.bi_is_input[c] ? I(a.microbatch, chunk) : B(a.microbatch, chunk);
      why = ps == stuck
                ? "waits for its own " + text(need, sh) +
                      " (the next chunk's gradient), which comes later in its list"
                : "waits for the input gradient of micro-batch " + std::to_string(a.microbatch) +
                      " from stage " + std::to_string(ps) + " (" + text(need, sh) +
                      "), which is stuck at " + at_of(ps) + " before it";
      break;
    }
    case ActionKind::kBackwardWeight:
      // Unreachable after check_static (I comes first on the same stage); kept exhaustive.
      why = "waits for its own " + text(I(a.microbatch, a.chunk), sh);
      break;
    case ActionKind::kSync: {
      const int k = passed[u];
      int absent = -1;
      for (size_t st = 0; st < P && absent < 0; ++st) {
        if (arrived_at[st] != k) absent = static_cast<int>(st);
      }
      why = "waits at barrier " + std::to_string(k + 1) + " of " + std::to_string(n_sync) +
            " for stage " + std::to_string(absent) + ", which is stuck at " +
            (absent >= 0 ? at_of(absent) : std::string("?"));
      break;
    }
  }
  return failure(
      "deadlock: stage " + std::to_string(stuck) + " stuck at " + text(a, sh) + ": " + why,
      stuck_grid(s, sh, ptr));
}

void validate_or_throw(const Schedule& s, const std::string& source,
                       const ValidateOptions& options) {
  ValidationResult r = validate_schedule(s, options);
  if (r.ok) return;
  const std::string name = s.name.empty() ? std::string("schedule") : "schedule '" + s.name + "'";
  throw ScheduleError((source.empty() ? name : source) + ": " + r.error, std::move(r.grid));
}

}  // namespace ppb
