// Result <-> JSON. The reader is strict about what it needs (each error names
// the field path) and ignores what it does not know, so that newer writers
// stay readable by older reports.
#include <boost/json.hpp>
#include <cmath>
#include <concepts>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "ppb/pipeline/model.hpp"
#include "ppb/pipeline/result.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/json_fields.hpp"

namespace ppb {

namespace json = boost::json;

const char* result_status_name(ResultStatus status) {
  switch (status) {
    case ResultStatus::kOk:
      return "ok";
    case ResultStatus::kOom:
      return "oom";
    case ResultStatus::kInvalid:
      return "invalid";
    case ResultStatus::kError:
      return "error";
  }
  return "?";
}

ScheduleParams schedule_params(const ResultConfig& c) {
  ScheduleParams p;
  copy_schedule_params(p, c);
  return p;
}

namespace {

// ---------------------------------------------------------------- writing --

json::value num(double x) {
  if (!std::isfinite(x)) return nullptr;
  return x;
}

template <class T, class F>
json::array array_of(const std::vector<T>& xs, F&& f) {
  json::array a;
  a.reserve(xs.size());
  for (const auto& x : xs) a.push_back(f(x));
  return a;
}

json::array doubles(const std::vector<double>& xs) {
  return array_of(xs, [](double x) { return num(x); });
}

json::array ints(const std::vector<int64_t>& xs) {
  return array_of(xs, [](int64_t x) { return json::value(x); });
}

// ------------------------------------------------------------ field lists --
// One list per struct names each of its fields once: the JSON key, required
// or optional (absent or null keeps the struct's default), nullable (a
// number or null, read as NaN; optional_nullable: absent reads as NaN too)
// and, for numbers, the least value allowed. The writer, the reader and the bound check all
// walk the same list, so they cannot disagree; keys are written in list
// order. A field added to a struct is one more line in its list.

/// Lists that hold one entry per stage (config.stages); `allow_empty` for
/// optional lists and for figures of a result that is not ok.
struct StageCount {
  const JsonReader& reader;
  size_t stages;
  void check(size_t n, const std::string& path, bool allow_empty) const {
    if (n == stages || (allow_empty && n == 0)) return;
    reader.fail(path, "expected " + std::to_string(stages) +
                          " entries (one per stage, config.stages), got " + std::to_string(n));
  }
};

/// The least value a number field allows (none: any).
using Least = std::optional<int64_t>;

template <class T>
void at_least(const JsonObject& o, std::string_view key, T value, int64_t least) {
  if (value < static_cast<T>(least)) {
    o.fail(key, "expected >= " + std::to_string(least) + ", got " + std::to_string(value));
  }
}

/// S is T, const or not (the writer walks a const struct).
template <class S, class T>
concept Is = std::same_as<std::remove_const_t<S>, T>;

template <class V, Is<ResultConfig> C>
void fields(V& v, C& c) {
  v.required("schedule", c.schedule);
  v.required("partition", c.partition);
  v.required("stages", c.stages, 1);
  v.required("microbatches", c.microbatches, 1);
  v.required("micro_batch_size", c.micro_batch_size, 1);
  v.required("inflight", c.inflight, 0);
  v.required("chunks", c.chunks, 1);
  v.required("model", c.model);
  v.required("backend", c.backend);
  v.required("transport", c.transport);
  v.optional("message_path", c.message_path);
  v.required("iters", c.iters, 1);
  v.required("warmup", c.warmup, 0);
  v.optional("time_scale", c.time_scale, 0);
  v.optional("memory_budget", c.memory_budget, 0);
  v.optional("seed", c.seed);
  v.optional("sync_warmup", c.sync_warmup, 0);
  v.optional("memory_guard", c.memory_guard, 0);
  v.optional("batches", c.batches, 1);
  // The regression gate's, and what `pipebench run --rerun` needs to measure
  // the combination again.
  v.optional("min_time", c.min_time);
  v.optional("plant", c.plant);
  v.optional("device", c.device);
  v.optional("max_iters", c.max_iters);
  v.optional("profile", c.profile);
  v.optional("check", c.check);  // absent: whether metrics.check is present (result_from_json)
  v.optional("dtype", c.dtype);
  v.optional("unit_ranges", c.unit_ranges);  // what calibration re-prices
  // Data parallelism's: files written before them load as one replica.
  v.optional("data_parallel", c.data_parallel, 1);
  v.optional("rank_order", c.rank_order);
}

template <class V, Is<ResultEnvironment> E>
void fields(V& v, E& e) {
  v.required("hosts", e.hosts);
  v.required("ranks", e.ranks);
  v.required("mpi", e.mpi);
  v.required("cuda", e.cuda);
  v.required("gpus", e.gpus);
  v.required("driver", e.driver);
  v.required("git", e.git);
  v.required("date", e.date);
  v.optional("compiler", e.compiler);
  v.optional("build_type", e.build_type);
  v.optional("hostname", e.hostname);
  v.optional("cpu", e.cpu);
  // The regression gate's: what makes a run unfit for it.
  v.optional("cores", e.cores);
  v.optional("oversubscribed", e.oversubscribed);
  v.optional("rank_hosts", e.rank_hosts);
  v.optional("ranks_per_gpu", e.ranks_per_gpu);  // bound checked by read_environment
  // The software stack beside the driver: the gate names a change of it.
  v.optional("nccl", e.nccl);
  v.optional("cudnn", e.cudnn);
}

template <class V, Is<StepTimeStats> S>
void fields(V& v, S& x) {
  v.required("median", x.median);
  v.required("min", x.min);
  v.required("max", x.max);
  v.required("samples", x.samples);
}

template <class V, Is<SampleSpread> S>
void fields(V& v, S& x) {
  v.required("n", x.n);
  v.nullable("median", x.median);
  v.nullable("mad", x.mad);
  v.nullable("q1", x.q1);
  v.nullable("q3", x.q3);
  v.nullable("min", x.min);
  v.nullable("max", x.max);
}

template <class V, Is<CheckFigures> C>
void fields(V& v, C& x) {
  v.required("passed", x.passed);
  v.nullable("max_rel_error", x.max_rel_error);
  v.optional_nullable("loss", x.loss);
  v.optional("method", x.method);
}

template <class V, Is<MemoryGuardFigures> G>
void fields(V& v, G& x) {
  v.required("actions", x.actions);
  v.required("min_inflight", x.min_inflight);
}

template <class V, Is<StageActionTimes> A>
void fields(V& v, A& x) {
  v.optional_nullable("F", x.fwd);
  v.optional_nullable("B", x.bwd);
  v.optional_nullable("I", x.bwd_input);
  v.optional_nullable("W", x.bwd_weight);
}

template <class V, Is<KindSeconds> K>
void fields(V& v, K& x) {
  v.required("F", x.fwd);
  v.required("I", x.bwd_input);
  v.required("W", x.bwd_weight);
}

template <class V, Is<MeasuredLinkFigures> L>
void fields(V& v, L& x) {
  v.required("path", x.path);  // "host" or "network": checked by read_theory
  v.nullable("latency_seconds", x.latency_seconds);
  v.nullable("bandwidth_bytes_per_second", x.bandwidth_bytes_per_second);
  v.required("messages", x.messages);
  v.optional("sizes", x.sizes);
}

/// The theory's figures with a field list; kind_seconds, timeline and links
/// (keyed by unit kind, events, an earlier single link) follow them by hand.
template <class V, Is<TheoryFigures> T>
void fields(V& v, T& t) {
  v.nullable("step_time_seconds", t.step_time_seconds);
  v.per_stage("peak_inflight_per_stage", t.peak_inflight_per_stage);
  v.per_stage("activation_bytes_per_microbatch", t.activation_bytes_per_microbatch);
  v.per_stage("peak_activation_bytes_per_stage", t.peak_activation_bytes_per_stage);
  v.per_stage("action_seconds", t.action_seconds);
}

template <class S>
json::object write_fields(const S& x);
template <class S>
S read_fields(const JsonObject& o, const StageCount* stages = nullptr);

json::value to_json(const std::string& x) { return json::value(x); }
template <class T>
json::value to_json(const T& x) {
  if constexpr (std::is_floating_point_v<T>) {
    return num(x);
  } else if constexpr (std::is_arithmetic_v<T>) {
    return json::value(x);
  } else {
    return write_fields(x);
  }
}
template <class T>
json::value to_json(const std::vector<T>& xs) {
  return array_of(xs, [](const T& x) { return to_json(x); });
}

/// Writes each field of a list into `o`, in list order.
struct FieldWriter {
  json::object& o;
  template <class T>
  void required(std::string_view key, const T& x, Least /*least*/ = {}) {
    o[key] = to_json(x);
  }
  template <class T>
  void optional(std::string_view key, const T& x, Least /*least*/ = {}) {
    o[key] = to_json(x);
  }
  void nullable(std::string_view key, double x) { o[key] = num(x); }
  void optional_nullable(std::string_view key, double x) { o[key] = num(x); }
  template <class T>
  void per_stage(std::string_view key, const std::vector<T>& x) {
    o[key] = to_json(x);
  }
};

/// Reads each field of a list from `o`; every error names the field path.
struct FieldReader {
  const JsonObject& o;
  template <class T>
  void required(std::string_view key, T& x, Least /*least*/ = {}) {
    x = o.get<T>(key);
  }
  template <class T>
  void optional(std::string_view key, T& x, Least /*least*/ = {}) {
    x = o.get_or(key, x);
  }
  /// Required number or null (NaN).
  void nullable(std::string_view key, double& x) { x = o.number_or_null(key); }
  /// Absent or null: NaN.
  void optional_nullable(std::string_view key, double& x) { x = o.optional_number_or_null(key); }
  /// Optional, one entry per stage (checked by FieldBounds).
  template <class T>
  void per_stage(std::string_view key, std::vector<T>& x) {
    if constexpr (std::is_arithmetic_v<T>) {
      x = o.get_or(key, x);
    } else {
      x = o.optional_array(key, [this](const json::value& v, const std::string& p) {
        return read_fields<T>(o.reader().object(v, p));
      });
    }
  }
};

/// Checks each number of a list against its least value, after the whole
/// object is read (so a missing field is named before a bad one).
struct FieldBounds {
  const JsonObject& o;
  const StageCount* stages;  ///< what per_stage lists follow
  template <class T>
  void required(std::string_view key, const T& x, Least least = {}) {
    check(key, x, least);
  }
  template <class T>
  void optional(std::string_view key, const T& x, Least least = {}) {
    check(key, x, least);
  }
  void nullable(std::string_view /*key*/, double /*x*/) {}
  void optional_nullable(std::string_view /*key*/, double /*x*/) {}
  template <class T>
  void per_stage(std::string_view key, const std::vector<T>& x) {
    PPB_CHECK(stages != nullptr, "a per-stage field read without the stage count");
    stages->check(x.size(), o.field(key), true);
  }
  template <class T>
  void check(std::string_view key, const T& x, Least least) {
    if constexpr (std::is_arithmetic_v<T>) {
      if (least) at_least(o, key, x, *least);
    }
  }
};

/// Reads a struct by its field list, then checks its bounds (per_stage
/// lists against `stages`).
template <class S>
S read_fields(const JsonObject& o, const StageCount* stages) {
  S x;
  FieldReader in{o};
  fields(in, x);
  FieldBounds bounds{o, stages};
  fields(bounds, std::as_const(x));
  return x;
}

/// Writes a struct by its field list.
template <class S>
json::object write_fields(const S& x) {
  json::object o;
  FieldWriter out{o};
  fields(out, x);
  return o;
}

json::object bubble_json(const BubbleFigures& b) {
  return {{"measured", num(b.measured)},
          {"theoretical", num(b.theoretical)},
          {"per_stage", doubles(b.per_stage)}};
}

json::array timeline_json(const Timeline& timeline) {
  return array_of(timeline, [](const std::vector<TimelineEvent>& stage) {
    return json::value(array_of(stage, [](const TimelineEvent& e) {
      return json::value(json::object{{"op", action_kind_name(e.op)},
                                      {"mb", e.mb},
                                      {"chunk", e.chunk},
                                      {"start", num(e.start)},
                                      {"end", num(e.end)}});
    }));
  });
}

json::object memory_json(const PeakMemory& m) {
  json::object o{{"per_stage", ints(m.per_stage)},
                 {"activations_per_stage", ints(m.activations_per_stage)},
                 {"device_per_stage", ints(m.device_per_stage)}};
  o["by_category"] = array_of(m.by_category, [](const MemoryByCategory& c) {
    json::object cats;
    for (int i = 0; i < kNumMemCategories; ++i) {
      cats[mem_category_name(static_cast<MemCategory>(i))] = c[static_cast<size_t>(i)];
    }
    return json::value(std::move(cats));
  });
  o["peak_rss_per_stage"] = ints(m.peak_rss_per_stage);
  o["device_profiler"] = m.device_profiler;
  return o;
}

json::object device_json(const DeviceFigures& d) {
  json::object o = {{"profiler", d.profiler},
                    {"bubble_ratio", num(d.bubble_ratio)},
                    {"bubble_ratio_per_stage", doubles(d.bubble_ratio_per_stage)},
                    {"compute_seconds_per_stage", doubles(d.compute_seconds_per_stage)},
                    {"communication_seconds_per_stage", doubles(d.communication_seconds_per_stage)},
                    {"overlap_seconds_per_stage", doubles(d.overlap_seconds_per_stage)},
                    {"busy_seconds_per_stage", doubles(d.busy_seconds_per_stage)}};
  if (!d.bubble_ratio_samples.empty()) o["bubble_ratio_samples"] = doubles(d.bubble_ratio_samples);
  return o;
}

json::object theory_json(const TheoryFigures& t) {
  json::object o = write_fields(t);
  if (!t.kind_seconds.empty()) {
    o["kind_seconds"] = array_of(t.kind_seconds, [](const std::map<std::string, KindSeconds>& m) {
      json::object stage;
      for (const auto& [kind, k] : m) {
        stage[kind] = write_fields(k);
      }
      return json::value(std::move(stage));
    });
  }
  o["timeline"] = timeline_json(t.timeline);
  o["links"] = to_json(t.links);
  return o;
}

json::object metrics_json(const ResultMetrics& m) {
  json::object o;
  o["samples_per_second"] = num(m.samples_per_second);
  o["step_time_seconds"] = write_fields(m.step_time_seconds);
  o["bubble_ratio"] = bubble_json(m.bubble_ratio);
  o["bubble_overhead"] = bubble_json(m.bubble_overhead);
  o["peak_memory_bytes"] = memory_json(m.peak_memory_bytes);
  if (m.theory) o["theory"] = theory_json(*m.theory);
  if (m.check) o["check"] = write_fields(*m.check);
  if (m.memory_guard) o["memory_guard"] = write_fields(*m.memory_guard);
  if (!m.collectors.empty()) {
    json::object cs;
    for (const auto& [name, c] : m.collectors) {
      json::object step;
      for (const auto& [figure, v] : c.step) step[figure] = doubles(v);
      json::object action;
      for (const auto& [figure, v] : c.action) action[figure] = array_of(v, doubles);
      cs[name] = json::object{{"step", std::move(step)}, {"action", std::move(action)}};
    }
    o["collectors"] = std::move(cs);
  }
  if (m.device) o["device"] = device_json(*m.device);
  return o;
}

// ---------------------------------------------------------------- reading --
// One function per object of the schema; each field is one line through the
// one JSON field reader (ppb/profiling/json_fields.hpp).

ResultStatus read_status(const JsonObject& root) {
  const std::string status = root.get<std::string>("status");
  if (status == "ok") return ResultStatus::kOk;
  if (status == "oom") return ResultStatus::kOom;
  if (status == "invalid") return ResultStatus::kInvalid;
  if (status == "error") return ResultStatus::kError;
  root.fail("status", "expected one of ok, oom, invalid, error, got \"" + status + "\"");
}

/// Byte counts per stage: none below zero.
void no_negative_bytes(const JsonObject& o, std::string_view key,
                       const std::vector<int64_t>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0) {
      o.fail(std::string(key) + "[" + std::to_string(i) + "]",
             "expected bytes >= 0, got " + std::to_string(values[i]));
    }
  }
}

