// Schedule generators (docs/architecture.md): pure functions from a few
// integers to per-stage action lists. Every generator is one file in
// pipeline/src/schedule/ plus one registration line in registry.cpp
// (STYLE.md rule 8); `pipebench list` prints schedule_list().
//
// Example:
//   ppb::ScheduleParams p;
//   p.stages = 4;
//   p.microbatches = 8;
//   ppb::Schedule s = ppb::generate_schedule("1f1b", p);  // validated
//   // s.actions[3] == {F0 B0 F1 B1 ... F7 B7}
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/pipeline/action.hpp"
#include "ppb/profiling/check.hpp"  // UsageError

namespace ppb {

/// What a generator takes. Fields a schedule does not use are ignored
/// (inflight, sync_warmup), except chunks and batches, which must be 1 for
/// schedules without chunks / with a flush (a UsageError otherwise).
struct ScheduleParams {
  int stages = 1;        ///< P, >= 1
  int microbatches = 1;  ///< M per batch, >= 1
  int chunks = 1;        ///< V, model chunks per stage (interleaved-1f1b)
  int inflight = 0;  ///< async-1f1b/adaptive/hybrid: max micro-batches in flight on a stage; 0 = P
  int sync_warmup = 1;  ///< hybrid: the first K micro-batches run synchronously, 0 <= K <= M
  int batches = 1;      ///< pipedream: batches run back to back without a flush
  /// zb-1p, zb-2p: the per-pass times the heuristic places I and W by, in
  /// any one unit (simulate's cost flags): F, I, W (> 0) and one transfer (>= 0).
  double tf = 1, tb = 1, tw = 1, tc = 0;
  /// zb-1p, zb-2p: the share of a micro-batch's activations W still needs
  /// after I, in (0, 1]. 1 = pipebench's memory model (activations stay until
  /// W); the Zero Bubble paper's GPT keeps 32h of 34h + 5as (about 0.37-0.43).
  double wgrad_share = 1;
};

/// The one copy of the schedule parameters P, M, V, N, K and B between two
/// records that name them as ScheduleParams does (ScheduleParams itself, a
/// result's config, a sweep's combination, a planner's candidate), so that
/// no caller lists them again and none leaves one out. The pass times and
/// wgrad_share are not copied.
template <class To, class From>
void copy_schedule_params(To& to, const From& from) {
  to.stages = from.stages;
  to.microbatches = from.microbatches;
  to.chunks = from.chunks;
  to.inflight = from.inflight;
  to.sync_warmup = from.sync_warmup;
  to.batches = from.batches;
}

/// One registered schedule: its name, one line of help, and the properties
/// every caller asks about (the executor's optimizer policy, the backend's
/// weight stashing, the sweep's parameters, the memory guard), so that no
/// caller compares schedule names.
struct ScheduleInfo {
  std::string name;
  std::string help;              ///< one line
  bool splits_backward = false;  ///< backward split into I and W (zb-*)
  bool uses_chunks = false;      ///< takes --chunks V (interleaved-1f1b)
  /// Always this many chunks per stage, placed as the schedule says
  /// (zb-v, dualpipe-v: 2, V-shaped); --chunks may be left at 1 or equal it.
  int fixed_chunks = 0;
  /// Places I and W by the pass times (ScheduleParams tf, tb, tw, tc).
  bool uses_times = false;
  bool no_flush = false;          ///< batches run back to back (--batches), no flush between
  bool uses_inflight = false;     ///< takes --inflight N (async-1f1b, adaptive, hybrid)
  bool uses_sync_warmup = false;  ///< takes --sync-warmup K (hybrid)
  /// A micro-batch's backward uses the weights its forward used (PipeDream
  /// weight stashing): the backend keeps older weight versions.
  bool weight_stashing = false;
  /// One optimizer step on a chunk after each of its backwards instead of one
  /// per chunk at the end of the batch.
  bool optimizer_per_backward = false;
  /// Under --memory-budget the memory guard lowers the in-flight limit at run
  /// time instead of the run predicting the peak before it starts (adaptive).
  bool memory_guarded = false;
  /// The closed form (P-1)/(M+P-1) of equal stages holds (gpipe, 1f1b; with
  /// uses_inflight only when N >= P).
  bool closed_form_bubble = false;
  /// What the report reads (every entry sets all three; registry_test checks):
  /// its colour in charts, "#rrggbb", one per schedule;
  std::string colour;
  /// its place in the report's lists (ascending, one per schedule);
  int report_order = -1;
  /// and its peak in-flight micro-batches per stage as the report states the
  /// theory: "min(P-s, M)", or kInflightCounted where no formula is given.
  std::string inflight_formula;
};

/// ScheduleInfo::inflight_formula of a schedule whose figure is counted
/// along its lists (peak_inflight), with no closed form given; also what the
/// report says of a schedule read from a file.
inline constexpr const char* kInflightCounted =
    "the schedule's count (F until its last backward piece)";

/// The registry, in a fixed order, one entry per schedule.
const std::vector<ScheduleInfo>& schedule_list();

/// The registry entry of `name`. Throws UsageError for an unknown name (the
/// message lists the valid names).
const ScheduleInfo& schedule_info(std::string_view name);
/// The registry entry of `name`, or nullptr (a schedule file's own name).
const ScheduleInfo* find_schedule_info(std::string_view name);

/// --chunks V and --batches B where the command line gives none, in every
/// command alike (`run` sweeps them, `schedule` and `simulate` generate
/// them): a schedule of chosen chunks (uses_chunks) has kDefaultChunks, one
/// without a flush (no_flush) runs kDefaultBatches batches; a schedule of
/// fixed chunks has those; 1 otherwise.
inline constexpr int kDefaultChunks = 2;
inline constexpr int kDefaultBatches = 2;
int default_chunks(const ScheduleInfo& info);
int default_batches(const ScheduleInfo& info);

/// `schedule` and `simulate`: `params.chunks` and `params.batches`, where
/// the command line did not give them, set to schedule `name`'s defaults
/// (above), so that they generate what `run` sweeps. An unknown name is
/// left to generate_schedule to refuse.
void schedule_defaults(std::string_view name, bool chunks_given, bool batches_given,
                       ScheduleParams& params);

/// Whether the closed forms of GPipe and 1F1B with equal stages, bubble
/// ratio (P-1)/(M+P-1) and overhead (P-1)/M, apply to schedule `name` with
/// in-flight limit `inflight`: its registry entry says so
/// (closed_form_bubble), with an in-flight limit only when N >= P. False
/// for a name the registry does not hold.
bool closed_form_bubble_applies(std::string_view name, int stages, int inflight);

/// Why `name` cannot generate with `p`, naming the flag and the reason
/// ("--chunks: gpipe has no model chunks; expected 1, got 2"), or nullopt
/// when it can. An unknown name is its own problem, whatever `p` (the
/// message lists the valid names). A search that tries combinations asks
/// this first instead of catching generate_schedule's UsageError.
std::optional<std::string> schedule_problem(std::string_view name, const ScheduleParams& p);

/// Generates the schedule `name` and validates it (validator.hpp).
/// Throws UsageError with schedule_problem's message when it has one.
Schedule generate_schedule(std::string_view name, const ScheduleParams& p);

/// Peak in-flight micro-batches per stage: the largest number of
/// (micro-batch, chunk) pairs whose F has run and whose last backward piece
/// (B, or W when the backward is split) has not, counted along each stage's
/// list. Standard figures: 1f1b min(P-s, M); gpipe M; sync-1f1b 1;
/// async-1f1b stage 0 min(N, M).
/// REQUIRES: s passes the validator.
std::vector<int> peak_inflight(const Schedule& s);

/// Like peak_inflight, but a pair leaves at its input-gradient step (B or I):
/// what a schedule keeps of the full activations when W only needs the
/// smaller weight-gradient inputs (the Zero Bubble paper's memory model).
/// zb-h1 keeps 1F1B's figure here, min(P-s, M).
std::vector<int> peak_inflight_until_input_grad(const Schedule& s);

/// After which actions of a stage's `list` the optimizer steps: with
/// `per_backward` (ScheduleInfo::optimizer_per_backward) after each B and W,
/// on that action's chunk; otherwise after the last action of each batch
/// (SYNC aside), on every chunk. after[k] != 0 marks action k. The executor
/// runs its optimizer by it and the memory model versions stashed weights by it.
std::vector<char> optimizer_steps_after(const Schedule& s, const std::vector<Action>& list,
                                        bool per_backward);

/// Warm-up forwards of stage s under async-1f1b with in-flight limit N
/// (document 000 §3.2): min(M-1, max(min(N, P-s), N-s) - 1), never below 0.
/// N = P gives 1F1B's min(P-s-1, M-1).
int async_warmup_forwards(int stages, int microbatches, int inflight, int stage);

}  // namespace ppb
