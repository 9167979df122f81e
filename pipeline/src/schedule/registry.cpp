// The schedule registry: one line per schedule (STYLE.md rule 8), and the
// parameter checks every schedule shares.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "generators.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/validator.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {

// Each schedule's generator file (and what it refuses beyond the common
// checks), declared here beside its entry below: a new schedule is its file
// and these two lines.
namespace schedule_detail {
Schedule generate_sync_1f1b(const ScheduleParams& p);
Schedule generate_async_1f1b(const ScheduleParams& p);
Schedule generate_1f1b(const ScheduleParams& p);
Schedule generate_gpipe(const ScheduleParams& p);
Schedule generate_pipedream(const ScheduleParams& p);
Schedule generate_hybrid(const ScheduleParams& p);
std::optional<std::string> hybrid_problem(const ScheduleParams& p, std::string_view name);
Schedule generate_adaptive(const ScheduleParams& p);
Schedule generate_interleaved_1f1b(const ScheduleParams& p);
std::optional<std::string> interleaved_1f1b_problem(const ScheduleParams& p, std::string_view name);
Schedule generate_zb_h1(const ScheduleParams& p);
Schedule generate_zb_h2(const ScheduleParams& p);
Schedule generate_zb_1p(const ScheduleParams& p);
Schedule generate_zb_2p(const ScheduleParams& p);
/// zb-1p, zb-2p: --wgrad-share in (0, 1], finite pass times.
std::optional<std::string> zb_auto_problem(const ScheduleParams& p, std::string_view name);
Schedule generate_zb_v(const ScheduleParams& p);
Schedule generate_dualpipe_v(const ScheduleParams& p);
std::optional<std::string> dualpipe_v_problem(const ScheduleParams& p, std::string_view name);
}  // namespace schedule_detail

