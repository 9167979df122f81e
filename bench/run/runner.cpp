#include "run/runner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "ppb/exec/backend.hpp"
#include "ppb/exec/cpu_model.hpp"
#include "ppb/exec/cpu_reference.hpp"
#include "ppb/exec/executor.hpp"
#include "ppb/exec/memory_guard.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/exec/nvtx_instrumentation.hpp"
#include "ppb/exec/transport.hpp"
#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/partition.hpp"
#include "ppb/pipeline/result.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/clock.hpp"
#include "ppb/profiling/log.hpp"
#include "ppb/profiling/memory.hpp"
#include "ppb/profiling/nvtx.hpp"
#include "ppb/profiling/trace.hpp"
#include "run/environment.hpp"
#include "run/host_load.hpp"
#include "run/metrics.hpp"
#include "run/noise.hpp"
#include "run/progress.hpp"
#include "run/sweep.hpp"

namespace ppb::run {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
/// --check passes when every gradient and the loss agree to this relative error.
constexpr double kCheckTolerance = 1e-4;
constexpr float kLearningRate = 1e-3f;

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

/// Throws on every rank when rank 0 says `ok` is false: rank 0 a UsageError
/// with `message`, the others cli::ExitCode{2} (they stay quiet).
void agree(bool ok, const std::string& message, int rank, MPI_Comm comm) {
  int flag = ok ? 1 : 0;
  PPB_MPI_CHECK(MPI_Bcast(&flag, 1, MPI_INT, 0, comm));
  if (flag != 0) return;
  if (rank == 0) throw UsageError(message);
  throw cli::ExitCode{kUsageExitCode};
}

// --- the per-step instrumentation: --check probes and NVTX ranges ---------

/// Hooks of one combination: copies the gradients just before the optimizer
/// of the --check step, records the weight versions for pipedream's
/// stashing check, and forwards every hook to the NVTX ranges with
/// --profile nvtx (NvtxInstrumentation: actions, messages, optimizer, steps).
class Probe final : public Instrumentation {
 public:
  Probe(int stage, int stages, int chunks, CpuBackend* cpu, bool nvtx) : cpu_(cpu) {
    if (nvtx) nvtx_ = std::make_unique<NvtxInstrumentation>(stage, stages, chunks);
  }

  bool capture_grads = false;   ///< copy gradients at optimizer_begin (check step)
  bool watch_versions = false;  ///< pipedream: check the weight-stashing invariant
  std::map<int, std::vector<std::vector<float>>> grads;  ///< chunk -> per unit
  int64_t stash_violations = 0;  ///< backwards that did not use their forward's version
  int64_t stash_used = 0;        ///< backwards that ran with an older (stashed) version
  int64_t backwards_checked = 0;

  void step_begin(int step) override {
    if (nvtx_) nvtx_->step_begin(step);
  }
  void step_end(int step) override {
    if (nvtx_) nvtx_->step_end(step);
  }
  void action_begin(int stage, const Action& a) override {
    if (watch_versions && cpu_ != nullptr && a.chunk >= 0) {
      CpuChunk& chunk = cpu_->chunk(a.chunk);
      const auto key = std::make_pair(static_cast<int64_t>(a.microbatch), a.chunk);
      switch (a.kind) {
        case ActionKind::kForward:
          forward_version_[key] = chunk.weight_version();
          break;
        case ActionKind::kBackward:
        case ActionKind::kBackwardInput: {
          const auto it = forward_version_.find(key);
          const int used = chunk.weight_version_of(a.microbatch);
          ++backwards_checked;
          if (it == forward_version_.end() || it->second != used) ++stash_violations;
          if (used != chunk.weight_version()) ++stash_used;
          break;
        }
        case ActionKind::kBackwardWeight:
        case ActionKind::kSync:
          break;
      }
    }
    if (nvtx_) nvtx_->action_begin(stage, a);
  }
  void action_end(int stage, const Action& a) override {
    if (nvtx_) nvtx_->action_end(stage, a);
  }
  void comm_begin(const CommRecord& record) override {
    if (nvtx_) nvtx_->comm_begin(record);
  }
  void comm_end(const CommRecord& record) override {
    if (nvtx_) nvtx_->comm_end(record);
  }
  void optimizer_begin(int chunk) override {
    if (capture_grads && cpu_ != nullptr && grads.count(chunk) == 0) {
      std::vector<std::vector<float>>& out = grads[chunk];
      for (std::span<const float> g : cpu_->chunk(chunk).grad_views())
        out.emplace_back(g.begin(), g.end());
    }
    if (nvtx_) nvtx_->optimizer_begin(chunk);
  }
  void optimizer_end(int chunk) override {
    if (nvtx_) nvtx_->optimizer_end(chunk);
  }
  /// The outer "measure" range around the timed steps (for
  /// `nsys profile --capture-range=nvtx -p measure@pipebench`).
  void measure_begin() {
    if (nvtx_) nvtx::push("measure", nvtx::Category::kStep);
  }
  void measure_end() {
    if (nvtx_) nvtx::pop();
  }

