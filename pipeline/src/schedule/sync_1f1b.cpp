// sync-1f1b (document 000 §3.1): for each micro-batch the forward wave runs
// through every stage and all wait (SYNC), then the backward wave runs back
// and all wait again. One micro-batch in flight; with equal stages the bubble
// ratio is (P-1)/P.
#include "generators.hpp"

namespace ppb::schedule_detail {

Schedule generate_sync_1f1b(const ScheduleParams& p) {
  Schedule s = make_schedule("sync-1f1b", p);
  for (auto& list : s.actions) {
    list.reserve(static_cast<size_t>(4 * p.microbatches));
    for (int mb = 0; mb < p.microbatches; ++mb) {
      list.push_back(F(mb));
      list.push_back(Sync());
      list.push_back(B(mb));
      list.push_back(Sync());
    }
  }
  return s;
}

}  // namespace ppb::schedule_detail