ActionKind read_op(const JsonReader& r, const json::value& v, const std::string& path) {
  const std::string s = r.string(v, path);
  if (s == "F") return ActionKind::kForward;
  if (s == "B") return ActionKind::kBackward;
  if (s == "I") return ActionKind::kBackwardInput;
  if (s == "W") return ActionKind::kBackwardWeight;
  if (s == "SYNC") return ActionKind::kSync;
  r.fail(path, "expected one of F, B, I, W, SYNC, got \"" + s + "\"");
}

TimelineEvent read_event(const JsonObject& o) {
  TimelineEvent e;
  e.op = read_op(o.reader(), o.at("op"), o.field("op"));
  e.mb = o.get<int>("mb");
  e.chunk = o.get<int>("chunk");
  e.start = o.get<double>("start");
  e.end = o.get<double>("end");
  if (e.end < e.start) o.fail("end", "ends before its start");
  return e;
}

Timeline read_timeline(const JsonReader& r, const json::value& v, const std::string& path) {
  return r.array_of(v, path, [&r](const json::value& stage, const std::string& sp) {
    return r.array_of(stage, sp, [&r](const json::value& ev, const std::string& ep) {
      return read_event(r.object(ev, ep));
    });
  });
}

BubbleFigures read_bubble(const JsonObject& o, const StageCount& n, bool ok) {
  BubbleFigures b;
  b.measured = o.get<double>("measured");
  b.theoretical = o.number_or_null("theoretical");
  b.per_stage = o.get<std::vector<double>>("per_stage");
  n.check(b.per_stage.size(), o.field("per_stage"), !ok);
  return b;
}

