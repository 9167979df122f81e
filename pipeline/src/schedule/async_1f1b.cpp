// async-1f1b (document 000 §3.2): a stage does not wait for the others; it
// keeps up to N micro-batches in flight (--inflight N, default P). Stage s
// runs async_warmup_forwards(P, M, N, s) warm-up forwards, then 1F1B. With
// N = P this is exactly 1f1b; stage 0 holds min(N, M) micro-batches at its peak.
#include "generators.hpp"

namespace ppb::schedule_detail {

Schedule generate_async_1f1b(const ScheduleParams& p) {
  const int n = resolve_inflight(p);
  Schedule s = make_schedule("async-1f1b", p);
  for (int st = 0; st < p.stages; ++st) {
    auto& list = s.actions[static_cast<size_t>(st)];
    list.reserve(static_cast<size_t>(2 * p.microbatches));
    append_one_f_one_b(list, 0, p.microbatches,
                       async_warmup_forwards(p.stages, p.microbatches, n, st));
  }
  return s;
}

}  // namespace ppb::schedule_detail
