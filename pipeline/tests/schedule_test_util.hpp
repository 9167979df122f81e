// Helpers shared by the schedule tests: a tiny unit-time evaluator (the
// simulator's job in production; here an independent check of makespans)
// and list printing.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "ppb/pipeline/action.hpp"
#include "ppb/pipeline/schedule_io.hpp"

namespace ppb::testing {

/// Integer durations per action kind (per chunk); B is a full backward.
struct UnitCosts {
  long f = 1, b = 2, i = 1, w = 1;
};

struct Timing {
  long makespan = 0;
  std::vector<long> first_start, last_end, busy;
};

/// Runs each stage's list in order; an action starts when its stage is free
/// and its dependencies (the communication rule of action.hpp, no transfer
/// time) are done; the k-th SYNC of every stage ends when the last stage
/// reaches it. Fails the test (returns makespan -1) on a deadlock.
inline Timing evaluate(const Schedule& s, UnitCosts c = {}) {
  const int P = s.stages;
  const int VP = P * s.chunks;
  const Placement place = placement_of(s);
  std::map<std::tuple<int, int, int>, long> done;  // (kind 0=F 1=grad, v, mb) -> end time
  std::vector<size_t> ptr(static_cast<size_t>(P), 0);
  std::vector<long> t(static_cast<size_t>(P), 0);
  Timing r;
  r.first_start.assign(static_cast<size_t>(P), -1);
  r.last_end.assign(static_cast<size_t>(P), 0);
  r.busy.assign(static_cast<size_t>(P), 0);
  std::map<int, std::vector<long>> sync_arrival;  // k -> arrival per stage (-1 = not yet)
  std::vector<int> syncs_passed(static_cast<size_t>(P), 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int st = 0; st < P; ++st) {
      const auto u = static_cast<size_t>(st);
      const auto& list = s.actions[u];
      while (ptr[u] < list.size()) {
        const Action& a = list[ptr[u]];
        if (a.kind == ActionKind::kSync) {
          auto& arr = sync_arrival[syncs_passed[u]];
          if (arr.empty()) arr.assign(static_cast<size_t>(P), -1);
          arr[u] = t[u];
          if (std::count(arr.begin(), arr.end(), -1L) > 0) break;
          t[u] = *std::max_element(arr.begin(), arr.end());
          ++syncs_passed[u];
          ++ptr[u];
          progress = true;
          continue;
        }
        const int v = place.virtual_stage(st, a.chunk);
        std::vector<std::tuple<int, int, int>> deps;
        long cost = 0;
        switch (a.kind) {
          case ActionKind::kForward:
            if (v > 0) deps.emplace_back(0, v - 1, a.microbatch);
            cost = c.f;
            break;
          case ActionKind::kBackward:
          case ActionKind::kBackwardInput:
            deps.emplace_back(0, v, a.microbatch);
            if (v < VP - 1) deps.emplace_back(1, v + 1, a.microbatch);
            cost = a.kind == ActionKind::kBackward ? c.b : c.i;
            break;
          case ActionKind::kBackwardWeight:
            deps.emplace_back(1, v, a.microbatch);
            cost = c.w;
            break;
          case ActionKind::kSync:
            break;
        }
        long start = t[u];
        bool ready = true;
        for (const auto& d : deps) {
          auto it = done.find(d);
          if (it == done.end()) {
            ready = false;
            break;
          }
          start = std::max(start, it->second);
        }
        if (!ready) break;
        if (r.first_start[u] < 0) r.first_start[u] = start;
        t[u] = start + cost;
        r.busy[u] += cost;
        r.last_end[u] = t[u];
        if (a.kind == ActionKind::kForward) done[{0, v, a.microbatch}] = t[u];
        if (a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardInput)
          done[{1, v, a.microbatch}] = t[u];
        ++ptr[u];
        progress = true;
      }
    }
  }
  for (int st = 0; st < P; ++st) {
    if (ptr[static_cast<size_t>(st)] < s.actions[static_cast<size_t>(st)].size()) {
      r.makespan = -1;
      return r;
    }
  }
  r.makespan = *std::max_element(t.begin(), t.end());
  return r;
}

/// "F0 F1 B0 ..." of one stage list.
inline std::string list_text(const std::vector<Action>& list, bool with_chunk = false) {
  std::string out;
  for (const Action& a : list) {
    if (!out.empty()) out += ' ';
    out += action_to_text(a, with_chunk);
  }
  return out;
}

}  // namespace ppb::testing