MemoryByCategory read_categories(const JsonObject& o) {
  MemoryByCategory cats{};
  for (int i = 0; i < kNumMemCategories; ++i) {
    cats[static_cast<size_t>(i)] =
        o.get_or<int64_t>(mem_category_name(static_cast<MemCategory>(i)), 0);
  }
  return cats;
}

PeakMemory read_memory(const JsonObject& o, const StageCount& n, bool ok) {
  PeakMemory pm;
  pm.per_stage = o.get<std::vector<int64_t>>("per_stage");
  pm.activations_per_stage = o.get<std::vector<int64_t>>("activations_per_stage");
  pm.device_per_stage = o.get_or("device_per_stage", std::vector<int64_t>{});
  pm.peak_rss_per_stage = o.get_or("peak_rss_per_stage", std::vector<int64_t>{});
  pm.device_profiler = o.get_or<std::string>("device_profiler", "");
  pm.by_category =
      o.optional_array("by_category", [&o](const json::value& v, const std::string& p) {
        return read_categories(o.reader().object(v, p));
      });
  n.check(pm.per_stage.size(), o.field("per_stage"), !ok);
  n.check(pm.activations_per_stage.size(), o.field("activations_per_stage"), !ok);
  n.check(pm.device_per_stage.size(), o.field("device_per_stage"), true);
  n.check(pm.peak_rss_per_stage.size(), o.field("peak_rss_per_stage"), true);
  n.check(pm.by_category.size(), o.field("by_category"), true);
  no_negative_bytes(o, "per_stage", pm.per_stage);
  no_negative_bytes(o, "activations_per_stage", pm.activations_per_stage);
  no_negative_bytes(o, "device_per_stage", pm.device_per_stage);
  no_negative_bytes(o, "peak_rss_per_stage", pm.peak_rss_per_stage);
  return pm;
}

