// hybrid (document 000, claim S8): the first K micro-batches (--sync-warmup K)
// run as sync-1f1b (F, SYNC, B, SYNC each), the rest as async-1f1b with
// --inflight N over micro-batches K..M-1.
#include <string>

#include "generators.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::schedule_detail {

std::optional<std::string> hybrid_problem(const ScheduleParams& p, std::string_view name) {
  if (auto why = inflight_problem(p, name)) return why;
  if (p.sync_warmup < 0 || p.sync_warmup > p.microbatches) {
    return "--sync-warmup: hybrid needs 0 <= K <= M (--microbatches " +
           std::to_string(p.microbatches) + "), got " + std::to_string(p.sync_warmup);
  }
  return std::nullopt;
}

Schedule generate_hybrid(const ScheduleParams& p) {
  const int n = resolve_inflight(p);
  const int k = p.sync_warmup;
  const int rest = p.microbatches - k;
  Schedule s = make_schedule("hybrid", p);
  for (int st = 0; st < p.stages; ++st) {
    auto& list = s.actions[static_cast<size_t>(st)];
    list.reserve(static_cast<size_t>(4 * k + 2 * rest));
    for (int mb = 0; mb < k; ++mb) {
      list.push_back(F(mb));
      list.push_back(Sync());
      list.push_back(B(mb));
      list.push_back(Sync());
    }
    if (rest > 0) append_one_f_one_b(list, k, rest, async_warmup_forwards(p.stages, rest, n, st));
  }
  return s;
}

}  // namespace ppb::schedule_detail
