// Result <-> JSON. The reader is strict about what it needs (each error names
// the field path) and ignores what it does not know, so that newer writers
// stay readable by older reports.
#include <boost/json.hpp>
#include <cmath>
#include <string>
#include <utility>

#include "ppb/pipeline/result.hpp"
#include "ppb/profiling/check.hpp"

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

json::array strings(const std::vector<std::string>& xs) {
  return array_of(xs, [](const std::string& x) { return json::value(x); });
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
  return o;
}

json::object theory_json(const TheoryFigures& t) {
  json::object o{{"step_time_seconds", num(t.step_time_seconds)}};
  o["peak_inflight_per_stage"] =
      array_of(t.peak_inflight_per_stage, [](int x) { return json::value(x); });
  o["activation_bytes_per_microbatch"] = ints(t.activation_bytes_per_microbatch);
  o["peak_activation_bytes_per_stage"] = ints(t.peak_activation_bytes_per_stage);
  o["action_seconds"] = array_of(t.action_seconds, [](const StageActionTimes& a) {
    return json::value(json::object{
        {"F", num(a.fwd)}, {"B", num(a.bwd)}, {"I", num(a.bwd_input)}, {"W", num(a.bwd_weight)}});
  });
  o["timeline"] = timeline_json(t.timeline);
  return o;
}

json::object metrics_json(const ResultMetrics& m) {
  json::object o;
  o["samples_per_second"] = num(m.samples_per_second);
  o["step_time_seconds"] = json::object{{"median", num(m.step_time_seconds.median)},
                                        {"min", num(m.step_time_seconds.min)},
                                        {"max", num(m.step_time_seconds.max)},
                                        {"samples", doubles(m.step_time_seconds.samples)}};
  o["bubble_ratio"] = bubble_json(m.bubble_ratio);
  o["bubble_overhead"] = bubble_json(m.bubble_overhead);
  o["peak_memory_bytes"] = memory_json(m.peak_memory_bytes);
  if (m.theory) o["theory"] = theory_json(*m.theory);
  if (m.check) {
    o["check"] = json::object{{"passed", m.check->passed},
                              {"max_rel_error", num(m.check->max_rel_error)},
                              {"loss", num(m.check->loss)},
                              {"method", m.check->method}};
  }
  if (m.memory_guard) {
    o["memory_guard"] = json::object{{"actions", m.memory_guard->actions},
                                     {"min_inflight", m.memory_guard->min_inflight}};
  }
  return o;
}

// ---------------------------------------------------------------- reading --

std::string join(const std::string& parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return parent + "." + std::string(key);
}

