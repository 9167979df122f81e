// adaptive (document 000, claim S9): async-1f1b whose in-flight limit is what
// the memory guard allows. The generator takes that limit as --inflight; the
// guard that lowers it at run time when tracked memory passes guard x budget
// is the executor's. Same order as async-1f1b, its own name in results.
#include "generators.hpp"

namespace ppb::schedule_detail {

Schedule generate_adaptive(const ScheduleParams& p) {
  const int n = resolve_inflight(p);
  Schedule s = make_schedule("adaptive", p);
  for (int st = 0; st < p.stages; ++st) {
    append_one_f_one_b(s.actions[static_cast<size_t>(st)], 0, p.microbatches,
                       async_warmup_forwards(p.stages, p.microbatches, n, st));
  }
  return s;
}

}  // namespace ppb::schedule_detail
