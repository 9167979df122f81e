// The planner's search (plan.hpp). Branch and bound: every configuration
// gets an upper bound on its samples/s from a lower bound on its step
// (step_bound: each stage's compute for M micro-batches after the pipeline
// has filled up to it, plus the drain behind it; no communication) plus the
// all-reduce, and configurations are simulated best bound first. One is
// skipped when its bound cannot reach the leaders any more and its schedule
// already has a fitting candidate at least as fast, or when a configuration
// of the same schedule, partition, P and V with no more micro-batches, no
// larger ones and no more in flight did not fit (memory grows with each of
// the three). A shape whose parameter state plus one micro-batch of
// activations exceeds the capacity is dropped before any schedule is
// generated; a configuration that does not fit is not simulated.
#include "ppb/reports/plan.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ppb/pipeline/partition.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/simulator.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/reports/format.hpp"

namespace ppb::reports {
namespace {

// Generated schedules kept for reuse by other partitions and micro-batch
// sizes; bounded, since a deep pipeline's lists take megabytes.
constexpr size_t kScheduleCache = 64;
// What a single stage is listed under: it runs no schedule.
constexpr const char* kNoPipeline = "no pipeline";

// What a configuration of `stages` stages under `schedule` is listed as
// (shown_schedule).
std::string listed_name(int stages, const std::string& schedule) {
  return stages == 1 ? kNoPipeline : schedule;
}

// One run of a single stage, whichever schedule's name it was found under.
std::string single_stage_key(const Candidate& c) {
  return candidate_label(c) + " mbs=" + std::to_string(c.micro_batch_size);
}

// The model priced at one micro-batch size.
struct PricedModel {
  int micro_batch_size = 1;
  std::vector<Unit> units;
  std::vector<UnitTime> times;
};

// One cut of one priced model into P x V parts, with its bounds.
struct Shape {
  size_t model = 0;  // index into the priced models
  int stages = 1;
  int data_parallel = 1;
  int chunks = 1;
  std::string partition;
  std::vector<UnitRange> parts;       // the cut: P x V unit ranges
  std::vector<std::string> same_cut;  // the partitions after `partition` that cut it so too
  StageCosts costs;
  // Per stage, for step_bound(): F + I + W over its chunks, F + I over its
  // chunks, and the forwards / input gradients of the virtual stages before
  // its first chunk (the fill before it starts, the drain after its last I).
  std::vector<double> busy, forward_input, fill, drain;
  double allreduce_bound = 0;  // of the smallest gradients a placement gives
  int64_t least_memory = 0;    // parameter state + one micro-batch in flight, worst stage
  int least_stage = 0;
};

// One configuration waiting to be simulated.
struct Spec {
  const ScheduleInfo* info = nullptr;
  size_t shape = 0;
  int microbatches = 1;
  int inflight = 0;
  double bound = 0;  // samples/s it cannot exceed
};

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// Ring all-reduce of `bytes` over `d` replicas: 2 (d-1)/d of the data over
// the ring's slowest link, 2 (d-1) latencies.
double ring_allreduce_seconds(int64_t bytes, int d, const LinkModel& link) {
  if (d <= 1) return 0;
  const double share = 2.0 * (d - 1) / d * static_cast<double>(bytes);
  return (link.bandwidth > 0 ? share / link.bandwidth : 0.0) + 2.0 * (d - 1) * link.latency;
}

// Stage-to-stage link: across nodes once the pipeline spans more than one
// node (ranks are laid out pipeline outermost, the D replicas of a stage
// adjacent, so with D >= K every stage boundary crosses nodes and with
// D < K some do; the simulator takes one link, the slower).
LinkModel stage_link(const ClusterSpec& c, int stages) {
  return stages > 1 && c.gpus > c.gpus_per_node ? c.inter_node : c.intra_node;
}

// The replicas of one stage share a node when D divides K.
LinkModel replica_link(const ClusterSpec& c, int d) {
  return d <= c.gpus_per_node && c.gpus_per_node % d == 0 ? c.intra_node : c.inter_node;
}

// The attention the cluster's device would run the model with (it does not
// depend on the micro-batch size).
AttentionChoice plan_attention(const PlanOptions& o) {
  return modelled_attention(o.attention, kernels_for("", o.cluster.device.name), o.model);
}

// The units of the model at `spec`'s micro-batch size, as the cluster's
// device would run them with `attention`.
std::vector<Unit> plan_units(const PlanOptions& o, const ModelSpec& spec, Attention attention) {
  return expand_units(spec, kernels_for("", o.cluster.device.name), attention);
}

std::vector<std::string> schedule_names(const PlanOptions& o) {
  if (!o.schedules.empty()) return o.schedules;
  std::vector<std::string> out;
  for (const ScheduleInfo& i : schedule_list()) out.push_back(i.name);
  return out;
}

std::vector<std::string> partition_names(const PlanOptions& o) {
  if (!o.partitions.empty()) return o.partitions;
  std::vector<std::string> out;
  for (const PartitionInfo& p : partition_list()) {
    if (p.name.rfind("manual", 0) != 0) out.push_back(p.name);
  }
  return out;
}

// What one stage holds under one placement, per micro-batch.
struct StageSums {
  double busy = 0;           // F + I + W over its chunks
  double forward_input = 0;  // F + I over its chunks
  int64_t params = 0;
  int64_t least_activations = 0;  // its smallest chunk's

