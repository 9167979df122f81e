#include "ppb/reports/regression.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "ppb/profiling/check.hpp"
#include "ppb/reports/fast_paths.hpp"
#include "ppb/reports/format.hpp"
#include "ppb/reports/load.hpp"
#include "ppb/reports/plan.hpp"
#include "ppb/reports/stats.hpp"

namespace ppb::reports {

const char* regression_status_name(RegressionStatus status) {
  switch (status) {
    case RegressionStatus::kPass:
      return "no change";
    case RegressionStatus::kRegressed:
      return "regression";
    case RegressionStatus::kImproved:
      return "improvement";
    case RegressionStatus::kUndecidable:
      return "undecidable";
    case RegressionStatus::kNew:
      return "new";
    case RegressionStatus::kMissing:
      return "missing";
    case RegressionStatus::kExcluded:
      return "excluded";
  }
  return "?";
}

const char* undecided_name(Undecided why) {
  switch (why) {
    case Undecided::kNo:
      return "";
    case Undecided::kTooNoisy:
      return "too noisy to tell at the threshold";
    case Undecided::kHostBusy:
      return "the host was busy";
    case Undecided::kMachineSpeed:
      return "the machine itself ran at another speed";
    case Undecided::kNotReproduced:
      return "did not reproduce on a re-run";
  }
  return "?";
}

Undecided RegressionRow::undecided() const {
  if (status != RegressionStatus::kUndecidable) return Undecided::kNo;
  Undecided out = Undecided::kNo;
  for (const MetricVerdict& v : metrics) {
    if (v.status == RegressionStatus::kUndecidable) out = std::max(out, v.undecided);
  }
  return out;
}

std::string RegressionSummary::undecidable_causes() const {
  std::map<Undecided, int> by_cause;
  for (const RegressionRow& r : rows) {
    if (r.status == RegressionStatus::kUndecidable) ++by_cause[r.undecided()];
  }
  std::vector<std::pair<int, Undecided>> order;
  for (const auto& [why, n] : by_cause) order.emplace_back(n, why);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out;
  for (const auto& [n, why] : order) {
    out += (out.empty() ? "" : ", ") + std::to_string(n) + " " +
           (why == Undecided::kNo ? "undecidable" : undecided_name(why));
  }
  return out;
}

int RegressionSummary::regressions() const { return count(RegressionStatus::kRegressed); }

int RegressionSummary::count(RegressionStatus status) const {
  int n = 0;
  for (const RegressionRow& r : rows) n += r.status == status ? 1 : 0;
  return n;
}

int RegressionRow::count(Confirmation confirmation) const {
  int n = 0;
  for (const MetricVerdict& v : metrics) n += v.confirmation == confirmation ? 1 : 0;
  return n;
}

int RegressionSummary::rows_with(Confirmation confirmation) const {
  int n = 0;
  for (const RegressionRow& r : rows) n += r.count(confirmation) > 0 ? 1 : 0;
  return n;
}

std::string confirmation_summary(const RegressionRow& row) {
  std::string out;
  auto add = [&out](int n, const char* what) {
    if (n > 0) out += (out.empty() ? "" : ", ") + std::string(what);
  };
  add(row.count(Confirmation::kConfirmed), "confirmed");
  add(row.count(Confirmation::kNotReproduced), "did not reproduce");
  add(row.count(Confirmation::kAwaiting), "awaiting a re-run");
  return out;
}

std::vector<std::string> RegressionSummary::rerun_list() const {
  std::vector<std::string> out;
  std::set<std::string> listed;
  const auto add = [&](const ResultEntry* e) {
    if (e != nullptr && listed.insert(e->source).second) out.push_back(e->source);
  };
  for (const RegressionRow& r : rows) {
    if (r.current == nullptr || r.count(Confirmation::kAwaiting) == 0) continue;
    add(r.current);
    add(r.control);
  }
  return out;
}

double noise_floor_for(const NoiseFloor& f, int nights) {
  if (f.sigma <= 0 || nights <= 0) return 0;
  const double x = f.z * f.sigma * std::sqrt(1 + 1.0 / nights);
  return f.relative ? std::expm1(x) : x;
}

std::string noise_floor_text(const NoiseFloor& f) {
  const auto size = [&f](double x) {
    return f.relative ? format_fixed(x * 100, 1) + "%" : format_fixed(x, 3) + " points";
  };
  std::string out = f.backend + " " + f.figure + ": ";
  if (f.floor <= 0) {
    return out + "no floor (" + std::to_string(f.residuals) +
           " night-to-night differences; it needs 8, from combinations with 2 or more reference "
           "nights)";
  }
  return out + "one launch of an unchanged build lands sigma " + size(f.sigma) + " off (" +
         std::to_string(f.residuals) +
         (f.from_tonight ? " differences of tonight's launch against the last night's, the "
                           "history holding too few"
                         : " night-to-night differences") +
         "); floor " + size(f.floor) + " with " + std::to_string(f.nights) +
         " reference nights (z " + format_fixed(f.z, 2) +
         (f.beyond > 1 ? ": alpha x " + std::to_string(f.beyond) + " / " +
                             std::to_string(f.figures) + " figures, " + std::to_string(f.beyond) +
                             " beyond the noise (Benjamini-Hochberg))"
                       : ": alpha over " + std::to_string(f.figures) + " figures)");
}

namespace {

namespace fs = std::filesystem;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string match_key(const ResultEntry& e) { return e.machine + " # " + e.config_key; }

// The match key without the time scale and the vocabulary padding: the
// same combination run at another scale (the timed backend's wall seconds
// per modelled second) or with another padded head (more logits: another
// work, work_fields). Its timings are not comparable, but it is not a new
// combination either. What make_entry adds after the config's own key (the
// device profiler, the GPU sharing) stays: a run of another sharing is
// another combination.
std::string scale_free_key(const ResultEntry& e) {
  ResultConfig c = e.result.config;
  c.time_scale = 0;
  c.vocab_padding.reset();
  const std::string measured = e.config_key.substr(config_key(e.result.config).size());
  return e.machine + " # " + config_key(c) + measured;
}

// The vocabulary a result's head held: "padded to 50304
// (--make-vocab-size-divisible-by 128)", or "unpadded" (also files from
// before padding, which record none).
std::string head_vocab(const ResultConfig& c) {
  const std::optional<VocabPadding>& p = c.vocab_padding;
  if (!p || p->padded <= p->vocab) return "unpadded";
  return "padded to " + std::to_string(p->padded) + " (--make-vocab-size-divisible-by " +
         std::to_string(p->divisor) + ")";
}

// Why a combination whose history ran at another time scale or vocabulary
// padding is kept out. Six significant digits: two scales that differ show
// as different.
std::string rescaled_note(const ResultEntry& tonight, const ResultEntry& before) {
  const auto scale = [](const ResultEntry& e) {
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", e.result.config.time_scale);
    return std::string(text);
  };
  std::string differs;
  if (scale(before) != scale(tonight)) {
    differs = "at time scale " + scale(before) + ", tonight at " + scale(tonight) +
              " (wall seconds per modelled second)";
  }
  const std::string vocab_before = head_vocab(before.result.config);
  const std::string vocab_tonight = head_vocab(tonight.result.config);
  if (vocab_before != vocab_tonight) {
    differs += (differs.empty() ? "" : "; and ") + std::string("with the head's vocabulary ") +
               vocab_before + ", tonight " + vocab_tonight;
  }
  return "excluded: earlier nights ran it " + differs + ": its timings are not comparable";
}

std::string signed_percent(double x) {
  return (x >= 0 ? "+" : "") + format_fixed(x * 100, 1) + "%";
}

// A change in the figure's unit: "+12.3%" or "+0.031".
std::string change_text(double x, bool relative) {
  if (relative) return signed_percent(x);
  return (x >= 0 ? "+" : "") + format_fixed(x, 3);
}

std::string size_text(double x, bool relative) {
  if (!std::isfinite(x)) return "none";
  return relative ? format_fixed(x * 100, 1) + "%" : format_fixed(x, 3);
}

// `run` names whose timed steps: "tonight's", or "the re-run's".
std::string not_judged_text(const NotJudgedWhy& w, std::string_view run) {
  const std::string limit = format_trimmed(w.limit * 100) + "%";
  switch (w.kind) {
    case NotJudged::kNo:
      return "";
    case NotJudged::kHostBusy:
      return "the host was busy: other processes used " + format_fixed(w.share * 100, 0) +
             "% of its CPU during " + std::string(run) + " timed steps (limit " + limit + ")";
    case NotJudged::kMachineSpeed:
      return "the machine itself ran " + format_fixed(std::abs(w.drift) * 100, 1) + "% " +
             (w.drift > 0 ? "slower" : "faster") + " on stage " + std::to_string(w.stage) +
             " than on the earlier nights (speed probe " + format_fixed(w.probe * 1e3, 2) +
             " ms, usually " + format_fixed(w.usual * 1e3, 2) + " ms; limit " + limit +
             "): its timings are not comparable";
    case NotJudged::kEveryNightSpeed:
      return "every earlier night's machine ran at another speed than usual (speed probe, limit " +
             limit + ")";
    case NotJudged::kEveryNightBusy:
      return "every earlier night's host was busy with other processes (limit " + limit + ")";
  }
  return "";
}

// The verdict's own figures and test, without what a re-run said; `run`
// as not_judged_text's.
std::string figure_text(const MetricVerdict& v, std::string_view run = "tonight's") {
  if (v.not_judged.kind != NotJudged::kNo) {
    return v.name + " not judged: " + not_judged_text(v.not_judged, run);
  }
  std::string text;
  if (!v.timing) {
    text = v.name + " " + format_bytes(v.reference) + " -> " + format_bytes(v.current) + " (" +
           signed_percent(v.change) + ", threshold +" + format_trimmed(v.threshold * 100) + "%)";
  } else {
    text = v.name + " " + format_number(v.reference) + " -> " + format_number(v.current) + " (" +
           change_text(v.change, v.relative) + ", p=" + format_number(v.p) + ", band " +
           size_text(v.band, v.relative) +
           (v.floor > 0 ? ", sweep noise floor " + size_text(v.floor, v.relative) : "") +
           ", detectable " + size_text(v.detectable, v.relative) + ", threshold " +
           size_text(v.threshold, v.relative) + ")";
  }
  if (!v.arrived.empty()) text += ", since " + v.arrived;
  return text;
}

}  // namespace

std::string rerun_text(const MetricVerdict& v) {
  constexpr std::string_view kReRuns = "the re-run's";
  switch (v.rerun_outcome) {
    case RerunOutcome::kNone:
      return "";
    case RerunOutcome::kSameVerdict:
      return figure_text(*v.rerun, kReRuns);
    case RerunOutcome::kOtherVerdict:
      return std::string(regression_status_name(v.rerun->status)) + ": " +
             figure_text(*v.rerun, kReRuns);
    case RerunOutcome::kNotJudged:
      return "the re-run's " + figure_text(*v.rerun, kReRuns);
    case RerunOutcome::kNoFigure:
      return "the re-run has no " + v.name + " figure";
    case RerunOutcome::kOversubscribed:
      return "the re-run was oversubscribed (kept out of the gate)";
    case RerunOutcome::kEnded:
      return std::string("the re-run ended with status ") + result_status_name(v.rerun_status) +
             (v.rerun_error.empty() ? "" : ": " + v.rerun_error);
  }
  return "";
}

std::vector<SoftwareChange> software_changes(const ResultEnvironment& before,
                                             const ResultEnvironment& after) {
  std::vector<SoftwareChange> out;
  const auto known = [](const std::string& s) { return !s.empty() && s != "none"; };
  const auto compare = [&](const char* what, const std::string& from, const std::string& to) {
    if (known(from) && known(to) && from != to) out.push_back({what, from, to});
  };
  // The driver is its own version where NVML was there ("580.95.05") and
  // only its CUDA version where it was not ("CUDA 13.0"): the two forms
  // cannot say whether the driver changed, so they are not compared.
  const auto cuda_only = [](const std::string& d) { return d.rfind("CUDA ", 0) == 0; };
  if (cuda_only(before.driver) == cuda_only(after.driver))
    compare("driver", before.driver, after.driver);
  compare("CUDA", before.cuda, after.cuda);
  compare("NCCL", before.nccl, after.nccl);
  compare("cuDNN", before.cudnn, after.cudnn);
  return out;
}

std::vector<FastPathChange> fast_path_changes(const Result& before, const Result& after) {
  std::vector<FastPathChange> out;
  const std::vector<FastPath> was = fast_paths(before);
  const std::vector<FastPath> now = fast_paths(after);
  if (was.size() != now.size()) return out;  // one of them has none
  for (size_t i = 0; i < now.size(); ++i) {
    const FastPathOutcome a = was[i].outcome;
    const FastPathOutcome b = now[i].outcome;
    if (a != FastPathOutcome::kNotRecorded && b != FastPathOutcome::kNotRecorded && a != b)
      out.push_back({now[i].kind, was[i].text, now[i].text});
  }
  return out;
}

std::string verdict_text(const MetricVerdict& v) {
  std::string text = figure_text(v);
  for (size_t i = 0; i < v.kernels.size(); ++i) {
    const KernelChange& k = v.kernels[i];
    text += std::string(i == 0 ? "; kernels: " : ", ") + k.family + " on stage " +
            std::to_string(k.stage) + " " + format_number(k.reference * 1e3) + " ms -> " +
            format_number(k.current * 1e3) + " ms (" + signed_percent(k.current / k.reference - 1) +
            ")";
  }
  if (!v.software.empty()) {
    text += "; ";
    for (size_t i = 0; i < v.software.size(); ++i) {
      const SoftwareChange& c = v.software[i];
      text += (i > 0 ? ", " : "") + c.what + " " + c.from + " -> " + c.to;
    }
    text += " on that night";
  }
  // A fast path's text may hold commas (its reason): one clause each.
  for (const FastPathChange& c : v.fast_paths) {
    text += std::string("; fast path changed: ") + fast_path_name(c.kind) + " " + c.from + " -> " +
            c.to + " on that night";
  }
  switch (v.confirmation) {
    case Confirmation::kNone:
      break;
    case Confirmation::kAwaiting:
      if (v.reruns_given) text += "; not confirmed: no re-run of it";
      break;
    case Confirmation::kConfirmed:
      text += "; confirmed by a re-run: " + rerun_text(v);
      break;
    case Confirmation::kNotReproduced: {
      // A re-run that tells "no change" (or the opposite) shows a transient;
      // one that cannot tell leaves the question open.
      const bool told = v.rerun_outcome == RerunOutcome::kOtherVerdict &&
                        v.rerun->status != RegressionStatus::kUndecidable;
      text += "; did not reproduce on a re-run (" + rerun_text(v) + ")" +
              (told ? "; a transient" : "; the re-run could not tell");
      break;
    }
  }
  return text;
}

namespace {

// One night's samples of one figure.
struct NightSamples {
  std::string night;
  std::vector<double> values;
  double median = 0;
  const Night* source = nullptr;  ///< the history's night (null: tonight's, or pooled)
};

std::vector<double> pooled(const std::vector<NightSamples>& nights, size_t begin, size_t end) {
  std::vector<double> out;
  for (size_t i = begin; i < end; ++i)
    out.insert(out.end(), nights[i].values.begin(), nights[i].values.end());
  return out;
}

// What a figure is and which way is worse.
struct FigureKind {
  std::string name;
  bool relative;              // fractions (samples/s) or ratio points (bubble)
  int worse;                  // -1: a drop is worse (samples/s); +1: a rise is worse (bubble)
  std::string family = name;  // the noise floor's kind: "stage compute" for every stage
  const NoiseFloor* noise = nullptr;  // the sweep's noise model of the family (null: none)
  int stage = -1;                     // a per-stage figure's stage
};

double change_of(double cur, double ref, bool relative) {
  if (!relative) return cur - ref;
  return ref != 0 ? (cur - ref) / ref : kNaN;
}

// Tonight (the last element of `nights`) against nights [begin, end) of the
// reference. Fills every figure and the decision, arrival left to the caller.
MetricVerdict assess(const FigureKind& kind, const std::vector<NightSamples>& nights, size_t begin,
                     size_t end, const GateOptions& o) {
  const NightSamples& tonight = nights.back();
  const std::vector<double> ref = pooled(nights, begin, end);
  MetricVerdict v;
  v.name = kind.name;
  v.relative = kind.relative;
  v.stage = kind.stage;
  v.reference = median(ref);
  v.current = tonight.median;
  v.change = change_of(v.current, v.reference, kind.relative);
  v.p = mann_whitney_u(tonight.values, ref).p;
  v.band = 0;
  for (size_t i = begin; i < end; ++i) {
    v.band = std::max(v.band, std::fabs(change_of(nights[i].median, v.reference, kind.relative)));
  }
  // The floor for as many reference nights as this reading compares with.
  v.floor = kind.noise != nullptr ? noise_floor_for(*kind.noise, static_cast<int>(end - begin)) : 0;
  const double noise = std::max(v.band, v.floor);
  const std::optional<double> shift =
      detectable_shift(tonight.values, ref, o.alpha, kind.worse, 1.0,
                       kind.relative ? ShiftKind::kRelative : ShiftKind::kAbsolute);
  v.detectable = std::max({o.threshold, noise, shift.value_or(kInf)});
  const double worse = kind.worse * v.change;  // > 0: in the bad direction
  const bool significant = v.p < o.alpha;
  if (worse > o.threshold && significant && worse > noise) {
    v.status = RegressionStatus::kRegressed;
  } else if (-worse > o.threshold && significant && -worse > noise) {
    v.status = RegressionStatus::kImproved;
  } else if (v.detectable > o.threshold) {
    v.status = RegressionStatus::kUndecidable;
    v.undecided = Undecided::kTooNoisy;
  } else {
    v.status = RegressionStatus::kPass;
  }
  return v;
}

// The step-change reading: the nights from the series' best change point on
// (tonight included) against those before it. Returns the verdict when the
// step is a regression or improvement that tonight still shows.
std::optional<MetricVerdict> step_change(const FigureKind& kind,
                                         const std::vector<NightSamples>& nights,
                                         const GateOptions& o) {
  std::vector<double> medians;
  for (const NightSamples& n : nights) medians.push_back(n.median);
  const std::optional<size_t> j = change_point(medians);
  if (!j || *j + 1 >= nights.size()) return std::nullopt;  // a step tonight: the plain reading
  // The nights since the step, pooled, must differ from those before it...
  std::vector<NightSamples> pooled_after = {nights.begin(), nights.begin() + *j};
  pooled_after.push_back({"since", pooled(nights, *j, nights.size()), 0});
  pooled_after.back().median = median(pooled_after.back().values);
  const MetricVerdict since = assess(kind, pooled_after, 0, *j, o);
  if (since.status != RegressionStatus::kRegressed && since.status != RegressionStatus::kImproved)
    return std::nullopt;
  // ... and tonight alone too, the same way.
  std::vector<NightSamples> tonight_only = {nights.begin(), nights.begin() + *j};
  tonight_only.push_back(nights.back());
  MetricVerdict v = assess(kind, tonight_only, 0, *j, o);
  if (v.status != since.status) return std::nullopt;
  v.arrived = nights[*j].night;
  return v;
}

MetricVerdict decide_sampled(const FigureKind& kind, const std::vector<NightSamples>& nights,
                             const GateOptions& o) {
  std::optional<MetricVerdict> step = step_change(kind, nights, o);
  MetricVerdict v = step ? *step : assess(kind, nights, 0, nights.size() - 1, o);
  if (v.arrived.empty() &&
      (v.status == RegressionStatus::kRegressed || v.status == RegressionStatus::kImproved)) {
    v.arrived = nights.back().night;
  }
  v.threshold = o.threshold;
  return v;
}

// Memory is deterministic: tonight's peak against the last night whose peak
// differs from it by more than the threshold; the nights in between have
// tonight's level, so the change arrived with the first of them.
MetricVerdict decide_memory(const std::string& name,
                            const std::vector<std::pair<std::string, double>>& nights,
                            const GateOptions& o) {
  MetricVerdict v;
  v.name = name;
  v.current = nights.back().second;
  v.reference = nights.size() >= 2 ? nights[nights.size() - 2].second : v.current;
  v.detectable = o.threshold;
  size_t i = nights.size() - 1;
  while (i > 0 && std::fabs(change_of(nights[i - 1].second, v.current, true)) <= o.threshold) --i;
  if (i > 0) {
    v.reference = nights[i - 1].second;
    v.arrived = nights[i].first;
  }
  v.timing = false;
  v.change = change_of(v.current, v.reference, true);
  if (v.change > o.threshold)
    v.status = RegressionStatus::kRegressed;
  else if (v.change < -o.threshold)
    v.status = RegressionStatus::kImproved;
  if (v.status == RegressionStatus::kPass) v.arrived.clear();
  v.threshold = o.threshold;
  return v;
}

// The history of one combination: the window's nights that hold it (ok and
// fit for the gate), oldest first.
struct Matched {
  const Night* night;
  const ResultEntry* entry;
};

bool gated(const ResultEntry& e, const GateOptions& o) {
  return o.include_oversubscribed || !e.result.environment.oversubscribed;
}

TrendPoint trend_point(const std::string& night, const Result& r) {
  TrendPoint t;
  t.night = night;
  const Spread s = spread(throughput_samples(r));
  const Spread b = spread(bubble_samples(r));
  t.samples_median = s.median;
  t.samples_q1 = s.q1;
  t.samples_q3 = s.q3;
  t.bubble_median = b.median;
  t.bubble_q1 = b.q1;
  t.bubble_q3 = b.q3;
  t.memory = peak_memory_bytes(r);
  return t;
}

// The share of the host's CPU other processes used while `r` was timed,
// when it is over the limit; -1 when within it or unknown.
double busy_host(const Result& r, const GateOptions& o) {
  if (!r.metrics || !r.metrics->foreign_cpu) return -1;
  return *r.metrics->foreign_cpu > o.max_foreign_cpu ? *r.metrics->foreign_cpu : -1;
}

// The median over the timed steps of each stage's speed probe in `r`
// (NaN for a stage without one); empty when `r` has no probe.
std::vector<double> probe_medians(const Result& r) {
  std::vector<double> out;
  if (!r.metrics) return out;
  for (const std::vector<double>& steps : r.metrics->speed_probe_seconds_per_stage) {
    std::vector<double> finite;
    for (double x : steps)
      if (std::isfinite(x) && x > 0) finite.push_back(x);
    out.push_back(finite.empty() ? kNaN : median(finite));
  }
  return out;
}

// The machine's usual speed: per stage, the median over `nights` of their
// probe medians (only nights with a probe on as many stages); empty when
// none has one.
std::vector<double> reference_probe(const std::vector<Matched>& nights, size_t stages) {
  std::vector<std::vector<double>> per_stage(stages);
  for (const Matched& m : nights) {
    const std::vector<double> p = probe_medians(m.entry->result);
    if (p.size() != stages) continue;
    for (size_t s = 0; s < stages; ++s)
      if (std::isfinite(p[s])) per_stage[s].push_back(p[s]);
  }
  std::vector<double> out;
  for (const std::vector<double>& v : per_stage) {
    if (v.empty()) return {};
    out.push_back(median(v));
  }
  return out;
}

// How much slower (positive) or faster (negative) the machine ran for `r`
// than `reference`: the stage whose probe moved most, as a fraction, and
// that stage; {NaN, -1} without a probe to compare.
struct ProbeDrift {
  double change = kNaN;
  int stage = -1;
  double seconds = kNaN, reference = kNaN;
};
ProbeDrift probe_drift(const Result& r, const std::vector<double>& reference) {
  ProbeDrift d;
  const std::vector<double> p = probe_medians(r);
  if (reference.empty() || p.size() != reference.size()) return d;
  for (size_t s = 0; s < p.size(); ++s) {
    if (!std::isfinite(p[s])) continue;
    const double change = p[s] / reference[s] - 1;
    if (d.stage < 0 || std::abs(change) > std::abs(d.change)) {
      d = {change, static_cast<int>(s), p[s], reference[s]};
    }
  }
  return d;
}

bool drifted(const ProbeDrift& d, const GateOptions& o) {
  return d.stage >= 0 && std::abs(d.change) > o.max_speed_drift;
}

// A timing figure the gate declines to judge, and why.
MetricVerdict not_judged(const std::string& name, bool relative, const NotJudgedWhy& why,
                         Undecided cause) {
  MetricVerdict v;
  v.name = name;
  v.relative = relative;
  v.status = RegressionStatus::kUndecidable;
  v.undecided = cause;
  v.reference = v.current = v.change = kNaN;
  v.detectable = kInf;
  v.not_judged = why;
  return v;
}

// The history of one combination as the timing figures see it: its ok,
// gated nights (memory and the trend use them all), the quiet ones among
// them that the timings are compared with, and why tonight's timings are
// not judged ("" when they are).
struct TimingHistory {
  std::vector<Matched> ok;
  std::vector<Matched> quiet;
  NotJudgedWhy not_judged;
  Undecided cause = Undecided::kNo;  // of not_judged
};

TimingHistory timing_history(const ResultEntry& c, const std::vector<Matched>& history,
                             const GateOptions& o) {
  TimingHistory h;
  for (const Matched& m : history) {
    if (m.entry->result.status == ResultStatus::kOk && gated(*m.entry, o)) h.ok.push_back(m);
  }
  if (c.result.status != ResultStatus::kOk || h.ok.empty()) return h;
  // Timings of a night whose host was busy with other work are not
  // compared; memory is, from every night.
  for (const Matched& m : h.ok) {
    if (busy_host(m.entry->result, o) < 0) h.quiet.push_back(m);
  }
  const double busy_tonight = busy_host(c.result, o);
  // The machine's own speed (the backend's speed probe, when it has one):
  // nights that ran at another speed than the history's usual one are
  // left out of the timing reference, and tonight's timings are not judged
  // when tonight's machine was not the usual one.
  const size_t stages = c.result.metrics->speed_probe_seconds_per_stage.size();
  const std::vector<double> usual = reference_probe(h.quiet, stages);
  const bool had_quiet = !h.quiet.empty();
  std::erase_if(h.quiet,
                [&](const Matched& m) { return drifted(probe_drift(m.entry->result, usual), o); });
  const ProbeDrift drift_tonight = probe_drift(c.result, usual);
  if (busy_tonight >= 0) {
    h.cause = Undecided::kHostBusy;
    h.not_judged = {
        .kind = NotJudged::kHostBusy, .limit = o.max_foreign_cpu, .share = busy_tonight};
  } else if (drifted(drift_tonight, o)) {
    h.cause = Undecided::kMachineSpeed;
    h.not_judged = {.kind = NotJudged::kMachineSpeed,
                    .limit = o.max_speed_drift,
                    .stage = drift_tonight.stage,
                    .drift = drift_tonight.change,
                    .probe = drift_tonight.seconds,
                    .usual = drift_tonight.reference};
  } else if (h.quiet.empty() && had_quiet) {
    h.cause = Undecided::kMachineSpeed;
    h.not_judged = {.kind = NotJudged::kEveryNightSpeed, .limit = o.max_speed_drift};
  } else if (h.quiet.empty()) {
    h.cause = Undecided::kHostBusy;
    h.not_judged = {.kind = NotJudged::kEveryNightBusy, .limit = o.max_foreign_cpu};
  }
  return h;
}

// One timing figure of one combination: its quiet reference nights' step
// samples, oldest first, then tonight's.
struct Series {
  FigureKind kind;
  std::vector<NightSamples> nights;
};

// The timing figures decided from samples: samples/s, bubble ratio, and
// each stage's compute time (seconds busy per step: a slowdown of one stage
// shows there in full, where the step time dilutes it by the pipeline's
// other stages; only nights that recorded it on as many stages take part).
std::vector<Series> timing_series(const std::vector<Matched>& quiet, const ResultEntry& c,
                                  const std::string& tonight) {
  std::vector<Series> out;
  out.push_back({{"samples/s", true, -1}, {}});
  out.push_back({{"bubble ratio", false, +1}, {}});
  for (const Matched& m : quiet) {
    out[0].nights.push_back({m.night->name, throughput_samples(m.entry->result), 0, m.night});
    out[1].nights.push_back({m.night->name, bubble_samples(m.entry->result), 0, m.night});
  }
  out[0].nights.push_back({tonight, throughput_samples(c.result), 0});
  out[1].nights.push_back({tonight, bubble_samples(c.result), 0});
  const std::vector<std::vector<double>>& cur = c.result.metrics->busy_seconds_per_stage;
  for (size_t s = 0; s < cur.size(); ++s) {
    Series stage{{"stage " + std::to_string(s) + " compute", true, +1, "stage compute", nullptr,
                  static_cast<int>(s)},
                 {}};
    for (const Matched& m : quiet) {
      const std::vector<std::vector<double>>& b = m.entry->result.metrics->busy_seconds_per_stage;
      if (b.size() == cur.size()) stage.nights.push_back({m.night->name, b[s], 0, m.night});
    }
    if (stage.nights.empty()) continue;
    stage.nights.push_back({tonight, cur[s], 0});
    out.push_back(std::move(stage));
  }
  // The device's own bubble (a device profiler's, per timed step): only
  // nights that recorded its samples take part.
  Series device{{"device bubble ratio", false, +1}, {}};
  for (const Matched& m : quiet) {
    std::vector<double> samples = device_bubble_samples(m.entry->result);
    if (!samples.empty()) device.nights.push_back({m.night->name, std::move(samples), 0, m.night});
  }
  std::vector<double> device_tonight = device_bubble_samples(c.result);
  if (!device.nights.empty() && !device_tonight.empty()) {
    device.nights.push_back({tonight, std::move(device_tonight), 0});
    out.push_back(std::move(device));
  }
  for (Series& f : out) {
    for (NightSamples& n : f.nights) n.median = median(n.values);
  }
  return out;
}

bool moved(const MetricVerdict& v) {
  return v.status == RegressionStatus::kRegressed || v.status == RegressionStatus::kImproved;
}

// What the nightly gate of an earlier night said of one figure of the
// combination being judged (JudgedNights), or null where that night is not
// judged again.
using Recall = std::function<const MetricVerdict*(const Night* night, const std::string& figure)>;

// One timing figure decided over its nights. A move dated to an earlier
// night was reported before tonight when the gate of its last reference
// night (the night before tonight in its series) gave the same verdict:
// tonight has seen it again. When that night's gate did not (the step only
// shows now that tonight is added, or that night's re-run refuted it),
// tonight is the first night it is reported.
MetricVerdict decide_timing(const Series& f, const GateOptions& o, const Recall& recall) {
  MetricVerdict v = decide_sampled(f.kind, f.nights, o);
  if (moved(v) && v.arrived != f.nights.back().night && recall) {
    const MetricVerdict* then = recall(f.nights[f.nights.size() - 2].source, v.name);
    v.reported_before = then != nullptr && then->status == v.status;
  }
  return v;
}

// Tonight's kernel families that moved beyond the threshold on a stage,
// against the median over `quiet` nights of the same stage count.
std::vector<KernelChange> kernel_changes(const ResultEntry& c, const std::vector<Matched>& quiet,
                                         const GateOptions& o) {
  std::vector<KernelChange> out;
  for (const auto& [family, now] : kernel_seconds(c.result)) {
    for (size_t s = 0; s < now.size(); ++s) {
      std::vector<double> before;
      for (const Matched& m : quiet) {
        const auto k = kernel_seconds(m.entry->result);
        const auto it = k.find(family);
        if (it != k.end() && it->second.size() == now.size() && std::isfinite(it->second[s]))
          before.push_back(it->second[s]);
      }
      if (before.empty() || !std::isfinite(now[s])) continue;
      const double ref = median(before);
      const double change = change_of(now[s], ref, true);
      if (std::isfinite(change) && std::fabs(change) > o.threshold)
        out.push_back({family, static_cast<int>(s), ref, now[s]});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const KernelChange& a, const KernelChange& b) {
    return std::fabs(a.current - a.reference) > std::fabs(b.current - b.reference);
  });
  return out;
}

// Every moved timing figure but a bubble names the kernel families that
// moved its way: grew for a regression, shrank for an improvement (a
// per-stage figure: on its stage).
void name_kernel_changes(RegressionRow& row, const std::vector<KernelChange>& changes) {
  for (MetricVerdict& v : row.metrics) {
    if (!v.timing || !moved(v) || !v.relative) continue;  // bubbles are points
    const bool grew = v.status == RegressionStatus::kRegressed;
    for (const KernelChange& k : changes) {
      if ((k.current > k.reference) == grew && (v.stage < 0 || v.stage == k.stage))
        v.kernels.push_back(k);
    }
  }
}

// Every moved figure of the row names the software and the fast paths that
// changed on the night its move arrived, against the combination's night
// before it.
void name_night_changes(RegressionRow& row, const ResultEntry& c, const std::vector<Matched>& ok,
                        const std::string& tonight) {
  std::vector<std::pair<std::string, const Result*>> nights;
  for (const Matched& m : ok) nights.emplace_back(m.night->name, &m.entry->result);
  nights.emplace_back(tonight, &c.result);
  for (MetricVerdict& v : row.metrics) {
    if (!moved(v)) continue;
    for (size_t i = 1; i < nights.size(); ++i) {
      if (nights[i].first != v.arrived) continue;
      const Result& before = *nights[i - 1].second;
      const Result& after = *nights[i].second;
      v.software = software_changes(before.environment, after.environment);
      v.fast_paths = fast_path_changes(before, after);
    }
  }
}

// Noise floors by machine, backend and figure family.
std::string floor_key(const std::string& machine, const std::string& backend,
                      const std::string& family) {
  return machine + " # " + backend + " # " + family;
}
using Floors = std::map<std::string, NoiseFloor>;

// Every figure of `c` against its history: row.metrics (and a status
// change in row.reasons). summarize() turns them into the row's verdict.
void decide_figures(RegressionRow& row, const ResultEntry& c, const std::vector<Matched>& history,
                    const std::string& tonight, const GateOptions& o, const Floors& floors,
                    const Recall& recall = {}) {
  const TimingHistory h = timing_history(c, history, o);
  const bool cur_ok = c.result.status == ResultStatus::kOk;
  const Result& last = history.back().entry->result;
  if (last.status == ResultStatus::kOk && !cur_ok) {
    row.reasons.push_back(std::string("status ok -> ") + result_status_name(c.result.status) +
                          (c.result.error.empty() ? "" : ": " + c.result.error));
  }
  if (!cur_ok || h.ok.empty()) return;
  std::vector<std::pair<std::string, double>> mem;
  std::vector<std::pair<std::string, double>> device_mem;  // nights that recorded it
  for (const Matched& m : h.ok) {
    row.trend.push_back(trend_point(m.night->name, m.entry->result));
    mem.emplace_back(m.night->name, peak_memory_bytes(m.entry->result));
    const double device = peak_device_memory_bytes(m.entry->result);
    if (device > 0) device_mem.emplace_back(m.night->name, device);
  }
  row.trend.push_back(trend_point(tonight, c.result));
  mem.emplace_back(tonight, peak_memory_bytes(c.result));
  const double device_tonight = peak_device_memory_bytes(c.result);
  if (h.not_judged.kind != NotJudged::kNo) {
    row.metrics.push_back(not_judged("samples/s", true, h.not_judged, h.cause));
    row.metrics.push_back(not_judged("bubble ratio", false, h.not_judged, h.cause));
    row.metrics.push_back(decide_memory("peak memory", mem, o));
  } else {
    std::vector<Series> series = timing_series(h.quiet, c, tonight);
    for (Series& f : series) {
      const auto it = floors.find(floor_key(c.machine, c.result.config.backend, f.kind.family));
      if (it != floors.end()) f.kind.noise = &it->second;
    }
    row.metrics.push_back(decide_timing(series[0], o, recall));
    row.metrics.push_back(decide_timing(series[1], o, recall));
    row.metrics.push_back(decide_memory("peak memory", mem, o));
    for (size_t i = 2; i < series.size(); ++i)
      row.metrics.push_back(decide_timing(series[i], o, recall));
  }
  // The device's peak is as deterministic as the tracked one (the pool's
  // high-water mark): decided the same way, over the nights that have it.
  if (device_tonight > 0 && !device_mem.empty()) {
    device_mem.emplace_back(tonight, device_tonight);
    row.metrics.push_back(decide_memory("peak device memory", device_mem, o));
  }
  name_night_changes(row, c, h.ok, tonight);
  if (h.not_judged.kind == NotJudged::kNo) name_kernel_changes(row, kernel_changes(c, h.quiet, o));
  row.samples_change = row.metrics[0].change;
  row.detectable = row.metrics[0].detectable;
  row.bubble_change = row.metrics[1].change;
  row.memory_change = row.metrics[2].change;
}

constexpr size_t kMinResiduals = 8;

struct Family {
  NoiseFloor floor;
  std::vector<double> residuals;
  std::vector<double> tonight;  // tonight's median against the last reference night's
  std::vector<double> nights;   // each series' reference nights
};

// One of tonight's judged figures: its move against its whole reference
// (log ratio when relative), to be weighed against its family's noise.
struct Move {
  std::string family;
  double change;
  size_t nights;
};

// Each family's sigma from its residuals (or, with too few reference
// nights of its own, from tonight's launch against the last night's).
void fit_families(std::map<std::string, Family>& families, std::map<std::string, size_t>& figures) {
  for (auto& [key, fam] : families) {
    NoiseFloor& f = fam.floor;
    f.residuals = fam.residuals.size();
    f.figures = std::max<size_t>(1, figures[floor_key(f.machine, f.backend, "")]);
    f.nights = static_cast<int>(std::lround(median(fam.nights)));
    if (f.residuals < kMinResiduals && fam.tonight.size() >= kMinResiduals) {
      // Too few reference nights of their own (one night against another):
      // tonight's launch against the last night's, over the sweep.
      const double centre = median(fam.tonight);
      for (double& x : fam.tonight) x -= centre;
      fam.residuals = std::move(fam.tonight);
      f.residuals = fam.residuals.size();
      f.from_tonight = true;
    }
    if (f.residuals >= kMinResiduals) f.sigma = 1.4826 * spread(fam.residuals).mad / std::sqrt(2.0);
  }
}

// The sweep's noise floors (see regression.hpp): per machine, backend and
// figure family, from consecutive reference nights of every combination
// tonight has. Tonight's own figures set how many share alpha, and how many
// of them lie beyond the noise (Benjamini-Hochberg), which sets z.
std::vector<NoiseFloor> noise_floors(const std::vector<ResultEntry>& current,
                                     const std::map<std::string, std::vector<Matched>>& by_key,
                                     const GateOptions& o) {
  std::map<std::string, Family> families;
  std::map<std::string, size_t> figures;           // machine # backend -> tonight's timing figures
  std::map<std::string, std::vector<Move>> moves;  // machine # backend -> tonight's moves
  for (const ResultEntry& c : current) {
    const auto it = by_key.find(c.machine + " # " + c.config_key);
    if (it == by_key.end() || !gated(c, o)) continue;
    const TimingHistory h = timing_history(c, it->second, o);
    if (h.quiet.empty()) continue;
    const std::string backend = floor_key(c.machine, c.result.config.backend, "");
    for (const Series& f : timing_series(h.quiet, c, "")) {
      const std::string family = floor_key(c.machine, c.result.config.backend, f.kind.family);
      Family& fam = families[family];
      fam.floor.machine = c.machine;
      fam.floor.backend = c.result.config.backend;
      fam.floor.figure = f.kind.family;
      fam.floor.relative = f.kind.relative;
      const size_t n = f.nights.size() - 1;  // the reference nights; tonight is last
      fam.nights.push_back(static_cast<double>(n));
      const auto move = [&f](double x, double prev) {
        if (!f.kind.relative) return x - prev;
        return x > 0 && prev > 0 ? std::log(x / prev) : kNaN;
      };
      const auto difference = [&](size_t i, std::vector<double>& to) {
        const double d = move(f.nights[i].median, f.nights[i - 1].median);
        if (std::isfinite(d)) to.push_back(d);
      };
      for (size_t i = 1; i < n; ++i) difference(i, fam.residuals);
      if (n >= 1) difference(n, fam.tonight);
      if (h.not_judged.kind == NotJudged::kNo && n >= 1) {
        ++figures[backend];
        const double m = move(f.nights[n].median, median(pooled(f.nights, 0, n)));
        if (std::isfinite(m)) moves[backend].push_back({family, m, n});
      }
    }
  }
  fit_families(families, figures);
  // Each of tonight's figures whose family has a noise model: how likely
  // launch noise alone moves it that far (one-sided in |move|, as the floor
  // is); z from Benjamini-Hochberg over the backend's figures
  // (docs/gate.md, "Noise floor").
  std::map<std::string, size_t> beyond;
  for (const auto& [backend, list] : moves) {
    std::vector<double> p;
    for (const Move& m : list) {
      const NoiseFloor& f = families[m.family].floor;
      if (f.sigma <= 0) continue;
      const double spread_of_move = f.sigma * std::sqrt(1 + 1.0 / static_cast<double>(m.nights));
      p.push_back(normal_upper_tail(std::fabs(m.change) / spread_of_move));
    }
    beyond[backend] = benjamini_hochberg(std::move(p), o.alpha, figures[backend]);
  }
  std::vector<NoiseFloor> out;
  for (auto& [key, fam] : families) {
    NoiseFloor f = fam.floor;
    if (f.sigma > 0) {
      f.beyond = beyond[floor_key(f.machine, f.backend, "")];
      f.z = normal_upper_quantile(o.alpha * static_cast<double>(std::max<size_t>(1, f.beyond)) /
                                  static_cast<double>(f.figures));
      f.floor = noise_floor_for(f, f.nights);
    }
    out.push_back(f);
  }
  return out;
}

// The row's outcome, reasons, notes and night from its figures.
void summarize(RegressionRow& row) {
  bool improved = false;
  bool undecidable = false;
  for (const MetricVerdict& v : row.metrics) {
    if (v.status == RegressionStatus::kRegressed) row.reasons.push_back(verdict_text(v));
    if (v.status == RegressionStatus::kImproved)
      row.notes.push_back("improvement: " + verdict_text(v));
    if (v.status == RegressionStatus::kUndecidable)
      row.notes.push_back("undecidable: " + verdict_text(v));
    improved = improved || v.status == RegressionStatus::kImproved;
    undecidable = undecidable || v.status == RegressionStatus::kUndecidable;
    // The row's night: that of its first regressed figure (samples/s first),
    // else of its first improved one.
    const bool first_regression =
        v.status == RegressionStatus::kRegressed && row.reasons.size() == 1;
    if (moved(v) && (row.arrived.empty() || first_regression)) row.arrived = v.arrived;
  }
  // A move the re-run refuted leaves the row in question whatever its other
  // figures say: it is listed apart (undecidable), never as an improvement.
  const bool refuted = std::any_of(
      row.metrics.begin(), row.metrics.end(),
      [](const MetricVerdict& v) { return v.confirmation == Confirmation::kNotReproduced; });
  if (!row.reasons.empty()) {
    row.status = RegressionStatus::kRegressed;
  } else if (refuted) {
    row.status = RegressionStatus::kUndecidable;
  } else if (improved) {
    row.status = RegressionStatus::kImproved;
  } else if (undecidable) {
    row.status = RegressionStatus::kUndecidable;
  }
  for (size_t i = 0; i < row.trend.size(); ++i) {
    if (!row.arrived.empty() && row.trend[i].night == row.arrived)
      row.arrived_index = static_cast<int>(i);
  }
}

RegressionRow blank_row(const ResultEntry& e) {
  RegressionRow row;
  row.label = e.label;
  row.work = e.work;
  row.machine = e.machine;
  row.config_key = e.config_key;
  row.samples_change = row.memory_change = row.bubble_change = row.detectable = kNaN;
  return row;
}

// A timing figure that regressed or improved tonight awaits a re-run, and
// so does a step dated to an earlier night that no night reported before
// tonight; one that the last night's gate already reported (its re-run, if
// it made one, did not refute it: decide_timing) has been seen again every
// night since.
void mark_awaiting(RegressionRow& row) {
  for (MetricVerdict& v : row.metrics) {
    if (v.timing && moved(v) && !v.reported_before) v.confirmation = Confirmation::kAwaiting;
  }
}

// How fit `row` is to be a control: 0 when tonight's gate judged every
// figure unchanged; 1 when none moved but some were too noisy to tell (on a
// noisy machine that may be every row, and a control is wanted most
// there); -1 when it cannot be one (a figure moved, a timing figure was not
// judged, its status changed).
int control_rank(const RegressionRow& row) {
  if (row.current == nullptr || !row.reasons.empty() || row.metrics.empty()) return -1;
  int rank = 0;
  for (const MetricVerdict& v : row.metrics) {
    if (moved(v) || (v.timing && !std::isfinite(v.change))) return -1;
    if (v.status == RegressionStatus::kUndecidable) rank = 1;
  }
  return rank;
}

// The median samples/s over a result's timed steps.
double samples_median(const Result& r) { return median(throughput_samples(r)); }

// A control for every row awaiting a re-run: a combination of the same
// sweep (folder, group and ranks, so that one `run --rerun` runs both) in
// which tonight's gate saw no move, one found unchanged before one too
// noisy to tell, then one not yet a control (so that each re-runs beside
// its own suspect), then the samples/s nearest the row's.
void choose_controls(std::vector<RegressionRow>& rows) {
  struct Candidate {
    const ResultEntry* entry;
    int rank;
    double speed;    // samples/s
    double history;  // samples/s over the nights its gate compared it with
  };
  std::vector<Candidate> candidates;
  for (const RegressionRow& r : rows) {
    const int rank = control_rank(r);
    if (rank < 0) continue;
    const auto sps = std::find_if(r.metrics.begin(), r.metrics.end(),
                                  [](const MetricVerdict& v) { return v.name == "samples/s"; });
    candidates.push_back({r.current, rank, samples_median(r.current->result),
                          sps != r.metrics.end() ? sps->reference : kNaN});
  }
  std::set<const ResultEntry*> taken;
  for (RegressionRow& row : rows) {
    if (row.current == nullptr || row.count(Confirmation::kAwaiting) == 0) continue;
    const ResultEntry& s = *row.current;
    const double speed = samples_median(s.result);
    const fs::path folder = fs::path(s.source).parent_path();
    const Candidate* best = nullptr;
    double best_cost = kInf;
    for (const Candidate& c : candidates) {
      const ResultEntry& e = *c.entry;
      if (e.group != s.group || fs::path(e.source).parent_path() != folder ||
          e.result.environment.ranks != s.result.environment.ranks)
        continue;
      double cost = speed > 0 && c.speed > 0 ? std::fabs(std::log(c.speed / speed)) : 1e3;
      if (taken.count(&e) != 0) cost += 1e6;
      if (c.rank > 0) cost += 1e9;
      if (cost < best_cost) {
        best_cost = cost;
        best = &c;
      }
    }
    if (best == nullptr) continue;
    row.control = best->entry;
    row.control_history = best->history;
    taken.insert(best->entry);
  }
}

// The re-run as the machine of usual nights would have measured it: its
// times scaled by the control's speed in the re-runs, against the sweep
// and against the control's history. A machine slower during the re-runs
// slows the control as much, and both say so. When the sweep itself ran
// slow and the re-runs at the usual speed, the sweep alone would scale a
// good re-run back to the sweep's slowness, and the history says 1; when
// the build moved the control a little (a change below the floor), the
// history alone would scale the move away, and the sweep says 1. So the
// factor is the one nearer 1 when both point the same way, else 1. `note`
// says by how much, or why the re-run is taken as measured.
ResultEntry scaled_by_control(const RegressionRow& row, const ResultEntry& rerun,
                              std::string& note) {
  if (row.control == nullptr) return rerun;
  const std::string who = "control " + row.control->label + ": ";
  if (row.control_rerun == nullptr || row.control_rerun->result.status != ResultStatus::kOk) {
    note = who + "no re-run of it to compare; the re-run is taken as measured";
    return rerun;
  }
  const double sweep = samples_median(row.control->result);
  const double again = samples_median(row.control_rerun->result);
  if (!(sweep > 0 && again > 0) || !rerun.result.metrics) return rerun;
  const double by_sweep = again / sweep;  // < 1: the re-runs' machine was slower
  const double history = row.control_history;
  const double by_history = history > 0 ? again / history : by_sweep;
  double speed = 1;
  if ((by_sweep - 1) * (by_history - 1) > 0)
    speed = std::fabs(std::log(by_sweep)) < std::fabs(std::log(by_history)) ? by_sweep : by_history;
  note = who + "samples/s " + format_number(sweep) + " in the sweep, " + format_number(again) +
         " in the re-runs (" + signed_percent(by_sweep - 1) + ")" +
         (history > 0 ? ", " + format_number(history) + " over its history (" +
                            signed_percent(by_history - 1) + ")"
                      : std::string()) +
         "; the re-run's times are scaled by " + format_fixed(speed, 3);
  ResultEntry out = rerun;
  ResultMetrics& m = *out.result.metrics;
  for (double& t : m.step_time_seconds.samples) t *= speed;
  m.samples_per_second /= speed;
  for (std::vector<double>& stage : m.busy_seconds_per_stage) {
    for (double& t : stage) t *= speed;
  }
  return out;
}

// The re-run of a row's combination, gated against the same history the
// same way: a figure awaiting confirmation keeps its verdict only when the
// re-run gives the same one; otherwise it is undecidable, with the re-run's
// figures as the reason. Returns the control's note (scaled_by_control).
std::string confirm(RegressionRow& row, const ResultEntry& measured,
                    const std::vector<Matched>& history, const std::string& tonight,
                    const GateOptions& o, const Floors& floors) {
  if (row.count(Confirmation::kAwaiting) == 0) return "";
  row.rerun = &measured;
  std::string note;
  const ResultEntry rerun = scaled_by_control(row, measured, note);
  RegressionRow again = blank_row(rerun);
  const bool ran = rerun.result.status == ResultStatus::kOk && gated(rerun, o);
  if (ran) decide_figures(again, rerun, history, tonight, o, floors);
  for (MetricVerdict& v : row.metrics) {
    if (v.confirmation != Confirmation::kAwaiting) continue;
    const auto same = std::find_if(again.metrics.begin(), again.metrics.end(),
                                   [&v](const MetricVerdict& r) { return r.name == v.name; });
    if (same != again.metrics.end() && same->status == v.status) {
      v.confirmation = Confirmation::kConfirmed;
      v.rerun_outcome = RerunOutcome::kSameVerdict;
      v.rerun = std::make_shared<const MetricVerdict>(*same);
      continue;
    }
    if (!gated(rerun, o)) {
      v.rerun_outcome = RerunOutcome::kOversubscribed;
    } else if (!ran) {
      v.rerun_outcome = RerunOutcome::kEnded;
      v.rerun_status = rerun.result.status;
      v.rerun_error = rerun.result.error;
    } else if (same == again.metrics.end()) {
      // A re-run whose timings were not judged (a busy host, a machine at
      // another speed) has only the not-judged figures: say why.
      const auto skipped =
          std::find_if(again.metrics.begin(), again.metrics.end(),
                       [](const MetricVerdict& r) { return std::isnan(r.change); });
      if (skipped != again.metrics.end() && skipped->timing) {
        v.rerun_outcome = RerunOutcome::kNotJudged;
        v.rerun = std::make_shared<const MetricVerdict>(*skipped);
      } else {
        v.rerun_outcome = RerunOutcome::kNoFigure;
      }
    } else {
      v.rerun_outcome = RerunOutcome::kOtherVerdict;
      v.rerun = std::make_shared<const MetricVerdict>(*same);
    }
    v.confirmation = Confirmation::kNotReproduced;
    v.status = RegressionStatus::kUndecidable;
    v.undecided = Undecided::kNotReproduced;
  }
  return note;
}

// Figures still awaiting a re-run when re-runs were given say so.
void note_unconfirmed(RegressionRow& row) {
  for (MetricVerdict& v : row.metrics) {
    if (v.confirmation == Confirmation::kAwaiting) v.reruns_given = true;
  }
}

// Each gated row against its re-run (--confirm) and its control's, then
// summarised, with the notes of planted nights.
void confirm_rows(RegressionSummary& out,
                  const std::vector<const std::vector<Matched>*>& history_of,
                  const std::map<std::string, const ResultEntry*>& rerun_of,
                  const std::string& tonight, const GateOptions& options, const Floors& floors) {
  const auto rerun_for = [&rerun_of](const ResultEntry* e) -> const ResultEntry* {
    if (e == nullptr) return nullptr;
    const auto again = rerun_of.find(e->group + " # " + e->config_key);
    return again == rerun_of.end() ? nullptr : again->second;
  };
  for (size_t i = 0; i < history_of.size(); ++i) {
    if (history_of[i] == nullptr) continue;
    RegressionRow& row = out.rows[i];
    row.control_rerun = rerun_for(row.control);
    std::string control_note;
    if (const ResultEntry* again = rerun_for(row.current))
      control_note = confirm(row, *again, *history_of[i], tonight, options, floors);
    if (out.confirming) note_unconfirmed(row);
    summarize(row);
    if (!control_note.empty()) row.notes.push_back(control_note);
    for (const Matched& m : *history_of[i]) {
      const std::string& p = m.entry->result.config.plant;
      if (!p.empty()) row.notes.push_back("night " + m.night->name + " was planted (" + p + ")");
    }
  }
}

// The last night's combinations tonight did not run.
void add_missing_rows(RegressionSummary& out, const std::vector<Night>& history, size_t end,
                      const std::map<std::string, bool>& seen,
                      const std::set<std::string>& seen_scale_free) {
  if (end > 0) {
    for (const ResultEntry& b : history[end - 1].results.results) {
      if (seen.count(match_key(b)) != 0 || seen_scale_free.count(scale_free_key(b)) != 0) continue;
      RegressionRow row = blank_row(b);
      row.status = RegressionStatus::kMissing;
      row.baseline = &b;
      out.rows.push_back(std::move(row));
    }
  }
}

}  // namespace

MetricVerdict decide_figure(const std::string& name, int worse,
                            const std::vector<NightFigure>& nights, const GateOptions& options) {
  PPB_CHECK(nights.size() >= 2, "decide_figure: needs tonight and an earlier night");
  std::vector<NightSamples> series;
  for (const NightFigure& n : nights) series.push_back({n.night, n.values, median(n.values)});
  return decide_sampled({name, true, worse}, series, options);
}

namespace {

class JudgedNights;

RegressionSummary gate(const std::vector<ResultEntry>& current, const std::string& tonight,
                       const std::vector<Night>& history, size_t end, JudgedNights& judged,
                       const GateOptions& options, const std::vector<ResultEntry>* reruns);

// The nights of a gate's history gated again as the nightly job gated
// them, each at most once and only when asked for: a night's sweep (its
// first measurements) against the nights before it, the re-runs in its
// folder (which later nights read in place of the first measurements)
// confirming. Only nights from `oldest` on are judged again: each night's
// own gate asks for the nights before it, and the chain ends there.
class JudgedNights {
 public:
  JudgedNights(const std::vector<Night>& history, size_t oldest, const GateOptions& options)
      : history_(history), oldest_(oldest), options_(options) {}

