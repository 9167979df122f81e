#include "ppb/reports/health_gate.hpp"

#include <algorithm>
#include <array>
#include <boost/json.hpp>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "ppb/profiling/check.hpp"
#include "ppb/profiling/input_file.hpp"
#include "ppb/reports/format.hpp"

namespace ppb::reports {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

// Lists a file that cannot be read (--skip-bad) once: the results' loader
// may have listed it already.
void list_bad(std::vector<BadFile>& bad, const std::string& path, const std::string& why) {
  const bool listed =
      std::any_of(bad.begin(), bad.end(), [&path](const BadFile& b) { return b.path == path; });
  if (!listed) bad.push_back({path, why});
}

// The health files among the JSON under `path`. With `bad` (--skip-bad) one
// that cannot be read, or a bad health file, is listed there, else named.
void health_under(const std::string& path, std::set<std::string>& seen,
                  std::vector<HealthEntry>& out, std::vector<BadFile>* bad) {
  std::vector<BadFile> unreadable;
  const std::vector<std::string> files = result_candidates(path, bad ? &unreadable : nullptr);
  for (const BadFile& b : unreadable) list_bad(*bad, b.path, b.message);
  for (const std::string& f : files) {
    if (!seen.insert(resolved_path(f).string()).second) continue;
    try {
      // Results (far larger, and already read) are not parsed again: a
      // health file names its schema; one that does and is cut short is
      // named.
      const std::string text = read_input_file(f, "result file", kMaxResultFileBytes);
      if (text.find("pipebench.health/") == std::string::npos) continue;
      const json::value doc = parse_health_text(text, f);
      if (!is_health_document(doc)) continue;  // a result quoting the schema: not ours
      HealthEntry e;
      e.source = f;
      e.file = health_from_json(doc, f);
      e.machine = machine_key(e.file.environment);
      out.push_back(std::move(e));
    } catch (const UsageError& e) {
      if (bad == nullptr) throw;
      list_bad(*bad, f, e.what());
    }
  }
}

std::string gpu_label(const HealthGpu& g) {
  return "GPU " + std::to_string(g.device) + " " + g.name +
         (g.bus.empty() ? "" : " (" + g.bus + ")");
}

// The figure's samples of the GPU at `bus` (or device index, without a bus)
// in `file`; null when it has none.
const std::vector<double>* samples_of(const HealthFile& file, const HealthGpu& gpu,
                                      const std::string& figure) {
  for (const HealthGpu& g : file.gpus) {
    const bool same = gpu.bus.empty() ? g.device == gpu.device : g.bus == gpu.bus;
    if (!same || g.name != gpu.name) continue;
    const auto it = g.figures.find(figure);
    return it == g.figures.end() ? nullptr : &it->second;
  }
  return nullptr;
}

// A night's newest health file of `machine` (the first of the newest on a
// tie); null when the night has none.
const HealthEntry* newest_of(const std::string& machine, const std::vector<HealthEntry>& night) {
  const HealthEntry* newest = nullptr;
  for (const HealthEntry& e : night) {
    if (e.machine == machine && (newest == nullptr || e.file.date > newest->file.date)) newest = &e;
  }
  return newest;
}

// The earlier nights' health of `machine`: per night its name and newest
// file, oldest first.
std::vector<std::pair<std::string, const HealthFile*>> earlier(
    const std::string& machine,
    const std::vector<std::pair<std::string, std::vector<HealthEntry>>>& nights) {
  std::vector<std::pair<std::string, const HealthFile*>> out;
  for (const auto& [name, entries] : nights) {
    if (const HealthEntry* newest = newest_of(machine, entries))
      out.emplace_back(name, &newest->file);
  }
  return out;
}

std::vector<GpuTrouble> trouble_of(const HealthFile& file) {
  std::vector<GpuTrouble> out;
  for (const HealthGpu& g : file.gpus) {
    if (!g.gpu_state) continue;
    GpuTrouble t;
    t.gpu = gpu_label(g);
    t.reasons = slowing_reasons(*g.gpu_state);
    t.sm_clock_mhz_min = g.gpu_state->sm_clock_mhz_min;
    t.temperature_c_max = g.gpu_state->temperature_c_max;
    t.ecc_corrected = g.gpu_state->ecc_corrected;
    t.ecc_uncorrected = g.gpu_state->ecc_uncorrected;
    if (!t.reasons.empty() || t.ecc_uncorrected > 0 || t.ecc_corrected > 0)
      out.push_back(std::move(t));
  }
  return out;
}

// What NVML read while the GPU sweep ran, per GPU of its runs: one sample
// per result (its summary over the timed steps) of each figure below,
// higher being better for each: a GPU that runs the sweep at lower clocks
// or under a lower power limit than on the earlier nights got slower itself.
struct SweepFigure {
  const char* name;
  double GpuState::*field;
};
constexpr std::array<SweepFigure, 3> kSweepFigures = {{
    {"sweep_sm_clock_mhz", &GpuState::sm_clock_mhz_median},
    {"sweep_memory_clock_mhz", &GpuState::memory_clock_mhz_median},
    {"sweep_power_limit_watts", &GpuState::power_limit_watts},
}};

// Per GPU of a machine's runs (GpuState::gpu, "node1: NVIDIA H200
// (0000:3B:00.0)"), per figure, its samples, each with the configuration
// of the run that took it (ResultEntry::config_key).
using SweepSamples =
    std::map<std::string, std::map<std::string, std::vector<std::pair<std::string, double>>>>;

// The sweeps' samples of `results`, per machine (host_key).
std::map<std::string, SweepSamples> sweep_samples(const std::vector<const ResultEntry*>& results) {
  std::map<std::string, SweepSamples> out;
  for (const ResultEntry* e : results) {
    if (e->result.status != ResultStatus::kOk || !e->result.metrics) continue;
    for (const GpuState& g : e->result.metrics->gpu_state) {
      for (const SweepFigure& f : kSweepFigures) {
        const double x = g.*f.field;
        if (std::isfinite(x) && x > 0)
          out[host_key(e->result.environment)][g.gpu][f.name].emplace_back(e->config_key, x);
      }
    }
  }
  return out;
}

// The GPU states the runs of `results` on `host` (host_key) recorded.
std::vector<const GpuState*> host_states(const std::string& host,
                                         const std::vector<const ResultEntry*>& results) {
  std::vector<const GpuState*> out;
  for (const ResultEntry* e : results) {
    if (!e->result.metrics || host_key(e->result.environment) != host) continue;
    for (const GpuState& g : e->result.metrics->gpu_state) out.push_back(&g);
  }
  return out;
}

// What slowed or failed each GPU of `host` (host_key) while tonight's
// sweep ran: the slowing reasons any run saw, its lowest SM clock and top
// temperature, the ECC errors that arrived during the runs (summed over
// them: the runs took turns).
std::vector<GpuTrouble> sweep_trouble(const std::string& host,
                                      const std::vector<const ResultEntry*>& results) {
  std::map<std::string, GpuTrouble> by_gpu;
  const auto add = [](int64_t& total, int64_t n) {
    if (n >= 0) total = std::max<int64_t>(total, 0) + n;
  };
  for (const GpuState* g : host_states(host, results)) {
    GpuTrouble& t = by_gpu[g->gpu];
    t.gpu = g->gpu;
    t.sweep = true;
    for (const std::string& r : slowing_reasons(*g)) {
      if (std::find(t.reasons.begin(), t.reasons.end(), r) == t.reasons.end())
        t.reasons.push_back(r);
    }
    if (std::isfinite(g->sm_clock_mhz_min) &&
        !(g->sm_clock_mhz_min >= t.sm_clock_mhz_min))  // NaN so far, or lower
      t.sm_clock_mhz_min = g->sm_clock_mhz_min;
    if (std::isfinite(g->temperature_c_max) && !(g->temperature_c_max <= t.temperature_c_max))
      t.temperature_c_max = g->temperature_c_max;
    add(t.ecc_corrected, g->ecc_corrected);
    add(t.ecc_uncorrected, g->ecc_uncorrected);
  }
  std::vector<GpuTrouble> out;
  for (auto& [gpu, t] : by_gpu) {
    if (!t.reasons.empty() || t.ecc_uncorrected > 0 || t.ecc_corrected > 0)
      out.push_back(std::move(t));
  }
  return out;
}

// The GPU sweep's regressed rows on `host` (host_key), whatever share of
// its GPUs each run used.
int sweep_regressions(const std::string& host, const RegressionSummary* sweep) {
  if (sweep == nullptr) return 0;
  int n = 0;
  for (const RegressionRow& row : sweep->rows) {
    if (row.status != RegressionStatus::kRegressed || row.current == nullptr) continue;
    const ResultEnvironment& env = row.current->result.environment;
    if (!env.gpus.empty() && host_key(env) == host) ++n;
  }
  return n;
}

// Whether the hardware itself says why the GPU ran slower: a slowing reason
// other than the power cap (thermal, a hardware slowdown, a power brake)
// during the probe or the sweep, or a lower power limit than before. A
// heavier build holds the clocks at the power cap too; these it does not.
bool hardware_slowdown(const HealthSummary& s) {
  for (const GpuTrouble& t : s.trouble) {
    for (const std::string& r : t.reasons)
      if (r != "sw_power_cap") return true;
  }
  return std::any_of(s.figures.begin(), s.figures.end(), [](const HealthVerdict& v) {
    return v.what.name == "sweep_power_limit_watts" &&
           v.what.status == RegressionStatus::kRegressed;
  });
}

HealthCause cause_of(const HealthSummary& s) {
  const int probe = s.probe_regressions - s.sweep_state_regressions;
  if (probe > 0 || (s.sweep_state_regressions > 0 && hardware_slowdown(s)))
    return s.sweep_regressions > 0 ? HealthCause::kGpu : HealthCause::kProbeOnly;
  if (s.sweep_state_regressions > 0) return HealthCause::kLowerClocks;
  if (s.sweep_regressions > 0 && s.probe_held > 0) return HealthCause::kSoftware;
  return HealthCause::kNone;
}

}  // namespace

