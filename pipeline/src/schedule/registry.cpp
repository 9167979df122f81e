// The schedule registry: one line per schedule (STYLE.md rule 8), and the
// parameter checks every schedule shares.
#include <cstdint>
#include <string>
#include <utility>

#include "generators.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/validator.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

using schedule_detail::Generator;

struct Entry {
  ScheduleInfo info;  // name, help, splits_backward, uses_chunks, no_flush, uses_inflight
  Generator generate;
};

// clang-format off
const std::vector<Entry>& entries() {
  static const std::vector<Entry> kEntries = {
    {{"sync-1f1b", "document 000 §3.1: one micro-batch in flight, SYNC after each forward and backward wave", false, false, false, false}, &schedule_detail::generate_sync_1f1b},
    {{"async-1f1b", "document 000 §3.2: no waiting, at most N micro-batches in flight per stage (--inflight N, default P)", false, false, false, true}, &schedule_detail::generate_async_1f1b},
    {{"1f1b", "PipeDream-Flush, the non-interleaved 1F1B of DeepSpeed and Megatron-LM (= async-1f1b with N = P)", false, false, false, false}, &schedule_detail::generate_1f1b},
    {{"gpipe", "GPipe: all forwards, then all backwards, one flush", false, false, false, false}, &schedule_detail::generate_gpipe},
    {{"pipedream", "document 003: 1F1B with weight stashing, no flush between --batches B batches", false, false, true, false}, &schedule_detail::generate_pipedream},
    {{"hybrid", "document 000: first K micro-batches synchronous (--sync-warmup K), then async-1f1b", false, false, false, true}, &schedule_detail::generate_hybrid},
    {{"adaptive", "document 000: async-1f1b whose in-flight limit the memory guard lowers at run time", false, false, false, true}, &schedule_detail::generate_adaptive},
    {{"interleaved-1f1b", "Megatron-LM interleaved 1F1B, V model chunks per stage (--chunks V, M a multiple of P)", false, true, false, false}, &schedule_detail::generate_interleaved_1f1b},
    {{"zb-h1", "Zero Bubble H1 (Qi et al. 2024): backward split into I and W, 1F1B's activation memory", true, false, false, false}, &schedule_detail::generate_zb_h1},
    {{"zb-h2", "Zero Bubble H2 (Qi et al. 2024): more warm-up forwards, no bubble inside a stage, 2P-1 in flight", true, false, false, false}, &schedule_detail::generate_zb_h2},
  };
  return kEntries;
}
// clang-format on

std::string valid_names() {
  std::string names;
  for (const Entry& e : entries()) {
    if (!names.empty()) names += ", ";
    names += e.info.name;
  }
  return names;
}

// Generous bound so a typo (M=10000000) is an error, not an out-of-memory.
constexpr int64_t kMaxActions = 50'000'000;

void check_common(const Entry& e, const ScheduleParams& p) {
  const std::string& name = e.info.name;
  if (p.stages < 1) throw UsageError("--stages: expected >= 1, got " + std::to_string(p.stages));
  if (p.microbatches < 1)
    throw UsageError("--microbatches: expected >= 1, got " + std::to_string(p.microbatches));
  if (p.chunks < 1) throw UsageError("--chunks: expected >= 1, got " + std::to_string(p.chunks));
  if (p.batches < 1) throw UsageError("--batches: expected >= 1, got " + std::to_string(p.batches));
  if (p.chunks > 1 && !e.info.uses_chunks) {
    throw UsageError("--chunks: " + name +
                     " has no model chunks (only interleaved-1f1b does); expected 1, got " +
                     std::to_string(p.chunks));
  }
  if (p.batches > 1 && !e.info.no_flush) {
    throw UsageError("--batches: " + name +
                     " flushes after every batch (only pipedream runs batches back to back); "
                     "expected 1, got " +
                     std::to_string(p.batches));
  }
  const int64_t actions = int64_t{p.stages} * p.chunks * p.microbatches * p.batches * 4;
  if (actions > kMaxActions) {
    // Name the flags that make it large, with their values.
    std::string flags;
    for (const auto& [flag, value] : {std::pair{"--stages", p.stages},
                                      {"--chunks", p.chunks},
                                      {"--microbatches", p.microbatches},
                                      {"--batches", p.batches}}) {
      if (value > 1)
        flags += (flags.empty() ? "" : " x ") + std::string(flag) + " " + std::to_string(value);
    }
    throw UsageError(flags + ": too many actions to generate (" + std::to_string(actions) +
                     ", limit " + std::to_string(kMaxActions) + ")");
  }
}

}  // namespace

const std::vector<ScheduleInfo>& schedule_list() {
  static const std::vector<ScheduleInfo> kList = [] {
    std::vector<ScheduleInfo> list;
    for (const Entry& e : entries()) list.push_back(e.info);
    return list;
  }();
  return kList;
}

Schedule generate_schedule(std::string_view name, const ScheduleParams& p) {
  for (const Entry& e : entries()) {
    if (e.info.name != name) continue;
    check_common(e, p);
    Schedule s = e.generate(p);
    validate_or_throw(s);
    return s;
  }
  throw UsageError("unknown schedule '" + std::string(name) +
                   "'; valid schedules: " + valid_names());
}

}  // namespace ppb
