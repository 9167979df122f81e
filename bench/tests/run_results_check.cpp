// Asserts what `pipebench run` wrote, by reading its result files back
// (read_result_file): the run command's ctest cases run the command, then
// this checker. Prints every violation and exits 1 when there is one.
//
//   run_results_check check DIR N         N results, each ok with check passed, its
//                                         optimizer update within 1e-6 of w - lr*g
//                                         (check.update_rel_error), fp32 references
//                                         within 1e-4, two steps checked where there
//                                         was a warm-up step; the cpu backend's speed probe
//   run_results_check bubble DIR TOL STEP each ok result: |bubble - theory| <= TOL,
//                                         |median step - theory step| / theory <= STEP
//   run_results_check memory DIR          activation peak per stage == simulator's (the
//                                         memory model's), and sync-1f1b < 1f1b < gpipe
//                                         (summed) per (partition, M) where all three ran
//   run_results_check trace DIR           every result has a merged trace: one pid per
//                                         stage, an X event per action of the timed steps,
//                                         as many flow starts as flow ends (> 0)
//   run_results_check device DIR TOL      each ok result has CUPTI's device figures: records on
//                                         every stage, none dropped, every kernel and every
//                                         compute action attributed; |device bubble - the
//                                         events' bubble| <= TOL; with a trace, kernels on
//                                         every stage's device tracks
//   run_results_check epilogues DIR [WHY] a device backend: each ok result records its GEMM
//                                         epilogues, some fused, as many in every step (a
//                                         multiple of --check + warm-up + timed steps), none
//                                         refused and no refusal reason; with WHY, as many
//                                         refused in every step, the first refusal's reason
//                                         holding WHY
//   run_results_check guard DIR           with --memory-budget: adaptive's measured peak
//                                         <= guard x budget (and its guard acted), async-1f1b's
//                                         (same N) above it; gpipe ended with status oom
//   run_results_check same DIR OTHER      OTHER (run --rerun of DIR) holds the same files,
//                                         each with DIR's config and status
//   run_results_check model DIR STEP      timed backend at its default scale: every result's
//                                         time_scale is the model's (default_time_scale of
//                                         the model costs), every action lasts at least its
//                                         chunk's modelled time x that scale, and
//                                         |median step - simulated step x scale| / that
//                                         <= STEP (the simulator on the cost model, as
//                                         `simulate --model` prices it)
//   run_results_check dp DIR D TOL        data parallelism: each ok result ran D replicas on
//                                         stages x D ranks; every stage all-reduced > 0 bytes
//                                         in > 0 s, overlap <= that time; bubble with the
//                                         all-reduce >= without; |without - theory| <= TOL;
//                                         a reference check passed within 1e-6
//
// bubble, model, device and dp (TOL < 1) hold timings to tolerances only for results whose
// host was quiet (metrics.foreign_cpu <= 20%); when no result was, the
// checker exits 77 (ctest: skipped), saying so.
#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ppb/pipeline/costs.hpp"
#include "ppb/pipeline/result.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/simulator.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/reports/plan.hpp"

namespace {

int failures = 0;

void fail(const std::string& file, const std::string& what) {
  std::fprintf(stderr, "FAIL %s: %s\n", file.c_str(), what.c_str());
  ++failures;
}

std::vector<std::pair<std::string, ppb::Result>> load(const std::string& dir) {
  std::vector<std::pair<std::string, ppb::Result>> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 5 || name.substr(name.size() - 5) != ".json" ||
        name.find(".trace.") != std::string::npos) {
      continue;
    }
    out.emplace_back(name, ppb::read_result_file(entry.path().string()));
  }
  return out;
}

// Timings taken while other processes (or the hypervisor: steal time counts)
// used more than this share of the host's CPU are not judged, as the
// regression gate declines them (metrics.foreign_cpu, --max-foreign-cpu's
// default): the timed backend's stages wake late on a contended host, which
// is idle time the simulator does not model (one busy loop on this 2-core
// VM moves the 4-rank bubble by +0.02 to +0.035).
constexpr double kMaxForeignCpu = 0.2;
int timings_judged = 0, timings_declined = 0;