 private:
  CpuBackend* cpu_;
  std::unique_ptr<NvtxInstrumentation> nvtx_;
  std::map<std::pair<int64_t, int>, int> forward_version_;
};

// --- gathering the ranks' records to rank 0 -------------------------------

/// What one rank measured in one timed step, on its own clock.
struct RankStep {
  StepRecord record;
  double abs_start = 0;  ///< now_seconds() at the step's start on this rank (StepRecord::origin)
};

void put(std::vector<double>& b, double v) { b.push_back(v); }

std::vector<double> encode(const std::vector<RankStep>& steps, const StageMemory& mem) {
  std::vector<double> b;
  put(b, static_cast<double>(steps.size()));
  for (const RankStep& s : steps) {
    const StepRecord& r = s.record;
    put(b, s.abs_start);
    put(b, r.actions_end);
    put(b, static_cast<double>(r.peak_bytes));
    put(b, static_cast<double>(r.peak_activation_bytes));
    put(b, static_cast<double>(r.actions.size()));
    for (const ActionRecord& a : r.actions) {
      put(b, static_cast<double>(static_cast<int>(a.action.kind)));
      put(b, a.action.microbatch);
      put(b, a.action.chunk);
      put(b, a.start);
      put(b, a.end);
      put(b, a.wait);
    }
    put(b, static_cast<double>(r.comms.size()));
    for (const CommRecord& c : r.comms) {
      put(b, c.send ? 1 : 0);
      put(b, c.kind == MessageKind::kGradient ? 1 : 0);
      put(b, c.local ? 1 : 0);
      put(b, static_cast<double>(c.microbatch));
      put(b, c.from_virtual);
      put(b, c.to_virtual);
      put(b, c.start);
      put(b, c.end);
      put(b, static_cast<double>(c.bytes));
    }
  }
  put(b, static_cast<double>(mem.peak_total));
  put(b, static_cast<double>(mem.peak_activations));
  for (int64_t v : mem.at_peak) put(b, static_cast<double>(v));
  put(b, static_cast<double>(mem.peak_rss));
  return b;
}

/// One rank's decoded records: its steps (times on its own step clock) and
/// absolute step starts.
struct RankData {
  std::vector<StageStep> steps;
  std::vector<double> abs_start;
  std::vector<int64_t> peak_bytes;
  std::vector<int64_t> peak_activation_bytes;
  StageMemory memory;
};

RankData decode(const double* p, const double* end) {
  RankData d;
  auto next = [&]() -> double {
    PPB_CHECK(p < end, "truncated step records");
    return *p++;
  };
  const int n = static_cast<int>(next());
  for (int k = 0; k < n; ++k) {
    StageStep s;
    d.abs_start.push_back(next());
    s.end = next();
    d.peak_bytes.push_back(static_cast<int64_t>(next()));
    d.peak_activation_bytes.push_back(static_cast<int64_t>(next()));
    const int na = static_cast<int>(next());
    for (int i = 0; i < na; ++i) {
      ActionTiming a;
      a.action.kind = static_cast<ActionKind>(static_cast<int>(next()));
      a.action.microbatch = static_cast<int32_t>(next());
      a.action.chunk = static_cast<int32_t>(next());
      a.start = next();
      a.end = next();
      a.wait = next();
      s.actions.push_back(a);
    }
    const int nc = static_cast<int>(next());
    for (int i = 0; i < nc; ++i) {
      CommTiming c;
      c.send = next() != 0;
      c.gradient = next() != 0;
      c.local = next() != 0;
      c.microbatch = static_cast<int64_t>(next());
      c.from_virtual = static_cast<int>(next());
      c.to_virtual = static_cast<int>(next());
      c.start = next();
      c.end = next();
      c.bytes = static_cast<int64_t>(next());
      s.comms.push_back(c);
    }
    d.steps.push_back(std::move(s));
  }
  d.memory.peak_total = static_cast<int64_t>(next());
  d.memory.peak_activations = static_cast<int64_t>(next());
  for (int64_t& v : d.memory.at_peak) v = static_cast<int64_t>(next());
  d.memory.peak_rss = static_cast<int64_t>(next());
  return d;
}

/// Gathers every rank's buffer to rank 0 (empty elsewhere).
std::vector<std::vector<double>> gather(const std::vector<double>& mine, int rank, int size,
                                        MPI_Comm comm) {
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(size));
  PPB_MPI_CHECK(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm));
  std::vector<int> displs(static_cast<size_t>(size), 0);
  std::vector<double> all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < size; ++r) {
      displs[static_cast<size_t>(r)] = total;
      total += counts[static_cast<size_t>(r)];
    }
    all.resize(static_cast<size_t>(total));
  }
  PPB_MPI_CHECK(MPI_Gatherv(mine.data(), count, MPI_DOUBLE, all.data(), counts.data(),
                            displs.data(), MPI_DOUBLE, 0, comm));
  std::vector<std::vector<double>> out;
  if (rank == 0) {
    for (int r = 0; r < size; ++r) {
      const double* begin = all.data() + displs[static_cast<size_t>(r)];
      out.emplace_back(begin, begin + counts[static_cast<size_t>(r)]);
    }
  }
  return out;
}