std::vector<HealthEntry> load_health(const std::vector<std::string>& paths,
                                     std::vector<BadFile>* bad) {
  std::vector<HealthEntry> out;
  std::set<std::string> seen;
  for (const std::string& p : paths) health_under(p, seen, out, bad);
  if (!out.empty()) return out;
  for (const std::string& p : paths) {
    fs::path folder = fs::path(p).lexically_normal();
    if (!folder.has_filename()) folder = folder.parent_path();  // "night/cuda/"
    const fs::path beside = folder.parent_path() / "health";
    std::error_code ec;
    if (fs::is_directory(beside, ec)) health_under(beside.string(), seen, out, bad);
  }
  return out;
}

namespace {

// One figure of one GPU against its earlier nights (none: a new figure).
void judge(HealthSummary& s, const std::string& gpu, const std::string& figure,
           std::vector<NightFigure> series, const std::vector<double>& samples,
           const std::string& tonight, const GateOptions& options) {
  if (series.empty()) {
    ++s.new_figures;
    return;
  }
  series.push_back({tonight, samples});
  HealthVerdict v{gpu, decide_figure(figure, -1, series, options)};
  if (v.what.status == RegressionStatus::kRegressed) ++s.probe_regressions;
  if (v.what.status == RegressionStatus::kPass) ++s.probe_held;
  s.figures.push_back(std::move(v));
}

// What NVML read during tonight's GPU sweep (the sweep gate's rows) and
// during each earlier night's, per machine.
struct SweepHistory {
  std::vector<const ResultEntry*> tonight_results;
  std::set<std::string> hosts;  ///< tonight's machines (host_key) with a GPU state sampled
  std::map<std::string, SweepSamples> tonight;
  std::vector<std::pair<std::string, std::map<std::string, SweepSamples>>> before;
};

SweepHistory sweep_history(const RegressionSummary* sweep, const std::vector<Night>& history,
                           size_t first) {
  SweepHistory h;
  if (sweep != nullptr) {
    for (const RegressionRow& row : sweep->rows)
      if (row.current != nullptr) h.tonight_results.push_back(row.current);
  }
  for (const ResultEntry* e : h.tonight_results) {
    if (e->result.metrics && !e->result.metrics->gpu_state.empty())
      h.hosts.insert(host_key(e->result.environment));
  }
  h.tonight = sweep_samples(h.tonight_results);
  for (size_t i = first; i < history.size(); ++i) {
    std::vector<const ResultEntry*> results;
    for (const ResultEntry& e : history[i].results.results) results.push_back(&e);
    h.before.emplace_back(history[i].name, sweep_samples(results));
  }
  return h;
}

// The samples of one GPU's figure on each earlier night of `host`.
std::vector<std::pair<std::string, const std::vector<std::pair<std::string, double>>*>>
earlier_samples(const SweepHistory& h, const std::string& host, const std::string& gpu,
                const std::string& figure) {
  std::vector<std::pair<std::string, const std::vector<std::pair<std::string, double>>*>> out;
  for (const auto& [name, hosts] : h.before) {
    const auto m = hosts.find(host);
    if (m == hosts.end()) continue;
    const auto g = m->second.find(gpu);
    if (g == m->second.end()) continue;
    const auto f = g->second.find(figure);
    if (f != g->second.end()) out.emplace_back(name, &f->second);
  }
  return out;
}

// The sweep's figures and trouble of `host`, into its summary. A figure
// compares the combinations that tonight and every earlier night of it ran
// (a model added to the sweep, or one left out, changes what the GPU did,
// not how fast it is).
void add_sweep(HealthSummary& s, const std::string& host, const SweepHistory& h,
               const std::string& tonight, const GateOptions& options) {
  const int regressions = s.probe_regressions;
  const auto it = h.tonight.find(host);
  for (const auto& [gpu, figures] : it != h.tonight.end() ? it->second : SweepSamples{}) {
    for (const auto& [figure, samples] : figures) {
      // The combinations of tonight's that every earlier night with the
      // figure ran too.
      std::set<std::string> common;
      for (const auto& sample : samples) common.insert(sample.first);
      const auto nights = earlier_samples(h, host, gpu, figure);
      for (const auto& [name, night] : nights) {
        std::set<std::string> ran;
        for (const auto& sample : *night) ran.insert(sample.first);
        std::erase_if(common, [&ran](const std::string& c) { return ran.count(c) == 0; });
      }
      const auto only_common = [&common](const std::vector<std::pair<std::string, double>>& v) {
        std::vector<double> out;
        for (const auto& [config, x] : v)
          if (common.count(config) != 0) out.push_back(x);
        return out;
      };
      std::vector<NightFigure> series;
      for (const auto& [name, night] : nights) series.push_back({name, only_common(*night)});
      if (common.empty()) series.clear();  // no combination of tonight's ran every night: new
      judge(s, gpu, figure, std::move(series), only_common(samples), tonight, options);
    }
  }
  s.sweep_state_regressions += s.probe_regressions - regressions;
  for (GpuTrouble& t : sweep_trouble(host, h.tonight_results)) s.trouble.push_back(std::move(t));
  for (const GpuState* g : host_states(host, h.tonight_results))
    s.reasons_unread = s.reasons_unread || !g->throttle_reasons_read;
}

// The probe's summary of tonight's health file `e`.
HealthSummary probe_summary(
    const HealthEntry& e,
    const std::vector<std::pair<std::string, std::vector<HealthEntry>>>& nights,
    const std::string& tonight, const GateOptions& options) {
  HealthSummary s;
  s.machine = e.machine;
  s.source = e.source;
  if (!e.file.gpu_state_note.empty()) s.notes.push_back(e.file.gpu_state_note);
  s.trouble = trouble_of(e.file);
  const auto before = earlier(e.machine, nights);
  for (const HealthGpu& g : e.file.gpus) {
    for (const auto& [figure, samples] : g.figures) {
      std::vector<NightFigure> series;
      for (const auto& [name, file] : before) {
        if (const std::vector<double>* v = samples_of(*file, g, figure))
          series.push_back({name, *v});
      }
      judge(s, gpu_label(g), figure, std::move(series), samples, tonight, options);
    }
  }
  return s;
}

}  // namespace