std::string index_path(const std::string& parent, size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

// Reads typed fields out of one document; every failure names source + path.
class FieldReader {
 public:
  explicit FieldReader(std::string_view source) : source_(source) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw UsageError(std::string(source_) + ": field '" + path + "': " + what);
  }

  const json::object& object(const json::value& v, const std::string& path) const {
    if (!v.is_object()) fail(path, "expected an object");
    return v.get_object();
  }

  // nullptr when absent or null (optional fields).
  static const json::value* find(const json::object& o, std::string_view key) {
    const json::value* v = o.if_contains(key);
    if (v == nullptr || v->is_null()) return nullptr;
    return v;
  }

  const json::value& require(const json::object& o, const std::string& parent,
                             std::string_view key) const {
    const json::value* v = o.if_contains(key);
    if (v == nullptr) fail(join(parent, key), "missing");
    return *v;
  }

  double number(const json::value& v, const std::string& path) const {
    if (v.is_double()) return v.get_double();
    if (v.is_int64()) return static_cast<double>(v.get_int64());
    if (v.is_uint64()) return static_cast<double>(v.get_uint64());
    fail(path, std::string("expected a number, got ") + kind_name(v));
  }

  double number_or_null(const json::value& v, const std::string& path) const {
    if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (v.is_double() || v.is_int64() || v.is_uint64()) return number(v, path);
    fail(path, std::string("expected a number or null, got ") + kind_name(v));
  }

  int64_t integer(const json::value& v, const std::string& path) const {
    if (v.is_int64()) return v.get_int64();
    if (v.is_uint64()) {
      if (v.get_uint64() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(path, "integer out of range");
      }
      return static_cast<int64_t>(v.get_uint64());
    }
    if (v.is_double()) {
      const double d = v.get_double();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18)
        return static_cast<int64_t>(d);
      fail(path, "expected an integer, got " + std::to_string(d));
    }
    fail(path, std::string("expected an integer, got ") + kind_name(v));
  }

  int int32(const json::value& v, const std::string& path) const {
    const int64_t x = integer(v, path);
    if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max()) {
      fail(path, "integer out of range");
    }
    return static_cast<int>(x);
  }

  uint64_t uinteger(const json::value& v, const std::string& path) const {
    if (v.is_uint64()) return v.get_uint64();
    const int64_t x = integer(v, path);
    if (x < 0) fail(path, "expected a non-negative integer");
    return static_cast<uint64_t>(x);
  }

  bool boolean(const json::value& v, const std::string& path) const {
    if (!v.is_bool()) fail(path, std::string("expected true or false, got ") + kind_name(v));
    return v.get_bool();
  }

  std::string string(const json::value& v, const std::string& path) const {
    if (!v.is_string()) fail(path, std::string("expected a string, got ") + kind_name(v));
    return std::string(v.get_string());
  }

  template <class F>
  auto array(const json::value& v, const std::string& path, F&& element) const {
    using T = decltype(element(v, path));
    if (!v.is_array()) fail(path, std::string("expected an array, got ") + kind_name(v));
    std::vector<T> out;
    out.reserve(v.get_array().size());
    size_t i = 0;
    for (const json::value& x : v.get_array()) out.push_back(element(x, index_path(path, i++)));
    return out;
  }

  // Convenience: required key of object o (at parent) through reader fn.
  template <class F>
  auto field(const json::object& o, const std::string& parent, std::string_view key, F&& fn) const {
    return fn(require(o, parent, key), join(parent, key));
  }

  // Optional key: returns fallback when absent or null.
  template <class F, class T>
  auto optional_field(const json::object& o, const std::string& parent, std::string_view key,
                      F&& fn, T fallback) const {
    const json::value* v = find(o, key);
    if (v == nullptr) return static_cast<decltype(fn(*v, std::string()))>(fallback);
    return fn(*v, join(parent, key));
  }

  static const char* kind_name(const json::value& v) {
    switch (v.kind()) {
      case json::kind::null:
        return "null";
      case json::kind::bool_:
        return "a boolean";
      case json::kind::int64:
      case json::kind::uint64:
      case json::kind::double_:
        return "a number";
      case json::kind::string:
        return "a string";
      case json::kind::array:
        return "an array";
      case json::kind::object:
        return "an object";
    }
    return "?";
  }

 private:
  std::string_view source_;
};

ActionKind parse_op(const FieldReader& r, const json::value& v, const std::string& path) {
  const std::string s = r.string(v, path);
  if (s == "F") return ActionKind::kForward;
  if (s == "B") return ActionKind::kBackward;
  if (s == "I") return ActionKind::kBackwardInput;
  if (s == "W") return ActionKind::kBackwardWeight;
  if (s == "SYNC") return ActionKind::kSync;
  r.fail(path, "expected one of F, B, I, W, SYNC, got \"" + s + "\"");
}