/// The timed steps on one time axis per step: on one host every rank's
/// steady clock is the same clock, so each rank's times are shifted by its
/// step start minus the earliest start of that step (the barrier's exit);
/// across hosts the ranks' own step starts are the origin.
std::vector<StepMeasure> align_steps(const std::vector<RankData>& ranks, bool one_host) {
  std::vector<StepMeasure> steps;
  const size_t n = ranks.front().steps.size();
  for (size_t k = 0; k < n; ++k) {
    double origin = std::numeric_limits<double>::infinity();
    for (const RankData& r : ranks) origin = std::min(origin, r.abs_start[k]);
    StepMeasure step;
    for (const RankData& r : ranks) {
      StageStep s = r.steps[k];
      const double shift = one_host ? r.abs_start[k] - origin : 0.0;
      s.end += shift;
      for (ActionTiming& a : s.actions) {
        a.start += shift;
        a.end += shift;
      }
      for (CommTiming& c : s.comms) {
        c.start += shift;
        c.end += shift;
      }
      step.push_back(std::move(s));
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

// --- the merged Chrome/Perfetto trace ---------------------------------------

/// One merged trace of the timed steps, laid one after another (each step
/// starts where the previous one ended): pid = rank, a compute track, a send
/// and a receive track per rank, send -> receive flow arrows.
void write_trace(const std::vector<StepMeasure>& steps, int stages, int chunks, int64_t total_mbs,
                 const std::string& path) {
  std::vector<std::unique_ptr<trace::TraceWriter>> writers;
  std::vector<int> compute, send, recv;
  for (int r = 0; r < stages; ++r) {
    writers.push_back(
        std::make_unique<trace::TraceWriter>(r, "stage " + std::to_string(r), stages));
    compute.push_back(writers.back()->add_thread("compute"));
    send.push_back(writers.back()->add_thread("send"));
    recv.push_back(writers.back()->add_thread("recv"));
  }
  const int64_t vp = int64_t{stages} * chunks;
  const uint64_t stride = static_cast<uint64_t>((total_mbs + 1) * vp * 2 + 2);
  double offset = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    const StepMeasure& step = steps[k];
    for (int r = 0; r < stages; ++r) {
      trace::TraceWriter& tw = *writers[static_cast<size_t>(r)];
      const StageStep& s = step[static_cast<size_t>(r)];
      for (const ActionTiming& a : s.actions) {
        tw.complete(compute[static_cast<size_t>(r)], action_range_name(a.action, r, chunks),
                    action_category(a.action.kind), offset + a.start,
                    std::max(0.0, a.end - a.start), {{"mb", a.action.microbatch}});
      }
      // Slices of one track must not overlap: each starts no earlier than the
      // previous one on its track ended (a receive is posted long before it
      // completes; the slice shows its completion).
      std::vector<const CommTiming*> comms;
      for (const CommTiming& c : s.comms) {
        if (!c.local) comms.push_back(&c);
      }
      std::sort(comms.begin(), comms.end(),
                [](const CommTiming* a, const CommTiming* b) { return a->end < b->end; });
      double last_send = -1e300;
      double last_recv = -1e300;
      for (const CommTiming* c : comms) {
        double& last = c->send ? last_send : last_recv;
        const double start = std::max(c->start, last);
        const double end = std::max(c->end, start);
        last = end;
        const int from = c->from_virtual % stages;
        const int to = c->to_virtual % stages;
        const std::string name = message_range_name(c->send, c->gradient, from, to, c->microbatch);
        const int tid = c->send ? send[static_cast<size_t>(r)] : recv[static_cast<size_t>(r)];
        tw.complete(tid, name, c->send ? "send" : "recv", offset + start, end - start,
                    {{"mb", c->microbatch}});
        const uint64_t seq =
            k * stride + static_cast<uint64_t>((c->microbatch * vp + c->from_virtual) * 2 +
                                               (c->gradient ? 1 : 0));
        const uint64_t id = trace::flow_id(from, seq);
        const double mid = offset + 0.5 * (start + end);
        if (c->send)
          tw.flow_start(tid, id, c->gradient ? "grad" : "act", "flow", mid);
        else
          tw.flow_end(tid, id, c->gradient ? "grad" : "act", "flow", mid);
      }
    }
    offset += step_time(step);
  }
  std::vector<const trace::TraceWriter*> ptrs;
  for (const auto& w : writers) ptrs.push_back(w.get());
  trace::write_merged(ptrs, path);
}

// --- the sweep ---------------------------------------------------------------

struct Sweep {
  const RunOptions& options;
  RunPlan plan;
  MPI_Comm comm = MPI_COMM_WORLD;
  int rank = 0;
  int size = 1;
  std::string out_dir;
  ResultEnvironment environment;
  std::unique_ptr<Transport> transport;
  DeviceSpec device;
  std::vector<UnitTime> times;
  std::map<int, ReferenceStep> references;  // --check: per M
  bool any_failed = false;
};

ResultConfig make_config(const Sweep& sw, const Combination& c) {
  ResultConfig cfg;
  cfg.schedule = c.schedule;
  cfg.partition = c.partition;
  cfg.stages = c.stages;
  cfg.microbatches = c.microbatches;
  cfg.micro_batch_size = sw.plan.model.micro_batch_size;
  cfg.inflight = c.inflight;
  cfg.chunks = c.chunks;
  cfg.model = sw.options.model;
  cfg.backend = backend_name(sw.plan.backend);
  cfg.transport = transport_name(sw.plan.transport);
  cfg.iters = sw.options.iters;
  cfg.warmup = sw.options.warmup;
  cfg.time_scale = 0;
  cfg.memory_budget = sw.plan.memory_budget;
  cfg.seed = sw.options.seed;
  cfg.sync_warmup = c.sync_warmup;
  cfg.memory_guard =
      c.schedule == "adaptive" && sw.plan.memory_budget > 0 ? sw.options.memory_guard : 0;
  cfg.batches = c.batches;
  cfg.min_time = sw.options.min_time;
  cfg.plant = sw.plan.plant_label;
  return cfg;
}

/// The timed steps: --iters of them, then (with --min-time) more until
/// their summed time reaches --min-time or --max-iters is reached. Rank 0's
/// clock decides and tells the others between steps (outside the timed
/// region), so every rank runs the same number of steps.
template <class Step>
void time_steps(const Sweep& sw, Step&& step, std::vector<RankStep>& timed) {
  using Clock = std::chrono::steady_clock;
  const double min_time = sw.options.min_time;
  double elapsed = 0;
  for (int k = 0;; ++k) {
    int more = k < sw.options.iters ? 1 : 0;
    if (min_time > 0 && more == 0) {
      more = elapsed < min_time && k < sw.options.max_iters ? 1 : 0;
      PPB_MPI_CHECK(MPI_Bcast(&more, 1, MPI_INT, 0, sw.comm));
    }
    if (more == 0) return;
    const Clock::time_point t0 = Clock::now();
    timed.push_back(step());
    elapsed += std::chrono::duration<double>(Clock::now() - t0).count();
  }
}

/// Runs one combination on every rank. The returned Result is complete on
/// rank 0 only.
Result run_combination(Sweep& sw, const Combination& c, bool& wrote_trace) {
  Result result;
  result.config = make_config(sw, c);
  result.environment = sw.environment;
  const int P = sw.plan.stages;
  const int V = c.chunks;

  // 1. The schedule (deterministic: every rank reaches the same verdict).
  ScheduleParams params;
  params.stages = P;
  params.microbatches = c.microbatches;
  params.chunks = V;
  params.inflight = c.inflight;
  params.sync_warmup = c.sync_warmup;
  params.batches = c.batches;
  Schedule schedule;
  try {
    schedule = generate_schedule(c.schedule, params);
  } catch (const UsageError& e) {
    result.status = ResultStatus::kInvalid;
    result.error = e.what();
    return result;
  }

  // 2. The partition into P x V parts.
  std::vector<UnitRange> parts;
  PartitionOptions popts;
  popts.link = sw.device.link();
  try {
    parts = make_partition(c.partition, sw.plan.units, sw.times, P * V, popts);
  } catch (const UsageError& e) {
    result.status = ResultStatus::kInvalid;
    result.error = std::string("--partition ") + c.partition + ": " + e.what();
    return result;
  }
  const StageCosts model = model_costs(sw.plan.units, sw.times, parts, P, V, sw.device.link());

  // 3. Exact memory prediction against --memory-budget: parameters and
  //    gradients (4 bytes each per parameter) plus the schedule's peak of
  //    in-flight activation bytes. `adaptive` is left to its guard.
  const bool guarded = c.schedule == "adaptive" && sw.plan.memory_budget > 0;
  if (sw.plan.memory_budget > 0 && !guarded) {
    std::vector<int64_t> predicted, activations;
    for (int s = 0; s < P; ++s) {
      std::vector<int64_t> act_bytes;
      int64_t params_bytes = 0;
      for (int ch = 0; ch < V; ++ch) {
        act_bytes.push_back(model.at(s, ch).activation_bytes);
        params_bytes += model.at(s, ch).param_bytes;
      }
      const int64_t act = predicted_activation_peak(schedule, s, act_bytes);
      activations.push_back(act);
      predicted.push_back(2 * params_bytes + act);
    }
    const auto worst = std::max_element(predicted.begin(), predicted.end());
    if (*worst > sw.plan.memory_budget) {
      result.status = ResultStatus::kOom;
      result.error = "stage " + std::to_string(worst - predicted.begin()) + " would need " +
                     cli::format_bytes(*worst) +
                     " (parameters, gradients and in-flight activations) > --memory-budget " +
                     cli::format_bytes(sw.plan.memory_budget) + " (predicted before running)";
      ResultMetrics m;
      m.bubble_ratio.theoretical = kNaN;
      m.bubble_overhead.theoretical = kNaN;
      m.peak_memory_bytes.per_stage = predicted;
      m.peak_memory_bytes.activations_per_stage = activations;
      result.metrics = m;
      return result;
    }
  }

  // 4. Backend, executor, the steps. A failure on any rank ends the job.
  std::vector<RankStep> timed;
  StageMemory memory;
  double check_error = 0;
  double check_loss = kNaN;
  bool check_ran = false;
  bool stash_check = false;
  int64_t stash_used = 0;
  double time_scale = 0;
  double foreign_cpu = kNaN;  // HostLoadMeter: NaN = unknown
  std::optional<MemoryGuardFigures> guard_figures;
  Schedule last_schedule = schedule;

  run_or_abort(
      [&] {
        BackendConfig cfg;
        cfg.spec = sw.plan.model;
        cfg.units = sw.plan.units;
        cfg.parts = parts;
        cfg.costs = model;
        cfg.stage = sw.rank;
        cfg.stages = P;
        cfg.chunks = V;
        cfg.microbatches = c.microbatches;
        cfg.weight_stashing = c.schedule == "pipedream";
        cfg.seed = sw.options.seed;
        cfg.learning_rate = kLearningRate;
        cfg.time_scale = sw.options.time_scale;
        cfg.plant_factor = sw.rank == sw.plan.plant_stage ? sw.plan.plant_factor : 1.0;
        std::unique_ptr<Backend> backend = make_backend(backend_name(sw.plan.backend), cfg);
        if (const auto* tb = dynamic_cast<const TimedBackend*>(backend.get()))
          time_scale = tb->time_scale();
        auto* cpu = dynamic_cast<CpuBackend*>(backend.get());

        Probe probe(sw.rank, P, V, cpu, sw.plan.nvtx);
        ExecutorOptions eo;
        eo.optimizer = optimizer_policy_for(c.schedule);
        eo.timeout_seconds = sw.options.timeout;
        eo.instrumentation = &probe;
        eo.debug_stall_rank = sw.options.debug_stall_rank;
        Executor exec(sw.comm, *backend, *sw.transport, eo);

        std::unique_ptr<MemoryGuard> guard;
        if (guarded) {
          MemoryGuardOptions go;
          go.budget_bytes = sw.plan.memory_budget;
          go.guard = sw.options.memory_guard;
          go.max_inflight = c.inflight;
          ScheduleParams gp = params;
          guard = std::make_unique<MemoryGuard>(sw.comm, go, [gp, name = c.schedule](int n) {
            ScheduleParams p = gp;
            p.inflight = n;
            return generate_schedule(name, p);
          });
        }
        auto step = [&]() {
          const Schedule& s = guard ? guard->plan(*backend) : schedule;
          StepRecord rec = exec.run_step(s);
          if (guard) guard->observe(rec.peak_bytes);
          last_schedule = s;
          const double origin = rec.origin;
          return RankStep{std::move(rec), origin};
        };

        // --check: the first step, compared with the single-process reference.
        if (sw.options.check && cpu != nullptr) {
          check_ran = true;
          stash_check = c.schedule == "pipedream";
          probe.capture_grads = !stash_check;
          probe.watch_versions = stash_check;
          (void)step();
          probe.capture_grads = false;
          probe.watch_versions = false;
          double worst = 0;
          if (stash_check) {
            worst = probe.stash_violations > 0 ? 1.0 : 0.0;
            stash_used = probe.stash_used;
          } else {
            auto it = sw.references.find(c.microbatches);
            if (it == sw.references.end()) {
              CpuModelOptions mo;
              mo.seed = sw.options.seed;
              it = sw.references
                       .emplace(c.microbatches, reference_step(sw.plan.model, c.microbatches, mo))
                       .first;
            }
            const ReferenceStep& ref = it->second;
            for (int ch = 0; ch < cpu->chunks(); ++ch) {
              const UnitRange range = cpu->range(ch);
              const auto& mine = probe.grads[ch];
              PPB_CHECK(static_cast<int>(mine.size()) == range.size(), "gradient views per unit");
              for (int u = 0; u < range.size(); ++u) {
                const std::vector<float>& ref_grad =
                    ref.grads[static_cast<size_t>(range.begin + u)];
                PPB_CHECK(ref_grad.size() == mine[static_cast<size_t>(u)].size(), "gradient sizes");
                worst = std::max(worst, max_relative_error(mine[static_cast<size_t>(u)], ref_grad));
              }
            }
            double loss = 0;
            if (sw.rank == P - 1) {
              for (int mb = 0; mb < c.microbatches; ++mb) loss += cpu->chunk(V - 1).loss(mb);
              loss /= c.microbatches;
              const double denom = std::max(std::fabs(ref.loss), 1e-30);
              worst = std::max(worst, std::fabs(loss - ref.loss) / denom);
            }
            PPB_MPI_CHECK(MPI_Bcast(&loss, 1, MPI_DOUBLE, P - 1, sw.comm));
            check_loss = loss;
            probe.grads.clear();
          }
          PPB_MPI_CHECK(MPI_Allreduce(&worst, &check_error, 1, MPI_DOUBLE, MPI_MAX, sw.comm));
          int64_t used_total = 0;
          PPB_MPI_CHECK(MPI_Allreduce(&stash_used, &used_total, 1, MPI_INT64_T, MPI_SUM, sw.comm));
          stash_used = used_total;
        }
        for (int w = 0; w < sw.options.warmup; ++w) (void)step();
        HostLoadMeter load(sw.comm);
        load.begin();
        probe.measure_begin();
        time_steps(sw, step, timed);
        probe.measure_end();
        foreign_cpu = load.end();

        for (const RankStep& s : timed) {
          memory.peak_total = std::max(memory.peak_total, s.record.peak_bytes);
          memory.peak_activations =
              std::max(memory.peak_activations, s.record.peak_activation_bytes);
        }
        memory.at_peak = backend->memory().at_peak();
        memory.peak_rss = process_peak_rss_bytes();
        if (guard) {
          MemoryGuardFigures g;
          g.actions = guard->acted();
          const auto& h = guard->inflight_history();
          g.min_inflight = h.empty() ? c.inflight : *std::min_element(h.begin(), h.end());
          guard_figures = g;
        }
      },
      sw.comm);

  // 5. Gather to rank 0 and compute the figures there.
  const std::vector<std::vector<double>> all =
      gather(encode(timed, memory), sw.rank, sw.size, sw.comm);
  if (sw.rank != 0) return result;

  std::vector<RankData> ranks;
  for (const std::vector<double>& buf : all)
    ranks.push_back(decode(buf.data(), buf.data() + buf.size()));
  const std::vector<StepMeasure> steps = align_steps(ranks, sw.environment.hosts.size() == 1);
  const int64_t samples = int64_t{sw.plan.model.micro_batch_size} * c.microbatches * c.batches;
  StepFigures fig = step_figures(steps, samples);
  // Theory: the simulator fed the mean action times (per stage, chunk and
  // kind) and the transfer time measured in the same (median) step whose
  // bubbles are reported, so that the two differ only by what the simulator
  // leaves out (executor overhead, waits it does not model).
  const std::vector<StepMeasure> median_step{steps[fig.median_step]};
  const LinkModel link = measured_link(median_step, P);
  const StageCosts measured = measured_costs(last_schedule, median_step, model, link);
  TheoryOutcome theory = theory_figures(last_schedule, measured);
  theory.figures.action_seconds = mean_action_seconds(P, median_step);

  ResultMetrics m;
  m.samples_per_second = fig.samples_per_second;
  m.step_time_seconds = fig.step_time_seconds;
  m.bubble_ratio = fig.bubble_ratio;
  m.bubble_ratio.theoretical = theory.bubble_ratio;
  m.bubble_overhead = fig.bubble_overhead;
  m.bubble_overhead.theoretical = theory.bubble_overhead;
  std::vector<StageMemory> mems;
  for (const RankData& r : ranks) mems.push_back(r.memory);
  m.peak_memory_bytes = peak_memory(mems);
  m.theory = theory.figures;
  if (check_ran) {
    CheckFigures ck;
    ck.passed = stash_check ? (check_error == 0 && (P == 1 || stash_used > 0))
                            : check_error <= kCheckTolerance;
    ck.max_rel_error = check_error;
    ck.loss = check_loss;
    ck.method = stash_check ? "weight-stash" : "reference";
    m.check = ck;
    if (!ck.passed) sw.any_failed = true;
  }
  m.memory_guard = guard_figures;
  m.bubble_ratio.samples = bubble_ratio_per_step(steps);
  m.busy_seconds_per_stage = busy_seconds_per_stage(steps);
  if (std::isfinite(foreign_cpu)) m.foreign_cpu = foreign_cpu;
  m.spread = spread_figures(fig.step_time_seconds.samples, samples, m.bubble_ratio.samples);
  result.metrics = m;
  result.timeline = fig.timeline;
  result.config.time_scale = time_scale;

  const int64_t measured_peak =
      *std::max_element(m.peak_memory_bytes.per_stage.begin(), m.peak_memory_bytes.per_stage.end());
  if (sw.plan.memory_budget > 0 && measured_peak > sw.plan.memory_budget) {
    const auto worst = std::max_element(m.peak_memory_bytes.per_stage.begin(),
                                        m.peak_memory_bytes.per_stage.end());
    result.status = ResultStatus::kOom;
    result.error = "stage " + std::to_string(worst - m.peak_memory_bytes.per_stage.begin()) +
                   " measured a peak of " + cli::format_bytes(measured_peak) +
                   " > --memory-budget " + cli::format_bytes(sw.plan.memory_budget);
  }
  if (sw.options.trace) {
    write_trace(steps, P, V, int64_t{c.microbatches} * c.batches,
                sw.out_dir + "/" + result_file_name(c).substr(0, result_file_name(c).size() - 5) +
                    ".trace.json");
    wrote_trace = true;
  }
  return result;
}

}  // namespace

void run_command(const RunOptions& options) {
  MpiSession mpi;
  Sweep sw{options, {}, mpi.comm(), mpi.rank(), mpi.size(), {}, {}, {}, {}, {}, {}, false};

  // Every rank validates the same flags the same way: no collective before
  // the verdict, so a bad flag can never leave a rank waiting.
  try {
    sw.plan = validate_run_options(options, sw.size);
    if (options.check && sw.plan.backend != BackendKind::kCpu) {
      throw UsageError(std::string("--check: compares real gradients, which only --backend cpu "
                                   "computes (got --backend ") +
                       backend_name(sw.plan.backend) + ")");
    }
    sw.device = device_preset(options.device);
  } catch (const UsageError&) {
    if (sw.rank == 0) throw;
    throw cli::ExitCode{kUsageExitCode};
  }
  if (sw.plan.nvtx && !nvtx::compiled_in()) {
    log::warn_once("nvtx",
                   "--profile nvtx: this build has no NVTX (no CUDA toolkit); ranges are off");
  }
  if (sw.plan.cupti) {
    log::warn_once(
        "cupti",
        "--profile cupti: this build has no CUPTI (no CUDA); device activity is not collected");
  }
  sw.times = unit_times(sw.plan.units, sw.device);

  // The output folder, made by rank 0; every rank learns whether it worked.
  sw.out_dir = options.out.empty() ? default_out_dir(unix_now()) : options.out;
  std::string why;
  if (sw.rank == 0) {
    std::error_code ec;
    std::filesystem::create_directories(sw.out_dir, ec);
    if (ec) why = "--out " + sw.out_dir + ": cannot create the folder (" + ec.message() + ")";
  }
  agree(why.empty(), why, sw.rank, sw.comm);

  sw.environment = collect_environment(sw.comm);
  // Ranks of the timed backend sleep through their actions, so more of them
  // than cores do not take turns computing; only a backend that computes on
  // the host CPU is oversubscribed by them.
  sw.environment.oversubscribed =
      sw.environment.oversubscribed && sw.plan.backend == BackendKind::kCpu;
  sw.transport = make_transport(transport_name(sw.plan.transport), sw.comm);

  SweepParams sp;
  sp.stages = sw.plan.stages;
  sp.chunks = options.chunks;
  sp.inflight = sw.plan.inflight;
  sp.sync_warmup = options.sync_warmup;
  sp.batches = options.batches;
  const std::vector<Combination> combos =
      enumerate_sweep(sw.plan.schedules, sw.plan.partitions, sw.plan.microbatches, sp);

  if (sw.rank == 0) {
    log::info(
        "run: %zu combinations (%zu schedules x %zu partitions x %zu M) on %d ranks, %s backend, "
        "model %s -> %s",
        combos.size(), sw.plan.schedules.size(), sw.plan.partitions.size(),
        sw.plan.microbatches.size(), sw.size, backend_name(sw.plan.backend), options.model.c_str(),
        sw.out_dir.c_str());
  }

  std::vector<ProgressRow> rows;
  for (const Combination& c : combos) {
    const std::string path = sw.out_dir + "/" + result_file_name(c);
    ProgressRow row;
    row.index = c.index;
    row.total = static_cast<int>(combos.size());
    row.label = combination_label(c);
    row.closed_form = closed_form_bubble_ratio(c.schedule, c.stages, c.microbatches, c.inflight);

    // --resume: rank 0 reads the finished file; every rank learns to skip.
    int skip = 0;
    if (options.resume && sw.rank == 0 && std::filesystem::exists(path)) {
      try {
        row.result = read_result_file(path);
        skip = row.result.status == ResultStatus::kError ? 0 : 1;
      } catch (const UsageError& e) {
        log::warn("--resume: %s; running the combination again", e.what());
      }
    }
    PPB_MPI_CHECK(MPI_Bcast(&skip, 1, MPI_INT, 0, sw.comm));
    if (skip != 0) {
      row.resumed = true;
    } else {
      bool wrote_trace = false;
      row.result = run_combination(sw, c, wrote_trace);
      if (sw.rank == 0) {
        row.result.environment.date = iso8601_utc(unix_now());
        write_result_file(path, row.result);
      }
    }
    if (sw.rank == 0) {
      if (row.result.status == ResultStatus::kError) sw.any_failed = true;
      std::printf("%s\n", progress_line(row).c_str());
      std::fflush(stdout);
      rows.push_back(std::move(row));
    }
  }
  if (sw.rank == 0) {
    std::printf("\n%s\nresults: %s (%zu files)\n", summary_table(rows).c_str(), sw.out_dir.c_str(),
                rows.size());
    std::fflush(stdout);
  }
  int failed = sw.any_failed ? 1 : 0;
  PPB_MPI_CHECK(MPI_Bcast(&failed, 1, MPI_INT, 0, sw.comm));
  PPB_MPI_CHECK(MPI_Barrier(sw.comm));
  if (failed != 0) throw cli::ExitCode{1};
}

}  // namespace ppb::run