  StageSums min(const StageSums& o) const {
    return {std::min(busy, o.busy), std::min(forward_input, o.forward_input),
            std::min(params, o.params), std::min(least_activations, o.least_activations)};
  }
};

StageSums stage_sums(const StageCosts& costs, const Placement& place, int stage) {
  StageSums s;
  s.least_activations = -1;
  for (int ch = 0; ch < place.chunks(); ++ch) {
    const ChunkCost& c = costs.chunks[static_cast<size_t>(place.virtual_stage(stage, ch))];
    s.busy += c.fwd + c.bwd_input + c.bwd_weight;
    s.forward_input += c.fwd + c.bwd_input;
    s.params += c.param_bytes;
    s.least_activations = s.least_activations < 0
                              ? c.activation_bytes
                              : std::min(s.least_activations, c.activation_bytes);
  }
  return s;
}

class Planner {
 public:
  explicit Planner(const PlanOptions& o) : o_(o), attention_(plan_attention(o)) {
    capacity_ =
        static_cast<int64_t>(o.memory_guard * static_cast<double>(o.cluster.gpu_memory_bytes));
  }

  Plan run() {
    price_models();
    check_cut_work();
    make_shapes();
    make_specs();
    check_search_size();
    std::stable_sort(specs_.begin(), specs_.end(),
                     [](const Spec& a, const Spec& b) { return a.bound > b.bound; });
    const auto total = static_cast<int64_t>(specs_.size());
    for (int64_t i = 0; i < total; ++i) {
      const Spec& s = specs_[static_cast<size_t>(i)];
      if (!skip(s)) evaluate(s);
      if (o_.progress && (i % 64 == 63 || i + 1 == total)) o_.progress(i + 1, total);
    }
    return finish();
  }

 private:
  void price_models() {
    for (int mbs : o_.micro_batch_sizes) {
      if (mbs < 1)
        throw UsageError("--micro-batch-size: expected >= 1, got " + std::to_string(mbs));
      PricedModel m;
      m.micro_batch_size = mbs;
      ModelSpec spec = o_.model;
      spec.micro_batch_size = mbs;
      m.units = plan_units(o_, spec, attention_.attention);
      m.times = unit_times(m.units, o_.cluster.device, o_.calibration);
      models_.push_back(std::move(m));
    }
  }

  // The balanced cuts the search will make, before it makes them: each
  // costs about 64 x parts x units steps (partition.hpp).
  void check_cut_work() const {
    const std::vector<std::string> names = partition_names(o_);
    if (models_.empty() || std::find(names.begin(), names.end(), "balanced") == names.end()) return;
    const double units = static_cast<double>(models_.front().units.size());
    double work = 0;
    for (int p : divisors(o_.cluster.gpus)) {
      for (int v : chunk_counts()) {
        if (double{1} * p * v <= units) work += double{1} * p * v * units;
      }
    }
    work *= static_cast<double>(models_.size());
    if (work > kMaxPlanCutWork) {
      throw UsageError("--partition balanced: cutting the model's " + format_trimmed(units) +
                       " units into P x V parts for every P dividing " +
                       std::to_string(o_.cluster.gpus) + " GPUs and every micro-batch size is " +
                       format_number(work) + " parts x units, above the planner's limit of " +
                       format_number(static_cast<double>(kMaxPlanCutWork)) +
                       ": leave it out (--partition layer,operator), or plan fewer GPUs, "
                       "micro-batch sizes or layers");
    }
  }

