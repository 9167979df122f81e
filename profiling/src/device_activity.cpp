#include "ppb/profiling/device_activity.hpp"

#include <algorithm>
#include <utility>

#include "ppb/profiling/check.hpp"

namespace ppb::device {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kKernel:
      return "kernel";
    case OpKind::kMemcpy:
      return "memcpy";
    case OpKind::kMemset:
      return "memset";
  }
  return "?";
}

const char* op_class_name(OpClass c) {
  switch (c) {
    case OpClass::kCompute:
      return "compute";
    case OpClass::kCommunication:
      return "communication";
    case OpClass::kOptimizer:
      return "optimizer";
    case OpClass::kOther:
      return "other";
  }
  return "?";
}

// --- clock --------------------------------------------------------------------

ClockSample ClockSample::around(double before, uint64_t device_ns, double after) {
  return {0.5 * (before + after), device_ns};
}

ClockMap::ClockMap(ClockSample first, ClockSample second) : a_(first), b_(second) {
  PPB_CHECK(second.device_ns >= first.device_ns, "ClockMap: samples out of order");
  // Differences of the 64-bit timestamps stay integers until they are small:
  // CLOCK_REALTIME nanoseconds as a double would lose ~0.4 us.
  const double span = 1e-9 * static_cast<double>(b_.device_ns - a_.device_ns);
  if (span > 0) slope_ = drift_seconds() / span;
}

double ClockMap::drift_seconds() const {
  const double device = 1e-9 * static_cast<double>(b_.device_ns - a_.device_ns);
  return (b_.steady_seconds - a_.steady_seconds) - device;
}

double ClockMap::to_steady(uint64_t ns) const {
  // Signed distance from the nearer sample (outside the pair: extrapolated
  // from it at the pair's drift rate; inside: interpolated).
  const bool after_b = ns > b_.device_ns;
  const ClockSample& ref = after_b ? b_ : a_;
  const double d = ns >= ref.device_ns ? 1e-9 * static_cast<double>(ns - ref.device_ns)
                                       : -1e-9 * static_cast<double>(ref.device_ns - ns);
  return ref.steady_seconds + d * (1.0 + slope_);
}

// --- classification -----------------------------------------------------------

bool is_communication_kernel(std::string_view name) {
  return name.substr(0, 4) == "nccl" || name.find("ncclKernel") != std::string_view::npos;
}

OpClass classify(OpKind kind, std::string_view name, const Launch* launch) {
  if (kind == OpKind::kKernel && is_communication_kernel(name)) return OpClass::kCommunication;
  // Outside every launch, copies stage messages; memsets there zero the
  // buffers a pool hands out, and kernels are libraries' own.
  if (launch == nullptr) return kind == OpKind::kMemcpy ? OpClass::kCommunication : OpClass::kOther;
  switch (launch->kind) {
    case Launch::Kind::kAction:
      return OpClass::kCompute;
    case Launch::Kind::kOptimizer:
      return OpClass::kOptimizer;
  }
  return OpClass::kOther;
}

// --- the log ------------------------------------------------------------------

void ActivityLog::add(RawRecord r) {
  std::lock_guard lock(mutex_);
  if (r.start_ns == 0 || r.end_ns == 0 || r.end_ns < r.start_ns) {
    ++now_.skipped;
    return;
  }
  now_.records.push_back(std::move(r));
}

void ActivityLog::correlate(uint32_t correlation, uint64_t external_id) {
  std::lock_guard lock(mutex_);
  now_.external[correlation] = external_id;
}

void ActivityLog::add_dropped(uint64_t n) {
  std::lock_guard lock(mutex_);
  now_.dropped += static_cast<int64_t>(n);
}

ActivityLog::Taken ActivityLog::take() {
  std::lock_guard lock(mutex_);
  Taken out = std::move(now_);
  now_ = Taken{};
  return out;
}

// --- one step -----------------------------------------------------------------

DeviceStep build_device_step(const ActivityLog::Taken& taken,
                             const std::map<uint64_t, Launch>& launches, const ClockMap& clock,
                             double origin) {
  DeviceStep step;
  step.dropped = taken.dropped;
  step.skipped = taken.skipped;
  step.clock_drift = clock.drift_seconds();
  step.ops.reserve(taken.records.size());
  for (const RawRecord& r : taken.records) {
    const Launch* launch = nullptr;
    if (auto e = taken.external.find(r.correlation); e != taken.external.end()) {
      if (auto l = launches.find(e->second); l != launches.end()) launch = &l->second;
    }
    DeviceOp op;
    op.kind = r.kind;
    op.op_class = classify(r.kind, r.name, launch);
    op.start = clock.to_steady(r.start_ns) - origin;
    op.end = clock.to_steady(r.end_ns) - origin;
    op.stream = r.stream;
    op.device = r.device;
    op.correlation = r.correlation;
    op.action = launch != nullptr && launch->kind == Launch::Kind::kAction ? launch->index : -1;
    op.name = r.name;
    op.bytes = r.bytes;
    step.ops.push_back(std::move(op));
  }
  std::stable_sort(step.ops.begin(), step.ops.end(),
                   [](const DeviceOp& x, const DeviceOp& y) { return x.start < y.start; });
  return step;
}

