// zb-h2: the Zero Bubble paper's handcrafted ZB-H2 (Qi et al., ICLR 2024,
// §3.1): more warm-up forwards fill the bubble before the first I, and the W
// passes move to the tail, so each stage's timeline is a parallelogram with
// no idle time between its first and last action when TF = TB = TW (in
// general (P-1)(TF+TB-2TW) per stage), at the price of up to 2P-1
// micro-batches in flight.
//
// The order is built by the paper's construction, played out on unit times
// without communication cost: at every time step each stage runs, in this
// priority, an I whose gradient has arrived, else the next F while fewer than
// 2P-1 micro-batches are in flight (F done, W not), else its oldest pending
// W. The resulting per-stage lists are the schedule (a fixed order; with
// other costs the simulator or executor just runs it).
// P=4, M=8: every stage busy 24 units without a gap; makespan 27 = P-1 + 3M.
#include <algorithm>
#include <vector>

#include "generators.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::schedule_detail {

Schedule generate_zb_h2(const ScheduleParams& p) {
  const int P = p.stages;
  const int M = p.microbatches;
  const int limit = 2 * P - 1;
  constexpr int kNever = 1 << 30;
  // Time at which F / I of micro-batch mb finished on stage s (kNever = not yet).
  std::vector<int> f_done(static_cast<size_t>(P) * static_cast<size_t>(M), kNever);
  std::vector<int> i_done(static_cast<size_t>(P) * static_cast<size_t>(M), kNever);
  auto at = [M](std::vector<int>& v, int s, int mb) -> int& {
    return v[static_cast<size_t>(s) * static_cast<size_t>(M) + static_cast<size_t>(mb)];
  };
  std::vector<int> nf(static_cast<size_t>(P), 0), ni(static_cast<size_t>(P), 0),
      nw(static_cast<size_t>(P), 0);
  Schedule s = make_schedule("zb-h2", p);
  for (auto& list : s.actions) list.reserve(static_cast<size_t>(3 * M));
  int finished = 0;  // stages with all W done
  for (int t = 0; finished < P; ++t) {
    // Every step some stage acts (the forward wave and then the gradient wave
    // always advance), so 3M work units per stage end within 3M + 2P steps.
    PPB_CHECK(t <= 3 * M + 2 * P + 2, "zb-h2 construction made no progress");
    // Decide every stage's action for step t from the state at t, then apply.
    struct Step {
      int stage;
      Action action;
    };
    std::vector<Step> steps;
    steps.reserve(static_cast<size_t>(P));
    for (int st = 0; st < P; ++st) {
      const size_t u = static_cast<size_t>(st);
      const int b = ni[u];
      const bool grad_ready = b < M && b < nf[u] && at(f_done, st, b) <= t &&
                              (st == P - 1 || at(i_done, st + 1, b) <= t);
      const bool input_ready = nf[u] < M && (st == 0 || at(f_done, st - 1, nf[u]) <= t);
      if (grad_ready) {
        steps.push_back({st, I(b)});
      } else if (input_ready && nf[u] - nw[u] < limit) {
        steps.push_back({st, F(nf[u])});
      } else if (nw[u] < ni[u]) {
        steps.push_back({st, W(nw[u])});
      }
    }
    for (const Step& step : steps) {
      const size_t u = static_cast<size_t>(step.stage);
      s.actions[u].push_back(step.action);
      switch (step.action.kind) {
        case ActionKind::kForward:
          at(f_done, step.stage, nf[u]++) = t + 1;
          break;
        case ActionKind::kBackwardInput:
          at(i_done, step.stage, ni[u]++) = t + 1;
          break;
        case ActionKind::kBackwardWeight:
          if (++nw[u] == M) ++finished;
          break;
        case ActionKind::kBackward:
        case ActionKind::kSync:
          break;
      }
    }
  }
  return s;
}

}  // namespace ppb::schedule_detail