  // The configurations the search may generate, predict and simulate,
  // before it starts: each costs about its P x M x V compute slots.
  void check_search_size() const {
    double slots = 0;
    for (const Spec& sp : specs_) {
      const Shape& sh = shapes_[sp.shape];
      slots += double{1} * sh.stages * sp.microbatches * sh.chunks;
    }
    if (slots > kMaxPlanSlots) {
      throw UsageError("plan: " + std::to_string(specs_.size()) +
                       " configurations to search, with " + format_number(slots) +
                       " compute slots (P x M x V) in all, above the planner's limit of " +
                       format_number(static_cast<double>(kMaxPlanSlots)) +
                       ": narrow --schedule, --partition or --micro-batch-size, or plan fewer "
                       "GPUs or a smaller --global-batch");
    }
  }

  std::vector<int> chunk_counts() const {
    std::vector<int> v = {1};
    for (const std::string& n : schedule_names(o_)) {
      const ScheduleInfo& i = schedule_info(n);
      if (i.uses_chunks) v.insert(v.end(), {2, 4});
      if (i.fixed_chunks > 0) v.push_back(i.fixed_chunks);
    }
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  }

  void make_shapes() {
    const ClusterSpec& c = o_.cluster;
    const std::vector<int> chunks = chunk_counts();
    for (size_t mi = 0; mi < models_.size(); ++mi) {
      const PricedModel& m = models_[mi];
      for (int p : divisors(c.gpus)) {
        for (int v : chunks) {
          if (static_cast<size_t>(p) * static_cast<size_t>(v) > m.units.size()) continue;
          for (const std::string& name : partition_names(o_)) add_shape(mi, p, v, name);
        }
      }
    }
  }

  void add_shape(size_t mi, int p, int v, const std::string& partition) {
    const PricedModel& m = models_[mi];
    const ClusterSpec& c = o_.cluster;
    PartitionOptions popts;
    popts.link = stage_link(c, p);
    popts.memory = o_.memory;
    // A partition that cannot place P x V parts (layer with P > layers) is no shape.
    if (partition_problem(partition, m.units, p * v)) return;
    std::vector<UnitRange> parts = make_partition(partition, m.units, m.times, p * v, popts);
    // Two partitions that cut the model the same way are one run: the
    // first names it, the others are listed with it.
    for (Shape& other : shapes_) {
      if (other.model == mi && other.stages == p && other.chunks == v && other.parts == parts) {
        const bool named = other.partition == partition ||
                           std::find(other.same_cut.begin(), other.same_cut.end(), partition) !=
                               other.same_cut.end();
        if (!named) other.same_cut.push_back(partition);  // a name given twice is one
        return;
      }
    }
    Shape s;
    s.model = mi;
    s.stages = p;
    s.data_parallel = c.gpus / p;
    s.chunks = v;
    s.partition = partition;
    s.costs = model_costs(m.units, m.times, parts, p, v, popts.link);
    s.parts = std::move(parts);
    if (o_.calibration != nullptr) s.costs.action_seconds = o_.calibration->launch_seconds;
    // Looping, and V-shaped with 2 chunks: the bounds take the smaller
    // figure of the placements a schedule of this V may use.
    std::vector<Placement> places = {Placement(p, v)};
    if (v == 2) places.emplace_back(p, 2, v_shape_placement(p));
    int64_t grads = 0;
    double fill = 0;
    double drain = 0;
    for (int st = 0; st < p; ++st) {
      StageSums least;
      for (size_t k = 0; k < places.size(); ++k) {
        const StageSums sums = stage_sums(s.costs, places[k], st);
        least = k == 0 ? sums : least.min(sums);
      }
      s.busy.push_back(least.busy);
      s.forward_input.push_back(least.forward_input);
      s.fill.push_back(fill);
      s.drain.push_back(drain);
      fill += s.costs.chunks[static_cast<size_t>(st)].fwd;
      drain += s.costs.chunks[static_cast<size_t>(st)].bwd_input;
      const ParameterState state = parameter_state(least.params, o_.memory);
      grads = std::max(grads, state.gradients);
      if (state.total() + least.least_activations > s.least_memory) {
        s.least_memory = state.total() + least.least_activations;
        s.least_stage = st;
      }
    }
    s.allreduce_bound =
        ring_allreduce_seconds(grads, s.data_parallel, replica_link(c, s.data_parallel));
    shapes_.push_back(std::move(s));
  }