  // What night `k`'s gate said of figure `figure` of the combination
  // `key` (match_key); null when night k is not judged again, or its gate
  // had no such figure for it.
  const MetricVerdict* verdict(size_t k, const std::string& key, const std::string& figure) {
    if (k < oldest_ || k >= history_.size()) return nullptr;
    auto night = nights_.find(k);
    if (night == nights_.end()) night = nights_.emplace(k, judge(k)).first;
    const auto row = night->second.find(key);
    if (row == night->second.end()) return nullptr;
    const auto same = std::find_if(row->second.begin(), row->second.end(),
                                   [&figure](const MetricVerdict& v) { return v.name == figure; });
    return same == row->second.end() ? nullptr : &*same;
  }

 private:
  using Verdicts = std::map<std::string, std::vector<MetricVerdict>>;  // by match_key

  // Whether `e`, a re-run kept in a night's folder, is the nightly gate's:
  // ci/suite writes those to <sweep>/rerun/, a re-gate's to
  // <sweep>/rerun-<UTC time>/.
  static bool made_by_nightly_gate(const ResultEntry& e) {
    return fs::path(e.source).parent_path().filename() == "rerun";
  }

  Verdicts judge(size_t k) {
    const LoadedResults& r = history_[k].results;
    const auto key = [](const ResultEntry& e) { return e.group + " # " + e.config_key; };
    // Every measurement of a combination measured more than once, oldest
    // first: the sweep's, then its re-runs: the nightly gate's, and any a
    // re-gate made (ci/suite --regate), which the nightly verdict did not see.
    std::map<std::string, std::vector<const ResultEntry*>> versions;
    for (const ResultEntry& e : r.replaced) versions[key(e)].push_back(&e);
    for (const ResultEntry& e : r.results) {
      const auto it = versions.find(key(e));
      if (it != versions.end()) it->second.push_back(&e);
    }
    for (auto& entry : versions) {
      std::stable_sort(entry.second.begin(), entry.second.end(),
                       [](const ResultEntry* a, const ResultEntry* b) {
                         return a->result.environment.date < b->result.environment.date;
                       });
    }
    std::vector<ResultEntry> first;
    std::vector<ResultEntry> reruns;
    for (const ResultEntry& e : r.results) {
      const auto it = versions.find(key(e));
      if (it == versions.end()) {
        first.push_back(e);
        continue;
      }
      first.push_back(*it->second[0]);
      // The nightly gate's re-run, the oldest in a rerun/ folder; one that
      // only a re-gate made is not what the night reported.
      const auto nightly =
          std::find_if(it->second.begin() + 1, it->second.end(),
                       [](const ResultEntry* again) { return made_by_nightly_gate(*again); });
      if (nightly != it->second.end()) reruns.push_back(**nightly);
    }
    const RegressionSummary then = gate(first, history_[k].name, history_, k, *this, options_,
                                        reruns.empty() ? nullptr : &reruns);
    Verdicts out;
    for (const RegressionRow& row : then.rows) {
      if (row.current != nullptr) out[match_key(*row.current)] = row.metrics;
    }
    return out;
  }