namespace {

using schedule_detail::Generator;
using schedule_detail::Problem;

struct Entry {
  ScheduleInfo info;
  Generator generate;
  Problem problem = nullptr;  ///< what only this schedule refuses (none: nullptr)
};

// In-flight formulas shared by several entries.
constexpr const char* kCounted = kInflightCounted;
constexpr const char* kAsync = "min(M, max(min(N, P-s), N-s))";

// clang-format off
const std::vector<Entry>& entries() {
  static const std::vector<Entry> kEntries = {
    {{.name = "sync-1f1b", .help = "document 000 §3.1: one micro-batch in flight, SYNC after each forward and backward wave", .colour = "#9c755f", .report_order = 0, .inflight_formula = "1"}, &schedule_detail::generate_sync_1f1b},
    {{.name = "async-1f1b", .help = "document 000 §3.2: no waiting, at most N micro-batches in flight per stage (--inflight N, default P)", .uses_inflight = true, .closed_form_bubble = true, .colour = "#4e79a7", .report_order = 2, .inflight_formula = kAsync}, &schedule_detail::generate_async_1f1b, &schedule_detail::inflight_problem},
    {{.name = "1f1b", .help = "PipeDream-Flush, the non-interleaved 1F1B of DeepSpeed and Megatron-LM (= async-1f1b with N = P)", .closed_form_bubble = true, .colour = "#59a14f", .report_order = 4, .inflight_formula = "min(P-s, M)"}, &schedule_detail::generate_1f1b},
    {{.name = "gpipe", .help = "GPipe: all forwards, then all backwards, one flush", .closed_form_bubble = true, .colour = "#e15759", .report_order = 12, .inflight_formula = "M"}, &schedule_detail::generate_gpipe},
    {{.name = "pipedream", .help = "document 003: 1F1B with weight stashing, no flush between --batches B batches", .no_flush = true, .weight_stashing = true, .optimizer_per_backward = true, .colour = "#f28e2b", .report_order = 13, .inflight_formula = kCounted}, &schedule_detail::generate_pipedream},
    {{.name = "hybrid", .help = "document 000: first K micro-batches synchronous (--sync-warmup K), then async-1f1b", .uses_inflight = true, .uses_sync_warmup = true, .colour = "#edc948", .report_order = 1, .inflight_formula = kCounted}, &schedule_detail::generate_hybrid, &schedule_detail::hybrid_problem},
    {{.name = "adaptive", .help = "document 000: async-1f1b whose in-flight limit the memory guard lowers at run time", .uses_inflight = true, .memory_guarded = true, .colour = "#76b7b2", .report_order = 3, .inflight_formula = kAsync}, &schedule_detail::generate_adaptive, &schedule_detail::inflight_problem},
    {{.name = "interleaved-1f1b", .help = "Megatron-LM interleaved 1F1B, V model chunks per stage (--chunks V, M a multiple of P)", .uses_chunks = true, .colour = "#8cd17d", .report_order = 5, .inflight_formula = "Megatron warm-up + 1 (chunk micro-batches)"}, &schedule_detail::generate_interleaved_1f1b, &schedule_detail::interleaved_1f1b_problem},
    {{.name = "zb-h1", .help = "Zero Bubble H1 (Qi et al. 2024): backward split into I and W, 1F1B's activation memory", .splits_backward = true, .colour = "#b07aa1", .report_order = 6, .inflight_formula = kCounted}, &schedule_detail::generate_zb_h1},
    {{.name = "zb-h2", .help = "Zero Bubble H2 (Qi et al. 2024): more warm-up forwards, no bubble inside a stage, 2P-1 in flight", .splits_backward = true, .colour = "#ff9da7", .report_order = 7, .inflight_formula = kCounted}, &schedule_detail::generate_zb_h2},
    {{.name = "zb-1p", .help = "Zero Bubble automatic (Qi et al. 2024): I and W placed greedily on the pass times under 1F1B's activation memory (P in flight)", .splits_backward = true, .uses_times = true, .colour = "#86bcb6", .report_order = 8, .inflight_formula = "at most P (its memory limit)"}, &schedule_detail::generate_zb_1p, &schedule_detail::zb_auto_problem},
    {{.name = "zb-2p", .help = "Zero Bubble automatic (Qi et al. 2024): I and W placed greedily on the pass times under twice 1F1B's activation memory (2P)", .splits_backward = true, .uses_times = true, .colour = "#d37295", .report_order = 9, .inflight_formula = "at most 2P (its memory limit)"}, &schedule_detail::generate_zb_2p, &schedule_detail::zb_auto_problem},
    {{.name = "zb-v", .help = "Zero Bubble V (Qi et al. 2024): 2 chunks per stage placed in a V, I and W split, 1F1B's activation memory", .splits_backward = true, .fixed_chunks = 2, .colour = "#fabfd2", .report_order = 10, .inflight_formula = "at most 2P chunk halves (P micro-batches)"}, &schedule_detail::generate_zb_v},
    {{.name = "dualpipe-v", .help = "DualPipeV (DeepSeek 2024): V-placed 2 chunks, forward and backward of two chunks overlapped as one unit (M >= 2P)", .splits_backward = true, .fixed_chunks = 2, .colour = "#499894", .report_order = 11, .inflight_formula = kCounted}, &schedule_detail::generate_dualpipe_v, &schedule_detail::dualpipe_v_problem},
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

std::optional<std::string> common_problem(const Entry& e, const ScheduleParams& p) {
  const std::string& name = e.info.name;
  if (p.stages < 1) return "--stages: expected >= 1, got " + std::to_string(p.stages);
  if (p.microbatches < 1)
    return "--microbatches: expected >= 1, got " + std::to_string(p.microbatches);
  if (p.chunks < 1) return "--chunks: expected >= 1, got " + std::to_string(p.chunks);
  if (p.batches < 1) return "--batches: expected >= 1, got " + std::to_string(p.batches);
  if (e.info.fixed_chunks > 0 && p.chunks != 1 && p.chunks != e.info.fixed_chunks) {
    return "--chunks: " + name + " always has " + std::to_string(e.info.fixed_chunks) +
           " chunks per stage; expected 1 or " + std::to_string(e.info.fixed_chunks) + ", got " +
           std::to_string(p.chunks);
  }
  if (p.chunks > 1 && !e.info.uses_chunks && e.info.fixed_chunks == 0) {
    return "--chunks: " + name +
           " has no model chunks (only interleaved-1f1b does); expected 1, got " +
           std::to_string(p.chunks);
  }
  if (p.batches > 1 && !e.info.no_flush) {
    return "--batches: " + name +
           " flushes after every batch (only pipedream runs batches back to back); "
           "expected 1, got " +
           std::to_string(p.batches);
  }
  const int64_t actions =
      int64_t{p.stages} * std::max(p.chunks, e.info.fixed_chunks) * p.microbatches * p.batches * 4;
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
    return flags + ": too many actions to generate (" + std::to_string(actions) + ", limit " +
           std::to_string(kMaxActions) + ")";
  }
  return std::nullopt;
}

std::optional<std::string> problem_of(const Entry& e, const ScheduleParams& p) {
  if (std::optional<std::string> why = common_problem(e, p)) return why;
  return e.problem != nullptr ? e.problem(p, e.info.name) : std::nullopt;
}

std::string unknown_name(std::string_view name) {
  return "unknown schedule '" + std::string(name) + "'; valid schedules: " + valid_names();
}

const Entry* find_entry(std::string_view name) {
  for (const Entry& e : entries()) {
    if (e.info.name == name) return &e;
  }
  return nullptr;
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

const ScheduleInfo* find_schedule_info(std::string_view name) {
  for (const ScheduleInfo& info : schedule_list()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

const ScheduleInfo& schedule_info(std::string_view name) {
  if (const ScheduleInfo* info = find_schedule_info(name)) return *info;
  throw UsageError(unknown_name(name));
}

int default_chunks(const ScheduleInfo& info) {
  if (info.fixed_chunks > 0) return info.fixed_chunks;
  return info.uses_chunks ? kDefaultChunks : 1;
}

int default_batches(const ScheduleInfo& info) { return info.no_flush ? kDefaultBatches : 1; }

void schedule_defaults(std::string_view name, bool chunks_given, bool batches_given,
                       ScheduleParams& params) {
  const ScheduleInfo* info = find_schedule_info(name);
  if (info == nullptr) return;
  if (!chunks_given) params.chunks = default_chunks(*info);
  if (!batches_given) params.batches = default_batches(*info);
}

bool closed_form_bubble_applies(std::string_view name, int stages, int inflight) {
  const ScheduleInfo* info = find_schedule_info(name);
  return info != nullptr && info->closed_form_bubble &&
         (!info->uses_inflight || inflight >= stages);
}

std::optional<std::string> schedule_problem(std::string_view name, const ScheduleParams& p) {
  const Entry* e = find_entry(name);
  if (e == nullptr) return unknown_name(name);
  return problem_of(*e, p);
}

Schedule generate_schedule(std::string_view name, const ScheduleParams& p) {
  if (std::optional<std::string> why = schedule_problem(name, p)) throw UsageError(*why);
  Schedule s = find_entry(name)->generate(p);
  validate_or_throw(s);
  return s;
}

}  // namespace ppb