  // M for a shape: from the global batch (none when it does not divide
  // or asks for more than kMaxPlanMicrobatches; counted for the advice),
  // else P, 2P and 4P.
  std::vector<int> microbatch_counts(const Shape& s) {
    const int mbs = models_[s.model].micro_batch_size;
    if (o_.global_batch > 0) {
      const int64_t per_step = int64_t{s.data_parallel} * mbs;
      if (o_.global_batch % per_step != 0) {
        ++indivisible_;
        return {};
      }
      const int64_t m = o_.global_batch / per_step;
      if (m > kMaxPlanMicrobatches) {
        ++too_many_microbatches_;
        return {};
      }
      return {static_cast<int>(m)};
    }
    return {s.stages, 2 * s.stages, 4 * s.stages};
  }

  // Why no configuration was formed, for the advice.
  std::string why_none() const {
    const std::string batch = "--global-batch " + std::to_string(o_.global_batch);
    if (too_many_microbatches_ > 0) {
      return batch + " needs more than " + std::to_string(kMaxPlanMicrobatches) +
             " micro-batches per step (M = global batch / (D x micro-batch size)) wherever it "
             "divides: a smaller --global-batch or larger --micro-batch-size";
    }
    if (indivisible_ > 0) {
      return batch + " is not a multiple of D x micro-batch size for any P dividing the " +
             std::to_string(o_.cluster.gpus) + " GPUs (D = GPUs / P)";
    }
    if (shapes_.empty()) return "no partition of --partition cuts the model for any P";
    return "no schedule of --schedule runs on the shapes the GPUs and the model allow";
  }

  void make_specs() {
    for (size_t si = 0; si < shapes_.size(); ++si) {
      const Shape& s = shapes_[si];
      for (int m : microbatch_counts(s)) {
        // Every schedule (and in-flight limit) this shape and M can run is
        // a configuration, counted whether or not it is pruned.
        std::vector<std::pair<const ScheduleInfo*, int>> runnable;
        for (const std::string& name : schedule_names(o_)) {
          const ScheduleInfo& info = schedule_info(name);
          const int want_v = info.fixed_chunks > 0 ? info.fixed_chunks : 1;
          if (info.uses_chunks ? s.chunks < 2 : s.chunks != want_v) continue;
          std::vector<int> ns = {0};
          if (info.uses_inflight) ns = inflight_counts(s.stages);
          for (int n : ns) runnable.emplace_back(&info, n);
        }
        considered_ += static_cast<int64_t>(runnable.size());
        if (runnable.empty()) continue;
        if (s.least_memory > capacity_) {
          note_least(s, m);
          continue;
        }
        const double samples = double{1} * s.data_parallel * models_[s.model].micro_batch_size * m;
        const double bound = samples / (step_bound(s, m) + s.allreduce_bound);
        for (const auto& [info, n] : runnable) specs_.push_back({info, si, m, n, bound});
      }
    }
  }

  // No schedule's step is shorter: stage s starts when micro-batch 0 has
  // passed the virtual stages before it (fill) and then computes M
  // micro-batches; and after its last input gradient, the stages before it
  // still compute theirs (drain). W may be deferred, so the drain follows
  // F + I only. Holds for the V-shaped placements too: virtual stages
  // 0..P-1 run down the stages in both placements.
  static double step_bound(const Shape& s, int m) {
    double bound = 0;
    for (size_t st = 0; st < s.busy.size(); ++st) {
      bound = std::max(
          {bound, s.fill[st] + m * s.busy[st], s.fill[st] + m * s.forward_input[st] + s.drain[st]});
    }
    return bound;
  }

  static std::vector<int> inflight_counts(int p) {
    std::vector<int> v = {1, std::max(1, p / 2), p};
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  }

  // A shape that cannot hold even one micro-batch: remembered for the advice.
  void note_least(const Shape& s, int m) {
    if (least_ &&
        least_->peak_memory_bytes[static_cast<size_t>(least_->worst_stage)] <= s.least_memory) {
      return;
    }
    Candidate c = describe(s, m, 0, "");
    c.peak_memory_bytes.assign(static_cast<size_t>(s.stages), 0);
    c.peak_memory_bytes[static_cast<size_t>(s.least_stage)] = s.least_memory;
    c.worst_stage = s.least_stage;
    least_ = c;
  }