// True when `r`'s timings may be held to a tolerance; otherwise says why.
bool judge_timings(const std::string& file, const ppb::Result& r) {
  const std::optional<double>& foreign = r.metrics->foreign_cpu;
  if (foreign && *foreign > kMaxForeignCpu) {
    std::printf("%-48s timings not judged: other processes used %.0f%% of the host's CPU\n",
                file.c_str(), *foreign * 100);
    ++timings_declined;
    return false;
  }
  ++timings_judged;
  return true;
}

int64_t sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

// The cpu backend's unit times by kind (theory.kind_seconds): one map per
// stage; per pass, what one micro-batch spent in the stage's units adds up
// to no more than its V actions of that pass took (the units run inside
// them) and, where the units did a millisecond of work or more on a quiet
// host, to at least a quarter. The time outside the units is mostly a rank
// waiting for its core: more ranks than cores, or another process, stretch
// an action between its units. Keyed on the action's own time, the rule
// judged exactly the stretched actions of a tiny model (about 50 us of
// units in an action of over a millisecond, under ctest -j2 on 2 cores: 3%).
void check_kind_seconds(const std::string& name, const ppb::Result& r) {
  const ppb::TheoryFigures& t = *r.metrics->theory;
  if (t.kind_seconds.size() != static_cast<size_t>(r.config.stages) ||
      t.action_seconds.size() != t.kind_seconds.size()) {
    fail(name, "no unit times by kind per stage");
    return;
  }
  const double v = std::max(r.config.chunks, 1);
  const std::optional<double>& foreign = r.metrics->foreign_cpu;
  const bool quiet = !foreign || *foreign <= kMaxForeignCpu;
  for (size_t s = 0; s < t.kind_seconds.size(); ++s) {
    double f = 0, i = 0, w = 0;
    for (const auto& [kind, k] : t.kind_seconds[s]) {
      f += k.fwd;
      i += k.bwd_input;
      w += k.bwd_weight;
    }
    const ppb::StageActionTimes& a = t.action_seconds[s];
    // A schedule that runs both full and split backwards (dualpipe-v) mixes
    // the two in the kinds' sums: only its forward is compared.
    const bool full = std::isfinite(a.bwd), split = std::isfinite(a.bwd_input);
    const double none = std::nan("");
    const std::pair<double, double> passes[] = {{f, a.fwd},
                                                {i + w, full && !split ? a.bwd : none},
                                                {i, split && !full ? a.bwd_input : none},
                                                {w, split && !full ? a.bwd_weight : none}};
    for (const auto& [units, action] : passes) {
      if (!std::isfinite(action) || action <= 0) continue;
      const double ratio = units / (v * action);
      if (ratio > 1.02 || (quiet && units >= 1e-3 && ratio < 0.25))
        fail(name, "stage " + std::to_string(s) + ": the units of a pass took " +
                       std::to_string(ratio) + " x its actions");
    }
  }
}

// The modelled seconds of one action of the timeline.
double modelled_seconds(const ppb::ChunkCost& c, ppb::ActionKind op) {
  switch (op) {
    case ppb::ActionKind::kForward:
      return c.fwd;
    case ppb::ActionKind::kBackward:
      return c.bwd_input + c.bwd_weight;
    case ppb::ActionKind::kBackwardInput:
      return c.bwd_input;
    case ppb::ActionKind::kBackwardWeight:
      return c.bwd_weight;
    case ppb::ActionKind::kSync:
      break;
  }
  return 0;
}