TheoryFigures read_theory(const JsonObject& o, const StageCount& n) {
  TheoryFigures t = read_fields<TheoryFigures>(o, &n);
  t.kind_seconds =
      o.optional_array("kind_seconds", [&o](const json::value& v, const std::string& p) {
        const JsonObject stage = o.reader().object(v, p);
        std::map<std::string, KindSeconds> m;
        for (const auto& kv : stage.raw()) {
          const std::string kind(kv.key());
          if (!is_unit_kind_name(kind))
            stage.fail(kind, "unknown unit kind (kinds: " + unit_kind_names() + ")");
          m[kind] = read_fields<KindSeconds>(o.reader().object(kv.value(), stage.field(kind)));
        }
        return m;
      });
  if (const json::value* v = o.find("timeline"))
    t.timeline = read_timeline(o.reader(), *v, o.field("timeline"));
  t.links = o.optional_array("links", [&o](const json::value& v, const std::string& p) {
    const JsonObject l = o.reader().object(v, p);
    MeasuredLinkFigures f = read_fields<MeasuredLinkFigures>(l);
    if (f.path != "host" && f.path != "network") {
      l.fail("path", "expected \"host\" or \"network\", got \"" + f.path + "\"");
    }
    return f;
  });
  // Files written before `links` hold the stage-to-stage link as `link`
  // (bandwidth 0 = not resolved): the link within a host.
  if (const auto l = o.find_object("link"); l && t.links.empty()) {
    MeasuredLinkFigures f;
    f.path = "host";
    f.latency_seconds = l->get<double>("latency_seconds");
    const double bw = l->get<double>("bandwidth");
    f.bandwidth_bytes_per_second = bw > 0 ? bw : std::numeric_limits<double>::quiet_NaN();
    t.links.push_back(f);
  }
  n.check(t.kind_seconds.size(), o.field("kind_seconds"), true);
  n.check(t.timeline.size(), o.field("timeline"), true);
  return t;
}

