// zb-1p and zb-2p: the Zero Bubble paper's automatic schedules (Qi et al.,
// ICLR 2024, §3.1 and §5): I and W placed greedily, on the per-pass times
// TF, TB (= I), TW and the transfer time TC, under an activation-memory limit
// of 1x (zb-1p) and 2x (zb-2p) 1F1B's peak, P micro-batches. The paper's
// heuristic, not its ILP:
//  * warm-up: the first micro-batch runs down the stages; each stage adds as
//    many forwards as fit in memory and before the first backward's gradient
//    can arrive (one variant lets the last of them overrun it); fewer on a
//    later stage than on the one before;
//  * steady state, one micro-batch at a time: the next F on every stage
//    (a stage far ahead of the next may hold its F back, one variant), with
//    W passes first where memory is full or where they fit in the wait for
//    the F's input; then the I from the last stage up, again with W passes
//    in the wait for its gradient; a W that overruns the wait goes in only
//    while this stage's bubble stays under the largest one (one variant);
//  * the W passes left, at the end.
// Eight variants (three choices) run on the times; the schedule with the
// shortest longest stage span (the paper's cost) wins. Memory: F adds one
// micro-batch's activations, I frees all but the share W still needs
// (ScheduleParams::wgrad_share), W the rest. With share 1 (the default:
// pipebench's memory model, which keeps activations until W) the limit
// bounds what the memory model predicts; the paper's GPT keeps 32h of its
// 34h + 5as per token for W.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "generators.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::schedule_detail {
namespace {

enum Pass : uint8_t { kF = 0, kB = 1, kW = 2 };

struct Variant {
  bool allow_bubble_before_first_b;
  bool prioritize_b;
  bool no_bubble_greedy;
};

// One run of the heuristic. Stage j's state: counts of F, B (= I) and W
// placed, the end of its last pass e, its in-flight count m and its bubble.
class ZbHeuristic {
 public:
  ZbHeuristic(int stages, int microbatches, double limit, const ScheduleParams& times)
      : stages_(stages),
        mbs_(microbatches),
        limit_(limit),
        cost_{times.tf, times.tb, times.tw},
        comm_(times.tc),
        share_(times.wgrad_share) {
    const auto n = static_cast<size_t>(stages_);
    counts_.assign(3, std::vector<int>(n, 0));
    done_.assign(3, std::vector<double>(n * static_cast<size_t>(mbs_), 0.0));
    end_.assign(n, 0.0);
    mem_.assign(n, 0);
    bubble_.assign(n, 0.0);
    lists_.assign(n, {});
  }

  // False when memory cannot hold the order (this variant gives up).
  bool run(const Variant& v);
  // The paper's cost: the longest stage span, first F start to last W end.
  double cost() const;
  std::vector<std::vector<Action>>& lists() { return lists_; }

 private:
  int& count(Pass k, int j) { return counts_[k][static_cast<size_t>(j)]; }
  double& t(Pass k, int j, int mb) {
    return done_[k][static_cast<size_t>(j) * static_cast<size_t>(mbs_) + static_cast<size_t>(mb)];
  }
  double& e(int j) { return end_[static_cast<size_t>(j)]; }
  double& m(int j) { return mem_[static_cast<size_t>(j)]; }
  // Memory each pass adds: F one micro-batch, I and W their negative shares.
  double mem_of(Pass k) const { return k == kF ? 1.0 : (k == kB ? share_ - 1.0 : -share_); }
  // Room for `add` more on a stage holding `held` (a little slack for rounding).
  bool fits(double held, double add) const { return held + add <= limit_ + 1e-9; }
  double max_bubble() const { return *std::max_element(bubble_.begin(), bubble_.end()); }
  double slack(int j) const { return max_bubble() - bubble_[static_cast<size_t>(j)]; }

  void put(int j, Pass k);
  bool first_microbatch(const Variant& v);
  bool forwards(const Variant& v);
  bool backwards(const Variant& v, int i);
  // W passes into the wait until `ready` (the input of the next pass).
  void fill_wait(const Variant& v, int j, double ready);
  // W passes until one more pass of kind k fits in memory; false when none is left.
  bool make_room(int j, Pass k);

