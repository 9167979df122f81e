#include <algorithm>
#include <string>

#include "generators.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::schedule_detail {

Schedule make_schedule(std::string_view name, const ScheduleParams& p) {
  Schedule s;
  s.name = std::string(name);
  s.stages = p.stages;
  s.microbatches = p.microbatches;
  s.chunks = p.chunks;
  s.batches = p.batches;
  s.actions.resize(static_cast<size_t>(p.stages));
  return s;
}

void append_one_f_one_b(std::vector<Action>& out, int first, int count, int warmup) {
  warmup = std::clamp(warmup, 0, count);
  int next_f = 0;
  for (; next_f < warmup; ++next_f) out.push_back(F(first + next_f));
  for (int b = 0; b < count; ++b) {
    if (next_f < count) out.push_back(F(first + next_f++));
    out.push_back(B(first + b));
  }
}

std::optional<std::string> inflight_problem(const ScheduleParams& p, std::string_view schedule) {
  if (p.inflight >= 0) return std::nullopt;
  return "--inflight: " + std::string(schedule) +
         " needs at least 1 micro-batch in flight (0 means P), got " + std::to_string(p.inflight);
}

int resolve_inflight(const ScheduleParams& p) {
  PPB_CHECK(p.inflight >= 0, "resolve_inflight: a negative --inflight passed inflight_problem");
  return p.inflight == 0 ? p.stages : p.inflight;
}

}  // namespace ppb::schedule_detail

namespace ppb {

int async_warmup_forwards(int stages, int microbatches, int inflight, int stage) {
  const int w = std::max(std::min(inflight, stages - stage), inflight - stage) - 1;
  return std::clamp(w, 0, std::max(microbatches - 1, 0));
}

}  // namespace ppb