DeviceFigures read_device(const JsonObject& o, const StageCount& n) {
  DeviceFigures d;
  d.profiler = o.get<std::string>("profiler");
  d.bubble_ratio = o.number_or_null("bubble_ratio");
  const auto per_stage = [&o, &n](std::string_view key) {
    std::vector<double> v = o.numbers_or_null(key);
    n.check(v.size(), o.field(key), false);
    return v;
  };
  d.bubble_ratio_per_stage = per_stage("bubble_ratio_per_stage");
  d.compute_seconds_per_stage = per_stage("compute_seconds_per_stage");
  d.communication_seconds_per_stage = per_stage("communication_seconds_per_stage");
  d.overlap_seconds_per_stage = per_stage("overlap_seconds_per_stage");
  d.busy_seconds_per_stage = per_stage("busy_seconds_per_stage");
  if (o.has("bubble_ratio_samples"))
    d.bubble_ratio_samples = o.numbers_or_null("bubble_ratio_samples");
  return d;
}

/// metrics.collectors: per collector, figures per stage ("step") and per
/// stage and timeline action ("action"; checked against the timeline later).
std::map<std::string, CollectorResult> read_collectors(const JsonObject& o, const StageCount& n) {
  std::map<std::string, CollectorResult> out;
  const JsonReader& r = o.reader();
  for (const auto& kv : o.raw()) {
    const JsonObject c = o.object(kv.key());
    CollectorResult& cr = out[std::string(kv.key())];
    if (const auto step = c.find_object("step")) {
      for (const auto& f : step->raw()) {
        cr.step[std::string(f.key())] = step->numbers_or_null(f.key());
        n.check(cr.step[std::string(f.key())].size(), step->field(f.key()), false);
      }
    }
    if (const auto action = c.find_object("action")) {
      for (const auto& f : action->raw()) {
        auto& v = cr.action[std::string(f.key())];
        v = r.array_of(f.value(), action->field(f.key()),
                       [&r](const json::value& x, const std::string& p) {
                         return r.array_of(x, p, [&r](const json::value& y, const std::string& q) {
                           return r.number_or_null(y, q);
                         });
                       });
        n.check(v.size(), action->field(f.key()), false);
      }
    }
  }
  return out;
}

