// Result <-> JSON. The reader is strict about what it needs (each error names
// the field path) and ignores what it does not know, so that newer writers
// stay readable by older reports.
#include <array>
#include <boost/json.hpp>
#include <cmath>
#include <concepts>
#include <cstdio>
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

ModelSpec model_spec(const ResultConfig& c) {
  ModelSpec spec = parse_model_spec(c.model);
  spec.vocab_divisor = c.vocab_padding ? c.vocab_padding->divisor : 1;
  spec.micro_batch_size = c.micro_batch_size;
  spec.bytes_per_element = c.dtype == "bf16" ? 2 : 4;
  return spec;
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

// ------------------------------------------------------------ field lists --
// One list per struct names each of its fields once: the JSON key, required
// or optional (absent or null keeps the struct's default), nullable (a
// number or null, read as NaN; optional_nullable: absent reads as NaN too)
// and, for numbers, the least value allowed. The writer, the reader and the
// bound check all walk the same list, so they cannot disagree; keys are
// written in list order. A field added to a struct is one more line in its
// list. Lists with one entry per stage say how they follow config.stages
// (PerStage); a struct's own rules beyond its fields are its `validate`.

/// How a per-stage list follows config.stages.
enum class PerStage {
  kOptional,      ///< may be absent; empty or one entry per stage
  kMayBeEmpty,    ///< required; empty or one entry per stage
  kUnlessFailed,  ///< required; one entry per stage, or empty in a result that is not ok
  kExact,         ///< required; one entry per stage
};

/// The stage count lists are held to, and whether the result is ok.
struct StageCount {
  const JsonReader& reader;
  size_t stages;
  bool ok = true;
  void check(size_t n, const std::string& path, PerStage rule) const {
    const bool may_be_empty = rule == PerStage::kOptional || rule == PerStage::kMayBeEmpty ||
                              (rule == PerStage::kUnlessFailed && !ok);
    if (n == stages || (may_be_empty && n == 0)) return;
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
  v.optional("max_iters", c.max_iters, 0);  // 0: not recorded
  v.optional("profile", c.profile);
  v.optional("check", c.check);  // absent: whether metrics.check is present (result_from_json)
  v.optional("dtype", c.dtype);
  v.optional_if_any("attention", c.attention);  // absent: naive ran (attention_ran)
  v.optional_if_any("attention_reason", c.attention_reason);
  v.optional("unit_ranges", c.unit_ranges);  // what calibration re-prices
  // Data parallelism's: files written before them load as one replica.
  v.optional("data_parallel", c.data_parallel, 1);
  v.optional("vocab_padding", c.vocab_padding);  // absent: files from before padding
  v.optional("rank_order", c.rank_order);
  v.optional_if_any("cuda_graphs", c.cuda_graphs);  // "" (not a device backend): absent
}

template <class V, Is<VocabPadding> P>
void fields(V& v, P& p) {
  v.required("make_vocab_size_divisible_by", p.divisor, 1);
  v.required("vocab", p.vocab, 1);
  v.required("padded_vocab", p.padded, 1);
}

template <class V, Is<ResultEnvironment> E>
void fields(V& v, E& e) {
  v.required("hosts", e.hosts);
  v.required("ranks", e.ranks, 0);
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
  v.optional("ranks_per_gpu", e.ranks_per_gpu);  // >= 0: validate
  // The software stack beside the driver (the gate names a change of it):
  // absent when unknown, so files from before it read and write back alike.
  v.optional_if_any("nccl", e.nccl);
  v.optional_if_any("cudnn", e.cudnn);
}

template <class V, Is<GpuState> G>
void fields(V& v, G& x) {
  v.optional("gpu", x.gpu);
  v.required("samples", x.samples, 0);
  v.nullable("sm_clock_mhz_min", x.sm_clock_mhz_min);
  v.nullable("sm_clock_mhz_median", x.sm_clock_mhz_median);
  v.nullable("memory_clock_mhz_median", x.memory_clock_mhz_median);
  v.nullable("power_watts_mean", x.power_watts_mean);
  v.nullable("power_limit_watts", x.power_limit_watts);
  v.nullable("temperature_c_max", x.temperature_c_max);
  v.required("throttle_reasons", x.throttle_reasons);
  v.optional("throttle_reasons_read", x.throttle_reasons_read);
  v.required("ecc_corrected", x.ecc_corrected, -1);
  v.required("ecc_uncorrected", x.ecc_uncorrected, -1);
}

template <class V, Is<StepTimeStats> S>
void fields(V& v, S& x) {
  v.required("median", x.median);
  v.required("min", x.min);
  v.required("max", x.max);
  v.required("samples", x.samples);
}

/// `samples` is the gate's, in metrics.bubble_ratio only (write_gate_fields).
template <class V, Is<BubbleFigures> B>
void fields(V& v, B& x) {
  v.required("measured", x.measured);
  v.nullable("theoretical", x.theoretical);
  v.per_stage("per_stage", x.per_stage, PerStage::kUnlessFailed);
}

template <class V, Is<PeakMemory> M>
void fields(V& v, M& x) {
  v.bytes_per_stage("per_stage", x.per_stage, PerStage::kUnlessFailed);
  v.bytes_per_stage("activations_per_stage", x.activations_per_stage, PerStage::kUnlessFailed);
  v.bytes_per_stage("device_per_stage", x.device_per_stage, PerStage::kOptional);
  v.per_stage("by_category", x.by_category, PerStage::kOptional);
  v.bytes_per_stage("peak_rss_per_stage", x.peak_rss_per_stage, PerStage::kOptional);
  v.optional("device_profiler", x.device_profiler);
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

template <class V, Is<SpreadFigures> S>
void fields(V& v, S& x) {
  v.required("step_time_seconds", x.step_time_seconds);
  v.required("samples_per_second", x.samples_per_second);
  v.required("bubble_ratio", x.bubble_ratio);
}

template <class V, Is<CheckFigures> C>
void fields(V& v, C& x) {
  v.required("passed", x.passed);
  v.nullable("max_rel_error", x.max_rel_error);
  v.optional_nullable("loss", x.loss);
  v.optional("method", x.method);
  v.optional("update_rel_error", x.update_rel_error);
  v.optional("steps", x.steps);
}

template <class V, Is<CudaGraphFigures> G>
void fields(V& v, G& x) {
  v.required("captured", x.captured, 0);
  v.required("replayed", x.replayed, 0);
  v.required("rebuilt", x.rebuilt, 0);
  v.required("eager", x.eager, 0);
  v.required("eager_reason", x.eager_reason);
}

template <class V, Is<GemmEpilogueFigures> G>
void fields(V& v, G& x) {
  v.required("epilogue_gemms", x.fused, 0);
  v.required("refusals", x.refused, 0);
  v.required("first_refusal", x.first_refusal);
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

/// An event ends no earlier than it starts: validate.
template <class V, Is<TimelineEvent> E>
void fields(V& v, E& x) {
  v.required("op", x.op);
  v.required("mb", x.mb);
  v.required("chunk", x.chunk);
  v.required("start", x.start);
  v.required("end", x.end);
}

/// `path` is "host" or "network": validate.
template <class V, Is<MeasuredLinkFigures> L>
void fields(V& v, L& x) {
  v.required("path", x.path);
  v.nullable("latency_seconds", x.latency_seconds);
  v.nullable("bandwidth_bytes_per_second", x.bandwidth_bytes_per_second);
  v.required("messages", x.messages);
  v.optional("sizes", x.sizes);
}

/// kind_seconds: per stage, unit kind name -> its pass times. An earlier
/// single `link` reads as `links` (read_theory).
template <class V, Is<TheoryFigures> T>
void fields(V& v, T& t) {
  v.nullable("step_time_seconds", t.step_time_seconds);
  v.per_stage("peak_inflight_per_stage", t.peak_inflight_per_stage);
  v.per_stage("activation_bytes_per_microbatch", t.activation_bytes_per_microbatch);
  v.per_stage("peak_activation_bytes_per_stage", t.peak_activation_bytes_per_stage);
  v.per_stage("action_seconds", t.action_seconds);
  v.per_stage_if_any("kind_seconds", t.kind_seconds);
  v.per_stage("timeline", t.timeline);
  v.optional("links", t.links);
}

/// Figures per stage ("step") and per stage and timeline action ("action";
/// counted against the timeline by check_collector_actions).
template <class V, Is<CollectorResult> C>
void fields(V& v, C& x) {
  v.figures_per_stage("step", x.step);
  v.figures_per_stage("action", x.action);
}

template <class V, Is<DeviceFigures> D>
void fields(V& v, D& x) {
  v.required("profiler", x.profiler);
  v.nullable("bubble_ratio", x.bubble_ratio);
  v.nullable_per_stage("bubble_ratio_per_stage", x.bubble_ratio_per_stage, PerStage::kExact);
  v.nullable_per_stage("compute_seconds_per_stage", x.compute_seconds_per_stage, PerStage::kExact);
  v.nullable_per_stage("communication_seconds_per_stage", x.communication_seconds_per_stage,
                       PerStage::kExact);
  v.nullable_per_stage("overlap_seconds_per_stage", x.overlap_seconds_per_stage, PerStage::kExact);
  v.nullable_per_stage("busy_seconds_per_stage", x.busy_seconds_per_stage, PerStage::kExact);
  // One per timed step (the gate's samples); absent in files from before.
  v.nullable_list_if_any("bubble_ratio_samples", x.bubble_ratio_samples);
}

/// metrics.allreduce; `seconds` is metrics.allreduce_seconds
/// (write_data_parallel_fields).
template <class V, Is<AllReduceFigures> A>
void fields(V& v, A& x) {
  v.nullable_per_stage("seconds_per_stage", x.seconds_per_stage, PerStage::kMayBeEmpty);
  v.nullable_per_stage("overlap_seconds_per_stage", x.overlap_seconds_per_stage,
                       PerStage::kMayBeEmpty);
  v.bytes_per_stage("bytes_per_stage", x.bytes_per_stage, PerStage::kMayBeEmpty);
  v.nullable("exposed_seconds", x.exposed_seconds);
  v.nullable("latency", x.latency);
  v.nullable("bandwidth", x.bandwidth);
  v.nullable_per_stage("theoretical_seconds_per_stage", x.theoretical_seconds_per_stage,
                       PerStage::kMayBeEmpty);
  v.required("bubble_ratio_pipeline", x.bubble_ratio_pipeline);
}

/// metrics. bubble_ratio's `samples` is the gate's, written and read beside
/// this list (write_gate_fields); all-reduce's `seconds` stands beside its
/// object as allreduce_seconds.
template <class V, Is<ResultMetrics> M>
void fields(V& v, M& m) {
  v.required("samples_per_second", m.samples_per_second, 0);
  v.required("step_time_seconds", m.step_time_seconds);
  v.required("bubble_ratio", m.bubble_ratio);
  v.required("bubble_overhead", m.bubble_overhead);
  v.required("peak_memory_bytes", m.peak_memory_bytes);
  v.optional("theory", m.theory);
  v.optional("check", m.check);
  v.optional("memory_guard", m.memory_guard);
  v.optional_if_any("collectors", m.collectors);
  v.optional("device", m.device);
  // The regression gate's figures of a run's noise, and data parallelism's:
  // all optional, so files written before them still load.
  v.optional("foreign_cpu", m.foreign_cpu);
  v.nullable_per_stage("busy_seconds_per_stage", m.busy_seconds_per_stage, PerStage::kOptional);
  v.nullable_per_stage_if_any("speed_probe_seconds_per_stage", m.speed_probe_seconds_per_stage);
  v.optional("spread", m.spread);
  v.all_reduce("allreduce_seconds", "allreduce", m.allreduce);
  // The GPUs' own state while the timed steps ran (NVML): absent when
  // nothing was sampled.
  v.optional_if_any("gpu_state", m.gpu_state);
  v.optional("cuda_graphs", m.cuda_graphs);
  v.optional("gemm_epilogues", m.gemm_epilogues);
}

// ------------------------------------------------ values of the field types --
// Scalars, strings and lists of them go through JsonObject::get; the rest
// (unit kinds, memory categories, maps, nested structs and lists of them)
// through to_json and read_value.

template <class T>
constexpr bool kScalar = std::is_arithmetic_v<T> || std::is_same_v<T, std::string>;
template <class T>
struct Plain : std::bool_constant<kScalar<T>> {};
template <class T>
struct Plain<std::vector<T>> : std::bool_constant<kScalar<T>> {};

using KindSecondsByKind = std::map<std::string, KindSeconds>;

template <class S>
json::object write_fields(const S& x);
template <class S>
S read_fields(const JsonObject& o, const StageCount* stages = nullptr);

json::value to_json(const std::string& x) { return json::value(x); }
json::value to_json(ActionKind k) { return json::value(action_kind_name(k)); }
json::value to_json(const MemoryByCategory& c) {
  json::object cats;
  for (int i = 0; i < kNumMemCategories; ++i) {
    cats[mem_category_name(static_cast<MemCategory>(i))] = c[static_cast<size_t>(i)];
  }
  return cats;
}
template <class T>
json::value to_json(const std::vector<T>& xs);
template <class T>
json::value to_json(const std::map<std::string, T>& m);
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
template <class T>
json::value to_json(const std::map<std::string, T>& m) {
  json::object o;
  for (const auto& [key, x] : m) o[key] = to_json(x);
  return o;
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

/// Missing categories read as 0.
MemoryByCategory read_categories(const JsonObject& o) {
  MemoryByCategory cats{};
  for (int i = 0; i < kNumMemCategories; ++i) {
    cats[static_cast<size_t>(i)] =
        o.get_or<int64_t>(mem_category_name(static_cast<MemCategory>(i)), 0);
  }
  return cats;
}

KindSecondsByKind read_kind_seconds(const JsonObject& stage) {
  KindSecondsByKind m;
  for (const auto& kv : stage.raw()) {
    const std::string kind(kv.key());
    if (!is_unit_kind_name(kind))
      stage.fail(kind, "unknown unit kind (kinds: " + unit_kind_names() + ")");
    m[kind] = read_fields<KindSeconds>(stage.object(kind));
  }
  return m;
}

TheoryFigures read_theory(const JsonObject& o, const StageCount& n);

template <class T>
concept Map = requires {
  typename T::mapped_type;
};

/// A value of a field type that is not Plain.
template <class T>
T read_value(const JsonReader& r, const json::value& v, const std::string& path,
             const StageCount* stages) {
  if constexpr (std::is_same_v<T, ActionKind>) {
    return read_op(r, v, path);
  } else if constexpr (std::is_same_v<T, MemoryByCategory>) {
    return read_categories(r.object(v, path));
  } else if constexpr (std::is_same_v<T, KindSecondsByKind>) {
    return read_kind_seconds(r.object(v, path));
  } else if constexpr (std::is_same_v<T, TheoryFigures>) {
    PPB_CHECK(stages != nullptr, "the theory read without the stage count");
    return read_theory(r.object(v, path), *stages);
  } else if constexpr (Map<T>) {
    T m;
    const JsonObject o = r.object(v, path);
    for (const auto& kv : o.raw()) {
      m[std::string(kv.key())] =
          read_value<typename T::mapped_type>(r, kv.value(), o.field(kv.key()), stages);
    }
    return m;
  } else if constexpr (requires { typename T::value_type; }) {
    return r.array_of(v, path, [&r, stages](const json::value& x, const std::string& p) {
      return read_value<typename T::value_type>(r, x, p, stages);
    });
  } else {
    return read_fields<T>(r.object(v, path), stages);
  }
}

/// A number or null (NaN), or a list of them.
template <class T>
T read_nullable(const JsonReader& r, const json::value& v, const std::string& path) {
  if constexpr (std::is_same_v<T, double>) {
    return r.number_or_null(v, path);
  } else {
    return r.array_of(v, path, [&r](const json::value& x, const std::string& p) {
      return read_nullable<typename T::value_type>(r, x, p);
    });
  }
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

// ------------------------------------------------------- the list walkers --

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
  /// Absent when unset.
  template <class T>
  void optional(std::string_view key, const std::optional<T>& x, Least /*least*/ = {}) {
    if (x) o[key] = to_json(*x);
  }
  /// Absent when empty.
  template <class T>
  void optional_if_any(std::string_view key, const T& x) {
    if (!x.empty()) o[key] = to_json(x);
  }
  void nullable(std::string_view key, double x) { o[key] = num(x); }
  void optional_nullable(std::string_view key, double x) { o[key] = num(x); }
  template <class T>
  void per_stage(std::string_view key, const std::vector<T>& x, PerStage /*rule*/ = {}) {
    o[key] = to_json(x);
  }
  /// Written only when it has entries.
  template <class T>
  void per_stage_if_any(std::string_view key, const std::vector<T>& x) {
    if (!x.empty()) o[key] = to_json(x);
  }
  template <class T>
  void nullable_per_stage(std::string_view key, const std::vector<T>& x, PerStage /*rule*/) {
    o[key] = to_json(x);
  }
  template <class T>
  void nullable_per_stage_if_any(std::string_view key, const std::vector<T>& x) {
    per_stage_if_any(key, x);
  }
  /// Numbers or null, not one per stage; absent when empty.
  void nullable_list_if_any(std::string_view key, const std::vector<double>& x) {
    if (!x.empty()) o[key] = to_json(x);
  }
  void bytes_per_stage(std::string_view key, const std::vector<int64_t>& x, PerStage /*rule*/) {
    o[key] = to_json(x);
  }
  void all_reduce(std::string_view seconds_key, std::string_view key,
                  const std::optional<AllReduceFigures>& x) {
    if (!x) return;
    o[seconds_key] = num(x->seconds);
    o[key] = write_fields(*x);
  }
  template <class T>
  void figures_per_stage(std::string_view key, const std::map<std::string, T>& x) {
    o[key] = to_json(x);
  }
};

/// Reads each field of a list from `o`; every error names the field path.
struct FieldReader {
  const JsonObject& o;
  const StageCount* stages;  ///< for nested structs' per-stage lists
  template <class T>
  void required(std::string_view key, T& x, Least /*least*/ = {}) {
    if constexpr (Plain<T>::value) {
      x = o.get<T>(key);
    } else {
      x = read_value<T>(o.reader(), o.at(key), o.field(key), stages);
    }
  }
  template <class T>
  void optional(std::string_view key, T& x, Least /*least*/ = {}) {
    if constexpr (Plain<T>::value) {
      x = o.get_or(key, x);
    } else if (const json::value* v = o.find(key)) {
      x = read_value<T>(o.reader(), *v, o.field(key), stages);
    }
  }
  template <class T>
  void optional(std::string_view key, std::optional<T>& x, Least /*least*/ = {}) {
    const json::value* v = o.find(key);
    if (v == nullptr) return;
    if constexpr (Plain<T>::value) {
      x = o.get<T>(key);
    } else {
      x = read_value<T>(o.reader(), *v, o.field(key), stages);
    }
  }
  template <class T>
  void optional_if_any(std::string_view key, T& x) {
    optional(key, x);
  }
  /// Required number or null (NaN).
  void nullable(std::string_view key, double& x) { x = o.number_or_null(key); }
  /// Absent or null: NaN.
  void optional_nullable(std::string_view key, double& x) { x = o.optional_number_or_null(key); }
  /// Counted by FieldBounds.
  template <class T>
  void per_stage(std::string_view key, std::vector<T>& x, PerStage rule = PerStage::kOptional) {
    if (rule == PerStage::kOptional) {
      optional(key, x);
    } else {
      required(key, x);
    }
  }
  template <class T>
  void per_stage_if_any(std::string_view key, std::vector<T>& x) {
    optional(key, x);
  }
  template <class T>
  void nullable_per_stage(std::string_view key, std::vector<T>& x, PerStage rule) {
    const json::value* v = rule == PerStage::kOptional ? o.find(key) : &o.at(key);
    if (v != nullptr) x = read_nullable<std::vector<T>>(o.reader(), *v, o.field(key));
  }
  template <class T>
  void nullable_per_stage_if_any(std::string_view key, std::vector<T>& x) {
    nullable_per_stage(key, x, PerStage::kOptional);
  }
  void nullable_list_if_any(std::string_view key, std::vector<double>& x) {
    if (const json::value* v = o.find(key))
      x = read_nullable<std::vector<double>>(o.reader(), *v, o.field(key));
  }
  void bytes_per_stage(std::string_view key, std::vector<int64_t>& x, PerStage rule) {
    per_stage(key, x, rule);
  }
  /// All-reduces run only in ok results: bubble_ratio_pipeline has one
  /// entry per stage.
  void all_reduce(std::string_view seconds_key, std::string_view key,
                  std::optional<AllReduceFigures>& x) {
    const std::optional<JsonObject> figures = o.find_object(key);
    if (!figures) return;
    PPB_CHECK(stages != nullptr, "the all-reduce figures read without the stage count");
    const double seconds = o.optional_number_or_null(seconds_key);
    const StageCount ok{stages->reader, stages->stages, true};
    x = read_fields<AllReduceFigures>(*figures, &ok);
    x->seconds = seconds;
  }
  /// Optional: figure name -> per-stage list of numbers or null.
  template <class T>
  void figures_per_stage(std::string_view key, std::map<std::string, T>& x) {
    const std::optional<JsonObject> figures = o.find_object(key);
    if (!figures) return;
    for (const auto& f : figures->raw()) {
      x[std::string(f.key())] = read_nullable<T>(o.reader(), f.value(), figures->field(f.key()));
    }
  }
};

/// Checks each number of a list against its least value and each per-stage
/// list against the stage count, after the whole object is read (so a
/// missing field is named before a bad one).
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
  template <class T>
  void optional_if_any(std::string_view /*key*/, const T& /*x*/) {}
  void nullable(std::string_view /*key*/, double /*x*/) {}
  void optional_nullable(std::string_view /*key*/, double /*x*/) {}
  template <class T>
  void per_stage(std::string_view key, const std::vector<T>& x,
                 PerStage rule = PerStage::kOptional) {
    count(o.field(key), x.size(), rule);
  }
  template <class T>
  void nullable_per_stage_if_any(std::string_view key, const std::vector<T>& x) {
    per_stage(key, x);
  }
  void nullable_list_if_any(std::string_view /*key*/, const std::vector<double>& /*x*/) {}
  void all_reduce(std::string_view /*seconds_key*/, std::string_view /*key*/,
                  const std::optional<AllReduceFigures>& /*x*/) {}
  template <class T>
  void per_stage_if_any(std::string_view key, const std::vector<T>& x) {
    per_stage(key, x);
  }
  template <class T>
  void nullable_per_stage(std::string_view key, const std::vector<T>& x, PerStage rule) {
    per_stage(key, x, rule);
  }
  void bytes_per_stage(std::string_view key, const std::vector<int64_t>& x, PerStage rule) {
    per_stage(key, x, rule);
    no_negative_bytes(o, key, x);
  }
  /// Each figure has one entry per stage.
  template <class T>
  void figures_per_stage(std::string_view key, const std::map<std::string, T>& x) {
    for (const auto& [figure, per_stage] : x) {
      count(JsonReader::join(o.field(key), figure), per_stage.size(), PerStage::kExact);
    }
  }
  void count(const std::string& path, size_t n, PerStage rule) const {
    PPB_CHECK(stages != nullptr, "a per-stage field read without the stage count");
    stages->check(n, path, rule);
  }
  template <class T>
  void check(std::string_view key, const T& x, Least least) {
    if constexpr (std::is_arithmetic_v<T>) {
      if (least) at_least(o, key, x, *least);
    }
  }
};

/// A struct's rules beyond its fields' own, checked after its bounds.
template <class S>
void validate(const JsonObject& /*o*/, const S& /*x*/) {}

void validate(const JsonObject& o, const TimelineEvent& e) {
  if (e.end < e.start) o.fail("end", "ends before its start");
}

// A measured time in seconds: finite, >= 0 and at most a day (the planner
// and the simulator price from these); NaN only where the field may be null.
void check_seconds(const JsonObject& o, std::string_view key, double x, bool nullable) {
  if (nullable && std::isnan(x)) return;
  if (!(x >= 0 && x <= 86400))
    o.fail(key, "expected a time in seconds in [0, 86400], got " + number_text(x));
}

// Each of a list of times in seconds (null where a figure was not measured),
// named "key[i]".
void check_each_seconds(const JsonObject& o, const std::string& key,
                        const std::vector<double>& seconds) {
  for (size_t i = 0; i < seconds.size(); ++i)
    check_seconds(o, key + "[" + std::to_string(i) + "]", seconds[i], true);
}

// Step times: each a time in seconds, min <= median <= max.
void validate(const JsonObject& o, const StepTimeStats& s) {
  check_seconds(o, "median", s.median, false);
  check_seconds(o, "min", s.min, false);
  check_seconds(o, "max", s.max, false);
  for (size_t i = 0; i < s.samples.size(); ++i)
    check_seconds(o, "samples[" + std::to_string(i) + "]", s.samples[i], false);
  if (!(s.min <= s.median && s.median <= s.max)) {
    o.fail("median", "expected min <= median <= max, got " + number_text(s.min) +
                         " <= " + number_text(s.median) + " <= " + number_text(s.max));
  }
}

// A figure in [lo, hi], finite (NaN only where nullable), up to a rounding:
// files written before idle time was held at >= 0 may hold a bubble a
// rounding below 0. `what` names the range ("a share in [0, 1]").
void check_within(const JsonObject& o, std::string_view key, double x, double lo, double hi,
                  bool nullable, const char* what) {
  constexpr double kRounding = 1e-9;
  if (nullable && std::isnan(x)) return;
  if (!(x >= lo - kRounding && x <= hi + kRounding))
    o.fail(key, std::string("expected ") + what + ", got " + number_text(x));
}

constexpr double kMaxFigure = std::numeric_limits<double>::max();

void check_share(const JsonObject& o, std::string_view key, double x, bool nullable) {
  check_within(o, key, x, 0, 1, nullable, "a share in [0, 1]");
}

// Idle over the step (bubble_ratio: a share) or over the busy time
// (bubble_overhead: any figure >= 0), measured, in theory and per stage.
void check_bubble(const JsonObject& o, const BubbleFigures& b, bool share) {
  const auto check = [&](std::string_view key, double x, bool nullable) {
    if (share) {
      check_share(o, key, x, nullable);
    } else {
      check_within(o, key, x, 0, kMaxFigure, nullable, "a figure >= 0");
    }
  };
  check("measured", b.measured, false);
  check("theoretical", b.theoretical, true);
  for (size_t i = 0; i < b.per_stage.size(); ++i)
    check("per_stage[" + std::to_string(i) + "]", b.per_stage[i], false);
}

void validate(const JsonObject& o, const DeviceFigures& d) {
  // Kernels' compute over the host's step: at most the whole step idle (below
  // 0 where kernels outlast the host's step).
  const auto at_most_one = [&o](std::string_view key, double x) {
    check_within(o, key, x, -kMaxFigure, 1, true, "a bubble ratio <= 1");
  };
  at_most_one("bubble_ratio", d.bubble_ratio);
  for (size_t i = 0; i < d.bubble_ratio_per_stage.size(); ++i)
    at_most_one("bubble_ratio_per_stage[" + std::to_string(i) + "]", d.bubble_ratio_per_stage[i]);
  for (size_t i = 0; i < d.bubble_ratio_samples.size(); ++i)
    at_most_one("bubble_ratio_samples[" + std::to_string(i) + "]", d.bubble_ratio_samples[i]);
  check_each_seconds(o, "compute_seconds_per_stage", d.compute_seconds_per_stage);
  check_each_seconds(o, "communication_seconds_per_stage", d.communication_seconds_per_stage);
  check_each_seconds(o, "overlap_seconds_per_stage", d.overlap_seconds_per_stage);
  check_each_seconds(o, "busy_seconds_per_stage", d.busy_seconds_per_stage);
}

void validate(const JsonObject& o, const AllReduceFigures& a) {
  check_bubble(o.object("bubble_ratio_pipeline"), a.bubble_ratio_pipeline, true);
  check_seconds(o, "exposed_seconds", a.exposed_seconds, true);
  check_each_seconds(o, "seconds_per_stage", a.seconds_per_stage);
  check_each_seconds(o, "overlap_seconds_per_stage", a.overlap_seconds_per_stage);
  check_each_seconds(o, "theoretical_seconds_per_stage", a.theoretical_seconds_per_stage);
}

void validate(const JsonObject& o, const TheoryFigures& t) {
  check_seconds(o, "step_time_seconds", t.step_time_seconds, true);
}

void validate(const JsonObject& o, const StageActionTimes& a) {
  check_seconds(o, "F", a.fwd, true);
  check_seconds(o, "B", a.bwd, true);
  check_seconds(o, "I", a.bwd_input, true);
  check_seconds(o, "W", a.bwd_weight, true);
}

void validate(const JsonObject& o, const KindSeconds& k) {
  check_seconds(o, "F", k.fwd, false);
  check_seconds(o, "I", k.bwd_input, false);
  check_seconds(o, "W", k.bwd_weight, false);
}

void validate(const JsonObject& o, const MeasuredLinkFigures& f) {
  if (f.path != "host" && f.path != "network") {
    o.fail("path", "expected \"host\" or \"network\", got \"" + f.path + "\"");
  }
}

void validate(const JsonObject& o, const VocabPadding& p) {
  if (p.divisor > kMaxVocabDivisor) {
    o.fail("make_vocab_size_divisible_by", "expected <= " + std::to_string(kMaxVocabDivisor) +
                                               ", got " + std::to_string(p.divisor));
  }
  if (p.vocab > std::numeric_limits<int>::max() - p.divisor) {
    o.fail("vocab", "too large to pad: " + std::to_string(p.vocab));
  }
  const int want = padded_vocab_size(p.vocab, p.divisor);
  if (p.padded != want) {
    o.fail("padded_vocab", "expected " + std::to_string(want) +
                               " (vocab rounded up to a multiple of make_vocab_size_divisible_by), "
                               "got " +
                               std::to_string(p.padded));
  }
}

// "2026-12-06T19:47:54Z", as pipebench writes it: the gate orders nights
// and measurements by comparing these as text, which only this one shape
// keeps in time order (a fraction's '.' sorts before 'Z'), and a real time
// of day on a day of the calendar (a leap second allowed).
bool is_utc_date(const std::string& d) {
  constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:ddZ";
  if (d.size() != kShape.size()) return false;
  for (size_t i = 0; i < kShape.size(); ++i) {
    const bool digit = d[i] >= '0' && d[i] <= '9';
    if (kShape[i] == 'd' ? !digit : d[i] != kShape[i]) return false;
  }
  const auto at = [&d](size_t i, size_t n) { return std::stoi(d.substr(i, n)); };
  const int year = at(0, 4);
  const int month = at(5, 2);
  const int day = at(8, 2);
  constexpr std::array<int, 12> kDays = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12 || day < 1 || day > kDays[static_cast<size_t>(month - 1)])
    return false;
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (month == 2 && day == 29 && !leap) return false;
  return at(11, 2) <= 23 && at(14, 2) <= 59 && at(17, 2) <= 60;
}

void validate(const JsonObject& o, const ResultEnvironment& e) {
  if (e.ranks_per_gpu < 0) o.fail("ranks_per_gpu", "expected an integer >= 0");
  check_utc_date(o, "date", e.date);
}

void validate(const JsonObject& o, const ResultMetrics& m) {
  check_bubble(o.object("bubble_ratio"), m.bubble_ratio, true);
  check_bubble(o.object("bubble_overhead"), m.bubble_overhead, false);
  for (size_t s = 0; s < m.busy_seconds_per_stage.size(); ++s) {
    check_each_seconds(o, "busy_seconds_per_stage[" + std::to_string(s) + "]",
                       m.busy_seconds_per_stage[s]);
  }
  if (m.foreign_cpu)
    check_within(o, "foreign_cpu", *m.foreign_cpu, 0, 1, false,
                 "a share of the host's CPU in [0, 1]");
}

void validate(const JsonObject& o, const ResultConfig& c) {
  if (c.dtype != "fp32" && c.dtype != "bf16") {
    o.fail("dtype", "expected \"fp32\" or \"bf16\", got \"" + c.dtype + "\"");
  }
}

/// Reads a struct by its field list, then checks its bounds (per-stage
/// lists against `stages`) and its own rules.
template <class S>
S read_fields(const JsonObject& o, const StageCount* stages) {
  S x;
  FieldReader in{o, stages};
  fields(in, x);
  FieldBounds bounds{o, stages};
  fields(bounds, std::as_const(x));
  validate(o, std::as_const(x));
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

// ---------------------------------------------------------------- reading --

ResultStatus read_status(const JsonObject& root) {
  const std::string status = root.get<std::string>("status");
  if (status == "ok") return ResultStatus::kOk;
  if (status == "oom") return ResultStatus::kOom;
  if (status == "invalid") return ResultStatus::kInvalid;
  if (status == "error") return ResultStatus::kError;
  root.fail("status", "expected one of ok, oom, invalid, error, got \"" + status + "\"");
}

// The reason a combination ended: "" when ok, else required and not empty.
// Read as printable() text, as it is written: a file from before the writer
// kept it to one line may hold control characters, which other text fields
// refuse (JsonReader::string).
std::string read_error(const JsonObject& root, bool ok) {
  const json::value* v = ok ? root.find("error") : &root.at("error");
  if (v == nullptr) return "";
  if (!v->is_string()) {
    root.fail("error", std::string("expected a string, got ") + JsonReader::kind_name(*v));
  }
  const json::string& raw = v->get_string();
  std::string text = printable(std::string_view(raw.data(), raw.size()));
  if (!ok && text.empty())
    root.fail("error", "expected the reason the combination ended, got \"\"");
  return text;
}

Timeline read_timeline(const JsonReader& r, const json::value& v, const std::string& path) {
  return read_value<Timeline>(r, v, path, nullptr);
}

TheoryFigures read_theory(const JsonObject& o, const StageCount& n) {
  TheoryFigures t = read_fields<TheoryFigures>(o, &n);
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
  return t;
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

// Each event of a timeline is an action of the run: a SYNC's micro-batch and
// chunk are -1, any other's within the run's (M x batches micro-batches,
// V chunks).
void check_timeline(const JsonReader& r, const std::string& path, const Timeline& timeline,
                    const ResultConfig& c) {
  const int64_t mbs = static_cast<int64_t>(c.microbatches) * std::max(c.batches, 1);
  for (size_t s = 0; s < timeline.size(); ++s) {
    for (size_t i = 0; i < timeline[s].size(); ++i) {
      const TimelineEvent& e = timeline[s][i];
      const std::string at = path + "[" + std::to_string(s) + "][" + std::to_string(i) + "]";
      if (e.op == ActionKind::kSync) {
        if (e.mb != -1 || e.chunk != -1) r.fail(at, "expected mb and chunk -1 on a SYNC");
        continue;
      }
      if (e.mb < 0 || e.mb >= mbs) {
        r.fail(at + ".mb", "expected a micro-batch in [0, " + std::to_string(mbs) + "), got " +
                               std::to_string(e.mb));
      }
      if (e.chunk < 0 || e.chunk >= c.chunks) {
        r.fail(at + ".chunk", "expected a chunk in [0, " + std::to_string(c.chunks) + "), got " +
                                  std::to_string(e.chunk));
      }
    }
  }
}

// The gate's figures of each timed step (optional, so files written before
// them still load) stand in metrics.bubble_ratio beside its field list's.
void write_gate_fields(const Result& result, json::object& root) {
  if (!result.metrics) return;
  json::object& metrics = root["metrics"].as_object();
  metrics["bubble_ratio"].as_object()["samples"] = doubles(result.metrics->bubble_ratio.samples);
}

void read_gate_fields(const JsonObject& root, Result& out) {
  if (!root.object("config").has("check"))
    out.config.check = out.metrics.has_value() && out.metrics->check.has_value();
  if (!out.metrics) return;
  const JsonObject metrics = root.object("metrics");
  const JsonObject bubble = metrics.object("bubble_ratio");
  out.metrics->bubble_ratio.samples = bubble.get_or("samples", std::vector<double>{});
  const std::vector<double>& samples = out.metrics->bubble_ratio.samples;
  for (size_t i = 0; i < samples.size(); ++i)
    check_share(bubble, "samples[" + std::to_string(i) + "]", samples[i], false);
}

}  // namespace

void check_utc_date(const JsonObject& o, std::string_view key, const std::string& date) {
  if (!is_utc_date(date))
    o.fail(key, "expected a UTC time such as \"2026-12-06T19:47:54Z\", got \"" + date + "\"");
}

boost::json::object gpu_state_to_json(const GpuState& state) { return write_fields(state); }

GpuState gpu_state_from_json(const JsonObject& o) { return read_fields<GpuState>(o); }

boost::json::object environment_to_json(const ResultEnvironment& env) { return write_fields(env); }

ResultEnvironment environment_from_json(const JsonObject& o) {
  return read_fields<ResultEnvironment>(o);
}

boost::json::value result_to_json(const Result& result) {
  json::object o;
  o["schema"] = kResultSchema;
  o["status"] = result_status_name(result.status);
  // An error's text may quote a library's bytes: JSON holds only UTF-8, and
  // a file with any other could not be read back.
  o["error"] = printable(result.error);
  o["config"] = write_fields(result.config);
  if (result.metrics) o["metrics"] = write_fields(*result.metrics);
  o["timeline"] = to_json(result.timeline);
  o["environment"] = write_fields(result.environment);
  write_gate_fields(result, o);
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
  out.error = read_error(root, ok);
  out.config = read_fields<ResultConfig>(root.object("config"));
  const StageCount n{r, static_cast<size_t>(out.config.stages), ok};
  // metrics and timeline: required when ok, optional otherwise.
  if (ok || root.has("metrics"))
    out.metrics = read_fields<ResultMetrics>(root.object("metrics"), &n);
  if (ok || root.has("timeline")) out.timeline = read_timeline(r, root.at("timeline"), "timeline");
  n.check(out.timeline.size(), "timeline", PerStage::kOptional);
  check_collector_actions(r, out);
  check_timeline(r, "timeline", out.timeline, out.config);
  if (out.metrics && out.metrics->theory)
    check_timeline(r, "metrics.theory.timeline", out.metrics->theory->timeline, out.config);
  out.environment = read_fields<ResultEnvironment>(root.object("environment"));
  read_gate_fields(root, out);
  return out;
}

}  // namespace ppb