std::vector<HealthSummary> gate_health(const std::vector<HealthEntry>& tonight,
                                       const std::string& tonight_name,
                                       const std::vector<Night>& history,
                                       const RegressionSummary* sweep, const GateOptions& options,
                                       std::vector<BadFile>* bad) {
  const size_t first = history.size() > static_cast<size_t>(options.window)
                           ? history.size() - static_cast<size_t>(options.window)
                           : 0;
  std::vector<std::pair<std::string, std::vector<HealthEntry>>> nights;
  for (size_t i = first; i < history.size(); ++i) {
    if (!history[i].path.empty())
      nights.emplace_back(history[i].name, load_health({history[i].path}, bad));
  }
  const SweepHistory swept = sweep_history(sweep, history, first);
  std::vector<HealthSummary> out;
  std::set<std::string> with_sweep;
  for (const HealthEntry& e : tonight) {
    if (newest_of(e.machine, tonight) != &e) continue;  // as earlier() reads a night
    out.push_back(probe_summary(e, nights, tonight_name, options));
    for (const HealthEntry& other : tonight) {
      if (other.machine == e.machine && &other != &e)
        out.back().notes.push_back(
            "another probe of this machine tonight is not gated: " + other.source + " (" +
            other.file.date + "; the newest is gated: " + e.source + ")");
    }
    out.back().host = host_key(e.file.environment);
    if (with_sweep.insert(out.back().host).second)
      add_sweep(out.back(), out.back().host, swept, tonight_name, options);
  }
  // A machine whose sweep NVML sampled, without a probe tonight.
  for (const std::string& host : swept.hosts) {
    if (!with_sweep.insert(host).second) continue;
    HealthSummary s;
    s.machine = s.host = host;
    add_sweep(s, host, swept, tonight_name, options);
    out.push_back(std::move(s));
  }
  for (HealthSummary& s : out) {
    s.sweep_regressions = sweep_regressions(s.host, sweep);
    s.cause = cause_of(s);
  }
  return out;
}

