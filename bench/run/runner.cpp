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
#include "ppb/exec/collector.hpp"
#include "ppb/exec/cpu_reference.hpp"
#include "ppb/exec/executor.hpp"
#include "ppb/exec/memory_guard.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/exec/transport.hpp"
#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/partition.hpp"
#include "ppb/pipeline/result.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/clock.hpp"
#include "ppb/profiling/log.hpp"
#include "ppb/profiling/memory.hpp"
#include "run/check.hpp"
#include "run/environment.hpp"
#include "run/host_load.hpp"
#include "run/metrics.hpp"
#include "run/noise.hpp"
#include "run/progress.hpp"
#include "run/rank_record.hpp"
#include "run/sweep.hpp"
#include "run/trace_output.hpp"

namespace ppb::run {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
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

/// The timed steps on one time axis per step: on one host every rank's
/// steady clock is the same clock, so each rank's times are shifted by its
/// step start minus the earliest start of that step (the barrier's exit);
/// across hosts the ranks' own step starts are the origin.
std::vector<StepMeasure> align_steps(const std::vector<RankRecord>& ranks, bool one_host) {
  std::vector<StepMeasure> steps;
  const size_t n = ranks.front().steps.size();
  for (size_t k = 0; k < n; ++k) {
    double origin = std::numeric_limits<double>::infinity();
    for (const RankRecord& r : ranks) origin = std::min(origin, r.steps[k].origin);
    StepMeasure step;
    for (const RankRecord& r : ranks) {
      StageStep s = r.steps[k].step;
      const double shift = one_host ? r.steps[k].origin - origin : 0.0;
      s.end += shift;
      for (ActionTiming& a : s.actions) {
        a.start += shift;
        a.end += shift;
      }
      for (CommTiming& c : s.comms) {
        c.start += shift;
        c.end += shift;
      }
      for (device::DeviceOp& d : s.device) {
        d.start += shift;
        d.end += shift;
      }
      step.push_back(std::move(s));
    }
    steps.push_back(std::move(step));
  }
  return steps;
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
  cfg.backend = sw.plan.backend;
  cfg.transport = sw.plan.transport;
  cfg.iters = sw.options.iters;
  cfg.warmup = sw.options.warmup;
  cfg.time_scale = 0;
  cfg.memory_budget = sw.plan.memory_budget;
  cfg.seed = sw.options.seed;
  cfg.sync_warmup = c.sync_warmup;
  cfg.memory_guard = schedule_info(c.schedule).memory_guarded && sw.plan.memory_budget > 0
                         ? sw.options.memory_guard
                         : 0;
  cfg.batches = c.batches;
  cfg.min_time = sw.options.min_time;
  cfg.plant = sw.plan.plant_label;
  return cfg;
}

/// The schedule, partition and modelled costs of one combination.
struct Prepared {
  ScheduleParams params;
  Schedule schedule;
  std::vector<UnitRange> parts;  ///< P*V, by virtual stage
  StageCosts model;
};

/// Step 1 of a combination: the schedule and the partition into P x V parts.
/// Deterministic, so every rank reaches the same verdict; an impossible
/// combination is recorded as invalid in `result` (nullopt).
std::optional<Prepared> prepare(const Sweep& sw, const Combination& c, Result& result) {
  Prepared p;
  p.params.stages = sw.plan.stages;
  p.params.microbatches = c.microbatches;
  p.params.chunks = c.chunks;
  p.params.inflight = c.inflight;
  p.params.sync_warmup = c.sync_warmup;
  p.params.batches = c.batches;
  try {
    p.schedule = generate_schedule(c.schedule, p.params);
  } catch (const UsageError& e) {
    result.status = ResultStatus::kInvalid;
    result.error = e.what();
    return std::nullopt;
  }
  PartitionOptions popts;
  popts.link = sw.device.link();
  try {
    p.parts =
        make_partition(c.partition, sw.plan.units, sw.times, sw.plan.stages * c.chunks, popts);
  } catch (const UsageError& e) {
    result.status = ResultStatus::kInvalid;
    result.error = std::string("--partition ") + c.partition + ": " + e.what();
    return std::nullopt;
  }
  p.model =
      model_costs(sw.plan.units, sw.times, p.parts, sw.plan.stages, c.chunks, sw.device.link());
  return p;
}

/// Step 2: the exact memory prediction against --memory-budget (parameters
/// and gradients, 4 bytes each per parameter, plus the schedule's peak of
/// in-flight activation bytes). Returns true and fills an oom `result` when
/// a stage would exceed the budget. A memory-guarded schedule is left to
/// its guard.
bool predicted_oom(const Sweep& sw, const Combination& c, const Prepared& p, Result& result) {
  if (sw.plan.memory_budget <= 0 || schedule_info(c.schedule).memory_guarded) return false;
  std::vector<int64_t> predicted;
  std::vector<int64_t> activations;
  for (int s = 0; s < sw.plan.stages; ++s) {
    std::vector<int64_t> act_bytes;
    int64_t params_bytes = 0;
    for (int ch = 0; ch < c.chunks; ++ch) {
      act_bytes.push_back(p.model.at(s, ch).activation_bytes);
      params_bytes += p.model.at(s, ch).param_bytes;
    }
    const int64_t act = predicted_activation_peak(p.schedule, s, act_bytes);
    activations.push_back(act);
    predicted.push_back(2 * params_bytes + act);
  }
  const auto worst = std::max_element(predicted.begin(), predicted.end());
  if (*worst <= sw.plan.memory_budget) return false;
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
  return true;
}

/// What step 3 leaves on this rank besides its record.
struct Execution {
  RankRecord record;
  std::optional<CheckFigures> check;
  std::optional<MemoryGuardFigures> guard;
  Schedule last_schedule;  ///< the schedule of the last step (the guard may change it)
  double time_scale = 0;
  double foreign_cpu = kNaN;    ///< HostLoadMeter over the timed steps: NaN = unknown
  std::string device_profiler;  ///< CollectorSet::device_profiler(): "" = none attached
};

const ReferenceStep& reference_for(Sweep& sw, int microbatches) {
  auto it = sw.references.find(microbatches);
  if (it == sw.references.end()) {
    CpuModelOptions mo;
    mo.seed = sw.options.seed;
    it = sw.references.emplace(microbatches, reference_step(sw.plan.model, microbatches, mo)).first;
  }
  return it->second;
}

BackendConfig backend_config(const Sweep& sw, const Combination& c, const Prepared& p) {
  BackendConfig cfg;
  cfg.spec = sw.plan.model;
  cfg.units = sw.plan.units;
  cfg.parts = p.parts;
  cfg.costs = p.model;
  cfg.stage = sw.rank;
  cfg.stages = sw.plan.stages;
  cfg.chunks = c.chunks;
  cfg.microbatches = c.microbatches;
  cfg.weight_stashing = schedule_info(c.schedule).weight_stashing;
  cfg.seed = sw.options.seed;
  cfg.learning_rate = kLearningRate;
  cfg.time_scale = sw.options.time_scale;
  cfg.plant_factor = sw.rank == sw.plan.plant_stage ? sw.plan.plant_factor : 1.0;
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

/// Step 3, on every rank: backend, collectors, executor; the --check step,
/// W warm-up and K timed steps. A failure on any rank ends the job.
Execution execute(Sweep& sw, const Combination& c, const Prepared& p) {
  Execution ex;
  ex.last_schedule = p.schedule;
  const ScheduleInfo& info = schedule_info(c.schedule);
  run_or_abort(
      [&] {
        // Collectors before the backend: one that counts the process's
        // threads (perf) must exist before the backend starts its own.
        CheckProbe probe;
        CollectorSet collectors(
            sw.comm, sw.plan.collectors,
            CollectorContext{.stage = sw.rank, .stages = sw.plan.stages, .chunks = c.chunks},
            &probe);
        std::unique_ptr<Backend> backend = make_backend(sw.plan.backend, backend_config(sw, c, p));
        ex.time_scale = backend->time_scale();
        ExecutorOptions eo;
        eo.optimizer = optimizer_policy_for(info);
        eo.timeout_seconds = sw.options.timeout;
        eo.instrumentation = &collectors;
        eo.debug_stall_rank = sw.options.debug_stall_rank;
        Executor exec(sw.comm, *backend, *sw.transport, eo);

        std::unique_ptr<MemoryGuard> guard;
        if (info.memory_guarded && sw.plan.memory_budget > 0) {
          MemoryGuardOptions go;
          go.budget_bytes = sw.plan.memory_budget;
          go.guard = sw.options.memory_guard;
          go.max_inflight = c.inflight;
          guard =
              std::make_unique<MemoryGuard>(sw.comm, go, [gp = p.params, name = c.schedule](int n) {
                ScheduleParams q = gp;
                q.inflight = n;
                return generate_schedule(name, q);
              });
        }
        auto step = [&]() {
          const Schedule& s = guard ? guard->plan(*backend) : p.schedule;
          StepRecord rec = exec.run_step(s);
          if (guard) guard->observe(rec.peak_bytes);
          ex.last_schedule = s;
          CollectorStepFigures figures = collectors.finish_step(rec);
          RankStep r = rank_step(rec, std::move(figures));
          if (!sw.options.trace) r.step.device.clear();  // only traces draw them
          return r;
        };
        ex.device_profiler = collectors.device_profiler();

        // --check: the first step, compared with the single-process reference.
        if (sw.options.check) {
          probe.arm(*backend, info.weight_stashing);
          (void)step();
          probe.disarm();
          CheckContext ctx{sw.rank, sw.plan.stages, c.chunks, c.microbatches, p.parts};
          const ReferenceStep* ref =
              info.weight_stashing ? nullptr : &reference_for(sw, c.microbatches);
          ex.check = check_figures(probe, *backend, info.weight_stashing, ctx, ref, sw.comm);
        }
        for (int w = 0; w < sw.options.warmup; ++w) (void)step();
        HostLoadMeter load(sw.comm);
        load.begin();
        collectors.measure_begin();
        time_steps(sw, step, ex.record.steps);
        collectors.measure_end();
        ex.foreign_cpu = load.end();

        StageMemory& memory = ex.record.memory;
        for (const RankStep& s : ex.record.steps) {
          memory.peak_total = std::max(memory.peak_total, s.peak_bytes);
          memory.peak_activations = std::max(memory.peak_activations, s.peak_activation_bytes);
        }
        memory.at_peak = backend->memory().at_peak();
        memory.peak_rss = process_peak_rss_bytes();
        if (guard) {
          MemoryGuardFigures g;
          g.actions = guard->acted();
          const auto& h = guard->inflight_history();
          g.min_inflight = h.empty() ? c.inflight : *std::min_element(h.begin(), h.end());
          ex.guard = g;
        }
      },
      sw.comm);
  return ex;
}

/// The collectors' figures of the median step, per stage: the result's
/// metrics.collectors.
std::map<std::string, CollectorResult> collector_results(const std::vector<RankRecord>& ranks,
                                                         size_t median_step) {
  std::map<std::string, CollectorResult> out;
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (const auto& [name, figures] : ranks[r].steps[median_step].collectors) {
      CollectorResult& cr = out[name];
      for (const auto& [figure, value] : figures.step) {
        auto& v = cr.step[figure];
        v.resize(ranks.size(), kNaN);
        v[r] = value;
      }
      for (const auto& [figure, values] : figures.action) {
        auto& v = cr.action[figure];
        v.resize(ranks.size());
        v[r] = values;
      }
    }
  }
  return out;
}

/// Step 4, on rank 0: the figures from every rank's records.
void fill_metrics(Sweep& sw, const Combination& c, const Prepared& p, const Execution& ex,
                  const std::vector<RankRecord>& ranks, Result& result,
                  std::vector<StepMeasure>& steps) {
  const int P = sw.plan.stages;
  steps = align_steps(ranks, sw.environment.hosts.size() == 1);
  const int64_t samples = int64_t{sw.plan.model.micro_batch_size} * c.microbatches * c.batches;
  StepFigures fig = step_figures(steps, samples);
  // Theory: the simulator fed the mean action times (per stage, chunk and
  // kind) and the transfer time measured in the same (median) step whose
  // bubbles are reported, so that the two differ only by what the simulator
  // leaves out (executor overhead, waits it does not model).
  const std::vector<StepMeasure> median_step{steps[fig.median_step]};
  const LinkModel link = measured_link(median_step, P);
  const StageCosts measured = measured_costs(ex.last_schedule, median_step, p.model, link);
  TheoryOutcome theory = theory_figures(ex.last_schedule, measured);
  theory.figures.action_seconds = mean_action_seconds(P, median_step);

  ResultMetrics m;
  m.samples_per_second = fig.samples_per_second;
  m.step_time_seconds = fig.step_time_seconds;
  m.bubble_ratio = fig.bubble_ratio;
  m.bubble_ratio.theoretical = theory.bubble_ratio;
  m.bubble_overhead = fig.bubble_overhead;
  m.bubble_overhead.theoretical = theory.bubble_overhead;
  std::vector<StageMemory> mems;
  for (const RankRecord& r : ranks) mems.push_back(r.memory);
  m.peak_memory_bytes = peak_memory(mems);
  m.peak_memory_bytes.device_profiler = ex.device_profiler;
  m.device = device_figures(steps[fig.median_step], ex.device_profiler);
  m.theory = theory.figures;
  m.check = ex.check;
  if (ex.check && !ex.check->passed) sw.any_failed = true;
  m.memory_guard = ex.guard;
  m.collectors = collector_results(ranks, fig.median_step);
  m.bubble_ratio.samples = bubble_ratio_per_step(steps);
  m.busy_seconds_per_stage = busy_seconds_per_stage(steps);
  if (std::isfinite(ex.foreign_cpu)) m.foreign_cpu = ex.foreign_cpu;
  m.spread = spread_figures(fig.step_time_seconds.samples, samples, m.bubble_ratio.samples);
  result.metrics = m;
  result.timeline = fig.timeline;
  result.config.time_scale = ex.time_scale;

  const auto& per_stage = m.peak_memory_bytes.per_stage;
  const auto worst = std::max_element(per_stage.begin(), per_stage.end());
  if (sw.plan.memory_budget > 0 && *worst > sw.plan.memory_budget) {
    result.status = ResultStatus::kOom;
    result.error = "stage " + std::to_string(worst - per_stage.begin()) + " measured a peak of " +
                   cli::format_bytes(*worst) + " > --memory-budget " +
                   cli::format_bytes(sw.plan.memory_budget);
  }
}

/// Runs one combination on every rank. The returned Result is complete on
/// rank 0 only.
Result run_combination(Sweep& sw, const Combination& c) {
  Result result;
  result.config = make_config(sw, c);
  result.environment = sw.environment;
  const std::optional<Prepared> p = prepare(sw, c, result);
  if (!p || predicted_oom(sw, c, *p, result)) return result;

  const Execution ex = execute(sw, c, *p);
  const std::vector<RankRecord> ranks = gather_records(ex.record, sw.comm);
  if (sw.rank != 0) return result;

  std::vector<StepMeasure> steps;
  fill_metrics(sw, c, *p, ex, ranks, result, steps);
  if (sw.options.trace) {
    const std::string name = result_file_name(c);
    write_measured_traces(steps, sw.plan.stages, c.chunks, int64_t{c.microbatches} * c.batches,
                          sw.out_dir, name.substr(0, name.size() - 5));
  }
  return result;
}

/// One combination, or with --resume its finished file: rank 0 reads it and
/// every rank learns to skip. Rank 0 writes the result file; the row is
/// complete on rank 0 only.
ProgressRow run_or_resume(Sweep& sw, const Combination& c, int total) {
  const std::string path = sw.out_dir + "/" + result_file_name(c);
  ProgressRow row;
  row.index = c.index;
  row.total = total;
  row.label = combination_label(c);
  row.closed_form = closed_form_bubble_ratio(c.schedule, c.stages, c.microbatches, c.inflight);
  int skip = 0;
  if (sw.options.resume && sw.rank == 0 && std::filesystem::exists(path)) {
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
    row.result = run_combination(sw, c);
    if (sw.rank == 0) {
      row.result.environment.date = iso8601_utc(unix_now());
      write_result_file(path, row.result);
    }
  }
  if (sw.rank == 0 && row.result.status == ResultStatus::kError) sw.any_failed = true;
  return row;
}

}  // namespace