ResultMetrics read_metrics(const JsonObject& m, const StageCount& n, bool ok) {
  ResultMetrics x;
  x.samples_per_second = m.get<double>("samples_per_second");
  at_least(m, "samples_per_second", x.samples_per_second, 0);
  x.step_time_seconds = read_fields<StepTimeStats>(m.object("step_time_seconds"));
  x.bubble_ratio = read_bubble(m.object("bubble_ratio"), n, ok);
  x.bubble_overhead = read_bubble(m.object("bubble_overhead"), n, ok);
  x.peak_memory_bytes = read_memory(m.object("peak_memory_bytes"), n, ok);
  if (const auto o = m.find_object("theory")) x.theory = read_theory(*o, n);
  if (const auto o = m.find_object("check")) x.check = read_fields<CheckFigures>(*o);
  if (const auto o = m.find_object("memory_guard"))
    x.memory_guard = read_fields<MemoryGuardFigures>(*o);
  if (const auto o = m.find_object("collectors")) x.collectors = read_collectors(*o, n);
  if (const auto o = m.find_object("device")) x.device = read_device(*o, n);
  return x;
}

ResultEnvironment read_environment(const JsonObject& e) {
  ResultEnvironment env = read_fields<ResultEnvironment>(e);
  if (env.ranks_per_gpu < 0) e.fail("ranks_per_gpu", "expected an integer >= 0");
  return env;
}