  const std::vector<Night>& history_;
  size_t oldest_;
  GateOptions options_;
  std::map<size_t, Verdicts> nights_;
};

// The gate of `current` against history[0, end): see run_gate.
RegressionSummary gate(const std::vector<ResultEntry>& current, const std::string& tonight,
                       const std::vector<Night>& history, size_t end, JudgedNights& judged,
                       const GateOptions& options, const std::vector<ResultEntry>* reruns) {
  RegressionSummary out;
  out.options = options;
  out.threshold = options.threshold;
  out.tonight = tonight;
  const size_t first = end > static_cast<size_t>(options.window) ? end - options.window : 0;
  std::map<std::string, std::vector<Matched>> by_key;
  std::map<std::string, const ResultEntry*> by_scale_free;  // the latest night's
  for (size_t i = first; i < end; ++i) {
    out.nights.push_back(history[i].name);
    for (const ResultEntry& e : history[i].results.results) {
      by_key[match_key(e)].push_back({&history[i], &e});
      by_scale_free[scale_free_key(e)] = &e;
    }
  }
  Floors floors;
  if (options.noise_floor) {
    out.floors = noise_floors(current, by_key, options);
    for (const NoiseFloor& f : out.floors) {
      if (f.floor > 0) floors[floor_key(f.machine, f.backend, f.figure)] = f;
    }
  }
  // Re-runs match by machine, build, backend (the group) and configuration.
  out.confirming = reruns != nullptr;
  std::map<std::string, const ResultEntry*> rerun_of;
  if (reruns != nullptr) {
    for (const ResultEntry& e : *reruns) rerun_of[e.group + " # " + e.config_key] = &e;
  }
  std::map<std::string, bool> seen;
  std::set<std::string> seen_scale_free;
  std::vector<const std::vector<Matched>*> history_of;  // per row; null: not gated
  for (const ResultEntry& c : current) {
    RegressionRow row = blank_row(c);
    row.current = &c;
    row.planted = c.result.config.plant;
    if (!row.planted.empty()) row.label += " [planted " + row.planted + "]";
    const auto it = by_key.find(match_key(c));
    seen[match_key(c)] = true;
    seen_scale_free.insert(scale_free_key(c));
    history_of.push_back(nullptr);
    const auto rescaled = by_scale_free.find(scale_free_key(c));
    if (it == by_key.end() && rescaled != by_scale_free.end()) {
      row.baseline = rescaled->second;
      row.status = RegressionStatus::kExcluded;
      row.notes.push_back(rescaled_note(c, *rescaled->second));
    } else if (it == by_key.end()) {
      row.status = RegressionStatus::kNew;
    } else if (!gated(c, options)) {
      row.baseline = it->second.back().entry;
      row.status = RegressionStatus::kExcluded;
      row.notes.push_back("excluded: " + std::to_string(c.result.environment.ranks) + " ranks on " +
                          std::to_string(c.result.environment.cores) +
                          " cores took turns (oversubscribed); kept out of the gate");
    } else {
      row.baseline = it->second.back().entry;
      const std::string key = match_key(c);
      const Recall recall = [&](const Night* night,
                                const std::string& figure) -> const MetricVerdict* {
        if (night == nullptr) return nullptr;
        return judged.verdict(static_cast<size_t>(night - history.data()), key, figure);
      };
      decide_figures(row, c, it->second, tonight, options, floors, recall);
      mark_awaiting(row);
      history_of.back() = &it->second;
    }
    out.rows.push_back(std::move(row));
  }
  choose_controls(out.rows);
  confirm_rows(out, history_of, rerun_of, tonight, options, floors);
  add_missing_rows(out, history, end, seen, seen_scale_free);
  return out;
}

}  // namespace

RegressionSummary run_gate(const std::vector<ResultEntry>& current, const std::string& tonight,
                           const std::vector<Night>& history, const GateOptions& options,
                           const std::vector<ResultEntry>* reruns) {
  PPB_CHECK(options.threshold >= 0, "threshold must be >= 0");
  PPB_CHECK(options.alpha > 0 && options.alpha < 1, "alpha must be in (0, 1)");
  PPB_CHECK(options.window >= 1, "window must be >= 1");
  // The nights judged again are those of tonight's window.
  const size_t window = static_cast<size_t>(options.window);
  JudgedNights judged(history, history.size() > window ? history.size() - window : 0, options);
  return gate(current, tonight, history, history.size(), judged, options, reruns);
}

}  // namespace ppb::reports