// A timed result at the default scale against the cost model of its
// combination (re-priced as `plan --validate` prices it) and the simulator.
void check_model(const std::string& name, const ppb::Result& r, double step_tol) {
  if (r.status != ppb::ResultStatus::kOk || !r.metrics || r.config.backend != "timed") {
    fail(name, "expected an ok result of the timed backend");
    return;
  }
  ppb::reports::Repriced model;
  try {
    model = ppb::reports::reprice(r);
  } catch (const ppb::UsageError& e) {
    fail(name, std::string("cannot re-price its configuration: ") + e.what());
    return;
  }
  // One scale for every schedule, placement and partition of the model.
  const double scale = ppb::default_time_scale(model.costs);
  if (!(std::fabs(r.config.time_scale - scale) <= 1e-9 * scale))
    fail(name, "time_scale " + std::to_string(r.config.time_scale) + ", the model's is " +
                   std::to_string(scale));
  // Each action on the clock for its chunk's modelled time (a rank that
  // slept to its end wakes later, never earlier).
  const ppb::Placement place = ppb::placement_of(model.schedule);
  int short_actions = 0;
  for (size_t s = 0; s < r.timeline.size(); ++s) {
    for (const ppb::TimelineEvent& e : r.timeline[s]) {
      if (e.op == ppb::ActionKind::kSync) continue;
      const double want =
          modelled_seconds(model.costs.at(place, static_cast<int>(s), e.chunk), e.op) * scale;
      if (e.end - e.start < want - 1e-6) ++short_actions;
    }
  }
  if (short_actions > 0)
    fail(name, std::to_string(short_actions) + " actions shorter than their chunk's modelled time");
  const ppb::SimResult sim = ppb::simulate(model.schedule, model.costs);
  const double predicted = sim.step_time * scale;
  const double ds = (r.metrics->step_time_seconds.median - predicted) / predicted;
  std::printf("%-48s scale %.4g  step %.2f ms  simulated %.2f ms (%+.1f%%)\n", name.c_str(),
              r.config.time_scale, r.metrics->step_time_seconds.median * 1e3, predicted * 1e3,
              ds * 100);
  if (judge_timings(name, r) && !(std::fabs(ds) <= step_tol))
    fail(name, "step time differs from the simulated step x time scale by more than " +
                   std::to_string(step_tol));
}

// The merged trace beside a result file.
std::string trace_path(const std::string& dir, const std::string& result_file) {
  return dir + "/" + result_file.substr(0, result_file.size() - 5) + ".trace.json";
}