  int stages_, mbs_;
  double limit_;
  double cost_[3];
  double comm_;
  double share_;
  std::vector<std::vector<int>> counts_;
  std::vector<std::vector<double>> done_;
  std::vector<double> end_;
  std::vector<double> mem_;
  std::vector<double> bubble_;
  std::vector<std::vector<Action>> lists_;
};

void ZbHeuristic::put(int j, Pass k) {
  const int mb = count(k, j)++;
  double end = e(j) + cost_[k];
  const double packed = end;
  if (j > 0 && k == kF) end = std::max(end, t(kF, j - 1, mb) + comm_ + cost_[k]);
  if (j < stages_ - 1 && k == kB) end = std::max(end, t(kB, j + 1, mb) + comm_ + cost_[k]);
  if (count(kF, j) > (k == kF ? 1 : 0)) bubble_[static_cast<size_t>(j)] += end - packed;
  e(j) = end;
  t(k, j, mb) = end;
  m(j) += mem_of(k);
  auto& list = lists_[static_cast<size_t>(j)];
  list.push_back(k == kF ? F(mb) : (k == kB ? I(mb) : W(mb)));
}

bool ZbHeuristic::make_room(int j, Pass k) {
  while (!fits(m(j), mem_of(k))) {
    if (count(kW, j) >= count(kB, j)) return false;
    put(j, kW);
  }
  return true;
}

void ZbHeuristic::fill_wait(const Variant& v, int j, double ready) {
  while (count(kW, j) < count(kB, j) && e(j) + cost_[kW] <= ready) put(j, kW);
  if (count(kW, j) < count(kB, j) && e(j) < ready) {
    // A W that overruns the wait: taken while this stage's bubble stays
    // under the largest (greedy variant), always otherwise.
    if (ready - e(j) > slack(j) || v.no_bubble_greedy) put(j, kW);
  }
}

bool ZbHeuristic::first_microbatch(const Variant& v) {
  for (int j = 0; j < stages_; ++j) put(j, kF);
  std::vector<int> extra(static_cast<size_t>(stages_), 0);
  double last = 0;  // when the first gradient leaves stage j + 1
  for (int j = stages_ - 1; j >= 0; --j) {
    if (j == stages_ - 1) {
      last = t(kF, j, 0) + cost_[kB];
      continue;
    }
    double mem = m(j);
    double at = e(j);
    int& x = extra[static_cast<size_t>(j)];
    while (count(kF, j) + x < mbs_ && fits(mem, 1.0)) {
      if (v.allow_bubble_before_first_b ? at + cost_[kF] > last + comm_ : at >= last + comm_) break;
      ++mem;
      at += cost_[kF];
      ++x;
    }
    last = std::max(at, last + comm_) + cost_[kB];
  }
  for (int j = 1; j < stages_; ++j) {
    int& x = extra[static_cast<size_t>(j)];
    while (x > 0 && x >= extra[static_cast<size_t>(j - 1)] && count(kF, j) + x < mbs_) --x;
  }
  for (int j = 0; j < stages_; ++j) {
    for (int k = 0; k < extra[static_cast<size_t>(j)]; ++k) put(j, kF);
  }
  for (int j = stages_ - 1; j >= 0; --j) put(j, kB);
  return true;
}

bool ZbHeuristic::forwards(const Variant& v) {
  std::vector<int> want(static_cast<size_t>(stages_), 0);
  for (int j = 0; j < stages_; ++j) {
    if (count(kF, j) >= mbs_) continue;
    if (j + 1 < stages_ && count(kF, j) >= count(kF, j + 1) + 2 && v.prioritize_b) {
      // Far ahead of the next stage: hold the F back unless it (and the W
      // passes memory needs first) fits before the next stage's F and I.
      const double next = e(j + 1) + cost_[kF] + cost_[kB] + comm_;
      if (e(j) >= next) continue;
      double w_cost = 0;
      double mem = m(j) + 1.0;
      for (int w = count(kW, j); !fits(mem, 0.0) && w < count(kB, j); ++w) {
        w_cost += cost_[kW];
        mem -= share_;
      }
      if (e(j) + cost_[kF] + w_cost <= next) {
        want[static_cast<size_t>(j)] = 1;
        continue;
      }
      if (next - e(j) <= slack(j)) continue;
    }
    want[static_cast<size_t>(j)] = 1;
  }
  for (int j = stages_ - 2; j >= 0; --j)
    want[static_cast<size_t>(j)] =
        std::min(want[static_cast<size_t>(j)], want[static_cast<size_t>(j + 1)]);
  for (int j = 0; j < stages_; ++j) {
    if (want[static_cast<size_t>(j)] == 0) continue;
    if (!make_room(j, kF)) return false;
    if (j > 0) fill_wait(v, j, t(kF, j - 1, count(kF, j)) + comm_);
    put(j, kF);
  }
  return true;
}

bool ZbHeuristic::backwards(const Variant& v, int i) {
  for (int j = stages_ - 1; j >= 0; --j) {
    PPB_CHECK(count(kB, j) == i, "zb heuristic: backwards out of step");
    if (!make_room(j, kB)) return false;
    if (j + 1 < stages_) fill_wait(v, j, t(kB, j + 1, i) + comm_);
    if (j == 0 && count(kF, j) == mbs_) {
      while (count(kW, j) < count(kB, j)) put(j, kW);
    }
    put(j, kB);
  }
  return true;
}

bool ZbHeuristic::run(const Variant& v) {
  for (int i = 0; i < mbs_; ++i) {
    if (i == 0) {
      if (!first_microbatch(v)) return false;
      continue;
    }
    if (!forwards(v) || !backwards(v, i)) return false;
  }
  for (int j = 0; j < stages_; ++j) {
    while (count(kW, j) < mbs_) put(j, kW);
  }
  return true;
}

double ZbHeuristic::cost() const {
  double worst = 0;
  for (int j = 0; j < stages_; ++j) {
    const size_t first = static_cast<size_t>(j) * static_cast<size_t>(mbs_);
    const double span =
        done_[kW][first + static_cast<size_t>(mbs_ - 1)] - done_[kF][first] + cost_[kF];
    worst = std::max(worst, span);
  }
  return worst;
}

}  // namespace