void run_command(const RunOptions& options) {
  MpiSession mpi;
  Sweep sw{options, {}, mpi.comm(), mpi.rank(), mpi.size(), {}, {}, {}, {}, {}, {}, false};

  // Every rank validates the same flags the same way: no collective before
  // the verdict, so a bad flag can never leave a rank waiting.
  try {
    sw.plan = validate_run_options(options, sw.size);
    sw.device = device_preset(options.device);
  } catch (const UsageError&) {
    if (sw.rank == 0) throw;
    throw cli::ExitCode{kUsageExitCode};
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
  // Ranks of a backend whose action times are modelled sleep through their
  // actions, so more of them than cores do not take turns computing; only a
  // backend that computes on the host CPU is oversubscribed by them.
  sw.environment.oversubscribed =
      sw.environment.oversubscribed && !backend_info(sw.plan.backend).modelled_time;
  sw.transport = make_transport(sw.plan.transport, sw.comm);

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
        sw.plan.microbatches.size(), sw.size, sw.plan.backend.c_str(), options.model.c_str(),
        sw.out_dir.c_str());
  }

  std::vector<ProgressRow> rows;
  for (const Combination& c : combos) {
    ProgressRow row = run_or_resume(sw, c, static_cast<int>(combos.size()));
    if (sw.rank == 0) {
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