// A trace document (an object with traceEvents), or null after saying why.
boost::json::value read_trace(const std::string& name, const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    fail(name, "no trace file " + path);
    return nullptr;
  }
  std::stringstream text;
  text << in.rdbuf();
  boost::system::error_code ec;
  boost::json::value doc = boost::json::parse(text.str(), ec);
  if (ec || !doc.is_object() || !doc.as_object().contains("traceEvents")) {
    fail(path, "not a trace document");
    return nullptr;
  }
  return doc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: run_results_check check|bubble|memory|model|... DIR [args]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const std::string dir = argv[2];
  std::vector<std::pair<std::string, ppb::Result>> results;
  try {
    results = load(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL %s\n", e.what());
    return 1;
  }
  if (results.empty()) fail(dir, "no result files");

  if (mode == "check") {
    const size_t want = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 0;
    if (want != 0 && results.size() != want) {
      fail(dir, std::to_string(results.size()) + " result files, expected " + std::to_string(want));
    }
    for (const auto& [name, r] : results) {
      if (r.status != ppb::ResultStatus::kOk) {
        fail(name, std::string("status ") + ppb::result_status_name(r.status) + ": " + r.error);
        continue;
      }
      if (!r.metrics->check) {
        fail(name, "no check figures");
        continue;
      }
      const ppb::CheckFigures& c = *r.metrics->check;
      if (!c.passed)
        fail(name, "check failed, max relative error " + std::to_string(c.max_rel_error));
      if (c.method == "reference" && r.config.dtype == "fp32" && !(c.max_rel_error <= 1e-4))
        fail(name, "relative error above 1e-4");
      // Every schedule checks its optimizer step (kUpdateTolerance, run/check.hpp).
      if (!c.update_rel_error) {
        fail(name, "no check.update_rel_error");
      } else if (!(*c.update_rel_error <= 1e-6)) {
        fail(name, "optimizer update off w - lr*g by " + std::to_string(*c.update_rel_error));
      }
      // With a warm-up step the first one is checked too (check.steps).
      const int steps = r.config.warmup >= 1 ? 2 : 1;
      if (c.steps != steps) {
        fail(name, "check.steps " + (c.steps ? std::to_string(*c.steps) : std::string("absent")) +
                       ", expected " + std::to_string(steps) + " (--warmup " +
                       std::to_string(r.config.warmup) + ")");
      }
      if (r.config.backend == "cpu") {
        // The cpu backend's speed probe: one positive time per stage per timed step.
        const auto& probe = r.metrics->speed_probe_seconds_per_stage;
        bool probed = probe.size() == static_cast<size_t>(r.config.stages);
        for (const std::vector<double>& stage : probe) {
          probed = probed && stage.size() == r.metrics->step_time_seconds.samples.size();
          for (double x : stage) probed = probed && x > 0 && x < 10;
        }
        if (!probed) fail(name, "no speed probe per stage and timed step");
        check_kind_seconds(name, r);
      }
      std::printf("%-48s check %s (%s, max rel error %.2e, update %.2e)\n", name.c_str(),
                  c.passed ? "ok" : "FAILED", c.method.c_str(), c.max_rel_error,
                  c.update_rel_error.value_or(std::nan("")));
    }
  } else if (mode == "attention") {
    // Every result ran the attention argv[3] ("naive" or "fused") and
    // records argv[4] as the reason ("" for fused).
    const std::string form = argc > 3 ? argv[3] : "";
    const std::string reason = argc > 4 ? argv[4] : "";
    for (const auto& [name, r] : results) {
      if (r.config.attention != form)
        fail(name, "attention " + r.config.attention + ", expected " + form);
      if (r.config.attention_reason != reason) {
        fail(name,
             "attention_reason '" + r.config.attention_reason + "', expected '" + reason + "'");
      }
      std::printf("%-48s attention %s (%s)\n", name.c_str(), r.config.attention.c_str(),
                  r.config.attention_reason.c_str());
    }
  } else if (mode == "epilogues") {
    for (const auto& [name, r] : results) {
      if (r.status != ppb::ResultStatus::kOk || !r.metrics->gemm_epilogues) {
        fail(name, "no metrics.gemm_epilogues (status " +
                       std::string(ppb::result_status_name(r.status)) + ")");
        continue;
      }
      const ppb::GemmEpilogueFigures& g = *r.metrics->gemm_epilogues;
      const auto steps = static_cast<int64_t>(r.metrics->step_time_seconds.samples.size()) +
                         r.config.warmup + (r.config.check ? 1 : 0);
      if (g.fused <= 0 || g.fused % steps != 0) {
        fail(name, std::to_string(g.fused) + " epilogue GEMMs over " + std::to_string(steps) +
                       " steps: expected as many > 0 in each");
      }
      const std::string why = argc > 3 ? argv[3] : "";
      if (why.empty() && (g.refused != 0 || !g.first_refusal.empty()))
        fail(name, std::to_string(g.refused) + " refused: " + g.first_refusal);
      if (!why.empty() && (g.refused <= 0 || g.refused % steps != 0 ||
                           g.first_refusal.find(why) == std::string::npos)) {
        fail(name, std::to_string(g.refused) + " refused over " + std::to_string(steps) +
                       " steps (expected as many > 0 in each), the first: '" + g.first_refusal +
                       "', expected it to hold '" + why + "'");
      }
      std::printf("%-48s %lld epilogue GEMMs over %lld steps, %lld refused\n", name.c_str(),
                  static_cast<long long>(g.fused), static_cast<long long>(steps),
                  static_cast<long long>(g.refused));
    }
  } else if (mode == "bubble") {
    const double tol = argc > 3 ? std::atof(argv[3]) : 0.02;
    const double step_tol = argc > 4 ? std::atof(argv[4]) : 0.05;
    for (const auto& [name, r] : results) {
      if (r.status != ppb::ResultStatus::kOk || !r.metrics->theory) {
        fail(name, std::string("status ") + ppb::result_status_name(r.status) + " " + r.error);
        continue;
      }
      const ppb::ResultMetrics& m = *r.metrics;
      if (!m.speed_probe_seconds_per_stage.empty())
        fail(name, "a speed probe on a backend that models its time");
      const double db = m.bubble_ratio.measured - m.bubble_ratio.theoretical;
      const double theory_step = m.theory->step_time_seconds;
      const double ds = (m.step_time_seconds.median - theory_step) / theory_step;
      std::printf(
          "%-48s bubble %.4f theory %.4f (diff %+.4f)  step %.2f ms theory %.2f ms (%+.1f%%)\n",
          name.c_str(), m.bubble_ratio.measured, m.bubble_ratio.theoretical, db,
          m.step_time_seconds.median * 1e3, theory_step * 1e3, ds * 100);
      if (!judge_timings(name, r)) continue;
      if (!(std::fabs(db) <= tol))
        fail(name, "bubble ratio differs from the simulator's by more than " + std::to_string(tol));
      if (!(std::fabs(ds) <= step_tol))
        fail(name,
             "step time differs from the simulator's by more than " + std::to_string(step_tol));
    }
  } else if (mode == "vocab" && argc >= 6) {
    // Every result records the vocabulary padding it ran with: DIR VOCAB PADDED DIVISOR.
    const ppb::VocabPadding want{
        .divisor = std::atoi(argv[5]), .vocab = std::atoi(argv[3]), .padded = std::atoi(argv[4])};
    for (const auto& [name, r] : results) {
      if (r.config.vocab_padding != want) {
        fail(name, std::string("config.vocab_padding is not vocab ") + argv[3] + " padded to " +
                       argv[4] + " at divisor " + argv[5]);
      }
    }
  } else if (mode == "memory") {
    // (partition, M, P) -> schedule -> summed activation peak
    std::map<std::string, std::map<std::string, int64_t>> groups;
    for (const auto& [name, r] : results) {
      if (r.status != ppb::ResultStatus::kOk || !r.metrics->theory) {
        fail(name, std::string("status ") + ppb::result_status_name(r.status));
        continue;
      }
      const auto& measured = r.metrics->peak_memory_bytes.activations_per_stage;
      const auto& predicted = r.metrics->theory->peak_activation_bytes_per_stage;
      if (measured != predicted) {
        std::string m, p;
        for (int64_t x : measured) m += std::to_string(x) + " ";
        for (int64_t x : predicted) p += std::to_string(x) + " ";
        fail(name, "activation peaks per stage " + m + "!= simulator " + p);
      }
      const auto& inflight = r.metrics->theory->peak_inflight_per_stage;
      const auto& per_mb = r.metrics->theory->activation_bytes_per_microbatch;
      // A split backward keeps other bytes after I than before it.
      const ppb::ScheduleInfo* info = ppb::find_schedule_info(r.config.schedule);
      const bool split = info == nullptr || info->splits_backward;
      if (r.config.chunks == 1 && !split && inflight.size() == per_mb.size()) {
        for (size_t s = 0; s < inflight.size(); ++s) {
          if (predicted[s] != int64_t{inflight[s]} * per_mb[s])
            fail(name, "peak != peak in-flight x unit bytes on stage " + std::to_string(s));
        }
      }
      std::printf("%-48s activations per stage:", name.c_str());
      for (int64_t x : measured) std::printf(" %lld", static_cast<long long>(x));
      std::printf("\n");
      groups[r.config.partition + " M=" + std::to_string(r.config.microbatches) +
             " P=" + std::to_string(r.config.stages)][r.config.schedule] = sum(measured);
    }
    // The order where the sweep ran all three (a sweep of other schedules
    // checks only the peaks above; a missing result failed above).
    for (const auto& [key, by] : groups) {
      if (by.count("sync-1f1b") && by.count("1f1b") && by.count("gpipe")) {
        if (!(by.at("sync-1f1b") < by.at("1f1b") && by.at("1f1b") < by.at("gpipe"))) {
          fail(key, "activation peaks do not order sync-1f1b < 1f1b < gpipe");
        }
      }
    }
  } else if (mode == "trace") {
    for (const auto& [name, r] : results) {
      const std::string path = trace_path(dir, name);
      const boost::json::value doc = read_trace(name, path);
      if (doc.is_null()) continue;
      std::set<int64_t> pids;
      int64_t starts = 0, ends = 0, actions = 0;
      for (const auto& e : doc.as_object().at("traceEvents").as_array()) {
        const auto& o = e.as_object();
        const std::string ph(o.at("ph").as_string());
        if (ph == "s") ++starts;
        if (ph == "f") ++ends;
        if (ph == "X" && o.contains("cat")) {
          const std::string cat(o.at("cat").as_string());
          if (cat == "forward" || cat == "backward" || cat == "wgrad") ++actions;
        }
        pids.insert(o.at("pid").to_number<int64_t>());
      }
      int64_t want_actions = 0;
      for (const auto& row : r.timeline) {
        for (const auto& ev : row) want_actions += ev.op == ppb::ActionKind::kSync ? 0 : 1;
      }
      want_actions *= r.config.iters;
      std::printf("%-48s trace: %zu ranks, %lld actions, %lld flows\n", name.c_str(), pids.size(),
                  static_cast<long long>(actions), static_cast<long long>(starts));
      if (static_cast<int>(pids.size()) != r.config.stages) fail(path, "pids != stages");
      if (starts == 0 || starts != ends) fail(path, "flow starts and ends do not pair");
      if (actions != want_actions) fail(path, "action events != actions per step x iters");
    }
  } else if (mode == "device") {
    const double tol = argc > 3 ? std::atof(argv[3]) : 0.02;
    for (const auto& [name, r] : results) {
      if (r.status != ppb::ResultStatus::kOk) {
        fail(name, std::string("status ") + ppb::result_status_name(r.status) + " " + r.error);
        continue;
      }
      const ppb::ResultMetrics& m = *r.metrics;
      const auto cupti = m.collectors.find("cupti");
      if (!m.device || m.device->profiler != "cupti" || cupti == m.collectors.end()) {
        fail(name, "no device figures from the cupti collector");
        continue;
      }
      const ppb::CollectorResult& c = cupti->second;
      const auto figure = [&](const char* key) {
        const auto it = c.step.find(key);
        return it == c.step.end() ? std::vector<double>{} : it->second;
      };
      const std::vector<double> records = figure("records");
      const std::vector<double> dropped = figure("dropped_records");
      const std::vector<double> unattributed = figure("unattributed_kernels");
      if (records.size() != static_cast<size_t>(r.config.stages) ||
          dropped.size() != records.size() || unattributed.size() != records.size()) {
        fail(name, "the cupti step figures are not one per stage");
        continue;
      }
      for (size_t s = 0; s < records.size(); ++s) {
        const std::string at = "stage " + std::to_string(s) + ": ";
        if (!(records[s] > 0)) fail(name, at + "no device records");
        if (dropped[s] != 0) fail(name, at + std::to_string(dropped[s]) + " records dropped");
        if (unattributed[s] != 0)
          fail(name, at + std::to_string(unattributed[s]) + " kernels no action launched");
        if (!(m.device->compute_seconds_per_stage.at(s) > 0)) fail(name, at + "no compute");
        // The kernel families share out the compute time: their sum is at
        // least its union, and more only where families overlapped on two
        // streams (never half as much again).
        double families = 0;
        for (const auto& [key, per_stage] : c.step) {
          if (key.starts_with("kernel_seconds_")) families += per_stage.at(s);
        }
        const double compute = m.device->compute_seconds_per_stage.at(s);
        if (!(families >= compute * (1 - 1e-9) && families <= 1.5 * compute))
          fail(name, at + "kernel families sum to " + std::to_string(families) +
                         " s, device compute " + std::to_string(compute) + " s");
      }
      // Every family a GPT's units launch kernels in took time on some
      // stage: a kernel whose name no family knows counts as "other", and
      // its unit kind would read as free (gelu may ride in a GEMM epilogue).
      for (const char* family : {"gemm", "layernorm", "attention", "embedding", "cross_entropy"}) {
        const std::vector<double> per_stage =
            figure((std::string("kernel_seconds_") + family).c_str());
        double sum = 0;
        for (double x : per_stage) sum += x;
        if (!(sum > 0)) fail(name, std::string("no device time in kernel family ") + family);
      }
      // Every compute action ran device work that was attributed to it.
      const auto seconds = c.action.find("device_seconds");
      if (seconds == c.action.end() || seconds->second.size() != r.timeline.size()) {
        fail(name, "no device seconds per action");
      } else {
        for (size_t s = 0; s < r.timeline.size(); ++s) {
          for (size_t i = 0; i < r.timeline[s].size(); ++i) {
            const ppb::ActionKind k = r.timeline[s][i].op;
            const bool compute =
                k == ppb::ActionKind::kForward || k == ppb::ActionKind::kBackward ||
                k == ppb::ActionKind::kBackwardInput || k == ppb::ActionKind::kBackwardWeight;
            if (compute && !(seconds->second[s].at(i) > 0))
              fail(name, "stage " + std::to_string(s) + " action " + std::to_string(i) +
                             ": no device time attributed");
          }
        }
      }
      // With --trace: each stage's kernels on its device tracks.
      if (std::filesystem::exists(trace_path(dir, name))) {
        const boost::json::value doc = read_trace(name, trace_path(dir, name));
        std::map<int64_t, int64_t> kernels;  // pid -> kernel events
        if (!doc.is_null()) {
          for (const auto& e : doc.as_object().at("traceEvents").as_array()) {
            const auto& o = e.as_object();
            if (o.contains("cat") && o.at("cat").as_string() == "kernel")
              ++kernels[o.at("pid").to_number<int64_t>()];
          }
          for (int s = 0; s < r.config.stages; ++s) {
            if (kernels[s] == 0)
              fail(name, "stage " + std::to_string(s) + ": no kernels in the trace");
          }
        }
      }
      const double diff = m.device->bubble_ratio - m.bubble_ratio.measured;
      std::printf("%-48s device bubble %.4f events %.4f (diff %+.4f), %g records on stage 0\n",
                  name.c_str(), m.device->bubble_ratio, m.bubble_ratio.measured, diff, records[0]);
      if (judge_timings(name, r) && !(std::fabs(diff) <= tol))
        fail(name, "device bubble differs from the events' by more than " + std::to_string(tol));
    }
  } else if (mode == "guard") {
    const ppb::Result* adaptive = nullptr;
    const ppb::Result* async = nullptr;
    const ppb::Result* gpipe = nullptr;
    for (const auto& [name, r] : results) {
      if (r.config.schedule == "adaptive") adaptive = &r;
      if (r.config.schedule == "async-1f1b") async = &r;
      if (r.config.schedule == "gpipe") gpipe = &r;
    }
    if (adaptive == nullptr || async == nullptr || gpipe == nullptr) {
      fail(dir, "needs adaptive, async-1f1b and gpipe results");
    } else {
      auto peak = [](const ppb::Result& r) {
        int64_t p = 0;
        if (r.metrics)
          for (int64_t x : r.metrics->peak_memory_bytes.per_stage) p = std::max(p, x);
        return p;
      };
      const double line =
          adaptive->config.memory_guard * static_cast<double>(adaptive->config.memory_budget);
      std::printf(
          "guard line %.0f bytes; adaptive peak %lld (%s), async-1f1b peak %lld (%s), gpipe %s: "
          "%s\n",
          line, static_cast<long long>(peak(*adaptive)), ppb::result_status_name(adaptive->status),
          static_cast<long long>(peak(*async)), ppb::result_status_name(async->status),
          ppb::result_status_name(gpipe->status), gpipe->error.c_str());
      if (!(line > 0)) fail("adaptive", "no guard x budget in its config");
      if (adaptive->status != ppb::ResultStatus::kOk)
        fail("adaptive", "status " + std::string(ppb::result_status_name(adaptive->status)));
      if (!(static_cast<double>(peak(*adaptive)) <= line))
        fail("adaptive", "measured peak above guard x budget");
      if (!adaptive->metrics || !adaptive->metrics->memory_guard ||
          adaptive->metrics->memory_guard->actions < 1 ||
          adaptive->metrics->memory_guard->min_inflight >= adaptive->config.inflight) {
        fail("adaptive", "the guard did not lower the in-flight limit");
      }
      if (!(static_cast<double>(peak(*async)) > line))
        fail("async-1f1b", "peak not above guard x budget: the test proves nothing");
      if (gpipe->status != ppb::ResultStatus::kOom)
        fail("gpipe", "expected status oom over the budget");
      if (!gpipe->metrics || peak(*gpipe) <= gpipe->config.memory_budget)
        fail("gpipe", "oom without the figures over the budget");
    }
  } else if (mode == "same") {
    std::map<std::string, ppb::Result> other;
    try {
      for (auto& [name, r] : load(argc > 3 ? argv[3] : "")) other.emplace(name, std::move(r));
    } catch (const std::exception& e) {
      fail(argc > 3 ? argv[3] : "OTHER", e.what());
    }
    if (other.size() != results.size())
      fail(dir, std::to_string(other.size()) + " re-run files for " +
                    std::to_string(results.size()) + " results");
    for (const auto& [name, r] : results) {
      const auto it = other.find(name);
      if (it == other.end()) {
        fail(name, "not re-run");
        continue;
      }
      ppb::ResultConfig a = r.config;
      ppb::ResultConfig b = it->second.config;
      // The time scale goes through JSON twice: equal within a few ulps.
      if (std::fabs(a.time_scale - b.time_scale) > 1e-12 * std::fabs(a.time_scale))
        fail(name,
             "time_scale " + std::to_string(a.time_scale) + " -> " + std::to_string(b.time_scale));
      a.time_scale = b.time_scale = 0;
      if (!(a == b)) fail(name, "the re-run's config differs");
      if (r.status != it->second.status) fail(name, "the re-run's status differs");
      std::printf("%-48s re-run with the same config (%s)\n", name.c_str(),
                  ppb::result_status_name(it->second.status));
    }
  } else if (mode == "model") {
    const double step_tol = argc > 3 ? std::atof(argv[3]) : 0.1;
    for (const auto& [name, r] : results) check_model(name, r, step_tol);
  } else if (mode == "dp") {
    const int want = argc > 3 ? std::atoi(argv[3]) : 2;
    const double tol = argc > 4 ? std::atof(argv[4]) : 0.02;
    for (const auto& [name, r] : results) {
      if (r.status != ppb::ResultStatus::kOk || !r.metrics->allreduce) {
        fail(name, std::string("status ") + ppb::result_status_name(r.status) + " " + r.error +
                       (r.metrics && !r.metrics->allreduce ? " (no all-reduce figures)" : ""));
        continue;
      }
      const ppb::ResultConfig& c = r.config;
      if (c.data_parallel != want)
        fail(name, "data_parallel " + std::to_string(c.data_parallel) + ", expected " +
                       std::to_string(want));
      if (r.environment.ranks != c.stages * c.data_parallel)
        fail(name, std::to_string(r.environment.ranks) + " ranks for " + std::to_string(c.stages) +
                       " stages x " + std::to_string(c.data_parallel));
      const ppb::AllReduceFigures& a = *r.metrics->allreduce;
      for (size_t s = 0; s < a.bytes_per_stage.size(); ++s) {
        const std::string at = "stage " + std::to_string(s) + ": ";
        if (a.bytes_per_stage[s] <= 0) fail(name, at + "no gradient bytes all-reduced");
        if (!(a.seconds_per_stage[s] > 0)) fail(name, at + "no all-reduce time");
        if (!(a.overlap_seconds_per_stage[s] <= a.seconds_per_stage[s] + 1e-9))
          fail(name, at + "overlap longer than the all-reduce");
      }
      if (a.bytes_per_stage.size() != static_cast<size_t>(c.stages))
        fail(name,
             "all-reduce figures for " + std::to_string(a.bytes_per_stage.size()) + " stages");
      const ppb::BubbleFigures& without = a.bubble_ratio_pipeline;
      if (!(r.metrics->bubble_ratio.measured + 1e-12 >= without.measured))
        fail(name, "bubble with the all-reduce below the one without it");
      if (tol < 1 && judge_timings(name, r) &&
          !(std::fabs(without.measured - without.theoretical) <= tol))
        fail(name, "bubble without the all-reduce differs from the simulator's by more than " +
                       std::to_string(tol));
      if (const auto& ck = r.metrics->check) {
        if (!ck->passed) fail(name, "check failed");
        if (ck->method == "reference" && !(ck->max_rel_error <= 1e-6))
          fail(name, "relative error above 1e-6");
      }
      std::printf(
          "%-48s P=%d D=%d all-reduce %.3f ms (theory %.3f ms, overlap %.3f ms) bubble "
          "with %.4f (%.4f) without %.4f (%.4f)%s\n",
          name.c_str(), c.stages, c.data_parallel, a.seconds * 1e3,
          a.theoretical_seconds_per_stage.empty() ? 0.0 : a.theoretical_seconds_per_stage[0] * 1e3,
          a.overlap_seconds_per_stage.empty() ? 0.0 : a.overlap_seconds_per_stage[0] * 1e3,
          r.metrics->bubble_ratio.measured, r.metrics->bubble_ratio.theoretical, without.measured,
          without.theoretical,
          r.metrics->check ? (" check " + std::string(r.metrics->check->passed ? "ok" : "FAILED") +
                              " max rel error " + std::to_string(r.metrics->check->max_rel_error))
                                 .c_str()
                           : "");
    }
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  std::printf("%zu result files, %d failures\n", results.size(), failures);
  if (failures > 0) return 1;
  if (timings_declined > 0 && timings_judged == 0) {
    std::printf(
        "SKIP: no result's timings could be judged: the host was busy with other work "
        "(metrics.foreign_cpu above %.0f%%)\n",
        kMaxForeignCpu * 100);
    return 77;
  }
  return 0;
}
