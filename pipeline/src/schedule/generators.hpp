// Private to pipeline/src/schedule: what a generator file defines (a
// Generator, and a Problem when the schedule refuses more than the common
// checks) and the small helpers generators share. registry.cpp declares each
// schedule's functions beside its entry; nothing here lists schedules.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/pipeline/action.hpp"
#include "ppb/pipeline/schedule.hpp"

namespace ppb::schedule_detail {

/// A generator: REQUIRES the common checks of registry.cpp passed (P, M >= 1,
/// V == 1 unless the schedule uses chunks (or has fixed ones: it then sets
/// V itself), batches == 1 unless pipedream) and its own Problem, if any,
/// found none.
using Generator = Schedule (*)(const ScheduleParams&);

/// What a schedule refuses beyond the common checks: the message, naming the
/// flag ("--microbatches: dualpipe-v needs ..."), or nullopt. `name` is the
/// schedule's registered name.
using Problem = std::optional<std::string> (*)(const ScheduleParams& p, std::string_view name);

/// An empty schedule with P lists and the sizes of `p`.
Schedule make_schedule(std::string_view name, const ScheduleParams& p);

/// Appends the 1F1B order over micro-batches first..first+count-1 (chunk 0):
/// `warmup` forwards, then F/B pairs (forward first, as Megatron-LM's steady
/// state), then the remaining backwards. warmup is clamped to 0..count.
void append_one_f_one_b(std::vector<Action>& out, int first, int count, int warmup);

/// async-1f1b, adaptive (and hybrid's first check): --inflight >= 0.
std::optional<std::string> inflight_problem(const ScheduleParams& p, std::string_view schedule);

/// The in-flight limit N of async-1f1b/adaptive/hybrid: p.inflight, or P when
/// 0. REQUIRES: inflight_problem(p) found none.
int resolve_inflight(const ScheduleParams& p);

}  // namespace ppb::schedule_detail