/// Collector figures per action follow the timeline: one per event.
void check_collector_actions(const JsonReader& r, const Result& out) {
  if (!out.metrics) return;
  for (const auto& [name, c] : out.metrics->collectors) {
    for (const auto& [figure, per_stage] : c.action) {
      for (size_t s = 0; s < per_stage.size() && s < out.timeline.size(); ++s) {
        if (per_stage[s].size() == out.timeline[s].size()) continue;
        r.fail("metrics.collectors." + name + ".action." + figure + "[" + std::to_string(s) + "]",
               "expected " + std::to_string(out.timeline[s].size()) +
                   " entries (one per action of timeline[" + std::to_string(s) + "]), got " +
                   std::to_string(per_stage[s].size()));
      }
    }
  }
}

// The regression gate's figures of a run's noise, written and read in one
// place each (its config and environment fields are in the field lists).
// All are optional, so files written before them still load.
void write_gate_fields(const Result& result, json::object& root) {
  if (!result.metrics) return;
  json::object& metrics = root["metrics"].as_object();
  metrics["bubble_ratio"].as_object()["samples"] = doubles(result.metrics->bubble_ratio.samples);
  if (result.metrics->foreign_cpu) metrics["foreign_cpu"] = num(*result.metrics->foreign_cpu);
  metrics["busy_seconds_per_stage"] =
      array_of(result.metrics->busy_seconds_per_stage,
               [](const std::vector<double>& steps) { return json::value(doubles(steps)); });
  if (!result.metrics->speed_probe_seconds_per_stage.empty()) {
    metrics["speed_probe_seconds_per_stage"] =
        array_of(result.metrics->speed_probe_seconds_per_stage,
                 [](const std::vector<double>& steps) { return json::value(doubles(steps)); });
  }
  if (const std::optional<SpreadFigures>& sp = result.metrics->spread) {
    metrics["spread"] = json::object{{"step_time_seconds", write_fields(sp->step_time_seconds)},
                                     {"samples_per_second", write_fields(sp->samples_per_second)},
                                     {"bubble_ratio", write_fields(sp->bubble_ratio)}};
  }
}

void read_gate_fields(const JsonObject& root, Result& out) {
  if (!root.object("config").has("check"))
    out.config.check = out.metrics.has_value() && out.metrics->check.has_value();
  if (!out.metrics) return;
  const JsonObject metrics = root.object("metrics");
  out.metrics->bubble_ratio.samples =
      metrics.object("bubble_ratio").get_or("samples", std::vector<double>{});
  if (metrics.has("foreign_cpu")) out.metrics->foreign_cpu = metrics.get<double>("foreign_cpu");
  const JsonReader& r = metrics.reader();
  const auto per_stage_steps = [&r](const json::value& v, const std::string& p) {
    return r.array_of(
        v, p, [&r](const json::value& x, const std::string& q) { return r.number_or_null(x, q); });
  };
  out.metrics->busy_seconds_per_stage =
      metrics.optional_array("busy_seconds_per_stage", per_stage_steps);
  out.metrics->speed_probe_seconds_per_stage =
      metrics.optional_array("speed_probe_seconds_per_stage", per_stage_steps);
  const StageCount n{r, static_cast<size_t>(out.config.stages)};
  n.check(out.metrics->busy_seconds_per_stage.size(), metrics.field("busy_seconds_per_stage"),
          true);
  n.check(out.metrics->speed_probe_seconds_per_stage.size(),
          metrics.field("speed_probe_seconds_per_stage"), true);
  const std::optional<JsonObject> spread = metrics.find_object("spread");
  if (!spread) return;
  auto one = [&spread](std::string_view key) {
    return read_fields<SampleSpread>(spread->object(key));
  };
  SpreadFigures& f = out.metrics->spread.emplace();
  f.step_time_seconds = one("step_time_seconds");
  f.samples_per_second = one("samples_per_second");
  f.bubble_ratio = one("bubble_ratio");
}

