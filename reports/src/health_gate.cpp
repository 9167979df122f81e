#include "ppb/reports/health_gate.hpp"

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

// The health files among the JSON under `path`.
void health_under(const std::string& path, std::set<std::string>& seen,
                  std::vector<HealthEntry>& out) {
  for (const std::string& f : result_candidates(path)) {
    if (!seen.insert(fs::weakly_canonical(f).string()).second) continue;
    json::error_code ec;
    const json::value doc = json::parse(read_input_file(f, "result file", kMaxResultFileBytes), ec);
    if (ec || !is_health_document(doc)) continue;  // results and other JSON: not ours
    HealthEntry e;
    e.source = f;
    e.file = health_from_json(doc, f);
    e.machine = machine_key(e.file.environment);
    out.push_back(std::move(e));
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

// The earlier nights' health of `machine`: per night its name and file
// (the newest when a night holds several), oldest first.
std::vector<std::pair<std::string, const HealthFile*>> earlier(
    const std::string& machine,
    const std::vector<std::pair<std::string, std::vector<HealthEntry>>>& nights) {
  std::vector<std::pair<std::string, const HealthFile*>> out;
  for (const auto& [name, entries] : nights) {
    const HealthFile* newest = nullptr;
    for (const HealthEntry& e : entries) {
      if (e.machine == machine && (newest == nullptr || e.file.date > newest->date))
        newest = &e.file;
    }
    if (newest != nullptr) out.emplace_back(name, newest);
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

int sweep_regressions(const std::string& machine, const RegressionSummary* sweep) {
  if (sweep == nullptr) return 0;
  int n = 0;
  for (const RegressionRow& row : sweep->rows) {
    if (row.status != RegressionStatus::kRegressed || row.current == nullptr) continue;
    if (row.machine == machine && !row.current->result.environment.gpus.empty()) ++n;
  }
  return n;
}

HealthCause cause_of(const HealthSummary& s) {
  if (s.probe_regressions > 0)
    return s.sweep_regressions > 0 ? HealthCause::kGpu : HealthCause::kProbeOnly;
  if (s.sweep_regressions > 0 && s.probe_held > 0) return HealthCause::kSoftware;
  return HealthCause::kNone;
}

}  // namespace

std::vector<HealthEntry> load_health(const std::vector<std::string>& paths) {
  std::vector<HealthEntry> out;
  std::set<std::string> seen;
  for (const std::string& p : paths) health_under(p, seen, out);
  if (!out.empty()) return out;
  for (const std::string& p : paths) {
    fs::path folder = fs::path(p).lexically_normal();
    if (!folder.has_filename()) folder = folder.parent_path();  // "night/cuda/"
    const fs::path beside = folder.parent_path() / "health";
    std::error_code ec;
    if (fs::is_directory(beside, ec)) health_under(beside.string(), seen, out);
  }
  return out;
}

std::vector<HealthSummary> gate_health(const std::vector<HealthEntry>& tonight,
                                       const std::string& tonight_name,
                                       const std::vector<Night>& history,
                                       const RegressionSummary* sweep, const GateOptions& options) {
  const size_t first = history.size() > static_cast<size_t>(options.window)
                           ? history.size() - static_cast<size_t>(options.window)
                           : 0;
  std::vector<std::pair<std::string, std::vector<HealthEntry>>> nights;
  for (size_t i = first; i < history.size(); ++i) {
    if (!history[i].path.empty())
      nights.emplace_back(history[i].name, load_health({history[i].path}));
  }
  std::vector<HealthSummary> out;
  for (const HealthEntry& e : tonight) {
    HealthSummary s;
    s.machine = e.machine;
    s.source = e.source;
    s.nvml_note = e.file.gpu_state_note;
    s.trouble = trouble_of(e.file);
    const auto before = earlier(e.machine, nights);
    for (const HealthGpu& g : e.file.gpus) {
      for (const auto& [figure, samples] : g.figures) {
        std::vector<NightFigure> series;
        for (const auto& [name, file] : before) {
          if (const std::vector<double>* v = samples_of(*file, g, figure))
            series.push_back({name, *v});
        }
        if (series.empty()) {
          ++s.new_figures;
          continue;
        }
        series.push_back({tonight_name, samples});
        HealthVerdict v{gpu_label(g), decide_figure(figure, -1, series, options)};
        if (v.what.status == RegressionStatus::kRegressed) ++s.probe_regressions;
        if (v.what.status == RegressionStatus::kPass) ++s.probe_held;
        s.figures.push_back(std::move(v));
      }
    }
    s.sweep_regressions = sweep_regressions(e.machine, sweep);
    s.cause = cause_of(s);
    out.push_back(std::move(s));
  }
  return out;
}

std::string trouble_text(const GpuTrouble& t) {
  std::string text = t.gpu + ":";
  if (!t.reasons.empty()) {
    text += " throttled tonight:";
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
            " uncorrected ECC error(s) during the probe";
  if (t.ecc_corrected > 0)
    text += (t.reasons.empty() && t.ecc_uncorrected <= 0 ? " " : "; ") +
            std::to_string(t.ecc_corrected) + " corrected ECC error(s) during the probe";
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
    case HealthCause::kSoftware:
      return text + "the probe held (" + std::to_string(s.probe_held) +
             " figure(s) unchanged: GEMM and copies as on earlier nights): the GPU sweep's " +
             sweep +
             " on this machine are the software's (pipebench's code, the driver or a "
             "library), not the GPU";
    case HealthCause::kProbeOnly:
      return text + "the GPU itself got slower (clocks, throttling, a failing part): " + slower +
             "; the GPU sweep did not show it";
    case HealthCause::kNone:
      break;
  }
  if (s.figures.empty())
    return text + "no earlier night to compare with (" + std::to_string(s.new_figures) +
           " new figure(s))";
  return text + std::to_string(s.probe_held) + " of " + std::to_string(s.figures.size()) +
         " figure(s) unchanged, none slower";
}

}  // namespace ppb::reports