  Candidate describe(const Shape& s, int m, int n, const std::string& schedule) const {
    Candidate c;
    c.schedule = schedule;
    c.partition = s.partition;
    c.same_cut = s.same_cut;
    c.stages = s.stages;
    c.data_parallel = s.data_parallel;
    c.microbatches = m;
    c.micro_batch_size = models_[s.model].micro_batch_size;
    c.chunks = s.chunks;
    c.inflight = n;
    c.allreduce_seconds = s.allreduce_bound;
    return c;
  }

  // What a configuration is listed under (shown_schedule): its schedule, or
  // "no pipeline" for one stage. Each gets its best configuration exactly.
  std::string listed_as(const Spec& s) const {
    return listed_name(shapes_[s.shape].stages, s.info->name);
  }

  // Pruned when it can neither join the leaders nor beat the best of what
  // it is listed as; a tie is simulated (of equal speed, less memory ranks
  // first).
  bool skip(const Spec& s) {
    const auto best = best_fit_.find(listed_as(s));
    if (leaders_.size() >= static_cast<size_t>(o_.top) && s.bound < leaders_.top() &&
        best != best_fit_.end() && s.bound < best->second) {
      return true;
    }
    const Shape& sh = shapes_[s.shape];
    const auto it = failed_.find(fail_key(s));
    if (it == failed_.end()) return false;
    const int mbs = models_[sh.model].micro_batch_size;
    return std::any_of(it->second.begin(), it->second.end(), [&](const std::array<int, 3>& f) {
      return f[0] <= mbs && f[1] <= s.microbatches && f[2] <= s.inflight;
    });
  }

  std::string fail_key(const Spec& s) const {
    const Shape& sh = shapes_[s.shape];
    return s.info->name + "/" + sh.partition + "/" + std::to_string(sh.stages) + "/" +
           std::to_string(sh.chunks);
  }

  const Schedule& schedule_for(const Spec& s, const ScheduleParams& p) {
    if (s.info->uses_times) {
      timed_schedule_ = std::make_unique<Schedule>(generate_schedule(s.info->name, p));
      return *timed_schedule_;
    }
    const std::string key = s.info->name + "/" + std::to_string(p.stages) + "/" +
                            std::to_string(p.microbatches) + "/" + std::to_string(p.chunks) + "/" +
                            std::to_string(p.inflight);
    auto it = schedules_.find(key);
    if (it == schedules_.end()) {
      if (schedules_.size() >= kScheduleCache) schedules_.clear();
      it = schedules_.emplace(key, generate_schedule(s.info->name, p)).first;
    }
    return it->second;
  }

  void evaluate(const Spec& s) {
    const Shape& sh = shapes_[s.shape];
    Candidate c = describe(sh, s.microbatches, s.inflight, s.info->name);
    ScheduleParams params = schedule_params(c);
    if (s.info->uses_times) set_pass_times(sh.costs, params);
    // Not a valid combination (M not a multiple of P for interleaving, ...).
    if (schedule_problem(s.info->name, params)) return;
    const Schedule* schedule = &schedule_for(s, params);
    ++evaluated_;
    MemoryModelOptions mo = o_.memory;
    mo.data_parallel = sh.data_parallel;
    const std::vector<PredictedMemory> mem = predict_memory(*schedule, sh.costs, mo);
    c.worst_stage = worst_stage(mem);
    int64_t grads = 0;
    for (const PredictedMemory& m : mem) {
      c.peak_memory_bytes.push_back(m.peak_bytes);
      grads = std::max(grads, m.state.gradients);
    }
    // The replicas of the slowest-to-reduce stage hold the step.
    c.allreduce_seconds =
        ring_allreduce_seconds(grads, sh.data_parallel, replica_link(o_.cluster, sh.data_parallel));
    c.fits = c.peak_memory_bytes[static_cast<size_t>(c.worst_stage)] <= capacity_;
    if (!c.fits) {
      failed_[fail_key(s)].push_back(
          {models_[sh.model].micro_batch_size, s.microbatches, s.inflight});
      if (!least_ || c.peak_memory_bytes[static_cast<size_t>(c.worst_stage)] <
                         least_->peak_memory_bytes[static_cast<size_t>(least_->worst_stage)])
        least_ = c;
      if (!best_any_.count(listed_as(s))) best_any_.emplace(listed_as(s), c);
      return;
    }
    SimOptions so;
    so.record_events = false;
    const SimResult r = simulate(*schedule, sh.costs, so);
    c.step_seconds = s.info->no_flush ? r.time_per_batch() : r.step_time;
    c.bubble_ratio = r.bubble_ratio;
    const double samples = double{1} * c.data_parallel * c.micro_batch_size * c.microbatches;
    c.samples_per_second = samples / (c.step_seconds + c.allreduce_seconds);
    fitting_.push_back(c);
    // One stage under another schedule's name is the same run: one place
    // among the leaders, as finish() ranks it once.
    if (c.stages > 1 || single_stage_runs_.insert(single_stage_key(c)).second) {
      leaders_.push(c.samples_per_second);
      if (leaders_.size() > static_cast<size_t>(o_.top)) leaders_.pop();
    }
    double& best = best_fit_[listed_as(s)];
    best = std::max(best, c.samples_per_second);
  }