Timeline parse_timeline(const FieldReader& r, const json::value& v, const std::string& path) {
  return r.array(v, path, [&r](const json::value& stage, const std::string& sp) {
    return r.array(stage, sp, [&r](const json::value& ev, const std::string& ep) {
      const json::object& o = r.object(ev, ep);
      TimelineEvent e;
      e.op = r.field(o, ep, "op", [&r](const json::value& x, const std::string& p) {
        return parse_op(r, x, p);
      });
      auto i32 = [&r](const json::value& x, const std::string& p) { return r.int32(x, p); };
      auto dbl = [&r](const json::value& x, const std::string& p) { return r.number(x, p); };
      e.mb = r.field(o, ep, "mb", i32);
      e.chunk = r.field(o, ep, "chunk", i32);
      e.start = r.field(o, ep, "start", dbl);
      e.end = r.field(o, ep, "end", dbl);
      if (e.end < e.start) r.fail(join(ep, "end"), "ends before its start");
      return e;
    });
  });
}

// The regression gate's fields (the noise of a run and what makes a run
// unfit for it), written and read in one place each. All are optional, so
// files written before them still load.
void write_gate_fields(const Result& result, json::object& root) {
  json::object& config = root["config"].as_object();
  config["min_time"] = num(result.config.min_time);
  config["plant"] = result.config.plant;
  json::object& env = root["environment"].as_object();
  env["cores"] = result.environment.cores;
  env["oversubscribed"] = result.environment.oversubscribed;
  if (!result.metrics) return;
  json::object& metrics = root["metrics"].as_object();
  metrics["bubble_ratio"].as_object()["samples"] = doubles(result.metrics->bubble_ratio.samples);
  if (result.metrics->foreign_cpu) metrics["foreign_cpu"] = num(*result.metrics->foreign_cpu);
  metrics["busy_seconds_per_stage"] =
      array_of(result.metrics->busy_seconds_per_stage,
               [](const std::vector<double>& steps) { return json::value(doubles(steps)); });
  if (const std::optional<SpreadFigures>& sp = result.metrics->spread) {
    auto one = [](const SampleSpread& x) {
      return json::object{{"n", x.n},         {"median", num(x.median)}, {"mad", num(x.mad)},
                          {"q1", num(x.q1)},  {"q3", num(x.q3)},         {"min", num(x.min)},
                          {"max", num(x.max)}};
    };
    metrics["spread"] = json::object{{"step_time_seconds", one(sp->step_time_seconds)},
                                     {"samples_per_second", one(sp->samples_per_second)},
                                     {"bubble_ratio", one(sp->bubble_ratio)}};
  }
}

void read_gate_fields(const FieldReader& r, const json::object& root, Result& out) {
  auto dbl = [&r](const json::value& v, const std::string& p) { return r.number_or_null(v, p); };
  auto str = [&r](const json::value& v, const std::string& p) { return r.string(v, p); };
  const json::object& config = root.at("config").as_object();
  out.config.min_time = r.optional_field(config, "config", "min_time", dbl, 0.0);
  out.config.plant = r.optional_field(config, "config", "plant", str, std::string());
  const json::object& env = root.at("environment").as_object();
  out.environment.cores = r.optional_field(
      env, "environment", "cores",
      [&r](const json::value& v, const std::string& p) { return r.int32(v, p); }, 0);
  out.environment.oversubscribed = r.optional_field(
      env, "environment", "oversubscribed",
      [&r](const json::value& v, const std::string& p) { return r.boolean(v, p); }, false);
  if (!out.metrics) return;
  const json::object& metrics = root.at("metrics").as_object();
  const std::string bp = "metrics.bubble_ratio";
  out.metrics->bubble_ratio.samples = r.optional_field(
      metrics.at("bubble_ratio").as_object(), bp, "samples",
      [&r, dbl](const json::value& v, const std::string& p) { return r.array(v, p, dbl); },
      std::vector<double>{});
  if (const json::value* fv = FieldReader::find(metrics, "foreign_cpu"))
    out.metrics->foreign_cpu = r.number(*fv, "metrics.foreign_cpu");
  out.metrics->busy_seconds_per_stage = r.optional_field(
      metrics, "metrics", "busy_seconds_per_stage",
      [&r, dbl](const json::value& v, const std::string& p) {
        return r.array(v, p, [&r, dbl](const json::value& x, const std::string& q) {
          return r.array(x, q, dbl);
        });
      },
      std::vector<std::vector<double>>{});
  const size_t stages = static_cast<size_t>(out.config.stages);
  const size_t busy = out.metrics->busy_seconds_per_stage.size();
  if (busy != 0 && busy != stages) {
    r.fail("metrics.busy_seconds_per_stage", "expected " + std::to_string(stages) +
                                                 " entries (one per stage, config.stages), got " +
                                                 std::to_string(busy));
  }
  const json::value* sv = FieldReader::find(metrics, "spread");
  if (sv == nullptr) return;
  const std::string sp = "metrics.spread";
  const json::object& so = r.object(*sv, sp);
  auto one = [&](std::string_view key) {
    const std::string q = join(sp, key);
    const json::object& o = r.object(r.require(so, sp, key), q);
    SampleSpread x;
    x.n = r.field(o, q, "n",
                  [&r](const json::value& v, const std::string& p) { return r.int32(v, p); });
    x.median = r.field(o, q, "median", dbl);
    x.mad = r.field(o, q, "mad", dbl);
    x.q1 = r.field(o, q, "q1", dbl);
    x.q3 = r.field(o, q, "q3", dbl);
    x.min = r.field(o, q, "min", dbl);
    x.max = r.field(o, q, "max", dbl);
    return x;
  };
  SpreadFigures& f = out.metrics->spread.emplace();
  f.step_time_seconds = one("step_time_seconds");
  f.samples_per_second = one("samples_per_second");
  f.bubble_ratio = one("bubble_ratio");
}

}  // namespace

