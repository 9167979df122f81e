// pipedream (document 003, P7): 1F1B with weight stashing and no flush.
// The schedule covers --batches B batches back to back: micro-batches of
// batch b are b*M .. b*M+M-1, and stage s runs min(P-s-1, B*M) warm-up
// forwards, then F/B pairs over all B*M micro-batches, then the cool-down.
// After the warm-up this is document 003's loop "backward(i); forward(M+i)":
// the next batch's forwards enter while the current batch drains. Weight
// versions (one stash per in-flight micro-batch) are the executor's.
#include <algorithm>

#include "generators.hpp"

namespace ppb::schedule_detail {

Schedule generate_pipedream(const ScheduleParams& p) {
  Schedule s = make_schedule("pipedream", p);
  const int total = p.microbatches * p.batches;
  for (int st = 0; st < p.stages; ++st) {
    auto& list = s.actions[static_cast<size_t>(st)];
    list.reserve(static_cast<size_t>(2 * total));
    append_one_f_one_b(list, 0, total, std::min(p.stages - st - 1, total));
  }
  return s;
}

}  // namespace ppb::schedule_detail