  Plan finish();

  const PlanOptions& o_;
  AttentionChoice attention_;  // plan_attention(o_): every candidate's
  int64_t capacity_ = 0;
  std::vector<PricedModel> models_;
  std::vector<Shape> shapes_;
  std::vector<Spec> specs_;
  std::map<std::string, Schedule> schedules_;
  std::unique_ptr<Schedule> timed_schedule_;
  std::map<std::string, std::vector<std::array<int, 3>>> failed_;
  std::map<std::string, double> best_fit_;  // per listed_as: the best samples/s
  // Per listed_as: the first (best bound) non-fitting configuration.
  std::map<std::string, Candidate> best_any_;
  std::priority_queue<double, std::vector<double>, std::greater<>> leaders_;
  std::set<std::string> single_stage_runs_;  // single_stage_key of those among leaders_
  std::vector<Candidate> fitting_;
  std::optional<Candidate> least_;
  int64_t considered_ = 0;
  int64_t evaluated_ = 0;
  int64_t indivisible_ = 0;            // shapes whose D x mbs does not divide the global batch
  int64_t too_many_microbatches_ = 0;  // shapes whose M would exceed kMaxPlanMicrobatches
};

std::string pct(double x) { return format_trimmed(std::round(x * 1000) / 10) + "%"; }

std::string memory_words(const Candidate& c, int64_t capacity, const PlanOptions& o) {
  const int64_t peak = c.peak_memory_bytes[static_cast<size_t>(c.worst_stage)];
  return "stage " + std::to_string(c.worst_stage) + " needs " +
         format_bytes(static_cast<double>(peak)) + " of " +
         format_bytes(static_cast<double>(capacity)) + " (" + format_trimmed(o.memory_guard * 100) +
         "% of " + format_bytes(static_cast<double>(o.cluster.gpu_memory_bytes)) + ")";
}

double allreduce_share(const Candidate& c) {
  const double t = c.step_seconds + c.allreduce_seconds;
  return t > 0 ? c.allreduce_seconds / t : 0;
}

std::string versus(const Candidate& c, const Candidate& best) {
  const double slower = 1 - c.samples_per_second / best.samples_per_second;
  std::string why = pct(slower) + " slower than the leader (" + shown_schedule(best) +
                    "): bubble " + pct(c.bubble_ratio) + " vs " + pct(best.bubble_ratio);
  if (std::fabs(allreduce_share(c) - allreduce_share(best)) > 0.01) {
    why +=
        ", all-reduce " + pct(allreduce_share(c)) + " of the step vs " + pct(allreduce_share(best));
  }
  return why;
}

// "; balanced cuts the model the same way (the same run)" where other
// partitions searched gave this pipelined candidate's cut; else "".
std::string same_cut_words(const Candidate& c) {
  if (c.stages == 1 || c.same_cut.empty()) return "";
  std::string names;
  for (size_t i = 0; i < c.same_cut.size(); ++i) {
    names += (i == 0 ? "" : i + 1 == c.same_cut.size() ? " and " : ", ") + c.same_cut[i];
  }
  return "; " + names + (c.same_cut.size() == 1 ? " cuts" : " cut") +
         " the model the same way (the same run)";
}

std::string advice(const std::optional<Candidate>& least, int64_t capacity, const PlanOptions& o,
                   const std::string& why_none) {
  std::string a = "nothing fits " + format_bytes(static_cast<double>(capacity)) + " per GPU (" +
                  format_trimmed(o.memory_guard * 100) + "% of " +
                  format_bytes(static_cast<double>(o.cluster.gpu_memory_bytes)) + ")";
  if (!least) return a + "; no configuration could be formed: " + why_none;
  const Candidate& c = *least;
  const auto peak = static_cast<double>(c.peak_memory_bytes[static_cast<size_t>(c.worst_stage)]);
  a += ". The least memory any configuration needs is " + format_bytes(peak) + " (stage " +
       std::to_string(c.worst_stage) + ", P=" + std::to_string(c.stages) + ", micro-batch size " +
       std::to_string(c.micro_batch_size) + ", M=" + std::to_string(c.microbatches);
  if (!c.schedule.empty()) a += ", " + c.schedule;
  if (c.inflight > 0) a += " N=" + std::to_string(c.inflight);
  a += "). It would fit with GPUs of " + format_bytes(peak / o.memory_guard) +
       "; or with more stages than " + std::to_string(o.cluster.gpus) +
       " GPUs allow (more GPUs), fewer micro-batches in flight, a smaller micro-batch, " +
       (o.memory.optimizer == OptimizerKind::kAdam ? "SGD instead of Adam (--optimizer sgd), "
                                                   : "") +
       (o.memory.element_bytes >= 4 ? "or bf16 storage (--dtype bf16)" : "or a smaller model");
  return a;
}

Plan Planner::finish() {
  Plan plan;
  plan.capacity_bytes = capacity_;
  plan.attention = attention_;
  plan.considered = considered_;
  plan.evaluated = evaluated_;
  // Fastest first; of equal speed (to 9 digits: one stage cut into V
  // chunks runs as fast as uncut) the one with less memory, then fewer
  // chunks.
  const auto speed = [](const Candidate& c) {
    const double l = std::log(c.samples_per_second);
    return std::isfinite(l) ? std::llround(l * 1e9)
                            : (l > 0 ? std::numeric_limits<long long>::max()
                                     : std::numeric_limits<long long>::min());
  };
  std::stable_sort(fitting_.begin(), fitting_.end(), [&](const Candidate& a, const Candidate& b) {
    if (speed(a) != speed(b)) return speed(a) > speed(b);
    const int64_t pa = a.peak_memory_bytes[static_cast<size_t>(a.worst_stage)];
    const int64_t pb = b.peak_memory_bytes[static_cast<size_t>(b.worst_stage)];
    if (pa != pb) return pa < pb;
    return a.chunks < b.chunks;
  });
  // Single-stage runs of the same shape under several schedules' names are
  // one run: the first (fastest) stands for them.
  std::set<std::string> singles;
  for (const Candidate& c : fitting_) {
    if (plan.ranked.size() >= static_cast<size_t>(o_.top)) break;
    if (c.stages == 1 && !singles.insert(single_stage_key(c)).second) continue;
    plan.ranked.push_back(c);
  }
  // Listed per schedule (shown_schedule): one stage is "no pipeline",
  // whichever schedule's search found it.
  std::vector<std::string> names = schedule_names(o_);
  names.emplace_back(kNoPipeline);
  if (plan.ranked.empty()) {
    plan.advice = advice(least_, capacity_, o_, why_none());
    for (const std::string& name : names) {
      if (const auto it = best_any_.find(name); it != best_any_.end()) {
        Candidate alt = it->second;
        alt.why = memory_words(alt, capacity_, o_) + same_cut_words(alt);
        plan.alternatives.push_back(alt);
      }
    }
    return plan;
  }
  const Candidate& best = plan.ranked.front();
  for (size_t i = 0; i < plan.ranked.size(); ++i) {
    Candidate& c = plan.ranked[i];
    const int64_t peak = c.peak_memory_bytes[static_cast<size_t>(c.worst_stage)];
    c.why = i == 0 ? "fastest: bubble " + pct(c.bubble_ratio) + ", all-reduce " +
                         pct(allreduce_share(c)) + " of the step, stage " +
                         std::to_string(c.worst_stage) + " peaks at " +
                         format_bytes(static_cast<double>(peak)) + " of " +
                         format_bytes(static_cast<double>(capacity_))
                   : versus(c, best);
    c.why += same_cut_words(c);
  }
  // The best of every schedule not among the leaders, and why it loses.
  for (const std::string& name : names) {
    const auto listed = [&](const Candidate& c) { return shown_schedule(c) == name; };
    if (std::any_of(plan.ranked.begin(), plan.ranked.end(), listed)) continue;
    const auto fit = std::find_if(fitting_.begin(), fitting_.end(), listed);
    if (fit != fitting_.end()) {
      Candidate alt = *fit;
      alt.why = versus(alt, best) + same_cut_words(alt);
      plan.alternatives.push_back(alt);
    } else if (const auto it = best_any_.find(name); it != best_any_.end()) {
      Candidate alt = it->second;
      alt.why = memory_words(alt, capacity_, o_) + same_cut_words(alt);
      plan.alternatives.push_back(alt);
    }
  }
  return plan;
}

// Names the flag of a schedule or partition the registries do not hold.
void check_names(const PlanOptions& o) {
  for (const std::string& s : o.schedules) {
    if (find_schedule_info(s) == nullptr) {
      throw UsageError("--schedule: " + schedule_problem(s, ScheduleParams{}).value_or(""));
    }
  }
  for (const std::string& p : o.partitions) {
    if (p.rfind("manual:", 0) == 0) continue;
    std::string names;
    bool known = false;
    for (const PartitionInfo& info : partition_list()) {
      known = known || info.name == p;
      names += (names.empty() ? "" : ", ") + info.name;
    }
    if (!known)
      throw UsageError("--partition: unknown partition '" + p + "' (partitions: " + names + ")");
  }
}

}  // namespace

Plan make_plan(const PlanOptions& options) {
  PPB_CHECK(options.cluster.device.bytes_per_element == options.model.bytes_per_element,
            "make_plan: the cluster's device is resolved for another storage than the model's "
            "(resolve_cluster(input, model.bytes_per_element))");
  check_names(options);
  if (!(options.memory_guard > 0 && options.memory_guard <= 1)) {
    throw UsageError("--memory-guard: expected a fraction in (0, 1], got " +
                     std::to_string(options.memory_guard));
  }
  if (options.top < 1) throw UsageError("--top: expected >= 1");
  Planner planner(options);
  return planner.run();
}

std::string shown_schedule(const Candidate& c) { return listed_name(c.stages, c.schedule); }

std::string candidate_label(const Candidate& c) {
  const std::string d = c.data_parallel > 1 ? " D=" + std::to_string(c.data_parallel) : "";
  const std::string m = " M=" + std::to_string(c.microbatches);
  if (c.stages == 1) return std::string(kNoPipeline) + " (P=1)" + d + m;
  return c.schedule + " x " + c.partition + " P=" + std::to_string(c.stages) + d + m +
         (c.inflight > 0 ? " N=" + std::to_string(c.inflight) : "") +
         (c.chunks > 1 ? " V=" + std::to_string(c.chunks) : "");
}

ScheduleParams schedule_params(const Candidate& c) {
  ScheduleParams p;
  copy_schedule_params(p, c);
  return p;
}

void write_plan_trace(const PlanOptions& options, const Candidate& c, const std::string& path) {
  ModelSpec spec = options.model;
  spec.micro_batch_size = c.micro_batch_size;
  const std::vector<Unit> units = plan_units(options, spec, plan_attention(options).attention);
  const std::vector<UnitTime> times =
      unit_times(units, options.cluster.device, options.calibration);
  PartitionOptions popts;
  popts.link = stage_link(options.cluster, c.stages);
  popts.memory = options.memory;
  const std::vector<UnitRange> parts =
      make_partition(c.partition, units, times, c.stages * c.chunks, popts);
  StageCosts costs = model_costs(units, times, parts, c.stages, c.chunks, popts.link);
  if (options.calibration != nullptr) costs.action_seconds = options.calibration->launch_seconds;
  ScheduleParams p = schedule_params(c);
  if (schedule_info(c.schedule).uses_times) set_pass_times(costs, p);
  const Schedule schedule = generate_schedule(c.schedule, p);
  write_sim_trace(schedule, simulate(schedule, costs), path);
}

}  // namespace ppb::reports
