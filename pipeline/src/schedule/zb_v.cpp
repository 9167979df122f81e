// zb-v: the Zero Bubble paper's ZB-V (Qi et al., arXiv 2401.10241 §6): the
// model in 2P chunks placed in a V (stage s holds virtual stages s and
// 2P-1-s, so the first and last share stage 0), backward split into I and
// W. Every stage starts its gradient wave itself, so with TF = TB = TW and
// M >= 2P-1 no stage idles between its first and last action, while the
// activations in flight stay at 1F1B's P micro-batches (2P chunk halves).
//
// Per stage s, with chunk 0 the way down and chunk 1 the way up (the order
// of PyTorch's ScheduleZBVZeroBubble, built for max(2P-1, M) micro-batches
// and then cut to M so that a short batch keeps the order's shape):
//   warm-up   2(P-s)-1 x F0;  s x (F1 F0);  P-s x (F1 I1 W1)
//   steady    [F0] I0 W0 F1 I1 W1           until every F is placed
//   cool-down s x (I0 I1);  P-s x (I0 W0);  the W1 left;  the W0 left
// Example P=2, M=3, stage 1 (micro-batch.chunk):
//   F0.0 F0.1 F1.0 F1.1 I0.1 W0.1 F2.0 I0.0 W0.0 F2.1 I1.1 W1.1 ...
#include <algorithm>
#include <vector>

#include "generators.hpp"

namespace ppb::schedule_detail {
namespace {

// Counts per chunk of what has been appended so far.
struct ChunkCounts {
  int f = 0, i = 0, w = 0;
};

}  // namespace

Schedule generate_zb_v(const ScheduleParams& p) {
  const int P = p.stages;
  const int M = p.microbatches;
  ScheduleParams q = p;
  q.chunks = 2;
  Schedule s = make_schedule("zb-v", q);
  s.placement = v_shape_placement(P);
  const int n = std::max(2 * P - 1, M);
  for (int st = 0; st < P; ++st) {
    std::vector<Action> ops;
    ops.reserve(static_cast<size_t>(6 * n));
    ChunkCounts c[2];
    auto f = [&](int k) { ops.push_back(F(c[k].f++, k)); };
    auto i = [&](int k) { ops.push_back(I(c[k].i++, k)); };
    auto w = [&](int k) { ops.push_back(W(c[k].w++, k)); };
    for (int k = 0; k < 2 * (P - st) - 1; ++k) f(0);
    for (int k = 0; k < st; ++k) {
      f(1);
      f(0);
    }
    for (int k = 0; k < P - st; ++k) {
      f(1);
      i(1);
      w(1);
    }
    while (c[1].f < c[0].f || c[0].f < n) {
      if (c[0].f < n) f(0);
      i(0);
      w(0);
      f(1);
      i(1);
      w(1);
    }
    for (int k = 0; k < st; ++k) {
      i(0);
      i(1);
    }
    for (int k = 0; k < P - st; ++k) {
      i(0);
      w(0);
    }
    while (c[1].w < c[1].i) w(1);
    while (c[0].w < c[0].i) w(0);
    auto& list = s.actions[static_cast<size_t>(st)];
    for (const Action& a : ops) {
      if (a.microbatch < M) list.push_back(a);
    }
  }
  return s;
}

}  // namespace ppb::schedule_detail
