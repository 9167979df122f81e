// zb-h1: the Zero Bubble paper's handcrafted ZB-H1 (Qi et al., ICLR 2024,
// §3.1), in the order of the authors' reference pipeline
// (sail-sg/zero-bubble-pipeline-parallelism, ZeroBubbleH1Pipeline with exact
// semantics). The backward is split into I (input gradient, on the critical
// path) and W (weight gradient, deferred into bubbles). Stage s runs:
//   P-s-1 warm-up F;  s pairs F,I (W postponed);  then F,I,W triples while
//   forwards remain;  then I,W pairs;  then the postponed W.
// With TF=TB=TW it idles (P-1)(TF+TB-TW) per stage (1F1B: (P-1)(TF+TB+TW));
// P=4, M=8, unit times, no comm: makespan 27. It keeps 1F1B's activation
// figure: at most min(P-s, M) micro-batches between F and I on stage s.
#include <algorithm>

#include "generators.hpp"

namespace ppb::schedule_detail {

Schedule generate_zb_h1(const ScheduleParams& p) {
  const int P = p.stages;
  const int M = p.microbatches;
  Schedule s = make_schedule("zb-h1", p);
  for (int st = 0; st < P; ++st) {
    auto& list = s.actions[static_cast<size_t>(st)];
    list.reserve(static_cast<size_t>(3 * M));
    int f = 0;
    int i = 0;
    int w = 0;
    for (int k = 0; k < std::min(P - st - 1, M); ++k) list.push_back(F(f++));
    for (int k = 0; k < st && f < M; ++k) {
      list.push_back(F(f++));
      list.push_back(I(i++));
    }
    while (f < M) {
      list.push_back(F(f++));
      list.push_back(I(i++));
      list.push_back(W(w++));
    }
    while (i < M) {
      list.push_back(I(i++));
      list.push_back(W(w++));
    }
    while (w < M) list.push_back(W(w++));
  }
  return s;
}

}  // namespace ppb::schedule_detail
