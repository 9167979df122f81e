#include "ppb/reports/report_model.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <set>
#include <string_view>
#include <vector>

#include "ppb/pipeline/schedule.hpp"
#include "ppb/reports/fast_paths.hpp"
#include "ppb/reports/format.hpp"
#include "ppb/reports/plan.hpp"
#include "ppb/reports/stats.hpp"

namespace ppb::reports {

namespace {

int schedule_rank(const std::string& name) {
  const ScheduleInfo* info = find_schedule_info(name);
  return info != nullptr ? info->report_order : static_cast<int>(schedule_list().size());
}

bool entry_less(const ResultEntry* a, const ResultEntry* b) {
  const ResultConfig& x = a->result.config;
  const ResultConfig& y = b->result.config;
  const int rx = schedule_rank(x.schedule);
  const int ry = schedule_rank(y.schedule);
  if (rx != ry) return rx < ry;
  if (x.schedule != y.schedule) return x.schedule < y.schedule;
  if (x.partition != y.partition) return x.partition < y.partition;
  if (x.stages != y.stages) return x.stages < y.stages;
  if (x.data_parallel != y.data_parallel) return x.data_parallel < y.data_parallel;
  if (x.microbatches != y.microbatches) return x.microbatches < y.microbatches;
  if (x.inflight != y.inflight) return x.inflight < y.inflight;
  if (x.chunks != y.chunks) return x.chunks < y.chunks;
  return a->config_key < b->config_key;
}

std::string now_iso() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A figure of a result as the verdict weighs it: peak memory only as
// measured without a device profiler attached (clean_memory).
std::optional<double> figure(const GroupView& g, const ResultEntry& e, const char* metric) {
  if (std::string_view(metric) != "peak_memory") return metric_value(e, metric);
  const ResultEntry* clean = clean_memory(g, e);
  return clean != nullptr ? metric_value(*clean, metric) : std::nullopt;
}

std::string describe(const GroupView& g, const ResultEntry& e) {
  const ResultMetrics& m = *e.result.metrics;
  const ResultEntry* clean = clean_memory(g, e);
  const auto peak = clean != nullptr ? metric_value(*clean, "peak_memory") : std::nullopt;
  std::string memory = "peak n/a";
  if (peak) {
    memory =
        "peak " + format_bytes(*peak) + " on its worst stage" +
        (clean != &e ? " (in its run without " + m.peak_memory_bytes.device_profiler + ")" : "");
  } else if (clean == nullptr) {
    memory = "no peak memory without " + m.peak_memory_bytes.device_profiler;
  }
  return e.label + ": " + format_number(m.samples_per_second) + " samples/s, " + memory +
         ", bubble " + format_fixed(m.bubble_ratio.measured, 2);
}

void choose(GroupView& g, int64_t extra_budget) {
  std::set<int64_t> budgets;
  for (const ResultEntry* e : g.entries) {
    if (e->result.config.memory_budget > 0) budgets.insert(e->result.config.memory_budget);
  }
  if (extra_budget > 0) budgets.insert(extra_budget);
  budgets.insert(0);  // the fastest overall, whatever its memory
  for (int64_t budget : budgets) {
    BudgetChoice c;
    c.budget = budget;
    for (const ResultEntry* e : g.entries) {
      const auto sps = metric_value(*e, "samples_per_second");
      const auto peak = figure(g, *e, "peak_memory");
      // Without a budget the fastest is the best whatever its memory; a
      // budget ranks only peaks measured without a device profiler.
      if (!sps || (!peak && (budget > 0 || !metric_value(*e, "peak_memory")))) continue;
      // Its figures are measured, but wrong gradients are no choice.
      if (!check_failure(e->result).empty()) continue;
      if (peak && (c.smallest == nullptr || *peak < *figure(g, *c.smallest, "peak_memory")))
        c.smallest = e;
      if (budget > 0 && *peak > static_cast<double>(budget)) continue;
      ++c.candidates;
      if (c.best == nullptr || *sps > *metric_value(*c.best, "samples_per_second")) c.best = e;
    }
    g.choices.push_back(c);
  }
}

// Median of a metric of the first schedule alternative present in one setup.
std::optional<double> setup_metric(const GroupView& g, const std::vector<const ResultEntry*>& setup,
                                   const std::vector<std::string>& alts, const char* metric,
                                   std::string* which) {
  for (const std::string& name : alts) {
    std::vector<double> xs;
    for (const ResultEntry* e : setup) {
      if (e->result.config.schedule != name) continue;
      if (auto v = figure(g, *e, metric)) xs.push_back(*v);
    }
    if (xs.empty()) continue;
    std::sort(xs.begin(), xs.end());
    if (which != nullptr) *which = name;
    return xs[xs.size() / 2];
  }
  return std::nullopt;
}

// The documents' choice rules (S7, P8) and where they disagree, from this
// group's measurements only.
// What the rules S7 and P8 are judged on: per setup, which schedule used
// less memory and which ran faster.
struct RuleTally {
  int s7_cases = 0, s7_mem = 0, s7_speed = 0;
  int order_cases = 0, order_holds = 0;
  int p8_cases = 0, p8_mem = 0;
  int small_cases = 0, small_gpipe = 0, large_cases = 0, large_pd = 0;
  std::string order_example;
  std::string async_name = "async-1f1b";
};

RuleTally tally_rules(const GroupView& g) {
  std::map<std::string, std::vector<const ResultEntry*>> setups;
  for (const ResultEntry* e : g.entries) {
    const ResultConfig& c = e->result.config;
    setups[c.partition + " P=" + std::to_string(c.stages) +
           " D=" + std::to_string(c.data_parallel) + " M=" + std::to_string(c.microbatches) + " " +
           c.model + " " + c.backend + " budget=" + std::to_string(c.memory_budget)]
        .push_back(e);
  }
  RuleTally t;
  for (const auto& [key, setup] : setups) {
    std::string an;
    const auto sync_mem = setup_metric(g, setup, {"sync-1f1b"}, "peak_memory", nullptr);
    const auto async_mem = setup_metric(g, setup, {"async-1f1b", "1f1b"}, "peak_memory", &an);
    const auto sync_sps = setup_metric(g, setup, {"sync-1f1b"}, "samples_per_second", nullptr);
    const auto async_sps =
        setup_metric(g, setup, {"async-1f1b", "1f1b"}, "samples_per_second", nullptr);
    std::string pn;
    const auto pd_mem = setup_metric(g, setup, {"pipedream", "1f1b"}, "peak_memory", &pn);
    const auto gp_mem = setup_metric(g, setup, {"gpipe"}, "peak_memory", nullptr);
    const auto pd_sps = setup_metric(g, setup, {"pipedream"}, "samples_per_second", nullptr);
    const auto gp_sps = setup_metric(g, setup, {"gpipe"}, "samples_per_second", nullptr);
    if (sync_mem && async_mem && sync_sps && async_sps) {
      ++t.s7_cases;
      t.async_name = an;
      t.s7_mem += *sync_mem < *async_mem ? 1 : 0;
      t.s7_speed += *async_sps > *sync_sps ? 1 : 0;
    }
    if (sync_mem && async_mem && gp_mem) {
      ++t.order_cases;
      const bool holds = *sync_mem < *async_mem && *async_mem < *gp_mem;
      t.order_holds += holds ? 1 : 0;
      if (t.order_example.empty() || !holds) {
        t.order_example = "sync-1f1b " + format_bytes(*sync_mem) + ", " + an + " " +
                          format_bytes(*async_mem) + ", gpipe " + format_bytes(*gp_mem) + " (" +
                          key.substr(0, key.find(" budget")) + ")";
      }
    }
    if (pd_mem && gp_mem) {
      ++t.p8_cases;
      t.p8_mem += *pd_mem < *gp_mem ? 1 : 0;
    }
    if (pd_sps && gp_sps) {
      const int p = setup.front()->result.config.stages;
      if (p <= 4) {
        ++t.small_cases;
        t.small_gpipe += *gp_sps >= *pd_sps ? 1 : 0;
      } else if (p >= 8) {
        ++t.large_cases;
        t.large_pd += *pd_sps > *gp_sps ? 1 : 0;
      }
    }
  }
  return t;
}

void rule_findings(GroupView& g) {
  const RuleTally t = tally_rules(g);
  auto of = [](int k, int n) { return std::to_string(k) + " of " + std::to_string(n); };
  // Memory rules weigh peaks measured without a device profiler only.
  const std::string clean = g.unclean_memory > 0 ? " with peak memory measured without a device "
                                                   "profiler"
                                                 : "";
  if (t.s7_cases > 0) {
    const bool supported = t.s7_mem == t.s7_cases && t.s7_speed == t.s7_cases;
    g.rule_findings.push_back(
        std::string("S7 (memory tight: sync 1F1B; ample: async) is ") +
        (supported ? "supported"
                   : (t.s7_mem + t.s7_speed > 0 ? "partly supported" : "not supported")) +
        ": sync-1f1b used less peak memory than " + t.async_name + " in " +
        of(t.s7_mem, t.s7_cases) + " setups and was slower in " + of(t.s7_speed, t.s7_cases) + ".");
  } else {
    g.rule_findings.push_back(
        "S7 (memory tight: sync 1F1B) cannot be judged: no setup ran both sync-1f1b and "
        "async-1f1b/1f1b" +
        clean + ".");
  }
  if (t.p8_cases > 0) {
    std::string text =
        std::string("P8's memory rule (memory tight: PipeDream over GPipe) is ") +
        (t.p8_mem == t.p8_cases ? "supported"
                                : (t.p8_mem > 0 ? "partly supported" : "not supported")) +
        ": PipeDream/1F1B peaked below GPipe in " + of(t.p8_mem, t.p8_cases) + " setups";
    if (t.small_cases > 0)
      text += "; at <= 4 stages GPipe was at least as fast as PipeDream in " +
              of(t.small_gpipe, t.small_cases);
    if (t.large_cases > 0)
      text += "; at >= 8 stages PipeDream was faster in " + of(t.large_pd, t.large_cases);
    g.rule_findings.push_back(text + ".");
  } else {
    g.rule_findings.push_back(
        "P8 (memory tight: PipeDream) cannot be judged: no setup ran both pipedream/1f1b and "
        "gpipe" +
        clean + ".");
  }
  if (t.order_cases > 0) {
    const bool both = t.order_holds == t.order_cases;
    g.rule_findings.push_back(
        std::string("Where they disagree: peak memory ordered sync-1F1B < async-1F1B < GPipe in ") +
        of(t.order_holds, t.order_cases) + " setups (" + t.order_example + "), so " +
        (both ? "both rules hold: sync 1F1B is the tightest-memory choice, and PipeDream/1F1B "
                "beats GPipe when sync's throughput is too low."
              : "the measurements do not support both rules at once; see the memory table."));
  }
}

// Partitions that cut the model into the same parts ran one configuration
// once per name: how far apart those measurements' samples/s were is
// tonight's own spread between runs of one configuration. "" where no
// combination ran so (or the results do not record their parts).
std::string same_cut_point(const GroupView& g) {
  // The combination but for its partition's name, with the parts it ran.
  std::map<std::string, std::vector<const ResultEntry*>> runs;
  for (const ResultEntry* e : g.entries) {
    const ResultConfig& c = e->result.config;
    if (e->result.status != ResultStatus::kOk || !e->result.metrics || c.unit_ranges.empty())
      continue;
    std::string key = e->config_key;
    const std::string name = "partition=" + c.partition + " ";
    if (const size_t at = key.find(name); at != std::string::npos) key.erase(at, name.size());
    runs[key + " parts=" + c.unit_ranges].push_back(e);
  }
  std::map<std::string, int> names;  // "balanced and operator" -> combinations
  std::vector<double> gaps;
  double widest = -1;
  std::string widest_label;
  for (const auto& [key, same] : runs) {
    // One result per partition of the cut (the first of repeats); the gap
    // is the slowest against the fastest of them.
    std::vector<const ResultEntry*> one;
    for (const ResultEntry* e : same) {
      if (std::none_of(one.begin(), one.end(), [&](const ResultEntry* o) {
            return o->result.config.partition == e->result.config.partition;
          }))
        one.push_back(e);
    }
    if (one.size() < 2) continue;
    double lo = 0, hi = 0;
    std::string who;
    std::string others;
    for (size_t i = 0; i < one.size(); ++i) {
      const double x = one[i]->result.metrics->samples_per_second;
      lo = i == 0 ? x : std::min(lo, x);
      hi = i == 0 ? x : std::max(hi, x);
      const std::string& name = one[i]->result.config.partition;
      who += (i == 0 ? "" : i + 1 == one.size() ? " and " : ", ") + name;
      if (i > 0) others += " / " + name;
    }
    if (!(lo > 0)) continue;
    const double gap = (hi - lo) / lo;
    ++names[who];
    gaps.push_back(gap);
    if (gap > widest) {
      widest = gap;
      widest_label = one.front()->label + others;
    }
  }
  if (gaps.empty()) return "";
  std::string who;
  for (const auto& [partitions, n] : names) {
    who += (who.empty() ? "" : "; ") + partitions +
           (names.size() > 1 ? " (" + std::to_string(n) + ")" : std::string());
  }
  const size_t n = gaps.size();
  return who + " cut the model into the same parts in " + std::to_string(n) + " combination" +
         (n == 1 ? "" : "s") +
         ", each one configuration measured once per name: the slowest and fastest of its "
         "samples/s differed by " +
         (n == 1 ? format_percent(widest, 1)
                 : format_percent(spread(gaps).median, 1) + " at the median and at most " +
                       format_percent(widest, 1)) +
         " (" + widest_label + "), the spread between runs of one configuration.";
}

// The group's combinations that failed: a --check that did not pass, a
// run that ended with an error; "" when none did. (oom and invalid are a
// sweep's routine answers: a budget a combination would exceed, a cut that
// cannot place its stages.)
std::string failures_point(const GroupView& g) {
  std::vector<std::string> failed;
  for (const ResultEntry* e : g.entries) {
    const Result& r = e->result;
    if (r.status == ResultStatus::kError) {
      failed.push_back(e->label + " (status " + result_status_name(r.status) +
                       (r.error.empty() ? "" : ": " + r.error) + ")");
    } else if (std::string check = check_failure(r); !check.empty()) {
      failed.push_back(e->label + " (" + check + ")");
    }
  }
  if (failed.empty()) return "";
  std::string text = "FAILED: " + std::to_string(failed.size()) + " combination(s): ";
  for (size_t i = 0; i < failed.size(); ++i) text += (i == 0 ? "" : "; ") + failed[i];
  return text + ".";
}

void verdict(GroupView& g, const ReportModel& m) {
  std::vector<std::string>& points = g.verdict_points;
  if (std::string failed = failures_point(g); !failed.empty()) points.push_back(std::move(failed));
  for (const BudgetChoice& c : g.choices) {
    const std::string within =
        c.budget > 0 ? "Within " + format_bytes(static_cast<double>(c.budget)) + " per stage"
                     : "With no memory budget";
    if (c.best != nullptr) {
      points.push_back(within + ", the best is " + describe(g, *c.best) +
                       (c.budget > 0
                            ? " (" + std::to_string(c.candidates) + " combinations fit)."
                            : " (of " + std::to_string(c.candidates) + " measured combinations)."));
    } else if (c.smallest != nullptr) {
      points.push_back(within + ", nothing measured fits; the smallest peak is " +
                       describe(g, *c.smallest) + ".");
    } else if (g.unclean_memory > 0) {
      points.push_back(within +
                       ", nothing can be ranked: no peak memory was measured without a "
                       "device profiler attached.");
    } else {
      points.push_back(within + ", no combination ran successfully.");
    }
  }
  if (g.unclean_memory > 0) {
    points.push_back(
        "No clean memory figure was measured for " + std::to_string(g.unclean_memory) +
        " result(s): their peaks were taken with a device profiler attached (it holds device "
        "memory of its own) and no run of the same combination without it exists, so memory "
        "does not rank them.");
  }
  for (const std::string& f : g.rule_findings) points.push_back(f);
  if (std::string same = same_cut_point(g); !same.empty()) points.push_back(std::move(same));
  if (std::string plan = which_schedule_for_this_machine(g.entries); !plan.empty())
    points.push_back(std::move(plan));
  int consistent = 0, inconsistent = 0, unmeasurable = 0;
  for (const ClaimRow& r : g.claims) {
    switch (r.verdict) {
      case Verdict::kConsistent:
        ++consistent;
        break;
      case Verdict::kInconsistent:
        ++inconsistent;
        break;
      case Verdict::kNotMeasurable:
        ++unmeasurable;
        break;
    }
  }
  points.push_back("Documents' claims: " + std::to_string(consistent) + " consistent, " +
                   std::to_string(inconsistent) + " inconsistent, " + std::to_string(unmeasurable) +
                   " not measurable here.");
  if (m.regression) {
    const RegressionSummary& r = *m.regression;
    points.push_back("Against " + std::to_string(r.nights.size()) +
                     " earlier night(s): " + std::to_string(r.regressions()) + " regression(s), " +
                     std::to_string(r.count(RegressionStatus::kImproved)) + " improvement(s), " +
                     std::to_string(r.count(RegressionStatus::kPass)) + " no change, " +
                     std::to_string(r.count(RegressionStatus::kUndecidable)) + " undecidable at " +
                     format_trimmed(r.threshold * 100) + "%.");
    if (r.confirming) {
      points.push_back("Re-runs: " + std::to_string(r.rows_with(Confirmation::kConfirmed)) +
                       " timing change(s) confirmed, " +
                       std::to_string(r.rows_with(Confirmation::kNotReproduced)) +
                       " did not reproduce (undecidable).");
    }
  }
  g.verdict.clear();
  for (const std::string& p : points) g.verdict += (g.verdict.empty() ? "" : " ") + p;
}

void showcase(GroupView& g) {
  std::map<std::string, std::vector<const ResultEntry*>> by_setup;
  for (const ResultEntry* e : g.entries) {
    if (e->result.status != ResultStatus::kOk) continue;
    const ResultConfig& c = e->result.config;
    by_setup[c.partition + " P=" + std::to_string(c.stages) +
             " D=" + std::to_string(c.data_parallel) + " M=" + std::to_string(c.microbatches) +
             " budget=" + std::to_string(c.memory_budget)]
        .push_back(e);
  }
  auto schedules = [](const std::vector<const ResultEntry*>& es) {
    std::set<std::string> s;
    for (const ResultEntry* e : es) s.insert(e->result.config.schedule);
    return s.size();
  };
  auto m_of = [](const std::vector<const ResultEntry*>& es) {
    return es.front()->result.config.microbatches;
  };
  auto part_rank = [](const std::vector<const ResultEntry*>& es) {
    const std::string& p = es.front()->result.config.partition;
    return p == "balanced" ? 0 : (p == "operator" ? 1 : (p == "layer" ? 2 : 3));
  };
  const std::vector<const ResultEntry*>* best = nullptr;
  for (const auto& [key, es] : by_setup) {
    if (best == nullptr || schedules(es) > schedules(*best) ||
        (schedules(es) == schedules(*best) &&
         (part_rank(es) < part_rank(*best) ||
          (part_rank(es) == part_rank(*best) && m_of(es) < m_of(*best))))) {
      best = &es;
    }
  }
  if (best == nullptr) return;
  const ResultConfig& c = best->front()->result.config;
  g.showcase_label = g.work + ", " + c.partition + " partition, P=" + std::to_string(c.stages) +
                     ", M=" + std::to_string(c.microbatches);
  std::set<std::string> seen;
  for (const ResultEntry* e : *best) {
    if (!seen.insert(e->result.config.schedule).second) continue;
    g.showcase.push_back(e);
    if (e->result.timeline.empty()) continue;
    GanttPair pair;
    pair.entry = e;
    pair.predicted = predicted_timeline(*e, &pair.predicted_source);
    g.gantt.push_back(std::move(pair));
  }
}

// Two measurements of one combination in one group that differ only in
// their setup (another transport, time scale, device profiler, guard or
// GPU sharing) read alike by their labels; each gets what tells it apart,
// in its label (JUnit's case name, every table) and in `variant` (the
// tables whose columns spell out the combination). Labels that do not
// collide stay as they are.
void tell_apart(std::vector<ResultEntry>& entries) {
  std::map<std::pair<std::string, std::string>, std::vector<ResultEntry*>> alike;
  for (ResultEntry& e : entries) alike[{e.group, e.label}].push_back(&e);
  const auto setup = [](const ResultEntry& e) {
    const ResultConfig& c = e.result.config;
    const std::string& profiler =
        e.result.metrics ? e.result.metrics->peak_memory_bytes.device_profiler : std::string();
    return std::vector<std::pair<std::string, std::string>>{
        {"transport", c.transport},
        {"time scale", format_trimmed(c.time_scale)},
        {"profiler", profiler.empty() ? "none" : profiler},
        {"guard", format_trimmed(c.memory_guard)},
        {"ranks per GPU", std::to_string(e.result.environment.ranks_per_gpu)}};
  };
  for (auto& [key, same] : alike) {
    if (same.size() < 2) continue;
    const auto first = setup(*same.front());
    for (size_t k = 0; k < first.size(); ++k) {
      const bool differs = std::any_of(same.begin(), same.end(), [&](const ResultEntry* e) {
        return setup(*e)[k].second != first[k].second;
      });
      if (!differs) continue;
      for (ResultEntry* e : same) {
        e->variant += (e->variant.empty() ? "" : ", ") + first[k].first + " " + setup(*e)[k].second;
      }
    }
    for (ResultEntry* e : same) {
      if (!e->variant.empty()) e->label += " [" + e->variant + "]";
    }
  }
}

}  // namespace

ReportModel build_report_model(LoadedResults loaded, Reference reference,
                               std::vector<Night> history, const ModelOptions& options,
                               std::optional<LoadedResults> reruns) {
  ReportModel m;
  m.generated_at = now_iso();
  m.inputs = options.inputs;
  m.loaded = std::move(loaded);
  m.reference = std::move(reference);
  m.setup_matches = options.setup_matches || m.reference.setup_matches;
  m.memory_budget = options.memory_budget;
  m.history = std::move(history);
  m.reruns = std::move(reruns);
  tell_apart(m.loaded.results);

  std::map<std::string, size_t> index;
  for (const ResultEntry& e : m.loaded.results) {
    auto [it, inserted] = index.emplace(e.group, m.groups.size());
    if (inserted) {
      GroupView g;
      g.key = e.group;
      g.machine = e.machine;
      g.build = e.build;
      g.backend = e.result.config.backend;
      g.work = e.work;
      g.environment = e.result.environment;
      m.groups.push_back(std::move(g));
    }
    m.groups[it->second].entries.push_back(&e);
  }
  if (!m.history.empty())
    m.regression = run_gate(m.loaded.results, options.tonight, m.history, options.gate,
                            m.reruns ? &m.reruns->results : nullptr);
  for (GroupView& g : m.groups) {
    std::sort(g.entries.begin(), g.entries.end(), entry_less);
    g.claims = evaluate_claims(m.reference, g.entries, m.setup_matches);
    for (const ResultEntry* e : g.entries) {
      if (metric_value(*e, "peak_memory") && clean_memory(g, *e) == nullptr) ++g.unclean_memory;
    }
    choose(g, options.memory_budget);
    rule_findings(g);
    showcase(g);
    verdict(g, m);
  }
  return m;
}

ReportModel build_report_model(LoadedResults loaded, Reference reference,
                               std::optional<LoadedResults> baseline, const ModelOptions& options) {
  std::vector<Night> history;
  if (baseline) {
    Night n;
    n.name = "baseline";
    n.date = latest_date(*baseline);
    n.first_date = earliest_date(*baseline);
    n.results = std::move(*baseline);
    history.push_back(std::move(n));
  }
  return build_report_model(std::move(loaded), std::move(reference), std::move(history), options);
}

std::vector<const ResultEntry*> allreduce_entries(const GroupView& group) {
  std::vector<const ResultEntry*> rows;
  for (const ResultEntry* e : group.entries) {
    if (e->result.status == ResultStatus::kOk && e->result.metrics && e->result.metrics->allreduce)
      rows.push_back(e);
  }
  return rows;
}

const ResultEntry* clean_memory(const GroupView& group, const ResultEntry& entry) {
  if (memory_is_clean(entry)) return &entry;
  const std::string combination = config_key(entry.result.config);
  for (const ResultEntry* e : group.entries) {
    if (memory_is_clean(*e) && e->result.status == ResultStatus::kOk &&
        config_key(e->result.config) == combination)
      return e;
  }
  return nullptr;
}

std::string check_failure(const Result& result) {
  const auto& m = result.metrics;
  if (!m || !m->check || m->check->passed) return "";
  return "--check failed: max relative error " + format_number(m->check->max_rel_error);
}

namespace {

// The distinct values, in order, ", "-joined ("-" for none or only "").
std::string distinct(const std::vector<std::string>& values) {
  std::vector<std::string> seen;
  for (const std::string& v : values) {
    if (!v.empty() && std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
  }
  std::string out;
  for (const std::string& v : seen) out += (out.empty() ? "" : ", ") + v;
  return out.empty() ? "-" : out;
}

}  // namespace

GroupEnvironment group_environment(const GroupView& group) {
  std::set<int> ranks;
  std::set<int> shared;
  std::vector<std::string> gpus, mpi, cuda, driver, hosts;
  std::string first, last;
  for (const ResultEntry* e : group.entries) {
    const ResultEnvironment& env = e->result.environment;
    ranks.insert(env.ranks);
    if (env.ranks_per_gpu > 1) shared.insert(env.ranks_per_gpu);
    gpus.insert(gpus.end(), env.gpus.begin(), env.gpus.end());
    mpi.push_back(env.mpi);
    cuda.push_back(env.cuda);
    driver.push_back(env.driver);
    hosts.push_back(env.hostname);
    if (first.empty() || env.date < first) first = env.date;
    last = std::max(last, env.date);
  }
  GroupEnvironment out;
  std::string r;
  for (const int n : ranks) r += (r.empty() ? "" : ", ") + std::to_string(n);
  out.ranks = r;
  out.gpus = distinct(gpus);
  if (!shared.empty() && out.gpus != "-") {
    out.gpus += " (" + or_list(shared) + " ranks per GPU)";
  }
  out.mpi = distinct(mpi);
  out.cuda = distinct(cuda);
  out.driver = distinct(driver);
  out.hostnames = distinct(hosts);
  out.dates = first == last ? first : first + " .. " + last;
  return out;
}

std::string group_title(const GroupView& group) {
  return group.machine + ", " + group.backend + " backend, " + group.work;
}

bool ReportModel::several_works() const {
  std::set<std::string> works;
  for (const GroupView& g : groups) works.insert(g.work);
  return works.size() > 1;
}

std::string ReportModel::row_label(const std::string& label, const std::string& work) const {
  return several_works() ? label + " [" + work + "]" : label;
}

std::string stages_text(const ResultConfig& config) {
  return config.data_parallel > 1
             ? std::to_string(config.stages) + " x " + std::to_string(config.data_parallel)
             : std::to_string(config.stages);
}

std::vector<const ResultEntry*> fast_path_entries(const GroupView& group) {
  std::vector<const ResultEntry*> rows;
  for (const ResultEntry* e : group.entries) {
    if (!fast_paths(e->result).empty()) rows.push_back(e);
  }
  return rows;
}

std::vector<const ResultEntry*> device_entries(const GroupView& group) {
  std::vector<const ResultEntry*> rows;
  for (const ResultEntry* e : group.entries) {
    if (e->result.status == ResultStatus::kOk && e->result.metrics && e->result.metrics->device)
      rows.push_back(e);
  }
  return rows;
}

}  // namespace ppb::reports
