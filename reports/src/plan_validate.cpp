// Calibrating the planner's roofline on measured results, and predicting
// each measured combination from its configuration (plan.hpp).
#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <cmath>
#include <deque>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "plan_cupti.hpp"
#include "ppb/pipeline/memory_model.hpp"
#include "ppb/pipeline/partition.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/simulator.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/input_file.hpp"
#include "ppb/reports/format.hpp"
#include "ppb/reports/plan.hpp"
#include "ppb/reports/stats.hpp"

namespace ppb::reports {

std::string gpu_preset(std::string_view gpu_name) {
  std::vector<std::string> words(1);
  for (const char ch : gpu_name) {
    if (ch == ' ' || ch == '-' || ch == '_') {
      if (!words.back().empty()) words.emplace_back();
    } else {
      words.back() += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
  }
  for (const std::string& name : device_preset_names()) {
    if (std::find(words.begin(), words.end(), name) != words.end()) return name;
  }
  return "";
}

std::string roofline_device(const Result& result) {
  if (!result.environment.gpus.empty()) {
    std::string preset = gpu_preset(result.environment.gpus.front());
    if (!preset.empty()) return preset;
  }
  return result.config.device.empty() ? "cpu" : result.config.device;
}

Repriced reprice(const Result& result) {
  const ResultConfig& c = result.config;
  Repriced r;
  r.spec = model_spec(c);
  r.device = device_preset(roofline_device(result), r.spec.bytes_per_element);
  // The attention that ran: fused keeps the softmax statistics, not the
  // probabilities (a cuda kernel; any other backend's files ran naive).
  const Kernels kernels = kernels_for(c.backend, r.device.name);
  r.attention = attention_ran(c) == attention_name(Attention::kFused) && kernels == Kernels::kCuda
                    ? Attention::kFused
                    : Attention::kNaive;
  r.units = expand_units(r.spec, kernels, r.attention);
  r.times = unit_times(r.units, r.device);
  const int parts = c.stages * c.chunks;
  if (!c.unit_ranges.empty()) {
    r.parts = make_partition("manual:" + c.unit_ranges, r.units, r.times, parts);
  } else {
    PartitionOptions popts;
    popts.link = r.device.link();  // as the run command cuts
    r.parts = make_partition(c.partition, r.units, r.times, parts, popts);
  }
  r.costs = model_costs(r.units, r.times, r.parts, c.stages, c.chunks, r.device.link());
  ScheduleParams p = schedule_params(c);
  if (schedule_info(c.schedule).uses_times) set_pass_times(r.costs, p);
  r.schedule = generate_schedule(c.schedule, p);
  return r;
}

namespace {

double finite_or_zero(double x) { return std::isfinite(x) && x > 0 ? x : 0.0; }

// Per stage: the roofline's mean F and mean backward (I + W) of one action
// (the mean over the stage's chunks, as measured means are), and the
// measured ones in modelled seconds.
struct StagePairs {
  std::vector<double> model_fwd, model_bwd, measured_fwd, measured_bwd;
};

StagePairs stage_pairs(const Repriced& r, const Result& result) {
  const ResultConfig& c = result.config;
  const std::vector<StageActionTimes>& measured = result.metrics->theory->action_seconds;
  const Placement place = placement_of(r.schedule);
  const double scale = c.time_scale > 0 ? c.time_scale : 1.0;
  StagePairs out;
  for (int s = 0; s < c.stages; ++s) {
    double f = 0, b = 0;
    for (int ch = 0; ch < c.chunks; ++ch) {
      const ChunkCost& cc = r.costs.at(place, s, ch);
      f += cc.fwd / c.chunks;
      b += (cc.bwd_input + cc.bwd_weight) / c.chunks;
    }
    const StageActionTimes& m = measured[static_cast<size_t>(s)];
    const double mb = finite_or_zero(m.bwd) > 0
                          ? m.bwd
                          : finite_or_zero(m.bwd_input) + finite_or_zero(m.bwd_weight);
    out.model_fwd.push_back(f);
    out.model_bwd.push_back(b);
    out.measured_fwd.push_back(finite_or_zero(m.fwd) / scale);
    out.measured_bwd.push_back(mb / scale);
  }
  return out;
}

// Why a result cannot be used, or "" when it can.
std::string unusable(const ResultEntry& e) {
  const Result& r = e.result;
  if (r.status != ResultStatus::kOk || !r.metrics) return "status is not ok";
  if (!(r.metrics->samples_per_second > 0)) return "no samples/s measured (0)";
  if (!r.metrics->theory ||
      r.metrics->theory->action_seconds.size() != static_cast<size_t>(r.config.stages)) {
    return "no measured action times (metrics.theory.action_seconds)";
  }
  if (find_schedule_info(r.config.schedule) == nullptr)
    return "schedule '" + r.config.schedule + "' is not registered (a schedule file)";
  return "";
}

// One line through every calibrating result's link: each measured link
// stands for its transfers at the sizes it carried (its own fit read at
// each size; a link of one size is its median time), so a run of one
// message size adds its point and runs of several sizes add their slope.
// Averaging the runs' own intercepts and slopes instead mixes fits that are
// ill-conditioned on a busy host (a latency of 30 us in one run and 500 us
// in the next over the same sizes) and leaves out the runs of one size.
class LinkPoints {
 public:
  void add(const MeasuredLinkFigures& l) {
    if (l.sizes.empty() || l.messages <= 0 || !std::isfinite(l.latency_seconds)) return;
    const bool sloped =
        std::isfinite(l.bandwidth_bytes_per_second) && l.bandwidth_bytes_per_second > 0;
    if (l.sizes.size() > 1 && !sloped) return;  // no line to read at its sizes
    const double w = static_cast<double>(l.messages) / static_cast<double>(l.sizes.size());
    for (const int64_t bytes : l.sizes) {
      const auto x = static_cast<double>(bytes);
      const double y = l.latency_seconds + (sloped ? x / l.bandwidth_bytes_per_second : 0.0);
      sw_ += w;
      sx_ += w * x;
      sy_ += w * y;
      sxx_ += w * x * x;
      sxy_ += w * x * y;
    }
  }

  // Weighted least squares y = latency + x / bandwidth; a flat or falling
  // line (one size overall, or noise) keeps the mean time as the latency
  // and no bandwidth term. Leaves `link` as it is without points.
  void fit(LinkModel& link) const {
    if (sw_ <= 0) return;
    const double mx = sx_ / sw_;
    const double my = sy_ / sw_;
    const double vxx = sxx_ / sw_ - mx * mx;
    const double slope = vxx > 0 ? (sxy_ / sw_ - mx * my) / vxx : 0.0;
    if (slope > 0 && my - slope * mx >= 0) {
      link.latency = my - slope * mx;
      link.bandwidth = 1.0 / slope;
    } else if (slope > 0) {
      link.latency = 0;  // through the origin
      link.bandwidth = sxx_ / sxy_;
    } else {
      link.latency = my;
      link.bandwidth = 0;  // infinite
    }
  }

 private:
  double sw_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
};

// The most ranks that took turns on one GPU in `e` (1: none shared).
int ranks_sharing_a_gpu(const ResultEntry& e) {
  return std::max(1, e.result.environment.ranks_per_gpu);
}

std::string setup_of(const ResultEntry& e) {
  const ResultConfig& c = e.result.config;
  // Runs that shared a GPU calibrate only one another: their action times
  // include the turns their stages took on it.
  const int shared = ranks_sharing_a_gpu(e);
  return e.machine + " | " + c.backend + " | " + roofline_device(e.result) + " | " + c.model +
         " | " + c.dtype + (shared > 1 ? " | " + std::to_string(shared) + " ranks per GPU" : "");
}

}  // namespace

// Per unit kind, least squares through the origin of the measured seconds
// of the kind's units on a stage against the roofline's, pass by pass; then
// one factor per pass on all kinds so that the stages' actions come out as
// measured (the units' times leave out what an action does besides them).
// The kinds share out a pass's time; the actions' times set its total.
class KindFit {
 public:
  KindFit() : sums_(static_cast<size_t>(kUnitKinds)) {}

  // The stages of one result whose backend timed its units; `actions`: its
  // measured and modelled action times per stage.
  void add(const Repriced& r, const Result& result, const StagePairs& actions) {
    const ResultConfig& c = result.config;
    const std::vector<std::map<std::string, KindSeconds>>& measured =
        result.metrics->theory->kind_seconds;
    if (measured.size() != static_cast<size_t>(c.stages)) return;
    const Placement place = placement_of(r.schedule);
    const double scale = c.time_scale > 0 ? c.time_scale : 1.0;
    for (int s = 0; s < c.stages; ++s) {
      std::vector<UnitTime> model(static_cast<size_t>(kUnitKinds));
      for (int ch = 0; ch < c.chunks; ++ch) {
        const UnitRange& part = r.parts[static_cast<size_t>(place.virtual_stage(s, ch))];
        for (int u = part.begin; u < part.end; ++u) {
          UnitTime& m = model[static_cast<size_t>(r.units[static_cast<size_t>(u)].kind)];
          const UnitTime& t = r.times[static_cast<size_t>(u)];
          m.fwd += t.fwd;
          m.bwd_input += t.bwd_input;
          m.bwd_weight += t.bwd_weight;
        }
      }
      for (const auto& [name, k] : measured[static_cast<size_t>(s)]) {
        for (int kind = 0; kind < kUnitKinds; ++kind) {
          if (name != unit_kind_name(static_cast<UnitKind>(kind))) continue;
          Sums& x = sums_[static_cast<size_t>(kind)];
          const UnitTime& m = model[static_cast<size_t>(kind)];
          x.add(0, k.fwd / scale, m.fwd);
          x.add(1, k.bwd_input / scale, m.bwd_input);
          x.add(2, k.bwd_weight / scale, m.bwd_weight);
        }
      }
      // Per action, as the action times are (a stage's V chunks share them).
      for (UnitTime& m : model) {
        m.fwd /= c.chunks;
        m.bwd_input /= c.chunks;
        m.bwd_weight /= c.chunks;
      }
      stages_.push_back({std::move(model), actions.measured_fwd[static_cast<size_t>(s)],
                         actions.measured_bwd[static_cast<size_t>(s)]});
    }
  }

  // The fitted kinds into cal.kinds; a pass without data takes the
  // per-pass factor.
  void fit(PassCalibration& cal) const {
    for (int kind = 0; kind < kUnitKinds; ++kind) {
      const Sums& x = sums_[static_cast<size_t>(kind)];
      if (x.model_squared[0] <= 0 && x.model_squared[1] <= 0 && x.model_squared[2] <= 0) continue;
      const auto pass = [&x](int p, double fallback) {
        return x.model_squared[p] > 0 ? x.cross[p] / x.model_squared[p] : fallback;
      };
      cal.kinds[unit_kind_name(static_cast<UnitKind>(kind))] = {
          pass(0, cal.forward), pass(1, cal.backward), pass(2, cal.backward)};
    }
    if (cal.kinds.empty()) return;
    double fm = 0, fp = 0, bm = 0, bp = 0;  // measured x predicted, predicted^2
    for (const Stage& st : stages_) {
      double f = 0, b = 0;
      for (int kind = 0; kind < kUnitKinds; ++kind) {
        const UnitTime x = cal.factors(unit_kind_name(static_cast<UnitKind>(kind)));
        const UnitTime& m = st.model[static_cast<size_t>(kind)];
        f += x.fwd * m.fwd;
        b += x.bwd_input * m.bwd_input + x.bwd_weight * m.bwd_weight;
      }
      fm += st.fwd * f;
      fp += f * f;
      bm += st.bwd * b;
      bp += b * b;
    }
    const double cf = fp > 0 && fm > 0 ? fm / fp : 1.0;
    const double cb = bp > 0 && bm > 0 ? bm / bp : 1.0;
    for (auto& [kind, x] : cal.kinds) {
      x.fwd *= cf;
      x.bwd_input *= cb;
      x.bwd_weight *= cb;
    }
  }

 private:
  struct Stage {
    std::vector<UnitTime> model;  // per kind, per action
    double fwd = 0, bwd = 0;      // measured action times, modelled seconds
  };
  struct Sums {
    double cross[3] = {0, 0, 0};
    double model_squared[3] = {0, 0, 0};
    void add(int pass, double measured, double model) {
      if (!(std::isfinite(measured) && model > 0)) return;
      cross[pass] += measured * model;
      model_squared[pass] += model * model;
    }
  };
  std::vector<Sums> sums_;
  std::vector<Stage> stages_;
};

namespace {
constexpr std::string_view kNoUsableResult =
    "calibration: no usable result (ok, with action times)";
}  // namespace

PassCalibration fit_calibration(const std::vector<const ResultEntry*>& results) {
  double ff = 0, fp = 0, bf = 0, bp = 0;  // sums of measured x model and model^2
  LinkPoints points;
  KindFit kinds;
  CuptiFit cupti;
  int with_cupti = 0;  // results with CUPTI's figures
  PassCalibration cal;
  for (const ResultEntry* e : results) {
    if (!unusable(*e).empty()) continue;
    Repriced r;
    try {
      r = reprice(e->result);
    } catch (const UsageError& err) {
      throw UsageError(e->source + ": cannot re-price its configuration: " + err.what());
    }
    if (cal.results == 0) cal.link = r.device.link();  // unless a link was measured
    const StagePairs p = stage_pairs(r, e->result);
    for (size_t s = 0; s < p.model_fwd.size(); ++s) {
      ff += p.measured_fwd[s] * p.model_fwd[s];
      fp += p.model_fwd[s] * p.model_fwd[s];
      bf += p.measured_bwd[s] * p.model_bwd[s];
      bp += p.model_bwd[s] * p.model_bwd[s];
    }
    // The link within a host (the planner's stages of one node); a
    // network link, where the run crossed hosts, is not calibrated from.
    for (const MeasuredLinkFigures& l : e->result.metrics->theory->links) {
      if (l.path == "host") points.add(l);
    }
    kinds.add(r, e->result, p);
    if (has_cupti_figures(e->result)) {
      cupti.add(r, e->result);
      ++with_cupti;
    }
    ++cal.results;
  }
  if (cal.results == 0) throw UsageError(std::string(kNoUsableResult));
  cal.forward = fp > 0 ? ff / fp : 1.0;
  cal.backward = bp > 0 ? bf / bp : 1.0;
  points.fit(cal.link);
  if (with_cupti == cal.results) {
    cupti.fit(cal);
    return cal;
  }
  kinds.fit(cal);
  cal.method = "per pass on the roofline (forward x" + format_number(cal.forward) + ", backward x" +
               format_number(cal.backward) + ") from " + std::to_string(cal.results) +
               (cal.results == 1 ? " result" : " results") +
               (cal.kinds.empty() ? "" : ", per unit kind from the units' timers") +
               ": not from CUPTI (" + std::to_string(cal.results - with_cupti) + " of " +
               std::to_string(cal.results) +
               " without its kernel times, some above zero, and action windows)";
  return cal;
}

Calibration kind_calibration(const PassCalibration& cal, const std::string& device, double scale) {
  Calibration kinds;
  kinds.device = device;
  for (int k = 0; k < kUnitKinds; ++k) {
    const std::string name = unit_kind_name(static_cast<UnitKind>(k));
    const UnitTime f = cal.factors(name);
    kinds.kind_scale[name] = UnitTime{f.fwd * scale, f.bwd_input * scale, f.bwd_weight * scale};
  }
  kinds.launch_seconds = cal.launch * scale;
  kinds.summary = cal.method;
  return kinds;
}

Calibration calibration_from(const std::vector<std::string>& paths, const std::string& device) {
  if (paths.size() == 1 && std::filesystem::is_regular_file(paths[0])) {
    const std::string text = read_input_file(paths[0], "calibration file", kMaxResultFileBytes);
    boost::json::error_code ec;
    const boost::json::value doc = boost::json::parse(text, ec);
    if (ec) {
      throw UsageError(paths[0] + ": not valid JSON (" + ec.message() +
                       "), expected a pipebench.calibration/1 file or result files");
    }
    const boost::json::object* o = doc.if_object();
    const boost::json::value* schema = o != nullptr ? o->if_contains("schema") : nullptr;
    if (schema != nullptr && schema->is_string() &&
        schema->get_string() == "pipebench.calibration/1") {
      // Read again under the calibration file's own limit, which names it.
      Calibration cal = read_calibration(paths[0]);
      cal.summary = "as given in " + paths[0];
      return cal;
    }
  }
  LoadedResults loaded;
  try {
    loaded = load_results(paths, false);
  } catch (const UsageError& e) {
    // "--calibration: nothing to report: no pipebench result files in a.json,
    // b.json (a.json is a pipebench.calibration/1 file, not a result, ...)":
    // a calibration file is taken alone, never with others.
    throw UsageError(
        std::string("--calibration: ") + e.what() +
        "; it takes one pipebench.calibration/1 file alone, or result files and folders");
  }
  // A file named among results must be one: a calibration file there is
  // not silently left out (a folder's other JSON, such as health files, is).
  for (const std::string& p : paths) {
    if (std::find(loaded.ignored.begin(), loaded.ignored.end(), p) != loaded.ignored.end()) {
      throw UsageError("--calibration: " + p +
                       " is not a result; it takes one pipebench.calibration/1 file alone, or "
                       "result files and folders");
    }
  }
  std::vector<const ResultEntry*> on_device;
  int shared = 1;  // the most ranks per GPU among the results left out
  for (const ResultEntry& e : loaded.results) {
    if (roofline_device(e.result) != device) continue;
    if (ranks_sharing_a_gpu(e) > 1) {
      shared = std::max(shared, ranks_sharing_a_gpu(e));
      continue;
    }
    on_device.push_back(&e);
  }
  if (on_device.empty() && shared > 1) {
    throw UsageError("--calibration: every result measured on device '" + device + "' in " +
                     paths.front() + (paths.size() > 1 ? ", ..." : "") +
                     " is unfit to calibrate from: " + shared_gpu_refusal(shared));
  }
  try {
    return kind_calibration(fit_calibration(on_device), device);
  } catch (const UsageError& e) {
    if (std::string_view(e.what()).starts_with(kNoUsableResult)) {
      throw UsageError("--calibration: no ok result measured on device '" + device +
                       "' with action times in " + paths.front() +
                       (paths.size() > 1 ? ", ..." : ""));
    }
    throw UsageError(std::string("--calibration: ") + e.what());  // names the file
  }
}

namespace {

ValidationRow predict(const ResultEntry& e, const PassCalibration& cal) {
  const ResultConfig& c = e.result.config;
  const Repriced r = reprice(e.result);
  const double scale = c.time_scale > 0 ? c.time_scale : 1.0;
  std::vector<UnitTime> times = r.times;
  for (size_t u = 0; u < times.size(); ++u) {
    const UnitTime f = cal.factors(unit_kind_name(r.units[u].kind));
    times[u].fwd *= f.fwd * scale;
    times[u].bwd_input *= f.bwd_input * scale;
    times[u].bwd_weight *= f.bwd_weight * scale;
  }
  StageCosts costs = model_costs(r.units, times, r.parts, c.stages, c.chunks, cal.link);
  costs.action_seconds = cal.launch * scale;
  const SimResult sim = simulate(r.schedule, costs);
  MemoryModelOptions mo;
  mo.element_bytes = r.spec.bytes_per_element;
  mo.resident_bytes = backend_resident_bytes(c.backend);
  const std::vector<PredictedMemory> mem = predict_memory(r.schedule, r.costs, mo);
  ValidationRow row;
  row.source = e.source;
  row.config = c;
  row.predicted_samples_per_second =
      static_cast<double>(c.micro_batch_size) * c.microbatches * c.batches / sim.step_time;
  row.measured_samples_per_second = e.result.metrics->samples_per_second;
  row.predicted_peak_bytes = 0;
  for (const PredictedMemory& m : mem)
    row.predicted_peak_bytes = std::max(row.predicted_peak_bytes, m.expected_peak_bytes);
  for (int64_t b : e.result.metrics->peak_memory_bytes.per_stage)
    row.measured_peak_bytes = std::max(row.measured_peak_bytes, b);
  row.samples_error = (row.predicted_samples_per_second - row.measured_samples_per_second) /
                      row.measured_samples_per_second;
  if (ranks_sharing_a_gpu(e) > 1) {
    // Its peak is one process's, as the memory model predicts; its speed
    // is not one device per stage's (shared_gpu_refusal).
    row.predicted_samples_per_second = std::numeric_limits<double>::quiet_NaN();
    row.samples_error = std::numeric_limits<double>::quiet_NaN();
  }
  // No peak measured (0): no error to state, and none to average.
  row.memory_error = row.measured_peak_bytes > 0
                         ? static_cast<double>(row.predicted_peak_bytes - row.measured_peak_bytes) /
                               static_cast<double>(row.measured_peak_bytes)
                         : std::numeric_limits<double>::quiet_NaN();
  row.calibrated_on = cal.results;
  if (e.result.metrics->foreign_cpu) row.foreign_cpu = *e.result.metrics->foreign_cpu;
  return row;
}

}  // namespace

namespace {

// The median of the finite values (NaN when none: a pass the schedule does
// not run).
double median_of(std::vector<double> xs) {
  const Spread s = spread(std::move(xs));
  return s.n > 0 ? s.median : std::nan("");
}

// Repeated measurements of one combination (several nights) as one, as a
// benchmark aggregates its repetitions: the median samples/s, median action
// times per stage and pass (and unit times per kind), every measured link,
// the highest peak.
ResultEntry merge_repeats(const std::vector<const ResultEntry*>& repeats) {
  ResultEntry m = *repeats.front();
  ResultMetrics& mm = *m.result.metrics;
  TheoryFigures& mt = *mm.theory;
  auto median = [&](auto field) {
    std::vector<double> xs;
    for (const ResultEntry* e : repeats) xs.push_back(field(*e));
    return median_of(std::move(xs));
  };
  mm.samples_per_second =
      median([](const ResultEntry& e) { return e.result.metrics->samples_per_second; });
  for (size_t s = 0; s < mt.action_seconds.size(); ++s) {
    const auto stage = [s](const ResultEntry& e) -> const StageActionTimes& {
      return e.result.metrics->theory->action_seconds[s];
    };
    mt.action_seconds[s].fwd = median([&](const ResultEntry& e) { return stage(e).fwd; });
    mt.action_seconds[s].bwd = median([&](const ResultEntry& e) { return stage(e).bwd; });
    mt.action_seconds[s].bwd_input =
        median([&](const ResultEntry& e) { return stage(e).bwd_input; });
    mt.action_seconds[s].bwd_weight =
        median([&](const ResultEntry& e) { return stage(e).bwd_weight; });
  }
  // Unit times by kind: the median per stage, kind and pass where every
  // repeat has them for every stage, else none (the per-pass fit).
  const bool kinds = std::all_of(repeats.begin(), repeats.end(), [&](const ResultEntry* e) {
    return e->result.metrics->theory->kind_seconds.size() == mt.action_seconds.size();
  });
  if (!kinds) mt.kind_seconds.clear();
  for (size_t s = 0; s < mt.kind_seconds.size(); ++s) {
    for (auto& [kind, k] : mt.kind_seconds[s]) {
      const auto pass = [&, name = kind](double KindSeconds::*p) {
        return median([&](const ResultEntry& e) {
          const auto& stage = e.result.metrics->theory->kind_seconds[s];
          const auto it = stage.find(name);
          return it != stage.end() ? it->second.*p : std::nan("");
        });
      };
      k = {pass(&KindSeconds::fwd), pass(&KindSeconds::bwd_input), pass(&KindSeconds::bwd_weight)};
    }
  }
  // The busiest of the merged measurements' hosts (merged rows are marked
  // by their worst, not hidden by the median).
  mm.foreign_cpu.reset();
  for (const ResultEntry* e : repeats) {
    const std::optional<double>& f = e->result.metrics->foreign_cpu;
    if (f && (!mm.foreign_cpu || *f > *mm.foreign_cpu)) mm.foreign_cpu = f;
  }
  mt.links.clear();
  std::vector<int64_t>& peaks = mm.peak_memory_bytes.per_stage;
  for (const ResultEntry* e : repeats) {
    const ResultMetrics& em = *e->result.metrics;
    mt.links.insert(mt.links.end(), em.theory->links.begin(), em.theory->links.end());
    for (size_t s = 0; s < peaks.size() && s < em.peak_memory_bytes.per_stage.size(); ++s)
      peaks[s] = std::max(peaks[s], em.peak_memory_bytes.per_stage[s]);
  }
  return m;
}

// A merged combination keeps its measurements only when they agree on the
// shape of what was measured (one action-time entry per stage each).
bool mergeable(const std::vector<const ResultEntry*>& repeats) {
  const ResultEntry& first = *repeats.front();
  return std::all_of(repeats.begin(), repeats.end(), [&](const ResultEntry* e) {
    return e->result.metrics->theory->action_seconds.size() ==
               first.result.metrics->theory->action_seconds.size() &&
           e->result.metrics->peak_memory_bytes.per_stage.size() ==
               first.result.metrics->peak_memory_bytes.per_stage.size();
  });
}

}  // namespace

bool measured_on_busy_host(const ValidationRow& row) {
  return row.foreign_cpu > kBusyHostCpuShare;  // false for NaN
}

namespace {

// One line when any row's measurement was timed on a busy host.
std::vector<std::string> busy_host_warnings(const std::vector<ValidationRow>& rows) {
  int busy = 0;
  int all = 0;
  double worst = 0;
  for (const ValidationRow& r : rows) {
    all += r.measurements;
    if (!measured_on_busy_host(r)) continue;
    busy += r.measurements;
    worst = std::max(worst, r.foreign_cpu);
  }
  if (busy == 0) return {};
  return {std::to_string(busy) + " of " + std::to_string(all) +
          " measurements (rows marked *) were timed while other processes used more than " +
          format_percent(kBusyHostCpuShare, 0) + " of the host's CPU (up to " +
          format_percent(worst, 0) +
          "; metrics.foreign_cpu): their samples/s errors, and the calibrations they took part "
          "in, measure the host's load as much as the planner; validate speed on a quiet host"};
}

// The mean absolute errors over the rows that have one (NaN: none has).
void set_mean_errors(Validation& v) {
  int timed = 0;     // rows whose samples/s were predicted
  int measured = 0;  // rows with a measured peak
  for (const ValidationRow& r : v.rows) {
    if (std::isfinite(r.samples_error)) {
      v.mean_abs_samples_error += std::fabs(r.samples_error);
      ++timed;
    }
    if (std::isfinite(r.memory_error)) {
      v.mean_abs_memory_error += std::fabs(r.memory_error);
      ++measured;
    }
  }
  constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  v.mean_abs_samples_error = timed > 0 ? v.mean_abs_samples_error / timed : kNone;
  v.mean_abs_memory_error = measured > 0 ? v.mean_abs_memory_error / measured : kNone;
}

}  // namespace

std::string shared_gpu_refusal(int ranks_per_gpu) {
  return std::to_string(ranks_per_gpu) +
         " ranks shared one GPU (environment.ranks_per_gpu), so its stages took turns on one "
         "device, and the planner models one device per stage";
}

Validation validate_plan(const std::vector<ResultEntry>& results) {
  Validation v;
  std::map<std::string, std::vector<const ResultEntry*>> repeats;  // setup | combination
  std::vector<std::string> order;
  std::map<int, int> shared;  // ranks per GPU -> results refused
  for (const ResultEntry& e : results) {
    std::string why = unusable(e);
    if (why.empty()) {
      try {
        (void)reprice(e.result);
      } catch (const UsageError& err) {
        why = std::string("cannot re-price its configuration: ") + err.what();
      }
    }
    if (!why.empty()) {
      v.skipped.push_back(e.source + ": " + why);
      continue;
    }
    const std::string key = setup_of(e) + " | " + e.config_key;
    if (repeats[key].empty()) order.push_back(key);
    repeats[key].push_back(&e);
  }
  std::deque<ResultEntry> merged;           // stable addresses
  std::map<std::string, int> measurements;  // source -> measurements merged into it
  std::map<std::string, std::vector<const ResultEntry*>> setups;
  for (const std::string& key : order) {
    const std::vector<const ResultEntry*>& r = repeats.at(key);
    const ResultEntry* e = r.front();
    if (r.size() > 1 && mergeable(r)) {
      merged.push_back(merge_repeats(r));
      e = &merged.back();
      measurements[e->source] = static_cast<int>(r.size());
      setups[setup_of(*e)].push_back(e);
    } else {
      for (const ResultEntry* one : r) {
        measurements[one->source] = 1;
        setups[setup_of(*one)].push_back(one);
      }
    }
  }
  for (const auto& [setup, members] : setups) {
    // Shared-GPU setups predict memory only: no speed calibration to name.
    if (members.size() > 1 && ranks_sharing_a_gpu(*members.front()) == 1)
      v.calibrations.push_back(setup + ": " + fit_calibration(members).method);
    for (const ResultEntry* held_out : members) {
      std::vector<const ResultEntry*> others;
      for (const ResultEntry* e : members) {
        if (e != held_out) others.push_back(e);
      }
      if (others.empty()) {
        v.skipped.push_back(held_out->source + ": alone in its setup (" + setup +
                            "): nothing to calibrate on");
        continue;
      }
      v.rows.push_back(predict(*held_out, fit_calibration(others)));
      v.rows.back().measurements = measurements[held_out->source];
      if (ranks_sharing_a_gpu(*held_out) > 1)
        shared[ranks_sharing_a_gpu(*held_out)] += v.rows.back().measurements;
    }
  }
  for (const auto& [per_gpu, n] : shared) {
    v.refused.push_back(
        std::to_string(n) + (n == 1 ? " result" : " results") +
        ": samples/s not predicted (peak memory is): " + shared_gpu_refusal(per_gpu));
  }
  v.warnings = busy_host_warnings(v.rows);
  set_mean_errors(v);
  return v;
}

namespace {

// The GPUs a setup's results ran on, in words, and why the planner cannot
// predict for them ("" when it can).
struct GpuMachine {
  std::string words;  // "2 x NVIDIA H200, 131 GiB each, the h200 roofline"
  std::string refusal;
};

GpuMachine gpu_machine(const std::vector<const ResultEntry*>& setup) {
  const ResultEnvironment& env = setup.front()->result.environment;
  const std::string& gpu = env.gpus.front();
  int shared = 1;
  int ranks = 0;
  for (const ResultEntry* e : setup) {
    shared = std::max(shared, e->result.environment.ranks_per_gpu);
    ranks = std::max(ranks, e->result.environment.ranks);
  }
  GpuMachine m;
  const int gpus = std::max(1, (ranks + shared - 1) / shared);
  m.words = std::to_string(gpus) + " x " + gpu;
  const std::string preset = gpu_preset(gpu);
  if (!preset.empty()) {
    m.words += ", " + format_bytes(static_cast<double>(device_preset(preset, 2).memory_bytes)) +
               " each, the " + preset + " roofline";
  } else {
    std::string names;
    for (const std::string& n : device_preset_names()) names += (names.empty() ? "" : ", ") + n;
    m.refusal = "the device table has no roofline for " + gpu + " (devices: " + names + ")";
  }
  if (shared > 1) m.refusal += (m.refusal.empty() ? "" : "; ") + shared_gpu_refusal(shared);
  return m;
}

}  // namespace

std::string which_schedule_for_this_machine(const std::vector<const ResultEntry*>& results) {
  std::map<std::string, std::vector<const ResultEntry*>> setups;
  for (const ResultEntry* e : results) {
    if (unusable(*e).empty()) setups[setup_of(*e)].push_back(e);
  }
  const std::vector<const ResultEntry*>* most = nullptr;
  for (const auto& [setup, members] : setups) {
    if (most == nullptr || members.size() > most->size()) most = &members;
  }
  if (most == nullptr) return "";
  std::string machine;
  if (!most->front()->result.environment.gpus.empty()) {
    const GpuMachine gpus = gpu_machine(*most);
    if (!gpus.refusal.empty()) {
      return "For this machine (" + gpus.words +
             "), the planner does not predict: " + gpus.refusal + ".";
    }
    machine = gpus.words;
  }
  try {
    const PassCalibration cal = fit_calibration(*most);
    const ResultConfig& c = most->front()->result.config;
    PlanOptions o;
    o.model = model_spec(c);
    o.micro_batch_sizes = {c.micro_batch_size};
    o.memory.element_bytes = o.model.bytes_per_element;
    // The attention these results ran, not the one a run would pick: a
    // night that fell back to naive is planned as it ran.
    o.attention = attention_ran(c) == attention_name(Attention::kFused) ? AttentionRequest::kFused
                                                                        : AttentionRequest::kNaive;
    ClusterInput in;
    int64_t budget = 0;
    for (const ResultEntry* e : *most) {
      in.gpus = std::max(in.gpus, e->result.config.stages);
      budget = std::max(budget, e->result.config.memory_budget);
    }
    in.device = roofline_device(most->front()->result);
    in.gpu_memory_bytes = budget;
    in.link_bandwidth = cal.link.bandwidth;
    in.link_latency = cal.link.latency;
    o.cluster = resolve_cluster(in, o.model.bytes_per_element);
    // The fitted factors as a calibration of every unit kind (in wall
    // seconds: timed results run at their time scale).
    const Calibration kinds =
        kind_calibration(cal, o.cluster.device.name, c.time_scale > 0 ? c.time_scale : 1.0);
    o.calibration = &kinds;
    o.top = 1;
    const Plan plan = make_plan(o);
    if (machine.empty()) machine = std::to_string(o.cluster.gpus) + " x " + o.cluster.device.name;
    if (plan.ranked.empty())
      return "For this machine (" + machine + "), the planner finds " + plan.advice + ".";
    const Candidate& w = plan.ranked.front();
    const std::string how = cal.from_cupti
                                ? cal.method
                                : "forward x" + format_number(cal.forward) + ", backward x" +
                                      format_number(cal.backward) + " the roofline";
    return "For this machine (" + machine + ", calibrated on " + std::to_string(cal.results) +
           " results: " + how + "), the planner ranks " + candidate_label(w) + " first (" + w.why +
           ").";
  } catch (const UsageError&) {
    return "";  // a configuration the roofline cannot re-price: no answer
  }
}

}  // namespace ppb::reports