boost::json::value result_to_json(const Result& result) {
  json::object o;
  o["schema"] = kResultSchema;
  o["status"] = result_status_name(result.status);
  o["error"] = result.error;
  const ResultConfig& c = result.config;
  o["config"] = json::object{{"schedule", c.schedule},
                             {"partition", c.partition},
                             {"stages", c.stages},
                             {"microbatches", c.microbatches},
                             {"micro_batch_size", c.micro_batch_size},
                             {"inflight", c.inflight},
                             {"chunks", c.chunks},
                             {"model", c.model},
                             {"backend", c.backend},
                             {"transport", c.transport},
                             {"iters", c.iters},
                             {"warmup", c.warmup},
                             {"time_scale", num(c.time_scale)},
                             {"memory_budget", c.memory_budget},
                             {"seed", c.seed},
                             {"sync_warmup", c.sync_warmup},
                             {"memory_guard", num(c.memory_guard)},
                             {"batches", c.batches}};
  if (result.metrics) o["metrics"] = metrics_json(*result.metrics);
  o["timeline"] = timeline_json(result.timeline);
  const ResultEnvironment& e = result.environment;
  o["environment"] = json::object{{"hosts", strings(e.hosts)},
                                  {"ranks", e.ranks},
                                  {"mpi", e.mpi},
                                  {"cuda", e.cuda},
                                  {"gpus", strings(e.gpus)},
                                  {"driver", e.driver},
                                  {"git", e.git},
                                  {"date", e.date},
                                  {"compiler", e.compiler},
                                  {"build_type", e.build_type},
                                  {"hostname", e.hostname},
                                  {"cpu", e.cpu}};
  write_gate_fields(result, o);
  return o;
}