// Data parallelism's figures, written and read in one place each (its
// config fields are in the field list); all optional, so files written
// before them still load.
void write_data_parallel_fields(const Result& result, json::object& root) {
  if (!result.metrics || !result.metrics->allreduce) return;
  const AllReduceFigures& a = *result.metrics->allreduce;
  json::object& metrics = root["metrics"].as_object();
  metrics["allreduce_seconds"] = num(a.seconds);
  metrics["allreduce"] =
      json::object{{"seconds_per_stage", doubles(a.seconds_per_stage)},
                   {"overlap_seconds_per_stage", doubles(a.overlap_seconds_per_stage)},
                   {"bytes_per_stage", ints(a.bytes_per_stage)},
                   {"exposed_seconds", num(a.exposed_seconds)},
                   {"latency", num(a.latency)},
                   {"bandwidth", num(a.bandwidth)},
                   {"theoretical_seconds_per_stage", doubles(a.theoretical_seconds_per_stage)},
                   {"bubble_ratio_pipeline", bubble_json(a.bubble_ratio_pipeline)}};
}

void read_data_parallel_fields(const JsonObject& root, Result& out) {
  if (!out.metrics) return;
  const JsonObject metrics = root.object("metrics");
  const std::optional<JsonObject> o = metrics.find_object("allreduce");
  if (!o) return;
  const StageCount n{o->reader(), static_cast<size_t>(out.config.stages)};
  AllReduceFigures& a = out.metrics->allreduce.emplace();
  a.seconds = metrics.optional_number_or_null("allreduce_seconds");
  a.seconds_per_stage = o->numbers_or_null("seconds_per_stage");
  a.overlap_seconds_per_stage = o->numbers_or_null("overlap_seconds_per_stage");
  a.bytes_per_stage = o->get<std::vector<int64_t>>("bytes_per_stage");
  a.exposed_seconds = o->number_or_null("exposed_seconds");
  a.latency = o->number_or_null("latency");
  a.bandwidth = o->number_or_null("bandwidth");
  a.theoretical_seconds_per_stage = o->numbers_or_null("theoretical_seconds_per_stage");
  a.bubble_ratio_pipeline = read_bubble(o->object("bubble_ratio_pipeline"), n, true);
  n.check(a.seconds_per_stage.size(), o->field("seconds_per_stage"), true);
  n.check(a.overlap_seconds_per_stage.size(), o->field("overlap_seconds_per_stage"), true);
  n.check(a.bytes_per_stage.size(), o->field("bytes_per_stage"), true);
  n.check(a.theoretical_seconds_per_stage.size(), o->field("theoretical_seconds_per_stage"), true);
  no_negative_bytes(*o, "bytes_per_stage", a.bytes_per_stage);
}

}  // namespace

boost::json::value result_to_json(const Result& result) {
  json::object o;
  o["schema"] = kResultSchema;
  o["status"] = result_status_name(result.status);
  o["error"] = result.error;
  o["config"] = write_fields(result.config);
  if (result.metrics) o["metrics"] = metrics_json(*result.metrics);
  o["timeline"] = timeline_json(result.timeline);
  o["environment"] = write_fields(result.environment);
  write_gate_fields(result, o);
  write_data_parallel_fields(result, o);
  return o;
}

Result result_from_json(const boost::json::value& doc, std::string_view source) {
  const JsonReader r{std::string(source)};
  if (!doc.is_object()) {
    throw UsageError(std::string(source) + ": expected a JSON object (a pipebench result), got " +
                     JsonReader::kind_name(doc));
  }
  const JsonObject root = r.root(doc);
  const std::string schema = root.get<std::string>("schema");
  if (schema != kResultSchema) {
    root.fail("schema", std::string("expected \"") + kResultSchema + "\", got \"" + schema + "\"");
  }
  Result out;
  out.status = read_status(root);
  const bool ok = out.status == ResultStatus::kOk;
  out.error = ok ? root.get_or<std::string>("error", "") : root.get<std::string>("error");
  out.config = read_fields<ResultConfig>(root.object("config"));
  const StageCount n{r, static_cast<size_t>(out.config.stages)};
  // metrics and timeline: required when ok, optional otherwise.
  if (ok || root.has("metrics")) out.metrics = read_metrics(root.object("metrics"), n, ok);
  if (ok || root.has("timeline")) out.timeline = read_timeline(r, root.at("timeline"), "timeline");
  n.check(out.timeline.size(), "timeline", true);
  check_collector_actions(r, out);
  out.environment = read_environment(root.object("environment"));
  read_gate_fields(root, out);
  read_data_parallel_fields(root, out);
  return out;
}

}  // namespace ppb
