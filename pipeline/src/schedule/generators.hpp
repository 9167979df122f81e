// Private to pipeline/src/schedule: the generator functions, one per file,
// and the small helpers they share. registry.cpp lists them (one line each).
#pragma once

#include <string_view>
#include <vector>

#include "ppb/pipeline/action.hpp"
#include "ppb/pipeline/schedule.hpp"

namespace ppb::schedule_detail {

/// A generator: REQUIRES the common checks of registry.cpp passed (P, M >= 1,
/// V == 1 unless the schedule uses chunks (or has fixed ones: it then sets
/// V itself), batches == 1 unless pipedream).
/// Throws UsageError for parameters only this schedule rejects.
using Generator = Schedule (*)(const ScheduleParams&);

Schedule generate_gpipe(const ScheduleParams& p);
Schedule generate_1f1b(const ScheduleParams& p);
Schedule generate_async_1f1b(const ScheduleParams& p);
Schedule generate_sync_1f1b(const ScheduleParams& p);
Schedule generate_hybrid(const ScheduleParams& p);
Schedule generate_adaptive(const ScheduleParams& p);
Schedule generate_pipedream(const ScheduleParams& p);
Schedule generate_interleaved_1f1b(const ScheduleParams& p);
Schedule generate_zb_h1(const ScheduleParams& p);
Schedule generate_zb_h2(const ScheduleParams& p);
Schedule generate_zb_v(const ScheduleParams& p);
Schedule generate_dualpipe_v(const ScheduleParams& p);
Schedule generate_zb_1p(const ScheduleParams& p);
Schedule generate_zb_2p(const ScheduleParams& p);

/// An empty schedule with P lists and the sizes of `p`.
Schedule make_schedule(std::string_view name, const ScheduleParams& p);

/// Appends the 1F1B order over micro-batches first..first+count-1 (chunk 0):
/// `warmup` forwards, then F/B pairs (forward first, as Megatron-LM's steady
/// state), then the remaining backwards. warmup is clamped to 0..count.
void append_one_f_one_b(std::vector<Action>& out, int first, int count, int warmup);

/// The in-flight limit N of async-1f1b/adaptive/hybrid: p.inflight, or P when
/// 0. Throws UsageError "--inflight: ..." when negative.
int resolve_inflight(const ScheduleParams& p, std::string_view schedule);

}  // namespace ppb::schedule_detail