std::optional<std::string> zb_auto_problem(const ScheduleParams& p, std::string_view name) {
  if (!(p.wgrad_share > 0 && p.wgrad_share <= 1)) {
    return "--wgrad-share: " + std::string(name) +
           " needs the share of a micro-batch's activations W keeps, in (0, 1]; got " +
           std::to_string(p.wgrad_share);
  }
  for (const auto& [flag, value] :
       {std::pair{"--fwd", p.tf}, {"--bwd", p.tb}, {"--wgrad", p.tw}, {"--comm", p.tc}}) {
    if (!std::isfinite(value) || value < 0 || (value == 0 && flag != std::string("--comm"))) {
      return std::string(flag) + ": " + std::string(name) +
             " places I and W by the pass times; expected a finite time > 0" +
             (flag == std::string("--comm") ? " or 0" : "") + ", got " + std::to_string(value);
    }
  }
  return std::nullopt;
}

namespace {

Schedule generate_zb_auto(const ScheduleParams& p, const char* name, int limit_factor) {
  Schedule best = make_schedule(name, p);
  double best_cost = std::numeric_limits<double>::infinity();
  for (const bool a : {true, false}) {
    for (const bool b : {true, false}) {
      for (const bool c : {true, false}) {
        ZbHeuristic h(p.stages, p.microbatches, limit_factor * p.stages, p);
        if (!h.run({a, b, c})) continue;
        if (const double cost = h.cost(); cost < best_cost) {
          best_cost = cost;
          best.actions = std::move(h.lists());
        }
      }
    }
  }
  PPB_CHECK(std::isfinite(best_cost), std::string(name) + ": no variant fits the memory limit");
  return best;
}

}  // namespace

Schedule generate_zb_1p(const ScheduleParams& p) { return generate_zb_auto(p, "zb-1p", 1); }
Schedule generate_zb_2p(const ScheduleParams& p) { return generate_zb_auto(p, "zb-2p", 2); }

}  // namespace ppb::schedule_detail