Result result_from_json(const boost::json::value& doc, std::string_view source) {
  const FieldReader r(source);
  if (!doc.is_object()) {
    throw UsageError(std::string(source) + ": expected a JSON object (a pipebench result), got " +
                     FieldReader::kind_name(doc));
  }
  const json::object& root = doc.get_object();

  auto str = [&r](const json::value& v, const std::string& p) { return r.string(v, p); };
  auto i32 = [&r](const json::value& v, const std::string& p) { return r.int32(v, p); };
  auto i64 = [&r](const json::value& v, const std::string& p) { return r.integer(v, p); };
  auto dbl = [&r](const json::value& v, const std::string& p) { return r.number(v, p); };
  auto dbl_or_null = [&r](const json::value& v, const std::string& p) {
    return r.number_or_null(v, p);
  };
  auto dbls = [&r, dbl](const json::value& v, const std::string& p) { return r.array(v, p, dbl); };
  auto i64s = [&r, i64](const json::value& v, const std::string& p) { return r.array(v, p, i64); };
  auto strs = [&r, str](const json::value& v, const std::string& p) { return r.array(v, p, str); };

  const std::string schema = r.field(root, "", "schema", str);
  if (schema != kResultSchema) {
    r.fail("schema", std::string("expected \"") + kResultSchema + "\", got \"" + schema + "\"");
  }

  Result out;
  const std::string status = r.field(root, "", "status", str);
  if (status == "ok") {
    out.status = ResultStatus::kOk;
  } else if (status == "oom") {
    out.status = ResultStatus::kOom;
  } else if (status == "invalid") {
    out.status = ResultStatus::kInvalid;
  } else if (status == "error") {
    out.status = ResultStatus::kError;
  } else {
    r.fail("status", "expected one of ok, oom, invalid, error, got \"" + status + "\"");
  }
  const bool ok = out.status == ResultStatus::kOk;
  if (ok) {
    out.error = r.optional_field(root, "", "error", str, std::string());
  } else {
    out.error = r.field(root, "", "error", str);
  }

  // config
  {
    const std::string p = "config";
    const json::object& c = r.object(r.require(root, "", "config"), p);
    ResultConfig& k = out.config;
    k.schedule = r.field(c, p, "schedule", str);
    k.partition = r.field(c, p, "partition", str);
    k.stages = r.field(c, p, "stages", i32);
    k.microbatches = r.field(c, p, "microbatches", i32);
    k.micro_batch_size = r.field(c, p, "micro_batch_size", i32);
    k.inflight = r.field(c, p, "inflight", i32);
    k.chunks = r.field(c, p, "chunks", i32);
    k.model = r.field(c, p, "model", str);
    k.backend = r.field(c, p, "backend", str);
    k.transport = r.field(c, p, "transport", str);
    k.iters = r.field(c, p, "iters", i32);
    k.warmup = r.field(c, p, "warmup", i32);
    k.time_scale = r.optional_field(c, p, "time_scale", dbl, 0.0);
    k.memory_budget = r.optional_field(c, p, "memory_budget", i64, int64_t{0});
    k.seed = r.optional_field(
        c, p, "seed", [&r](const json::value& v, const std::string& q) { return r.uinteger(v, q); },
        uint64_t{0});
    k.sync_warmup = r.optional_field(c, p, "sync_warmup", i32, 0);
    k.memory_guard = r.optional_field(c, p, "memory_guard", dbl, 0.0);
    k.batches = r.optional_field(c, p, "batches", i32, 1);
    if (k.stages < 1) r.fail("config.stages", "expected >= 1, got " + std::to_string(k.stages));
    if (k.microbatches < 1) {
      r.fail("config.microbatches", "expected >= 1, got " + std::to_string(k.microbatches));
    }
    if (k.micro_batch_size < 1) {
      r.fail("config.micro_batch_size", "expected >= 1, got " + std::to_string(k.micro_batch_size));
    }
    if (k.chunks < 1) r.fail("config.chunks", "expected >= 1, got " + std::to_string(k.chunks));
    if (k.inflight < 0)
      r.fail("config.inflight", "expected >= 0, got " + std::to_string(k.inflight));
  }
  const size_t stages = static_cast<size_t>(out.config.stages);
  auto check_len = [&r, stages](size_t n, const std::string& path, bool allow_empty) {
    if (n == stages || (allow_empty && n == 0)) return;
    r.fail(path, "expected " + std::to_string(stages) +
                     " entries (one per stage, config.stages), got " + std::to_string(n));
  };

  // metrics
  const json::value* metrics =
      ok ? &r.require(root, "", "metrics") : FieldReader::find(root, "metrics");
  if (metrics != nullptr) {
    const std::string p = "metrics";
    const json::object& m = r.object(*metrics, p);
    ResultMetrics& x = out.metrics.emplace();
    x.samples_per_second = r.field(m, p, "samples_per_second", dbl);
    {
      const std::string q = join(p, "step_time_seconds");
      const json::object& s = r.object(r.require(m, p, "step_time_seconds"), q);
      x.step_time_seconds.median = r.field(s, q, "median", dbl);
      x.step_time_seconds.min = r.field(s, q, "min", dbl);
      x.step_time_seconds.max = r.field(s, q, "max", dbl);
      x.step_time_seconds.samples = r.field(s, q, "samples", dbls);
    }
    auto bubble = [&](std::string_view key, BubbleFigures& b) {
      const std::string q = join(p, key);
      const json::object& o = r.object(r.require(m, p, key), q);
      b.measured = r.field(o, q, "measured", dbl);
      b.theoretical = r.field(o, q, "theoretical", dbl_or_null);
      b.per_stage = r.field(o, q, "per_stage", dbls);
      check_len(b.per_stage.size(), join(q, "per_stage"), !ok);
    };
    bubble("bubble_ratio", x.bubble_ratio);
    bubble("bubble_overhead", x.bubble_overhead);
    {
      const std::string q = join(p, "peak_memory_bytes");
      const json::object& o = r.object(r.require(m, p, "peak_memory_bytes"), q);
      PeakMemory& pm = x.peak_memory_bytes;
      pm.per_stage = r.field(o, q, "per_stage", i64s);
      check_len(pm.per_stage.size(), join(q, "per_stage"), !ok);
      pm.activations_per_stage = r.field(o, q, "activations_per_stage", i64s);
      check_len(pm.activations_per_stage.size(), join(q, "activations_per_stage"), !ok);
      pm.device_per_stage =
          r.optional_field(o, q, "device_per_stage", i64s, std::vector<int64_t>{});
      check_len(pm.device_per_stage.size(), join(q, "device_per_stage"), true);
      pm.peak_rss_per_stage =
          r.optional_field(o, q, "peak_rss_per_stage", i64s, std::vector<int64_t>{});
      check_len(pm.peak_rss_per_stage.size(), join(q, "peak_rss_per_stage"), true);
      auto categories = [&r](const json::value& v, const std::string& cp) {
        const json::object& co = r.object(v, cp);
        MemoryByCategory cats{};
        for (int i = 0; i < kNumMemCategories; ++i) {
          const std::string_view name = mem_category_name(static_cast<MemCategory>(i));
          if (const json::value* cv = FieldReader::find(co, name)) {
            cats[static_cast<size_t>(i)] = r.integer(*cv, join(cp, name));
          }
        }
        return cats;
      };
      pm.by_category = r.optional_field(
          o, q, "by_category",
          [&r, categories](const json::value& v, const std::string& cp) {
            return r.array(v, cp, categories);
          },
          std::vector<MemoryByCategory>{});
      check_len(pm.by_category.size(), join(q, "by_category"), true);
    }
    if (const json::value* tv = FieldReader::find(m, "theory")) {
      const std::string q = join(p, "theory");
      const json::object& o = r.object(*tv, q);
      TheoryFigures& t = x.theory.emplace();
      t.step_time_seconds = r.field(o, q, "step_time_seconds", dbl_or_null);
      t.peak_inflight_per_stage = r.optional_field(
          o, q, "peak_inflight_per_stage",
          [&r, i32](const json::value& v, const std::string& cp) { return r.array(v, cp, i32); },
          std::vector<int>{});
      check_len(t.peak_inflight_per_stage.size(), join(q, "peak_inflight_per_stage"), true);
      t.activation_bytes_per_microbatch =
          r.optional_field(o, q, "activation_bytes_per_microbatch", i64s, std::vector<int64_t>{});
      check_len(t.activation_bytes_per_microbatch.size(),
                join(q, "activation_bytes_per_microbatch"), true);
      t.peak_activation_bytes_per_stage =
          r.optional_field(o, q, "peak_activation_bytes_per_stage", i64s, std::vector<int64_t>{});
      check_len(t.peak_activation_bytes_per_stage.size(),
                join(q, "peak_activation_bytes_per_stage"), true);
      auto times = [&r, dbl_or_null](const json::value& v, const std::string& cp) {
        const json::object& to = r.object(v, cp);
        StageActionTimes a;
        a.fwd =
            r.optional_field(to, cp, "F", dbl_or_null, std::numeric_limits<double>::quiet_NaN());
        a.bwd =
            r.optional_field(to, cp, "B", dbl_or_null, std::numeric_limits<double>::quiet_NaN());
        a.bwd_input =
            r.optional_field(to, cp, "I", dbl_or_null, std::numeric_limits<double>::quiet_NaN());
        a.bwd_weight =
            r.optional_field(to, cp, "W", dbl_or_null, std::numeric_limits<double>::quiet_NaN());
        return a;
      };
      t.action_seconds = r.optional_field(
          o, q, "action_seconds",
          [&r, times](const json::value& v, const std::string& cp) {
            return r.array(v, cp, times);
          },
          std::vector<StageActionTimes>{});
      check_len(t.action_seconds.size(), join(q, "action_seconds"), true);
      t.timeline = r.optional_field(
          o, q, "timeline",
          [&r](const json::value& v, const std::string& cp) { return parse_timeline(r, v, cp); },
          Timeline{});
      check_len(t.timeline.size(), join(q, "timeline"), true);
    }
    if (const json::value* cv = FieldReader::find(m, "check")) {
      const std::string q = join(p, "check");
      const json::object& o = r.object(*cv, q);
      CheckFigures& ck = x.check.emplace();
      ck.passed = r.field(o, q, "passed", [&r](const json::value& v, const std::string& cp) {
        return r.boolean(v, cp);
      });
      ck.max_rel_error = r.field(o, q, "max_rel_error", dbl_or_null);
      ck.loss =
          r.optional_field(o, q, "loss", dbl_or_null, std::numeric_limits<double>::quiet_NaN());
      ck.method = r.optional_field(o, q, "method", str, std::string());
    }
    if (const json::value* gv = FieldReader::find(m, "memory_guard")) {
      const std::string q = join(p, "memory_guard");
      const json::object& o = r.object(*gv, q);
      MemoryGuardFigures& g = x.memory_guard.emplace();
      g.actions = r.field(o, q, "actions", i64);
      g.min_inflight = r.field(o, q, "min_inflight", i32);
    }
  }

  // timeline
  if (ok) {
    out.timeline = parse_timeline(r, r.require(root, "", "timeline"), "timeline");
  } else if (const json::value* tv = FieldReader::find(root, "timeline")) {
    out.timeline = parse_timeline(r, *tv, "timeline");
  }
  check_len(out.timeline.size(), "timeline", true);

  // environment
  {
    const std::string p = "environment";
    const json::object& e = r.object(r.require(root, "", "environment"), p);
    ResultEnvironment& env = out.environment;
    env.hosts = r.field(e, p, "hosts", strs);
    env.ranks = r.field(e, p, "ranks", i32);
    env.mpi = r.field(e, p, "mpi", str);
    env.cuda = r.field(e, p, "cuda", str);
    env.gpus = r.field(e, p, "gpus", strs);
    env.driver = r.field(e, p, "driver", str);
    env.git = r.field(e, p, "git", str);
    env.date = r.field(e, p, "date", str);
    env.compiler = r.optional_field(e, p, "compiler", str, std::string());
    env.build_type = r.optional_field(e, p, "build_type", str, std::string());
    env.hostname = r.optional_field(e, p, "hostname", str, std::string());
    env.cpu = r.optional_field(e, p, "cpu", str, std::string());
  }
  read_gate_fields(r, root, out);
  return out;
}

}  // namespace ppb
