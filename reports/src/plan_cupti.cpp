// Calibrating the planner per unit kind from a device profiler's kernel
// times, with a launch cost per action from its action windows (plan.hpp,
// fit_calibration).
#include "plan_cupti.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "ppb/pipeline/schedule.hpp"
#include "ppb/reports/stats.hpp"

namespace ppb::reports {

const char* kernel_family_of(UnitKind kind) {
  switch (kind) {
    case UnitKind::kEmbedding:
      return "embedding";
    case UnitKind::kLayerNorm1:
    case UnitKind::kLayerNorm2:
    case UnitKind::kFinalNorm:
      return "layernorm";
    case UnitKind::kQkv:
    case UnitKind::kAttnOut:
    case UnitKind::kFc2:
      return "gemm";
    case UnitKind::kAttention:
      return "attention";
    case UnitKind::kFc1Gelu:
      return "gelu";
    case UnitKind::kHead:
      return "cross_entropy";
  }
  return "gemm";  // not reached: every kind is named above
}

UnitTime kernel_gemm_shares(const Unit& unit, const Repriced& r) {
  if (unit.kind == UnitKind::kAttention && r.attention == Attention::kFused) return {0, 0, 0};
  return gemm_shares(unit, r.device);
}

namespace {

// The device profiler's figures of `r`, or null without one.
const CollectorResult* profiler_figures(const Result& r) {
  if (!r.metrics || !r.metrics->device) return nullptr;
  const auto c = r.metrics->collectors.find(r.metrics->device->profiler);
  return c == r.metrics->collectors.end() ? nullptr : &c->second;
}

// Per family: the roofline's seconds of stage `stage`'s units in it over
// one step (every micro-batch's F and backward of each of its chunks), by
// pass: a unit's GEMM share as it ran (kernel_gemm_shares) in "gemm", the
// rest in kernel_family_of.
std::map<std::string, UnitTime> family_model(const Repriced& r, const ResultConfig& c, int stage) {
  const Placement place = placement_of(r.schedule);
  const double actions = static_cast<double>(c.microbatches) * std::max(1, c.batches);
  std::map<std::string, UnitTime> out;
  for (int ch = 0; ch < c.chunks; ++ch) {
    const UnitRange& part = r.parts[static_cast<size_t>(place.virtual_stage(stage, ch))];
    for (int u = part.begin; u < part.end; ++u) {
      const Unit& unit = r.units[static_cast<size_t>(u)];
      const UnitTime& t = r.times[static_cast<size_t>(u)];
      const UnitTime g = kernel_gemm_shares(unit, r);
      UnitTime& gemm = out["gemm"];
      gemm.fwd += actions * t.fwd * g.fwd;
      gemm.bwd_input += actions * t.bwd_input * g.bwd_input;
      gemm.bwd_weight += actions * t.bwd_weight * g.bwd_weight;
      UnitTime& own = out[kernel_family_of(unit.kind)];
      own.fwd += actions * t.fwd * (1 - g.fwd);
      own.bwd_input += actions * t.bwd_input * (1 - g.bwd_input);
      own.bwd_weight += actions * t.bwd_weight * (1 - g.bwd_weight);
    }
  }
  return out;
}

// "0.61", "0.0031": an efficiency in the method's words (two significant
// digits: an emulated device runs at a few thousandths of a roofline).
std::string two_digits(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", x);
  return buf;
}

// A kind's factor on one pass: its GEMM share at the gemm family's factor,
// the rest at its own family's.
double kind_factor(double time, double gemm_time, double gemm_factor, double own_factor) {
  return time > 0 ? (gemm_time * gemm_factor + (time - gemm_time) * own_factor) / time : own_factor;
}

}  // namespace

std::map<std::string, std::vector<double>> kernel_seconds(const Result& r) {
  std::map<std::string, std::vector<double>> out;
  const CollectorResult* c = profiler_figures(r);
  if (c == nullptr) return out;
  const std::string prefix = "kernel_seconds_";
  for (const auto& [figure, per_stage] : c->step) {
    if (figure.starts_with(prefix)) out[figure.substr(prefix.size())] = per_stage;
  }
  return out;
}

bool has_cupti_figures(const Result& r) {
  const CollectorResult* c = profiler_figures(r);
  const auto stages = static_cast<size_t>(r.config.stages);
  if (c == nullptr || r.timeline.size() != stages) return false;
  const auto families = kernel_seconds(r);
  if (families.empty()) return false;
  // Kernel seconds that are all zero (or unknown) measured nothing: a fit
  // on them would call the roofline itself CUPTI's.
  bool measured = false;
  for (const auto& [family, per_stage] : families) {
    if (per_stage.size() != stages) return false;
    for (const double y : per_stage) measured = measured || (std::isfinite(y) && y > 0);
  }
  if (!measured) return false;
  const auto device = c->action.find("device_seconds");
  if (device == c->action.end() || device->second.size() != stages) return false;
  for (size_t s = 0; s < stages; ++s) {
    if (device->second[s].size() != r.timeline[s].size()) return false;
  }
  return true;
}

void CuptiFit::add(const Repriced& r, const Result& result) {
  const std::map<std::string, std::vector<double>> measured = kernel_seconds(result);
  for (int s = 0; s < result.config.stages; ++s) {
    Stage st;
    for (const auto& [family, t] : family_model(r, result.config, s)) {
      st.model[family] = t.total();
      const auto it = measured.find(family);
      const double y = it != measured.end() ? it->second[static_cast<size_t>(s)] : std::nan("");
      if (!std::isfinite(y)) continue;
      families_[family].cross += y * t.total();
      families_[family].model_squared += t.total() * t.total();
    }
    for (const auto& [family, per_stage] : measured) {
      const double y = per_stage[static_cast<size_t>(s)];
      if (std::isfinite(y)) st.measured += y;
    }
    stages_.push_back(std::move(st));
  }
  for (size_t u = 0; u < r.units.size(); ++u) {
    const UnitTime& t = r.times[u];
    const UnitTime g = kernel_gemm_shares(r.units[u], r);
    UnitTime& time = kind_time_[static_cast<size_t>(r.units[u].kind)];
    UnitTime& gemm = kind_gemm_[static_cast<size_t>(r.units[u].kind)];
    time = {time.fwd + t.fwd, time.bwd_input + t.bwd_input, time.bwd_weight + t.bwd_weight};
    gemm = {gemm.fwd + t.fwd * g.fwd, gemm.bwd_input + t.bwd_input * g.bwd_input,
            gemm.bwd_weight + t.bwd_weight * g.bwd_weight};
  }
  // The launch cost: what each action's window holds besides its device work.
  const std::vector<std::vector<double>>& device =
      profiler_figures(result)->action.at("device_seconds");
  for (size_t s = 0; s < result.timeline.size(); ++s) {
    for (size_t i = 0; i < result.timeline[s].size(); ++i) {
      const TimelineEvent& ev = result.timeline[s][i];
      if (ev.op == ActionKind::kSync || !std::isfinite(device[s][i])) continue;
      gaps_.push_back(std::max(0.0, ev.end - ev.start - device[s][i]));
    }
  }
}

// Per family, measured kernel seconds over the roofline's (least squares
// through the origin over the stages); a family measured as nothing takes
// the ratio of all. Then one factor on all so that each stage's kernel
// seconds of every family come out: the families no unit runs (copies,
// bias fills) are shared out over the others.
std::map<std::string, double> CuptiFit::family_factors() const {
  double measured = 0, model = 0;
  for (const Stage& st : stages_) {
    measured += st.measured;
    for (const auto& [family, x] : st.model) model += x;
  }
  const double all = measured > 0 && model > 0 ? measured / model : 1.0;
  std::map<std::string, double> f;
  for (const Stage& st : stages_) {
    for (const auto& [family, x] : st.model) {
      const auto it = families_.find(family);
      const bool fitted =
          it != families_.end() && it->second.cross > 0 && it->second.model_squared > 0;
      f[family] = fitted ? it->second.cross / it->second.model_squared : all;
    }
  }
  double cross = 0, squared = 0;
  for (const Stage& st : stages_) {
    double p = 0;
    for (const auto& [family, x] : st.model) p += x * f.at(family);
    cross += st.measured * p;
    squared += p * p;
  }
  const double common = cross > 0 && squared > 0 ? cross / squared : 1.0;
  for (auto& [family, x] : f) x *= common;
  return f;
}

void CuptiFit::fit(PassCalibration& cal) const {
  const std::map<std::string, double> f = family_factors();
  const auto factor = [&f](const std::string& family) {
    const auto it = f.find(family);
    return it != f.end() ? it->second : 1.0;
  };
  std::string words;
  for (int k = 0; k < kUnitKinds; ++k) {
    const UnitTime& t = kind_time_[static_cast<size_t>(k)];
    const UnitTime& g = kind_gemm_[static_cast<size_t>(k)];
    if (t.total() <= 0) continue;
    const double gf = factor("gemm");
    const double of = factor(kernel_family_of(static_cast<UnitKind>(k)));
    const UnitTime x{kind_factor(t.fwd, g.fwd, gf, of),
                     kind_factor(t.bwd_input, g.bwd_input, gf, of),
                     kind_factor(t.bwd_weight, g.bwd_weight, gf, of)};
    const std::string name = unit_kind_name(static_cast<UnitKind>(k));
    cal.kinds[name] = x;
    // Achieved over the roofline's rate: its time over the time it took.
    const double took = t.fwd * x.fwd + t.bwd_input * x.bwd_input + t.bwd_weight * x.bwd_weight;
    words += (words.empty() ? "" : ", ") + name + " " + two_digits(t.total() / took);
  }
  const Spread gaps = spread(gaps_);
  cal.launch = gaps.n > 0 ? gaps.median : 0.0;
  cal.from_cupti = true;
  char launch[64];
  std::snprintf(launch, sizeof launch, "%.3g us", cal.launch * 1e6);
  cal.method = "per unit kind from CUPTI on " + std::to_string(cal.results) +
               (cal.results == 1 ? " result" : " results") + " (achieved / roofline): " + words +
               "; launch " + launch + " per action";
}

}  // namespace ppb::reports