// --- busy time ----------------------------------------------------------------

namespace {

using Intervals = std::vector<std::pair<double, double>>;

// Sorted, disjoint union of the intervals.
Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& [s, e] : v) {
    if (!out.empty() && s <= out.back().second) {
      out.back().second = std::max(out.back().second, e);
    } else {
      out.emplace_back(s, e);
    }
  }
  return out;
}

double length(const Intervals& disjoint) {
  double sum = 0;
  for (const auto& [s, e] : disjoint) sum += e - s;
  return sum;
}

// Length of the intersection of two sorted disjoint unions.
double intersection(const Intervals& x, const Intervals& y) {
  double sum = 0;
  size_t i = 0;
  size_t j = 0;
  while (i < x.size() && j < y.size()) {
    const double lo = std::max(x[i].first, y[j].first);
    const double hi = std::min(x[i].second, y[j].second);
    if (hi > lo) sum += hi - lo;
    (x[i].second < y[j].second ? i : j) += 1;
  }
  return sum;
}

}  // namespace

DeviceBusy device_busy(const std::vector<DeviceOp>& ops, double from, double to) {
  PPB_CHECK(from <= to, "device_busy: window ends before it starts");
  Intervals compute;
  Intervals comm;
  Intervals optimizer;
  Intervals all;
  for (const DeviceOp& op : ops) {
    const double s = std::max(op.start, from);
    const double e = std::min(op.end, to);
    if (e <= s) continue;
    all.emplace_back(s, e);
    switch (op.op_class) {
      case OpClass::kCompute:
        compute.emplace_back(s, e);
        break;
      case OpClass::kCommunication:
        comm.emplace_back(s, e);
        break;
      case OpClass::kOptimizer:
        optimizer.emplace_back(s, e);
        break;
      case OpClass::kOther:
        break;
    }
  }
  const Intervals c = merged(std::move(compute));
  const Intervals m = merged(std::move(comm));
  DeviceBusy b;
  b.compute = length(c);
  b.communication = length(m);
  b.overlap = intersection(c, m);
  b.optimizer = length(merged(std::move(optimizer)));
  b.busy = length(merged(std::move(all)));
  return b;
}

std::vector<double> action_device_seconds(const std::vector<DeviceOp>& ops, size_t actions) {
  std::vector<Intervals> per(actions);
  for (const DeviceOp& op : ops) {
    if (op.action < 0 || static_cast<size_t>(op.action) >= actions || op.end <= op.start) continue;
    per[static_cast<size_t>(op.action)].emplace_back(op.start, op.end);
  }
  std::vector<double> out;
  out.reserve(actions);
  for (Intervals& v : per) out.push_back(length(merged(std::move(v))));
  return out;
}

const std::vector<std::string>& kernel_families() {
  static const std::vector<std::string> families = {"gemm",          "layernorm", "attention",
                                                    "gelu",          "embedding", "cross_entropy",
                                                    "column_reduce", "convert",   "other"};
  return families;
}

std::string kernel_family(std::string_view name) {
  // cuBLAS / cuBLASLt: "...gemm..." kernels, their split-K reductions, and
  // on Hopper its nvJet kernels ("nvjet_tst_...").
  if (name.find("gemm") != std::string_view::npos || name.find("splitKreduce") != name.npos ||
      name.find("nvjet") != name.npos)
    return "gemm";
  // cuDNN's fused scaled-dot-product attention ("cudnn_generated_fort_native_sdpa_sm90_flash_...").
  if (name.find("sdpa") != std::string_view::npos ||
      (name.find("cudnn") != name.npos && name.find("flash") != name.npos))
    return "attention";
  // pipebench's own kernels, by the stem after "ppb_".
  static const std::pair<std::string_view, std::string_view> kStems[] = {
      {"ppb_layernorm", "layernorm"},
      {"ppb_attention", "attention"},
      {"ppb_flash_attention", "attention"},
      {"ppb_gelu", "gelu"},
      {"ppb_embedding", "embedding"},
      {"ppb_cross_entropy", "cross_entropy"},
      {"ppb_loss", "cross_entropy"},
      {"ppb_column", "column_reduce"},
      {"ppb_to_", "convert"}};
  for (const auto& [stem, family] : kStems) {
    if (name.find(stem) != std::string_view::npos) return std::string(family);
  }
  return "other";
}

std::map<std::string, double> family_device_seconds(const std::vector<DeviceOp>& ops) {
  std::map<std::string, Intervals> per;
  for (const DeviceOp& op : ops) {
    if (op.op_class != OpClass::kCompute || op.end <= op.start) continue;
    per[op.kind == OpKind::kKernel ? kernel_family(op.name) : "other"].emplace_back(op.start,
                                                                                    op.end);
  }
  std::map<std::string, double> out;
  for (const std::string& f : kernel_families()) {
    auto it = per.find(f);
    out[f] = it == per.end() ? 0.0 : length(merged(std::move(it->second)));
  }
  return out;
}

double device_bubble_ratio(double compute_seconds, double step_seconds) {
  if (step_seconds <= 0) return 0;
  return (step_seconds - compute_seconds) / step_seconds;
}

}  // namespace ppb::device
