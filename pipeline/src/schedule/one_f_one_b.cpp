// 1f1b: PipeDream-Flush, the non-interleaved 1F1B of DeepSpeed's
// TrainSchedule and Megatron-LM's forward_backward_pipelining_without_interleaving.
// Stage s runs min(P-s-1, M) warm-up forwards, then F/B pairs, then the
// remaining backwards; one optimizer step after the flush.
#include <algorithm>

#include "generators.hpp"

namespace ppb::schedule_detail {

Schedule generate_1f1b(const ScheduleParams& p) {
  Schedule s = make_schedule("1f1b", p);
  for (int st = 0; st < p.stages; ++st) {
    auto& list = s.actions[static_cast<size_t>(st)];
    list.reserve(static_cast<size_t>(2 * p.microbatches));
    append_one_f_one_b(list, 0, p.microbatches, std::min(p.stages - st - 1, p.microbatches));
  }
  return s;
}

}  // namespace ppb::schedule_detail
