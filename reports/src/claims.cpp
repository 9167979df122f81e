#include "ppb/reports/claims.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "ppb/reports/format.hpp"

namespace ppb::reports {

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kConsistent:
      return "consistent";
    case Verdict::kInconsistent:
      return "inconsistent";
    case Verdict::kNotMeasurable:
      return "not measurable here";
  }
  return "?";
}

namespace {

using Entries = std::vector<const ResultEntry*>;

double median(std::vector<double> xs) {
  if (xs.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(xs.begin(), xs.end());
  const size_t n = xs.size();
  return n % 2 == 1 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

template <class T>
double sum(const std::vector<T>& xs) {
  double s = 0;
  for (const T& x : xs) s += static_cast<double>(x);
  return s;
}

bool ok(const ResultEntry& e) {
  return e.result.status == ResultStatus::kOk && e.result.metrics.has_value();
}

int inflight_n(const ResultConfig& c) { return c.inflight > 0 ? c.inflight : c.stages; }

// Key of the setup an entry belongs to when `vary` is the field compared.
std::string key_without(const ResultEntry& e, std::string_view vary) {
  ResultConfig c = e.result.config;
  if (vary == "schedule") {
    c.schedule.clear();
    c.inflight = 0;
    c.chunks = 1;
    c.sync_warmup = 0;
    c.memory_guard = 0;
    c.batches = 1;
  } else if (vary == "partition") {
    c.partition.clear();
  } else if (vary == "microbatches") {
    c.microbatches = 1;
  }
  return e.group + " # " + config_key(c);
}

// The entries of the first alternative that any of `entries` runs.
Entries first_present(const Entries& entries, const std::vector<std::string>& alternatives,
                      std::string* which) {
  for (const std::string& name : alternatives) {
    Entries out;
    for (const ResultEntry* e : entries) {
      if (e->result.config.schedule == name) out.push_back(e);
    }
    if (!out.empty()) {
      if (which != nullptr) *which = name;
      return out;
    }
  }
  return {};
}

std::optional<double> median_metric(const Entries& entries, std::string_view metric) {
  std::vector<double> xs;
  for (const ResultEntry* e : entries) {
    if (auto v = metric_value(*e, metric)) xs.push_back(*v);
  }
  if (xs.empty()) return std::nullopt;
  return median(xs);
}

std::string names(const std::vector<std::string>& xs) {
  std::string out;
  for (const auto& x : xs) out += (out.empty() ? "" : "/") + x;
  return out;
}

std::string metric_text(std::string_view metric, double v) {
  if (metric == "peak_memory" || metric == "activations_sum" || metric == "activations_max")
    return format_bytes(v);
  return format_number(v);
}

std::string no_runs(const std::vector<std::string>& schedules) {
  return "no successful " + names(schedules) + " run among the results";
}

// ----------------------------------------------------------------- checks --

CheckOutcome check_ratio(const ClaimCheck& c, const Entries& all) {
  CheckOutcome o;
  o.documented = format_number(c.documented) + " (" + c.metric + " " + names(c.numerator) + " / " +
                 names(c.denominator) + ", +-" + format_trimmed(c.tolerance * 100) + "%)";
  std::map<std::string, Entries> setups;
  for (const ResultEntry* e : all) setups[key_without(*e, "schedule")].push_back(e);
  std::vector<double> ratios;
  std::string example;
  for (const auto& [key, entries] : setups) {
    std::string num_name, den_name;
    const auto num = median_metric(first_present(entries, c.numerator, &num_name), c.metric);
    const auto den = median_metric(first_present(entries, c.denominator, &den_name), c.metric);
    if (!num || !den || *den == 0) continue;
    ratios.push_back(*num / *den);
    if (example.empty()) {
      example = num_name + " " + metric_text(c.metric, *num) + " / " + den_name + " " +
                metric_text(c.metric, *den) + " (" + entries.front()->result.config.partition +
                " P=" + std::to_string(entries.front()->result.config.stages) +
                " M=" + std::to_string(entries.front()->result.config.microbatches) + ")";
    }
  }
  o.cases = static_cast<int>(ratios.size());
  if (ratios.empty()) {
    o.why = "no setup ran both " + names(c.numerator) + " and " + names(c.denominator);
    return o;
  }
  o.value = median(ratios);
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  o.measured = format_number(o.value);
  if (ratios.size() > 1) {
    o.measured += " (median of " + std::to_string(ratios.size()) + " setups, " +
                  format_number(*lo) + "-" + format_number(*hi) + ")";
  }
  o.measured += "; e.g. " + example;
  const double rel = std::fabs(o.value / c.documented - 1.0);
  o.verdict = rel <= c.tolerance ? Verdict::kConsistent : Verdict::kInconsistent;
  if (o.verdict == Verdict::kInconsistent) {
    o.why = "off by " + format_number(rel * 100) + "% (tolerance " +
            format_trimmed(c.tolerance * 100) + "%)";
  }
  return o;
}

// A documented figure in its own unit ("14.6 GB") against a metric in bytes.
double unit_scale(const std::string& unit) {
  if (unit == "GB") return 1e9;
  if (unit == "MB") return 1e6;
  if (unit == "GiB") return 1024.0 * 1024 * 1024;
  if (unit == "MiB") return 1024.0 * 1024;
  return 1;
}

// The rank counts `entries` ran on: "8 ranks", "2 or 4 ranks", "2, 4 or 8 ranks".
std::string ranks_text(const Entries& entries) {
  std::set<int> counts;
  for (const ResultEntry* e : entries) {
    counts.insert(e->result.config.stages * e->result.config.data_parallel);
  }
  return or_list(counts) + (counts.size() == 1 && *counts.begin() == 1 ? " rank" : " ranks");
}

CheckOutcome check_absolute(const ClaimCheck& c, const Entries& all, bool setup_matches) {
  CheckOutcome o;
  const double scale = unit_scale(c.unit);
  o.documented = scale != 1 ? format_number(c.documented) + " " + c.unit
                            : metric_text(c.metric, c.documented) +
                                  (c.unit.empty() || c.unit == "bytes" ? "" : " " + c.unit);
  std::string which;
  const Entries entries = first_present(all, c.schedules, &which);
  std::vector<double> xs;
  Entries measured;  // the runs the median is of
  for (const ResultEntry* e : entries) {
    if (auto v = metric_value(*e, c.metric)) {
      xs.push_back(*v);
      measured.push_back(e);
    }
  }
  o.cases = static_cast<int>(xs.size());
  if (!xs.empty()) {
    o.value = median(xs);
    o.measured = metric_text(c.metric, o.value) + " (" + which + ", median of " +
                 std::to_string(xs.size()) + " runs on " + ranks_text(measured) + ")";
  }
  if (!setup_matches) {
    o.why =
        "an absolute figure of the documents' own (unknown) hardware and model; checked only with "
        "--reference-setup";
    return o;
  }
  if (xs.empty()) {
    o.why = no_runs(c.schedules);
    return o;
  }
  const double rel = std::fabs(o.value / (c.documented * scale) - 1.0);
  o.verdict = rel <= c.tolerance ? Verdict::kConsistent : Verdict::kInconsistent;
  if (o.verdict == Verdict::kInconsistent) {
    o.why = "off by " + format_number(rel * 100) + "% (tolerance " +
            format_trimmed(c.tolerance * 100) + "%)";
  }
  return o;
}

// An order claim's chain: "gpipe > 1f1b".
std::string order_chain_text(const ClaimCheck& c) {
  const char* rel = c.direction == "increasing" ? " < " : " > ";
  std::string chain;
  for (const auto& g : c.groups) chain += (chain.empty() ? "" : rel) + names(g);
  return chain;
}

// What an order claim documents: "bubble_ratio: gpipe > 1f1b".
std::string order_documented(const ClaimCheck& c) {
  if (c.vary == "microbatches")
    return c.metric + (c.direction == "increasing" ? " rises" : " falls") + " as M grows";
  return c.metric + ": " + order_chain_text(c);
}

// The margin an order claim is judged by, as the measured text gives it:
// "" for none, " (a step down of up to 2% counts as holding)", " (each step
// by more than 5%)".
std::string order_margin(const ClaimCheck& c) {
  const bool increasing = c.direction == "increasing";
  if (c.tolerance < 0) {
    return std::string(" (a step ") + (increasing ? "down" : "up") + " of up to " +
           format_trimmed(-c.tolerance * 100) + "% counts as holding)";
  }
  if (c.tolerance > 0)
    return " (each step by more than " + format_trimmed(c.tolerance * 100) + "%)";
  return "";
}

// The entries of each setup an order claim compares within.
std::map<std::string, Entries> order_setups(const ClaimCheck& c, const Entries& all) {
  std::map<std::string, Entries> setups;
  for (const ResultEntry* e : all) {
    if (c.vary == "microbatches" && !c.schedules.empty() &&
        std::find(c.schedules.begin(), c.schedules.end(), e->result.config.schedule) ==
            c.schedules.end()) {
      continue;
    }
    setups[key_without(*e, c.vary)].push_back(e);
  }
  return setups;
}

/// (label, value) in the claimed order.
using OrderChain = std::vector<std::pair<std::string, double>>;

// One setup's chain, or nullopt when the setup did not run all of it.
std::optional<OrderChain> order_chain(const ClaimCheck& c, const Entries& entries) {
  OrderChain chain;
  if (c.vary == "microbatches") {
    std::map<int, Entries> by_m;
    for (const ResultEntry* e : entries) by_m[e->result.config.microbatches].push_back(e);
    for (const auto& [m, es] : by_m) {
      if (auto v = median_metric(es, c.metric)) chain.emplace_back("M=" + std::to_string(m), *v);
    }
    if (chain.size() < 2) return std::nullopt;
    return chain;
  }
  for (const auto& g : c.groups) {
    Entries es;
    std::string which;
    for (const std::string& name : g) {
      for (const ResultEntry* e : entries) {
        const std::string& field =
            c.vary == "schedule" ? e->result.config.schedule : e->result.config.partition;
        if (field == name) es.push_back(e);
      }
      if (!es.empty()) {
        which = name;
        break;
      }
    }
    const auto v = median_metric(es, c.metric);
    if (!v) return std::nullopt;
    chain.emplace_back(which, *v);
  }
  return chain;
}

bool order_holds(const ClaimCheck& c, const OrderChain& chain) {
  const bool increasing = c.direction == "increasing";
  bool good = true;
  for (size_t i = 1; i < chain.size(); ++i) {
    const double prev = chain[i - 1].second;
    const double next = chain[i].second;
    const bool step =
        increasing ? next > prev * (1.0 + c.tolerance) : next < prev * (1.0 - c.tolerance);
    if (!step) good = false;
  }
  return good;
}

// The measured relation between neighbours, not the claimed one, so a
// counter-example reads true ("sync-1f1b 68.6 > async-1f1b 58.1"), and the setup.
std::string order_text(const ClaimCheck& c, const OrderChain& chain, const Entries& entries) {
  std::string text;
  for (size_t i = 0; i < chain.size(); ++i) {
    if (i > 0) {
      const double prev = chain[i - 1].second;
      const double next = chain[i].second;
      text += next > prev ? " < " : (next < prev ? " > " : " = ");
    }
    text += chain[i].first + " " + metric_text(c.metric, chain[i].second);
  }
  const ResultConfig& cfg = entries.front()->result.config;
  std::string where = cfg.partition + " P=" + std::to_string(cfg.stages);
  if (c.vary != "microbatches") where += " M=" + std::to_string(cfg.microbatches);
  if (c.vary == "partition" || c.vary == "microbatches") where = cfg.schedule + " " + where;
  if (c.vary == "partition")
    where = cfg.schedule + " P=" + std::to_string(cfg.stages) +
            " M=" + std::to_string(cfg.microbatches);
  return text + " (" + where + ")";
}

CheckOutcome check_order(const ClaimCheck& c, const Entries& all) {
  CheckOutcome o;
  o.documented = order_documented(c);
  int holds = 0;
  int total = 0;
  std::string example;
  std::string counter;
  for (const auto& [key, entries] : order_setups(c, all)) {
    const std::optional<OrderChain> chain = order_chain(c, entries);
    if (!chain) continue;
    ++total;
    const std::string text = order_text(c, *chain, entries);
    if (order_holds(c, *chain)) {
      ++holds;
      if (example.empty()) example = text;
    } else if (counter.empty()) {
      counter = text;
    }
  }
  o.cases = total;
  if (total == 0) {
    o.why = c.vary == "microbatches" ? "no setup ran two micro-batch counts"
                                     : "no setup ran all of " + order_chain_text(c);
    return o;
  }
  o.value = static_cast<double>(holds) / total;
  o.measured = "holds in " + std::to_string(holds) + " of " + std::to_string(total) + " setups" +
               order_margin(c);
  if (!counter.empty()) {
    o.measured += "; not in: " + counter;
  } else {
    o.measured += "; e.g. " + example;
  }
  o.verdict = holds == total ? Verdict::kConsistent : Verdict::kInconsistent;
  if (o.verdict == Verdict::kInconsistent)
    o.why = "the order does not hold in " + std::to_string(total - holds) + " setups";
  return o;
}

}  // namespace

std::optional<double> inflight_expected(const std::string& expr, const ResultConfig& c, int s) {
  const int p = c.stages;
  const int m = c.microbatches;
  const int n = inflight_n(c);
  if (expr == "N") return n;
  if (expr == "M") return m;
  if (expr == "P") return p;
  if (expr == "min(P-s,M)") return std::min(p - s, m);
  if (expr == "min(N,M)") return std::min(n, m);
  char* end = nullptr;
  const long v = std::strtol(expr.c_str(), &end, 10);
  if (end != nullptr && *end == '\0' && !expr.empty() && expr[0] != '-' && expr[0] != '+' &&
      v <= kMaxInflightValue)
    return static_cast<double>(v);
  return std::nullopt;
}

namespace {

CheckOutcome check_inflight(const ClaimCheck& c, const Entries& all) {
  CheckOutcome o;
  const char* rel = c.relation == "eq" ? " = " : (c.relation == "ge" ? " >= " : " <= ");
  o.documented =
      "in flight" +
      std::string(c.stage < 0 ? " on every stage" : " on stage " + std::to_string(c.stage)) + rel +
      c.value + " (" + names(c.schedules) + ")";
  std::string which;
  const Entries entries = first_present(all, c.schedules, &which);
  int good = 0;
  int total = 0;
  bool any_measured = false;
  bool any_schedule_count = false;
  std::string example;
  std::string counter;
  for (const ResultEntry* e : entries) {
    const ResultConfig& cfg = e->result.config;
    if (!ok(*e) || cfg.stages < 2 || cfg.microbatches < 2) continue;
    bool measured = false;
    const std::vector<double> inflight = inflight_per_stage(*e, &measured);
    if (inflight.empty()) continue;
    (measured ? any_measured : any_schedule_count) = true;
    bool holds = true;
    std::string text;
    const int first = c.stage < 0 ? 0 : c.stage;
    const int last = c.stage < 0 ? cfg.stages - 1 : c.stage;
    if (last >= static_cast<int>(inflight.size())) continue;
    for (int s = first; s <= last; ++s) {
      const auto want = inflight_expected(c.value, cfg, s);
      if (!want) continue;
      const double got = inflight[static_cast<size_t>(s)];
      const bool h = c.relation == "eq"
                         ? std::fabs(got - *want) < 0.05
                         : (c.relation == "ge" ? got >= *want - 0.05 : got <= *want + 0.05);
      holds = holds && h;
      text += (text.empty() ? "" : " ") + (std::fabs(got - std::round(got)) < 1e-9
                                               ? std::to_string(std::lround(got))
                                               : format_fixed(got, 2));
    }
    ++total;
    const std::string line = e->label + ": [" + text + "]";
    if (holds) {
      ++good;
      if (example.empty()) example = line;
    } else if (counter.empty()) {
      counter = line;
    }
  }
  o.cases = total;
  if (total == 0) {
    o.why =
        entries.empty()
            ? no_runs(c.schedules)
            : "no " + which + " run with P >= 2, M >= 2 and activation figures in its theory block";
    return o;
  }
  o.value = static_cast<double>(good) / total;
  o.measured = std::to_string(good) + " of " + std::to_string(total) + " runs; " +
               (counter.empty() ? example : "not: " + counter);
  o.measured += any_measured
                    ? (any_schedule_count ? " (bytes / per-mb bytes, some from the schedule)"
                                          : " (activation bytes / one micro-batch's bytes)")
                    : " (the schedule's count: no per-micro-batch bytes in the results)";
  o.verdict = good == total ? Verdict::kConsistent : Verdict::kInconsistent;
  return o;
}

CheckOutcome check_activation_formula(const ClaimCheck& c, const Entries& all) {
  CheckOutcome o;
  const std::string& f = c.formula;
  o.documented = f == "doc_sync"    ? "sum of activations = M x P"
                 : f == "doc_async" ? "sum of activations = M x (P+N-1)"
                 : f == "gpipe"     ? "per stage: M x a_s"
                 : f == "1f1b"      ? "per stage: min(P-s, M) x a_s"
                                    : "per stage: a_s";
  o.documented += " (+-" + format_trimmed(c.tolerance * 100) + "%)";
  std::string which;
  const Entries entries = first_present(all, c.schedules, &which);
  std::vector<double> ratios;
  std::string example;
  std::string counter;
  int good = 0;
  for (const ResultEntry* e : entries) {
    if (!ok(*e) || !e->result.metrics->theory) continue;
    const std::vector<int64_t>& a = e->result.metrics->theory->activation_bytes_per_microbatch;
    const std::vector<int64_t>& got = e->result.metrics->peak_memory_bytes.activations_per_stage;
    const ResultConfig& cfg = e->result.config;
    if (a.empty() || got.size() != a.size() || sum(a) <= 0) continue;
    const double p = cfg.stages;
    double measured = 0;
    double expected = 0;
    double worst = 1;  // ratio measured/expected farthest from 1
    if (f == "doc_sync" || f == "doc_async") {
      const double mean_a = sum(a) / p;
      expected = f == "doc_sync" ? mean_a * p : mean_a * (p + inflight_n(cfg) - 1);
      measured = sum(got);
      worst = measured / expected;
    } else {
      for (size_t s = 0; s < a.size(); ++s) {
        const double k = f == "gpipe" ? cfg.microbatches
                         : f == "1f1b"
                             ? std::min(cfg.stages - static_cast<int>(s), cfg.microbatches)
                             : 1;
        const double want = k * static_cast<double>(a[s]);
        if (want <= 0) continue;
        const double r = static_cast<double>(got[s]) / want;
        if (std::fabs(r - 1) >= std::fabs(worst - 1)) worst = r;
        measured += static_cast<double>(got[s]);
        expected += want;
      }
    }
    ratios.push_back(worst);
    const bool holds = std::fabs(worst - 1) <= c.tolerance;
    const std::string line =
        e->label + ": measured " + format_bytes(measured) + ", formula " + format_bytes(expected);
    if (holds) {
      ++good;
      if (example.empty()) example = line;
    } else if (counter.empty()) {
      counter = line;
    }
  }
  o.cases = static_cast<int>(ratios.size());
  if (ratios.empty()) {
    o.why = entries.empty()
                ? no_runs(c.schedules)
                : "the " + which +
                      " results carry no per-micro-batch activation bytes (metrics.theory)";
    return o;
  }
  o.value = median(ratios);
  o.measured = "measured/formula " + format_fixed(o.value, 2) + "; " + std::to_string(good) +
               " of " + std::to_string(ratios.size()) + " runs within; " +
               (counter.empty() ? example : "not: " + counter);
  o.verdict =
      good == static_cast<int>(ratios.size()) ? Verdict::kConsistent : Verdict::kInconsistent;
  return o;
}

CheckOutcome check_bubble_formula(const ClaimCheck& c, const Entries& all) {
  CheckOutcome o;
  o.documented = c.metric + " = " + c.formula + " (+-" + format_trimmed(c.tolerance) + ")";
  std::string which;
  const Entries entries = first_present(all, c.schedules, &which);
  std::vector<double> diffs;
  int good = 0;
  std::string example;
  std::string counter;
  for (const ResultEntry* e : entries) {
    const auto v = metric_value(*e, c.metric);
    if (!v) continue;
    const double p = e->result.config.stages;
    const double m = e->result.config.microbatches;
    const double want = c.formula == "(P-1)/M"
                            ? (p - 1) / m
                            : (c.formula == "(P-1)/P" ? (p - 1) / p : (p - 1) / (m + p - 1));
    const double d = *v - want;
    diffs.push_back(d);
    const std::string line = e->label + ": " + format_fixed(*v, 3) + " vs " + format_fixed(want, 3);
    if (std::fabs(d) <= c.tolerance) {
      ++good;
      if (example.empty()) example = line;
    } else if (counter.empty()) {
      counter = line;
    }
  }
  o.cases = static_cast<int>(diffs.size());
  if (diffs.empty()) {
    o.why = no_runs(c.schedules);
    return o;
  }
  o.value = median(diffs);
  o.measured = std::to_string(good) + " of " + std::to_string(diffs.size()) + " runs within; " +
               (counter.empty() ? example : "not: " + counter);
  o.verdict =
      good == static_cast<int>(diffs.size()) ? Verdict::kConsistent : Verdict::kInconsistent;
  return o;
}

CheckOutcome check_guard(const ClaimCheck& c, const Entries& all) {
  CheckOutcome o;
  o.documented = names(c.schedules) + " keeps peak memory within the budget (guard at 85%); " +
                 names(c.against) + " exceeds guard x budget";
  int fits = 0;
  int total = 0;
  int compared = 0;
  std::string text;
  for (const ResultEntry* e : all) {
    const ResultConfig& cfg = e->result.config;
    if (std::find(c.schedules.begin(), c.schedules.end(), cfg.schedule) == c.schedules.end())
      continue;
    if (cfg.memory_budget <= 0) continue;
    const double budget = static_cast<double>(cfg.memory_budget);
    const double guard = cfg.memory_guard > 0 ? cfg.memory_guard : 0.85;
    ++total;
    const auto peak = metric_value(*e, "peak_memory");
    const bool fit = e->result.status == ResultStatus::kOk && peak && *peak <= budget;
    if (fit) ++fits;
    std::string line =
        e->label + ": " +
        (peak ? format_bytes(*peak) : std::string(result_status_name(e->result.status))) + " of " +
        format_bytes(budget);
    if (e->result.metrics && e->result.metrics->memory_guard) {
      line += ", guard acted " + std::to_string(e->result.metrics->memory_guard->actions) + "x";
    }
    // The unguarded schedule, same group, setup and N.
    for (const ResultEntry* a : all) {
      const ResultConfig& ac = a->result.config;
      if (std::find(c.against.begin(), c.against.end(), ac.schedule) == c.against.end()) continue;
      if (a->group != e->group || ac.stages != cfg.stages || ac.microbatches != cfg.microbatches ||
          ac.partition != cfg.partition || ac.model != cfg.model ||
          inflight_n(ac) != inflight_n(cfg)) {
        continue;
      }
      const auto apeak = metric_value(*a, "peak_memory");
      const bool exceeded =
          a->result.status == ResultStatus::kOom || (apeak && *apeak > guard * budget);
      line += "; " + ac.schedule + " " +
              (apeak ? format_bytes(*apeak) : std::string(result_status_name(a->result.status))) +
              (exceeded ? " (over guard x budget)" : " (within guard x budget)");
      if (exceeded) ++compared;
      break;
    }
    if (text.empty() || !fit) text = line;
  }
  o.cases = total;
  if (total == 0) {
    o.why = "no " + names(c.schedules) + " run with --memory-budget among the results";
    return o;
  }
  o.measured = std::to_string(fits) + " of " + std::to_string(total) + " within budget; " + text;
  if (fits < total) {
    o.verdict = Verdict::kInconsistent;
    o.why = "the guarded schedule exceeded its budget";
  } else if (compared == 0) {
    o.why = "no " + names(c.against) +
            " run with the same setup exceeded guard x budget, so the guard was not exercised";
  } else {
    o.verdict = Verdict::kConsistent;
  }
  o.value = static_cast<double>(fits) / total;
  return o;
}

std::string figures_text(const Claim& claim) {
  std::string out;
  for (const ClaimFigure& f : claim.figures) {
    const std::string v = f.value == std::round(f.value) && std::fabs(f.value) < 1e9
                              ? std::to_string(static_cast<long long>(f.value))
                              : format_number(f.value);
    out += (out.empty() ? "" : "; ") + f.name + ": " + v + (f.unit.empty() ? "" : " " + f.unit);
  }
  return out.empty() ? "(rule, no figure)" : out;
}

}  // namespace

std::optional<double> metric_value(const ResultEntry& entry, std::string_view metric) {
  if (!ok(entry)) return std::nullopt;
  const ResultMetrics& m = *entry.result.metrics;
  const PeakMemory& mem = m.peak_memory_bytes;
  auto finite = [](double x) -> std::optional<double> {
    if (!std::isfinite(x)) return std::nullopt;
    return x;
  };
  if (metric == "samples_per_second") return finite(m.samples_per_second);
  if (metric == "step_time") return finite(m.step_time_seconds.median);
  if (metric == "bubble_ratio") return finite(m.bubble_ratio.measured);
  if (metric == "bubble_overhead") return finite(m.bubble_overhead.measured);
  if (metric == "utilisation") return finite(1.0 - m.bubble_ratio.measured);
  if (metric == "peak_memory") {
    const std::vector<int64_t>& src =
        mem.device_per_stage.empty() ? mem.per_stage : mem.device_per_stage;
    if (src.empty()) return std::nullopt;
    return static_cast<double>(*std::max_element(src.begin(), src.end()));
  }
  if (metric == "activations_sum") {
    if (mem.activations_per_stage.empty()) return std::nullopt;
    return sum(mem.activations_per_stage);
  }
  if (metric == "activations_max") {
    if (mem.activations_per_stage.empty()) return std::nullopt;
    return static_cast<double>(
        *std::max_element(mem.activations_per_stage.begin(), mem.activations_per_stage.end()));
  }
  if (metric == "stage_imbalance") {
    const Timeline& t = entry.result.timeline;
    if (t.empty()) return std::nullopt;
    std::vector<double> busy;
    for (const auto& stage : t) {
      double b = 0;
      for (const TimelineEvent& ev : stage) {
        if (ev.op != ActionKind::kSync) b += ev.end - ev.start;
      }
      busy.push_back(b);
    }
    const double mean = sum(busy) / static_cast<double>(busy.size());
    if (mean <= 0) return std::nullopt;
    return *std::max_element(busy.begin(), busy.end()) / mean;
  }
  return std::nullopt;
}

bool memory_is_clean(const ResultEntry& entry) {
  return entry.result.metrics && entry.result.metrics->peak_memory_bytes.device_profiler.empty();
}

std::vector<double> inflight_per_stage(const ResultEntry& entry, bool* measured) {
  if (measured != nullptr) *measured = false;
  if (!ok(entry) || !entry.result.metrics->theory) return {};
  const TheoryFigures& t = *entry.result.metrics->theory;
  const std::vector<int64_t>& got = entry.result.metrics->peak_memory_bytes.activations_per_stage;
  const std::vector<int64_t>& a = t.activation_bytes_per_microbatch;
  if (!a.empty() && a.size() == got.size() &&
      std::all_of(a.begin(), a.end(), [](int64_t x) { return x > 0; })) {
    std::vector<double> out;
    for (size_t s = 0; s < a.size(); ++s)
      out.push_back(static_cast<double>(got[s]) / static_cast<double>(a[s]));
    if (measured != nullptr) *measured = true;
    return out;
  }
  std::vector<double> out(t.peak_inflight_per_stage.begin(), t.peak_inflight_per_stage.end());
  return out;
}

namespace {

/// The entries a check of peak memory weighs: those measured without a
/// device profiler, as the verdict weighs them (a run of the same
/// combination without it is among `all` when one was made). `left_out`
/// counts the others.
Entries clean_memory_only(const Entries& all, int* left_out) {
  Entries out;
  *left_out = 0;
  for (const ResultEntry* e : all) {
    if (e->result.metrics && !memory_is_clean(*e)) {
      ++*left_out;
      continue;
    }
    out.push_back(e);
  }
  return out;
}

/// The entries a check with "ranks" looks at (all of them for 0).
Entries on_ranks(const Entries& all, int ranks) {
  if (ranks <= 0) return all;
  Entries out;
  for (const ResultEntry* e : all) {
    const ResultConfig& c = e->result.config;
    if (c.stages * c.data_parallel == ranks) out.push_back(e);
  }
  return out;
}

}  // namespace

std::vector<ClaimRow> evaluate_claims(const Reference& reference,
                                      const std::vector<ResultEntry>& results, bool setup_matches) {
  Entries all;
  for (const ResultEntry& e : results) all.push_back(&e);
  return evaluate_claims(reference, all, setup_matches);
}

std::vector<ClaimRow> evaluate_claims(const Reference& reference,
                                      const std::vector<const ResultEntry*>& results,
                                      bool setup_matches) {
  Entries all;
  for (const ResultEntry* e : results) {
    if (ok(*e) || e->result.status == ResultStatus::kOom) all.push_back(e);
  }
  std::vector<ClaimRow> rows;
  for (const Claim& claim : reference.claims) {
    ClaimRow row{claim.id,
                 claim.document,
                 claim.title,
                 claim.statement,
                 figures_text(claim),
                 Verdict::kNotMeasurable,
                 {}};
    bool any_consistent = false;
    bool any_inconsistent = false;
    for (const ClaimCheck& c : claim.checks) {
      CheckOutcome o;
      int profiled = 0;
      const Entries here = c.metric == "peak_memory" || c.kind == CheckKind::kGuard
                               ? clean_memory_only(on_ranks(all, c.ranks), &profiled)
                               : on_ranks(all, c.ranks);
      switch (c.kind) {
        case CheckKind::kRatio:
          o = check_ratio(c, here);
          break;
        case CheckKind::kAbsolute:
          o = check_absolute(c, here, setup_matches || reference.setup_matches);
          break;
        case CheckKind::kOrder:
          o = check_order(c, here);
          break;
        case CheckKind::kInflight:
          o = check_inflight(c, here);
          break;
        case CheckKind::kActivationFormula:
          o = check_activation_formula(c, here);
          break;
        case CheckKind::kBubbleFormula:
          o = check_bubble_formula(c, here);
          break;
        case CheckKind::kGuard:
          o = check_guard(c, here);
          break;
        case CheckKind::kQualitative:
          o.documented = c.description;
          o.why = c.why;
          break;
      }
      o.description = c.description;
      if (c.ranks > 0 && c.kind != CheckKind::kQualitative && on_ranks(all, c.ranks).empty()) {
        o.why = "the documents measured it on " + std::to_string(c.ranks) +
                " GPUs, and no run on " + std::to_string(c.ranks) + " ranks is among the results";
      }
      if (profiled > 0 && o.cases == 0 && o.verdict == Verdict::kNotMeasurable) {
        o.why += (o.why.empty() ? "" : "; ") + std::to_string(profiled) +
                 " run(s) measured their peaks with a device profiler attached, which are not "
                 "weighed";
      }
      any_consistent = any_consistent || o.verdict == Verdict::kConsistent;
      any_inconsistent = any_inconsistent || o.verdict == Verdict::kInconsistent;
      row.checks.push_back(std::move(o));
    }
    row.verdict = any_inconsistent
                      ? Verdict::kInconsistent
                      : (any_consistent ? Verdict::kConsistent : Verdict::kNotMeasurable);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace ppb::reports