std::string trouble_text(const GpuTrouble& t) {
  std::string text = t.gpu + ":";
  const std::string during = t.sweep ? "during the GPU sweep" : "during the probe";
  if (!t.reasons.empty()) {
    text += t.sweep ? " throttled during the GPU sweep:" : " throttled tonight:";
    for (size_t i = 0; i < t.reasons.size(); ++i) text += (i == 0 ? " " : ", ") + t.reasons[i];
    // What the driver read: a GPU may not expose its clocks or temperature.
    std::string read;
    if (std::isfinite(t.sm_clock_mhz_min))
      read = "SM clock down to " + format_fixed(t.sm_clock_mhz_min, 0) + " MHz";
    if (std::isfinite(t.temperature_c_max))
      read += (read.empty() ? "" : ", ") + std::string("up to ") +
              format_fixed(t.temperature_c_max, 0) + " C";
    if (!read.empty()) text += " (" + read + ")";
  }
  if (t.ecc_uncorrected > 0)
    text += (t.reasons.empty() ? " " : "; ") + std::to_string(t.ecc_uncorrected) +
            " uncorrected ECC error(s) " + during;
  if (t.ecc_corrected > 0)
    text += (t.reasons.empty() && t.ecc_uncorrected <= 0 ? " " : "; ") +
            std::to_string(t.ecc_corrected) + " corrected ECC error(s) " + during;
  return text;
}

std::string health_text(const HealthSummary& s) {
  std::string slower;
  for (const HealthVerdict& v : s.figures) {
    if (v.what.status != RegressionStatus::kRegressed) continue;
    slower += (slower.empty() ? "" : "; ") + v.gpu + " " + verdict_text(v.what);
  }
  const std::string sweep = std::to_string(s.sweep_regressions) + " regression(s)";
  std::string text = "GPU health (" + s.machine + "): ";
  switch (s.cause) {
    case HealthCause::kGpu:
      return text + "the GPU itself got slower (clocks, throttling, a failing part): " + slower +
             "; the GPU sweep's " + sweep + " on this machine follow it, not the code";
    case HealthCause::kSoftware: {
      // Which figures held: the probe's, the sweep's NVML readings, or both.
      bool probe = false;
      bool sampled = false;
      for (const HealthVerdict& v : s.figures) {
        if (v.what.status != RegressionStatus::kPass) continue;
        (v.what.name.rfind("sweep_", 0) == 0 ? sampled : probe) = true;
      }
      const std::string held = probe && sampled
                                   ? "GEMM, copies and the sweep's clocks and power limit"
                               : probe ? "GEMM and copies"
                                       : "the sweep's clocks and power limit";
      return text + (sampled ? "the GPU held (" : "the probe held (") +
             std::to_string(s.probe_held) + " figure(s) unchanged: " + held +
             " as on earlier nights): the GPU sweep's " + sweep +
             " on this machine are the software's (pipebench's code, the driver or a "
             "library), not the GPU";
    }
    case HealthCause::kProbeOnly:
      return text + "the GPU itself got slower (clocks, throttling, a failing part): " + slower +
             "; the GPU sweep's combinations did not show it";
    case HealthCause::kLowerClocks:
      return text +
             (s.reasons_unread
                  ? std::string("the GPU ran the sweep at lower clocks, and NVML did not give its "
                                "throttle reasons (its power limit as before), so nothing tells "
                                "the GPU's slowdown from the code's: ")
                  : std::string("the GPU ran the sweep at lower clocks, with no hardware cause "
                                "NVML names (no thermal or hardware slowdown, no power brake, its "
                                "power limit as before): ")) +
             slower +
             (s.sweep_regressions > 0
                  ? "; a build that draws more power holds the GPU lower at its power cap too, so "
                    "the GPU sweep's " +
                        sweep + " on this machine may be the software's"
                  : std::string("; the GPU sweep's combinations did not show it"));
    case HealthCause::kNone:
      break;
  }
  if (s.figures.empty() && s.new_figures == 0)
    return text + "no figure to compare (NVML read no clock or power limit during the sweep)";
  if (s.figures.empty())
    return text + "no earlier night to compare with (" + std::to_string(s.new_figures) +
           " new figure(s))";
  return text + std::to_string(s.probe_held) + " of " + std::to_string(s.figures.size()) +
         " figure(s) unchanged, none slower";
}

}  // namespace ppb::reports
