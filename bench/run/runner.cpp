#include "run/runner.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.hpp"
#include "ppb/exec/backend.hpp"
#include "ppb/exec/collector.hpp"
#include "ppb/exec/cpu_reference.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/exec/executor.hpp"
#include "ppb/exec/host_load.hpp"
#include "ppb/exec/job_watchdog.hpp"
#include "ppb/exec/memory_guard.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/exec/transport.hpp"
#include "ppb/pipeline/attention.hpp"
#include "ppb/pipeline/data_parallel.hpp"
#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/memory_model.hpp"
#include "ppb/pipeline/partition.hpp"
#include "ppb/pipeline/result.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/clock.hpp"
#include "ppb/profiling/hash.hpp"
#include "ppb/profiling/log.hpp"
#include "ppb/profiling/memory.hpp"
#include "ppb/profiling/output_file.hpp"
#include "ppb/reports/load.hpp"
#include "run/check.hpp"
#include "run/environment.hpp"
#include "run/gpu_state.hpp"
#include "run/metrics.hpp"
#include "run/noise.hpp"
#include "run/out_dir.hpp"
#include "run/progress.hpp"
#include "run/rank_record.hpp"
#include "run/rerun.hpp"
#include "run/sweep.hpp"
#include "run/trace_output.hpp"

namespace ppb::run {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr float kLearningRate = 1e-3f;

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

/// Thrown on every rank at once when a device backend ran out of memory on
/// one of them: the combination ends as status `oom` and the sweep goes on.
struct DeviceOom {
  std::string message;
};

/// Collective: throws DeviceOom on every rank when any rank's `mine` (an
/// out-of-memory message) is not empty.
void agree_on_oom(const std::string& mine, int rank, MPI_Comm comm) {
  const RankFailure f = first_failure(mine, rank, comm);
  if (f.rank >= 0) throw DeviceOom{"rank " + std::to_string(f.rank) + ": " + f.what};
}

/// A rank's failure as rank 0 says it: its text, naming the rank where it
/// is not rank 0's own.
std::string with_rank(const RankFailure& f) {
  return f.what + (f.rank > 0 ? " (rank " + std::to_string(f.rank) + ")" : "");
}

/// Collective: where any rank's `mine` (a usage error) is not empty, every
/// rank ends at once: rank 0 throws UsageError(prefix + the lowest such
/// rank's text, with_rank), the others cli::ExitCode{2}, so that a flag
/// bad on one rank only never leaves the others in the next collective.
void agree_on_usage(const std::string& mine, const std::string& prefix, int rank, MPI_Comm comm) {
  const RankFailure f = first_failure(mine, rank, comm);
  if (f.rank < 0) return;
  if (rank != 0) throw cli::ExitCode{kUsageExitCode};
  throw UsageError(prefix + with_rank(f));
}

// --- the sweep ---------------------------------------------------------------

struct RunContext;

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
  std::map<int, std::vector<ReferenceStep>> references;  // --check: per M
  bool any_failed = false;
  JobWatchdog* watch = nullptr;  ///< every phase outside the executor's steps (--timeout)
  int combinations = 0;          ///< in the sweep (the last one carries --debug-fault)
  NodeLocal node = {};           ///< this rank on its node (picks the GPU of a device backend)
  // Data parallelism (data_parallel.hpp): W = P x D ranks.
  RankGrid grid;                      ///< (stage, replica) of every rank
  int stage = 0;                      ///< this rank's stage
  int replica = 0;                    ///< this rank's replica
  MPI_Comm pipe = MPI_COMM_NULL;      ///< this replica's P ranks (rank = stage); `comm` when D = 1
  MPI_Comm replicas = MPI_COMM_NULL;  ///< this stage's D ranks (rank = replica); D > 1 only
  std::unique_ptr<Transport> allreduce;  ///< over `replicas`: the gradient all-reduce (D > 1)
  /// A device backend's: this rank's GPU sampled during the timed steps
  /// (null without NVML), and its name in metrics.gpu_state.
  std::unique_ptr<nvml::Sampler> gpu_sampler;
  std::string gpu;

  Sweep(const RunOptions& o, MPI_Comm c, int r, int s, JobWatchdog* w)
      : options(o), comm(c), rank(r), size(s), watch(w) {}
  /// The narrow view a combination's phases get (valid while the sweep lives).
  RunContext context();
  Sweep(const Sweep&) = delete;
  Sweep& operator=(const Sweep&) = delete;
  ~Sweep() {
    allreduce.reset();
    transport.reset();
    if (pipe != MPI_COMM_NULL && pipe != comm) MPI_Comm_free(&pipe);
    if (replicas != MPI_COMM_NULL) MPI_Comm_free(&replicas);
  }
};

/// --debug-fault (tests only): the planted failure, on its rank, in the
/// last combination, when `phase` begins.
void plant_fault(const Sweep& sw, const Combination& c, DebugFault::Phase phase) {
  const DebugFault& f = sw.plan.fault;
  if (f.rank != sw.rank || f.phase != phase || c.index != sw.combinations - 1) return;
  switch (f.what) {
    case DebugFault::What::kKill:
      std::raise(SIGKILL);
      break;
    case DebugFault::What::kStop:
      std::raise(SIGSTOP);
      break;
    case DebugFault::What::kThrow:
      throw std::runtime_error("planted failure (--debug-fault)");
  }
}

ResultConfig make_config(const Sweep& sw, const Combination& c) {
  ResultConfig cfg;
  cfg.schedule = c.schedule;
  cfg.partition = c.partition;
  copy_schedule_params(cfg, c);
  cfg.micro_batch_size = sw.plan.model.micro_batch_size;
  cfg.model = sw.options.model;
  cfg.vocab_padding = VocabPadding{.divisor = sw.plan.model.vocab_divisor,
                                   .vocab = sw.plan.model.vocab,
                                   .padded = sw.plan.model.padded_vocab()};
  cfg.backend = sw.plan.backend;
  cfg.transport = sw.plan.transport;
  cfg.iters = sw.options.iters;
  cfg.warmup = sw.options.warmup;
  cfg.time_scale = 0;
  cfg.memory_budget = sw.plan.memory_budget;
  cfg.seed = sw.options.seed;
  cfg.memory_guard = schedule_info(c.schedule).memory_guarded && sw.plan.memory_budget > 0
                         ? sw.options.memory_guard
                         : 0;
  cfg.min_time = sw.options.min_time;
  cfg.plant = sw.plan.plant_label;
  cfg.device = sw.options.device;
  cfg.max_iters = sw.options.max_iters;
  cfg.profile = sw.options.profile;
  cfg.check = sw.options.check;
  cfg.dtype = sw.options.dtype;
  cfg.attention = attention_name(sw.plan.attention.attention);
  cfg.attention_reason = sw.plan.attention.reason;
  cfg.data_parallel = sw.plan.data_parallel;
  cfg.rank_order = rank_order_name(sw.plan.rank_order);
  if (backend_info(sw.plan.backend).traits.device) {
    cfg.cuda_graphs = sw.plan.cuda_graphs ? "on" : "off";
  }
  return cfg;
}

/// What a result file must match to stand for a combination under
/// --resume: its configuration (reports::config_key) and the settings it
/// was measured with. The time scale counts only where the run gives one
/// (--time-scale); otherwise the timed backend chose it.
std::string resume_key(ResultConfig c, double given_time_scale) {
  if (given_time_scale <= 0) c.time_scale = 0;
  std::ostringstream s;
  s << reports::config_key(c) << " iters=" << c.iters << " warmup=" << c.warmup
    << " min_time=" << c.min_time << " max_iters=" << c.max_iters << " seed=" << c.seed
    << " profile=" << c.profile << " check=" << c.check << " plant=" << c.plant
    << " device=" << c.device << " rank_order=" << c.rank_order << " cuda_graphs=" << c.cuda_graphs;
  return s.str();
}

/// The first setting in which two resume keys differ ("M=8 in the file,
/// M=4 here"), or "" when they agree.
std::string first_difference(const std::string& file, const std::string& here) {
  std::istringstream a(file);
  std::istringstream b(here);
  std::string x;
  std::string y;
  while (a >> x, b >> y, a || b) {
    if (x != y) return (a ? x : "(none)") + " in the file, " + (b ? y : "(none)") + " here";
    x.clear();
    y.clear();
  }
  return "";
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
  copy_schedule_params(p.params, c);
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
  if (schedule_info(c.schedule).uses_times) set_pass_times(p.model, p.params);
  try {
    p.schedule = generate_schedule(c.schedule, p.params);
  } catch (const UsageError& e) {
    result.status = ResultStatus::kInvalid;
    result.error = e.what();
    return std::nullopt;
  }
  return p;
}

/// Step 2: the memory model's prediction (memory_model.hpp: parameters,
/// gradients, the schedule's peak of in-flight activations, weight stash,
/// workspace, the communication buffers' bound) against --memory-budget. Returns true and fills an
/// oom `result` when a stage would exceed the budget. A memory-guarded
/// schedule is left to its guard.
bool predicted_oom(const Sweep& sw, const Combination& c, const Prepared& p, Result& result) {
  if (sw.plan.memory_budget <= 0 || schedule_info(c.schedule).memory_guarded) return false;
  MemoryModelOptions mo;
  mo.element_bytes = sw.plan.model.bytes_per_element;
  const std::vector<PredictedMemory> stages = predict_memory(p.schedule, p.model, mo);
  const int worst = worst_stage(stages);
  const int64_t need = stages[static_cast<size_t>(worst)].peak_bytes;
  if (need <= sw.plan.memory_budget) return false;
  result.status = ResultStatus::kOom;
  result.error = "stage " + std::to_string(worst) + " would need " + cli::format_bytes(need) +
                 " (parameters, gradients, in-flight activations, stash, workspace and "
                 "communication buffers) > --memory-budget " +
                 cli::format_bytes(sw.plan.memory_budget) + " (predicted before running)";
  ResultMetrics m;
  m.bubble_ratio.theoretical = kNaN;
  m.bubble_overhead.theoretical = kNaN;
  for (const PredictedMemory& st : stages) {
    m.peak_memory_bytes.per_stage.push_back(st.peak_bytes);
    m.peak_memory_bytes.activations_per_stage.push_back(st.activations);
  }
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
  double foreign_cpu = kNaN;               ///< HostLoadMeter over the timed steps: NaN = unknown
  std::string oom;                         ///< a device ran out of memory (every rank): status oom
  std::string message_path;                ///< "direct" or "staged" (ResultConfig::message_path)
  std::string device_profiler;             ///< CollectorSet::device_profiler(): "" = none attached
  std::vector<GpuState> gpu_state;         ///< rank 0: the GPUs over the timed steps (NVML)
  std::optional<CudaGraphFigures> graphs;  ///< rank 0, device backends: summed over the ranks
  std::optional<GemmEpilogueFigures> epilogues;  ///< the same
};

/// What a combination's phases read of the sweep: this rank's place in the
/// job, its communicators and transports, the validated flags, the watchdog
/// and --check's cache of references. Built by Sweep::context().
struct RunContext {
  const RunOptions& options;
  const RunPlan& plan;
  JobWatchdog& watch;
  MPI_Comm comm;      ///< every rank of the job
  MPI_Comm pipe;      ///< this replica's P ranks (rank = stage)
  MPI_Comm replicas;  ///< this stage's D ranks (D > 1 only; else MPI_COMM_NULL)
  Transport& transport;
  Transport* allreduce;  ///< the gradient all-reduce over `replicas` (D > 1); else null
  int rank;
  int stage;
  int replica;
  NodeLocal node;
  std::map<int, std::vector<ReferenceStep>>& references;  ///< --check: per M
  bool device;                 ///< a device backend: the GPU state is gathered
  nvml::Sampler* gpu_sampler;  ///< this rank's GPU (null: not sampled here)
  const std::string& gpu;      ///< its name in metrics.gpu_state
  int ranks_per_gpu;           ///< environment.ranks_per_gpu (0: not recorded)
};

RunContext Sweep::context() {
  return RunContext{.options = options,
                    .plan = plan,
                    .watch = *watch,
                    .comm = comm,
                    .pipe = pipe,
                    .replicas = replicas,
                    .transport = *transport,
                    .allreduce = allreduce.get(),
                    .rank = rank,
                    .stage = stage,
                    .replica = replica,
                    .node = node,
                    .references = references,
                    .device = backend_info(plan.backend).traits.device,
                    .gpu_sampler = gpu_sampler.get(),
                    .gpu = gpu,
                    .ranks_per_gpu = environment.ranks_per_gpu};
}

/// The single-process reference of M micro-batches per replica (D x M in
/// all, each replica's partial sum formed as its stages form it): its first
/// step, and with a warm-up step its second (after the backends' SGD step).
const std::vector<ReferenceStep>& reference_for(const RunContext& ctx, int microbatches) {
  const int replicas = ctx.plan.data_parallel;
  auto it = ctx.references.find(microbatches);
  if (it == ctx.references.end()) {
    CpuModelOptions mo;
    mo.seed = ctx.options.seed;
    ModelSpec fp32 = ctx.plan.model;  // the reference computes in fp32 whatever the run stores
    fp32.bytes_per_element = 4;
    const int steps = ctx.options.warmup >= 1 ? 2 : 1;
    it = ctx.references
             .emplace(microbatches,
                      reference_steps(fp32, microbatches, replicas, mo, steps, kLearningRate))
             .first;
  }
  return it->second;
}

BackendConfig backend_config(const RunContext& ctx, const Combination& c, const Prepared& p) {
  BackendConfig cfg;
  cfg.spec = ctx.plan.model;
  cfg.units = ctx.plan.units;
  cfg.attention = ctx.plan.attention.attention;
  cfg.parts = p.parts;
  cfg.costs = p.model;
  cfg.stage = ctx.stage;
  cfg.stages = ctx.plan.stages;
  cfg.chunks = c.chunks;
  cfg.placement = p.schedule.placement;
  cfg.microbatches = c.microbatches;
  cfg.weight_stashing = schedule_info(c.schedule).weight_stashing;
  cfg.seed = ctx.options.seed;
  cfg.learning_rate = kLearningRate;
  cfg.time_scale = ctx.options.time_scale;
  cfg.plant_factor = ctx.stage == ctx.plan.plant_stage ? ctx.plan.plant_factor : 1.0;
  cfg.local_rank = ctx.node.rank;
  cfg.local_ranks = ctx.node.size;
  cfg.replica = ctx.replica;
  cfg.replicas = ctx.plan.data_parallel;
  cfg.cuda_graphs = ctx.plan.cuda_graphs;
  return cfg;
}

/// Step 3 of a combination on one rank, in phases: set_up() makes the
/// collectors, the backend, the executor and the memory guard; check() runs
/// the --check step against the single-process reference, and the first
/// warm-up step with the optimizer's updates checked again (the first step
/// that replays what a backend captured in the check step); warm_up() the
/// rest of the W untimed steps; measure() the timed ones; summarise() this rank's memory
/// and the guard's figures. Each phase is collective: every rank calls the
/// same phases in the same order. What they find goes into the Execution
/// given to the constructor (it outlives the run, which a DeviceOom ends).
class CombinationRun {
 public:
  CombinationRun(const RunContext& ctx, const Combination& c, const Prepared& p, Execution& ex)
      : ctx_(ctx),
        c_(c),
        p_(p),
        ex_(ex),
        info_(schedule_info(c.schedule)),
        binfo_(backend_info(ctx.plan.backend)),
        label_(combination_label(c)) {}
  CombinationRun(const CombinationRun&) = delete;
  CombinationRun& operator=(const CombinationRun&) = delete;
  ~CombinationRun() = default;

  void set_up();
  void check();
  void warm_up();
  void measure();
  void summarise();

 private:
  void make_backend_or_oom();
  void make_executor();
  void make_guard();
  /// One step: the guard's plan, the executor's step, the figures after it.
  RankStep step();
  /// The timed steps: --iters of them, then (with --min-time) more until
  /// their summed time reaches --min-time or --max-iters is reached. Rank
  /// 0's clock decides and tells the others between steps (outside the
  /// timed region), so every rank runs the same number of steps.
  void time_steps();

  const RunContext& ctx_;
  const Combination& c_;
  const Prepared& p_;
  Execution& ex_;
  const ScheduleInfo& info_;
  const BackendInfo& binfo_;
  const std::string label_;
  int warmups_done_ = 0;  // by check()
  // In the order they are made (and so unmade in reverse).
  CheckProbe probe_;
  std::unique_ptr<CollectorSet> collectors_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Executor> exec_;
  std::unique_ptr<MemoryGuard> guard_;
};

void CombinationRun::set_up() {
  // Collectors before the backend: one that counts the process's
  // threads (perf) must exist before the backend starts its own.
  ctx_.watch.begin("starting the backend and collectors of " + label_);
  collectors_ = std::make_unique<CollectorSet>(
      ctx_.comm, ctx_.plan.collectors,
      CollectorContext{.stage = ctx_.stage,
                       .stages = ctx_.plan.stages,
                       .chunks = c_.chunks,
                       .device_backend = backend_info(ctx_.plan.backend).traits.device},
      &probe_);
  make_backend_or_oom();
  if (const ModelledTime* modelled = backend_->modelled_time()) {
    ex_.time_scale = modelled->time_scale();
  }
  make_executor();
  make_guard();
  ex_.device_profiler = collectors_->device_profiler();
}

/// The backend; a device backend's out-of-memory while it allocates ends
/// the combination on every rank (DeviceOom).
/// Ranks that share a GPU make theirs in turn, the others waiting in a
/// barrier: a device backend measures what its library handles take as
/// the device's free memory before and after (device-wide), which another
/// rank allocating at that moment would add to.
void CombinationRun::make_backend_or_oom() {
  std::string setup_oom;
  const auto make = [&] {
    try {
      backend_ = make_backend(ctx_.plan.backend, backend_config(ctx_, c_, p_));
    } catch (const cuda::OutOfMemory& e) {
      if (!binfo_.traits.device) throw;
      setup_oom = e.what();
    }
  };
  if (binfo_.traits.device && ctx_.ranks_per_gpu > 1) {
    int size = 1;
    PPB_MPI_CHECK(MPI_Comm_size(ctx_.comm, &size));
    PPB_MPI_CHECK(MPI_Barrier(ctx_.comm));  // every rank's last backend is gone
    for (int turn = 0; turn < size; ++turn) {
      // Each turn is a phase of its own for --timeout: the wait grows with
      // the ranks, not the time one backend takes to start.
      ctx_.watch.begin("starting the backend of " + label_ + " (rank " + std::to_string(turn) +
                       "'s turn)");
      if (turn == ctx_.rank) make();
      PPB_MPI_CHECK(MPI_Barrier(ctx_.comm));
    }
    ctx_.watch.begin("starting the backend and collectors of " + label_);
  } else {
    make();
  }
  if (binfo_.traits.device) agree_on_oom(setup_oom, ctx_.rank, ctx_.comm);
}

void CombinationRun::make_executor() {
  ExecutorOptions eo;
  eo.optimizer = optimizer_policy_for(info_);
  eo.timeout_seconds = ctx_.options.timeout;
  eo.instrumentation = collectors_.get();
  eo.debug_stall_rank = ctx_.options.debug_stall_rank;
  eo.allreduce = ctx_.allreduce;
  if (ctx_.plan.data_parallel > 1) eo.step_comm = ctx_.comm;  // the replicas start together
  exec_ = std::make_unique<Executor>(ctx_.pipe, *backend_, ctx_.transport, eo);
  ex_.message_path = exec_->staging() ? "staged" : "direct";
}

/// A memory-guarded schedule under --memory-budget: its guard, which may
/// lower the in-flight limit N between steps.
void CombinationRun::make_guard() {
  if (!info_.memory_guarded || ctx_.plan.memory_budget <= 0) return;
  MemoryGuardOptions go;
  go.budget_bytes = ctx_.plan.memory_budget;
  go.guard = ctx_.options.memory_guard;
  go.max_inflight = c_.inflight;
  go.stage = ctx_.stage;  // every rank of the job takes part: the replicas agree on N
  guard_ =
      std::make_unique<MemoryGuard>(ctx_.comm, go, [gp = p_.params, name = c_.schedule](int n) {
        ScheduleParams q = gp;
        q.inflight = n;
        return generate_schedule(name, q);
      });
}

RankStep CombinationRun::step() {
  // The executor's watchdog covers the step itself; this phase the
  // memory guard's plan and the collectors' figures between steps.
  ctx_.watch.begin("between steps of " + label_);
  const Schedule& s = guard_ ? guard_->plan(*backend_) : p_.schedule;
  ctx_.watch.end();
  StepRecord rec = exec_->run_step(s);
  ctx_.watch.begin("between steps of " + label_);
  StepProbes* probes = backend_->probes();
  const double speed = probes != nullptr ? probes->speed_probe() : kNaN;
  if (guard_) guard_->observe(rec.peak_bytes);
  ex_.last_schedule = s;
  CollectorStepFigures figures = collectors_->finish_step(rec);
  RankStep out = rank_step(rec, std::move(figures));
  out.probe_seconds = speed;
  if (probes != nullptr) out.kind_seconds = probes->take_kind_seconds();
  if (!ctx_.options.trace) out.step.device.clear();  // only traces draw them
  if (DeviceAccess* device = backend_->device()) {
    const DeviceMemoryFigures dm = device->device_memory();
    out.device_peak_bytes = dm.pool_peak + dm.outside_pool;
    device->reset_device_peak();
    agree_on_oom(device->out_of_memory(), ctx_.rank, ctx_.comm);
  }
  return out;
}

/// --check: the first step, compared with the single-process reference,
/// then the first warm-up step (where there is one): its optimizer updates,
/// and with a flush schedule its gradients and loss against the
/// reference's second step. With the cuda backend that step is the first
/// to run the actions' CUDA graphs: --check covers what the timed steps run.
void CombinationRun::check() {
  if (!ctx_.options.check) return;
  const int replicas = ctx_.plan.data_parallel;
  // run_options refuses --check where the registry entry lacks real_gradients.
  const CheckAccess* access = backend_->check();
  PPB_CHECK(access != nullptr, "--check: the backend offers no check access");
  // kLearningRate: the backend's (backend_config).
  probe_.arm(*access, kLearningRate, info_.weight_stashing, replicas > 1);
  (void)step();
  probe_.disarm();
  ctx_.watch.begin("in --check of " + label_ +
                   " (the single-process reference and the comparison)");
  CheckContext cc;
  cc.stage = ctx_.stage;
  cc.stages = ctx_.plan.stages;
  cc.chunks = c_.chunks;
  cc.microbatches = c_.microbatches;
  cc.parts = p_.parts;
  cc.placement = placement_of(p_.schedule);
  cc.replica = ctx_.replica;
  cc.replicas = replicas;
  cc.replicas_comm = ctx_.replicas;
  // The reference runs the global batch: D x M micro-batches.
  const std::vector<ReferenceStep>* ref =
      info_.weight_stashing ? nullptr : &reference_for(ctx_, c_.microbatches);
  const double tolerance = run_check_tolerance(binfo_, ctx_.plan.model.bytes_per_element, replicas);
  ex_.check = check_figures(probe_, *access, info_.weight_stashing, cc,
                            ref != nullptr ? &ref->front() : nullptr, tolerance, ctx_.comm);
  if (ctx_.options.warmup == 0) return;
  // The first warm-up step: the first that runs what a backend captured.
  probe_.next_step();
  (void)step();
  probe_.disarm();
  warmups_done_ = 1;
  ctx_.watch.begin("in --check of " + label_ + " (the first warm-up step)");
  CheckFigures& ck = *ex_.check;
  const double replayed = update_figure(probe_, cc, "the first warm-up step", ctx_.comm);
  ck.update_rel_error = worse(ck.update_rel_error.value_or(0), replayed);
  ck.passed = ck.passed && replayed <= kUpdateTolerance;
  ck.steps = 2;
  if (ref == nullptr) return;
  PPB_CHECK(ref->size() >= 2, "--check: the reference has no second step");
  const double second = reference_figure(probe_, *access, cc, (*ref)[1], ctx_.comm);
  if (!(second <= tolerance) && ctx_.rank == 0) {
    log::warn(
        "--check: %s: the first warm-up step differs from the reference's second step (relative "
        "error %.2e, tolerance %.0e; the check step's was %.2e)",
        label_.c_str(), second, tolerance, ck.max_rel_error);
  }
  ck.max_rel_error = worse(ck.max_rel_error, second);
  ck.passed = ck.passed && second <= tolerance;
}

void CombinationRun::warm_up() {
  for (int w = warmups_done_; w < ctx_.options.warmup; ++w) (void)step();
}

void CombinationRun::measure() {
  ctx_.watch.begin("starting the timed steps of " + label_);
  HostLoadMeter load(ctx_.comm);
  load.begin();
  collectors_->measure_begin();
  if (ctx_.gpu_sampler != nullptr) ctx_.gpu_sampler->start();
  time_steps();
  collectors_->measure_end();
  ex_.foreign_cpu = load.end();
  if (ctx_.device) ex_.gpu_state = gather_gpu_state(ctx_.comm, ctx_.gpu_sampler, ctx_.gpu);
}

void CombinationRun::time_steps() {
  using Clock = std::chrono::steady_clock;
  const double min_time = ctx_.options.min_time;
  double elapsed = 0;
  for (int k = 0;; ++k) {
    int more = k < ctx_.options.iters ? 1 : 0;
    if (min_time > 0 && more == 0) {
      more = elapsed < min_time && k < ctx_.options.max_iters ? 1 : 0;
      PPB_MPI_CHECK(MPI_Bcast(&more, 1, MPI_INT, 0, ctx_.comm));
    }
    if (more == 0) return;
    const Clock::time_point t0 = Clock::now();
    ex_.record.steps.push_back(step());
    elapsed += std::chrono::duration<double>(Clock::now() - t0).count();
  }
}

void CombinationRun::summarise() {
  StageMemory& memory = ex_.record.memory;
  memory = step_memory_peaks(ex_.record.steps);
  ctx_.watch.begin("finishing the measurement of " + label_);
  memory.at_peak = backend_->memory().at_peak();
  memory.peak_rss = process_peak_rss_bytes();
  if (guard_) {
    MemoryGuardFigures g;
    g.actions = guard_->acted();
    const auto& h = guard_->inflight_history();
    g.min_inflight = h.empty() ? c_.inflight : *std::min_element(h.begin(), h.end());
    ex_.guard = g;
  }
  if (const DeviceAccess* device = backend_->device()) {
    // Every rank runs the same backend: all of them take part.
    ex_.graphs = sum_cuda_graphs(device->graphs(), ctx_.rank, ctx_.comm);
    ex_.epilogues = sum_gemm_epilogues(device->gemm_epilogues(), ctx_.rank, ctx_.comm);
  }
}

/// Step 3, on every rank: the phases of a CombinationRun. A failure on any
/// rank ends the job; a device out of memory on any rank ends the
/// combination alike on every rank (Execution::oom) and the sweep goes on.
Execution execute(Sweep& sw, const Combination& c, const Prepared& p) {
  Execution ex;
  ex.last_schedule = p.schedule;
  const RunContext ctx = sw.context();
  run_or_abort(
      [&] {
        try {
          CombinationRun run(ctx, c, p, ex);
          run.set_up();
          run.check();
          run.warm_up();
          plant_fault(sw, c, DebugFault::Phase::kMeasure);
          run.measure();
          run.summarise();
        } catch (const DeviceOom& e) {
          ex.oom = e.message;  // every rank got here together; the sweep goes on
        }
      },
      sw.comm);
  return ex;
}

/// Step 4, on rank 0: the figures from every rank's records.
void fill_metrics(Sweep& sw, const Combination& c, const Prepared& p, const Execution& ex,
                  const std::vector<RankRecord>& ranks, Result& result,
                  std::vector<StepMeasure>& steps) {
  const int P = sw.plan.stages;
  const int D = sw.plan.data_parallel;
  // Under data parallelism `ranks` is replica-major and a step holds the W
  // ranks (metrics.hpp): its time is the slowest replica's.
  steps = align_steps(ranks, sw.environment.hosts.size() == 1);
  const int64_t samples = int64_t{sw.plan.model.micro_batch_size} * c.microbatches * c.batches * D;
  StepFigures fig = step_figures(steps, samples);
  if (D > 1) {
    for (BubbleFigures* b : {&fig.bubble_ratio, &fig.bubble_overhead})
      b->per_stage = fold_replicas(b->per_stage, P);
    fig.timeline.resize(static_cast<size_t>(P));  // replica 0's
  }
  // Theory: the simulator fed the mean action times (per stage, chunk and
  // kind) and the transfer time measured in the same (median) step whose
  // bubbles are reported, so that the two differ only by what the simulator
  // leaves out (executor overhead, waits it does not model). Every replica
  // of the median step counts; the all-reduce's ring model is fitted to it.
  // Transfers between hosts cross a network: that link is fitted and
  // simulated apart from the one between ranks of a host.
  const std::vector<StepMeasure> median_step = split_replicas(steps[fig.median_step], P);
  const std::vector<int> hosts = host_of_stage(sw.environment, P);
  const MeasuredLinks links = measured_links(median_step, placement_of(ex.last_schedule), hosts);
  StageCosts measured = measured_costs(ex.last_schedule, median_step, p.model, links.host);
  measured.host_of_stage = hosts;
  measured.network_link = links.network;
  measured.allreduce = measured_allreduce(
      steps[fig.median_step], P, D,
      optimizer_policy_for(schedule_info(c.schedule)) == OptimizerPolicy::kPerBackward);
  measured.allreduce.element_bytes = sw.plan.model.bytes_per_element;
  TheoryOutcome theory = theory_figures(ex.last_schedule, measured);
  theory.figures.action_seconds = mean_action_seconds(P, median_step);
  theory.figures.kind_seconds =
      kind_seconds_per_stage(ranks, P, fig.median_step, c.microbatches * c.batches);
  theory.figures.links = links.figures;

  ResultMetrics m;
  m.samples_per_second = fig.samples_per_second;
  m.step_time_seconds = fig.step_time_seconds;
  m.bubble_ratio = fig.bubble_ratio;
  m.bubble_ratio.theoretical = theory.bubble_ratio;
  m.bubble_overhead = fig.bubble_overhead;
  m.bubble_overhead.theoretical = theory.bubble_overhead;
  m.peak_memory_bytes = peak_memory(stage_memories(ranks, P));
  m.peak_memory_bytes.device_profiler = ex.device_profiler;
  m.device = device_figures(median_step.front(), ex.device_profiler);
  if (m.device) m.device->bubble_ratio_samples = device_bubble_ratio_per_step(steps, P);
  m.theory = theory.figures;
  m.check = ex.check;
  if (ex.check && !ex.check->passed) sw.any_failed = true;
  m.memory_guard = ex.guard;
  const std::vector<RankRecord> first(ranks.begin(), ranks.begin() + P);  // replica 0
  m.collectors = collector_results(first, fig.median_step);
  m.bubble_ratio.samples = bubble_ratio_per_step(steps);
  m.busy_seconds_per_stage = busy_seconds_per_stage(steps);
  m.speed_probe_seconds_per_stage = speed_probe_per_stage(ranks);
  if (D > 1) add_data_parallel(steps, fig.median_step, P, measured.allreduce, theory, m);
  if (std::isfinite(ex.foreign_cpu)) m.foreign_cpu = ex.foreign_cpu;
  m.gpu_state = ex.gpu_state;
  m.cuda_graphs = ex.graphs;
  m.gemm_epilogues = ex.epilogues;
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
  const std::string label = combination_label(c);
  plant_fault(sw, c, DebugFault::Phase::kSetup);
  sw.watch->begin("in the setup of " + label + " (schedule, partition, memory prediction)");
  const std::optional<Prepared> p = prepare(sw, c, result);
  if (p) result.config.unit_ranges = format_partition(p->parts);
  if (!p || predicted_oom(sw, c, *p, result)) return result;

  const Execution ex = execute(sw, c, *p);
  result.config.message_path = ex.message_path;
  if (!ex.oom.empty()) {
    sw.watch->end();
    result.status = ResultStatus::kOom;
    result.error = "device out of memory on " + ex.oom;
    return result;
  }
  sw.watch->begin("gathering the records of " + label + " on rank 0");
  std::vector<RankRecord> ranks = gather_records(ex.record, sw.comm);
  sw.watch->end();
  if (sw.rank == 0 && sw.plan.data_parallel > 1) {
    // Replica-major (replica x P + stage), whatever the rank order: the
    // first P records are replica 0's pipeline (metrics.hpp).
    std::vector<RankRecord> by_replica(ranks.size());
    for (size_t r = 0; r < ranks.size(); ++r) {
      const int world = static_cast<int>(r);
      by_replica[static_cast<size_t>(sw.grid.replica_of(world) * sw.plan.stages +
                                     sw.grid.stage_of(world))] = std::move(ranks[r]);
    }
    ranks = std::move(by_replica);
  }
  plant_fault(sw, c, DebugFault::Phase::kWrite);
  if (sw.rank != 0) return result;

  std::vector<StepMeasure> steps;
  sw.watch->begin("computing the figures of " + label);
  fill_metrics(sw, c, *p, ex, ranks, result, steps);
  if (sw.options.trace) {
    sw.watch->begin("writing the traces of " + label);
    // The result last measured here goes before its traces are replaced: a
    // run killed between the new traces and the new result leaves no
    // result (--resume runs it again), never an old one beside new traces.
    remove_output_file(OutputPath{sw.out_dir, result_file_name(c)});
    // One pipeline's ranks (replica 0's under data parallelism).
    std::vector<StepMeasure> pipeline;
    for (const StepMeasure& step : steps)
      pipeline.push_back(split_replicas(step, sw.plan.stages).front());
    write_measured_traces(pipeline, placement_of(p->schedule), int64_t{c.microbatches} * c.batches,
                          sw.out_dir, result_stem(c));
    plant_fault(sw, c, DebugFault::Phase::kTrace);
  }
  return result;
}

/// One combination, or with --resume its finished file: rank 0 reads it and
/// every rank learns to skip. Rank 0 writes the result file; the row is
/// complete on rank 0 only.
ProgressRow run_or_resume(Sweep& sw, const Combination& c, int total) {
  const OutputPath out{sw.out_dir, result_file_name(c)};
  const std::string path = out.shown();
  ProgressRow row;
  row.index = c.index;
  row.total = total;
  row.label = combination_label(c);
  row.closed_form = closed_form_bubble_ratio(c.schedule, c.stages, c.microbatches, c.inflight);
  int skip = 0;
  sw.watch->begin(sw.rank == 0
                      ? "reading " + path + " (--resume)"
                      : "waiting for rank 0 (which writes each result file) before " + row.label);
  // A link planted where the result goes is named (the folder was checked
  // before the sweep; this catches one planted since), never read through.
  if (sw.rank == 0) check_output_path(out);
  if (sw.options.resume && sw.rank == 0 && std::filesystem::exists(path)) {
    try {
      row.result = read_result_file(path);
      ResultConfig here = make_config(sw, c);
      // A result that never ran (invalid, out of memory) recorded no scale.
      here.time_scale = row.result.config.time_scale > 0 ? sw.options.time_scale : 0;
      const std::string differs =
          first_difference(resume_key(row.result.config, sw.options.time_scale),
                           resume_key(here, sw.options.time_scale));
      skip = row.result.status == ResultStatus::kError || !differs.empty() ? 0 : 1;
      if (!differs.empty()) {
        log::warn(
            "--resume: %s holds a result of other settings (%s); running the combination "
            "again",
            path.c_str(), differs.c_str());
      }
    } catch (const UsageError& e) {
      log::warn("--resume: %s; running the combination again", e.what());
    }
  }
  PPB_MPI_CHECK(MPI_Bcast(&skip, 1, MPI_INT, 0, sw.comm));
  sw.watch->end();
  if (skip != 0) {
    row.resumed = true;
  } else {
    row.result = run_combination(sw, c);
    if (sw.rank == 0) {
      row.result.environment.date = iso8601_utc(unix_now());
      const JobPhase writing(*sw.watch, "writing " + path);
      write_result_file(out, row.result);
    }
  }
  if (sw.rank == 0 && row.result.status == ResultStatus::kError) sw.any_failed = true;
  return row;
}

/// cuDNN says whether it builds a shape only on a bound device: where the
/// attention rule chose cuDNN's bf16 fused attention, each rank builds it
/// once on its GPU. The ranks of a device backend then agree: where any
/// runs naive (cuDNN refused, or the rule found an obstacle on its node
/// alone), `--attention auto` runs naive everywhere with that reason (the
/// units and their times expanded again, before any partition is cut) and
/// `--attention fused` is a usage error. Collective.
void settle_attention(Sweep& sw) {
  if (!backend_info(sw.plan.backend).traits.device) return;
  const bool fused = sw.plan.attention.attention == Attention::kFused;
  std::string mine = fused ? "" : sw.plan.attention.reason;
  if (fused && sw.plan.model.bytes_per_element == 2) {
    try {
      (void)cuda::bind_device(sw.node.rank, sw.node.size);
      mine = cuda::fused_attention_refusal(sw.plan.model);
    } catch (const std::exception& e) {  // no memory for the trial, a device lost
      mine = std::string("the trial build of cuDNN's attention failed: ") + e.what();
    }
  }
  const RankFailure naive = first_failure(mine, sw.rank, sw.comm);
  if (naive.rank < 0 || !fused) return;
  try {
    sw.plan.attention =
        choose_attention(parse_attention_request(sw.options.attention), with_rank(naive));
  } catch (const UsageError&) {
    if (sw.rank == 0) throw;
    throw cli::ExitCode{kUsageExitCode};
  }
  sw.plan.units = expand_units(sw.plan.model, kernels_for(sw.plan.backend, sw.options.device),
                               sw.plan.attention.attention);
  sw.times = unit_times(sw.plan.units, sw.device);
  if (sw.rank == 0) log::warn("run: %s", attention_words(sw.plan.attention).c_str());
}

/// Validates sw.options into sw.plan on every rank, and the ranks agree on
/// the verdict: a flag bad on one rank only (the attention rule probes its
/// own node) ends every rank, rank 0 saying why, instead of leaving the
/// others in the next collective.
void validate(Sweep& sw) {
  sw.watch->begin("validating the flags (the model and every partition named)");
  std::string bad;
  try {
    sw.plan = validate_run_options(sw.options, sw.size);
    sw.device = device_preset(sw.options.device, sw.plan.model.bytes_per_element);
  } catch (const UsageError& e) {
    bad = e.what();
  }
  agree_on_usage(bad, "", sw.rank, sw.comm);
  sw.times = unit_times(sw.plan.units, sw.device);
  sw.grid = RankGrid{sw.plan.stages, sw.plan.data_parallel, sw.plan.rank_order};
  sw.stage = sw.grid.stage_of(sw.rank);
  sw.replica = sw.grid.replica_of(sw.rank);
  // A backend that cannot run here (no GPU, no driver, a build without CUDA)
  // is refused before anything starts, with its one-line reason.
  const BackendInfo& binfo = backend_info(sw.plan.backend);
  agree_on_usage(binfo.unusable != nullptr ? binfo.unusable() : std::string(),
                 "--backend " + binfo.name + ": ", sw.rank, sw.comm);
  sw.node = node_local(sw.comm);
  settle_attention(sw);
  sw.watch->end();
}

/// The environment and the transport of the sweep (collective).
void connect(Sweep& sw) {
  const JobPhase setup(*sw.watch, "in the job's setup (environment, transport)");
  const BackendInfo& binfo = backend_info(sw.plan.backend);
  sw.environment = collect_environment(sw.comm, binfo.traits.device, sw.node.rank);
  if (sw.rank == 0 && sw.environment.ranks_per_gpu > 1) {
    log::warn(
        "run: up to %d ranks share one GPU (%s): they take turns on it, so times and "
        "bubbles include that sharing",
        sw.environment.ranks_per_gpu, sw.environment.gpus.front().c_str());
  }
  // A device backend's actions run eagerly in the first step (it sizes the
  // static buffers) and are captured in the second: timed steps before the
  // third are not what a graph replay costs.
  const int untimed = sw.options.warmup + (sw.options.check ? 1 : 0);
  if (sw.rank == 0 && binfo.traits.device && sw.plan.cuda_graphs && untimed < 2) {
    log::warn(
        "run: --warmup %d%s: with CUDA graphs the actions run eagerly in the first step and are "
        "captured in the second, so the timed steps include %s; --warmup %d%s times replays only",
        sw.options.warmup, sw.options.check ? " with --check" : "",
        untimed == 0 ? "both" : "the capture", sw.options.check ? 1 : 2,
        sw.options.check ? " with --check" : "");
  }
  // Ranks of a backend whose action times are modelled sleep through their
  // actions, so more of them than cores do not take turns computing; only a
  // backend that computes on the host CPU is oversubscribed by them.
  sw.environment.oversubscribed = sw.environment.oversubscribed && !binfo.modelled_time;
  if (binfo.traits.device) {
    const cuda::DeviceFacts gpu = cuda::device_facts(sw.node.rank);
    sw.gpu = sw.environment.rank_hosts[static_cast<size_t>(sw.rank)] + ": " + gpu.name + " (" +
             gpu.bus + ")";
    sw.gpu_sampler = gpu_sampler(gpu.bus, sw.rank);
  }
  // Data parallelism: one communicator per replica (its pipeline's
  // messages) and one per stage (its gradient all-reduce).
  sw.pipe = sw.comm;
  if (sw.plan.data_parallel > 1) {
    PPB_MPI_CHECK(MPI_Comm_split(sw.comm, sw.replica, sw.stage, &sw.pipe));
    PPB_MPI_CHECK(MPI_Comm_split(sw.comm, sw.stage, sw.replica, &sw.replicas));
  }
  try {
    sw.transport = make_transport(sw.plan.transport, sw.pipe);
    if (sw.plan.data_parallel > 1) sw.allreduce = make_transport(sw.plan.transport, sw.replicas);
  } catch (const UsageError& e) {
    throw cli::FlagError(e.what());  // alike on every rank (no GPU, two ranks on one GPU)
  }
}

/// Runs `combos`, printing a progress line each (rank 0), into `rows`.
void run_all(Sweep& sw, const std::vector<Combination>& combos, int total,
             std::vector<ProgressRow>& rows) {
  sw.combinations = static_cast<int>(combos.size());
  for (const Combination& c : combos) {
    ProgressRow row = run_or_resume(sw, c, total);
    if (sw.rank == 0) {
      std::printf("%s\n", progress_line(row).c_str());
      std::fflush(stdout);
      rows.push_back(std::move(row));
    }
  }
}

/// The summary table (rank 0); returns on every rank whether a check failed
/// or a combination ended with status error.
bool finish(const std::vector<ProgressRow>& rows, const std::string& out_dir, bool any_failed,
            JobWatchdog& watch, int rank, MPI_Comm comm) {
  if (rank == 0) {
    std::printf("\n%s\nresults: %s (%zu files)\n", summary_table(rows).c_str(), out_dir.c_str(),
                rows.size());
    std::fflush(stdout);
  }
  int failed = any_failed ? 1 : 0;
  const JobPhase ending(
      watch, "waiting for rank 0 (which writes the last result) at the end of the sweep");
  PPB_MPI_CHECK(MPI_Bcast(&failed, 1, MPI_INT, 0, comm));
  PPB_MPI_CHECK(MPI_Barrier(comm));
  return failed != 0;
}

/// The combinations of a validated sweep, in run order.
std::vector<Combination> sweep_combinations(const Sweep& sw) {
  return enumerate_sweep(sw.plan.schedules, sw.plan.partitions, sw.plan.microbatches,
                         sweep_params(sw.options, sw.plan));
}

/// The sweep once the flags, the output folder and the transport are agreed. Runs inside
/// run_or_abort: from here on a failure on any rank (a full disk on rank 0,
/// a backend error) ends the whole job. Returns, on every rank, whether a
/// --check failed or a combination ended with status error.
bool run_sweep(Sweep& sw, const std::vector<Combination>& combos) {
  if (sw.rank == 0) {
    // "1 combination", "2 combinations".
    const auto count = [](size_t n, const char* noun) {
      return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
    };
    log::info("run: %s (%s x %s x %zu M) on %s (%s x %s, %s), %s backend, model %s -> %s",
              count(combos.size(), "combination").c_str(),
              count(sw.plan.schedules.size(), "schedule").c_str(),
              count(sw.plan.partitions.size(), "partition").c_str(), sw.plan.microbatches.size(),
              count(static_cast<size_t>(sw.size), "rank").c_str(),
              count(static_cast<size_t>(sw.plan.stages), "stage").c_str(),
              count(static_cast<size_t>(sw.plan.data_parallel), "replica").c_str(),
              rank_order_name(sw.plan.rank_order), sw.plan.backend.c_str(),
              sw.options.model.c_str(), sw.out_dir.c_str());
  }
  std::optional<StopNotice> stop;
  if (sw.rank == 0) stop.emplace(sw.out_dir);
  std::vector<ProgressRow> rows;
  run_all(sw, combos, static_cast<int>(combos.size()), rows);
  return finish(rows, sw.out_dir, sw.any_failed, *sw.watch, sw.rank, sw.comm);
}

/// Collective over `comm`: returns when every rank's `mine` is rank 0's;
/// otherwise rank 0 throws UsageError("<what>: rank N differs from rank 0")
/// naming the lowest such rank, and the others cli::ExitCode{2}.
void agree_alike(uint64_t mine, const std::string& what, int rank, int size, MPI_Comm comm) {
  uint64_t zero = mine;
  PPB_MPI_CHECK(MPI_Bcast(&zero, 1, MPI_UINT64_T, 0, comm));
  int first = mine == zero ? size : rank;
  PPB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == size) return;
  if (rank != 0) throw cli::ExitCode{kUsageExitCode};
  throw UsageError(what + ": rank " + std::to_string(first) + " differs from rank 0");
}

/// --rerun: every rank reads the result files and plans the same jobs;
/// the ranks must agree (a file one host cannot see ends the job with
/// exit 2, never a hang).
std::vector<RerunJob> agree_on_reruns(const RunOptions& options, int rank, int size, MPI_Comm comm,
                                      std::vector<std::string>& skipped) {
  std::vector<RerunJob> jobs;
  std::string why;
  uint64_t read = kFnv1aSeed;  // what this rank read: every path and result
  try {
    const std::vector<std::pair<std::string, Result>> recorded = load_rerun_results(options.rerun);
    for (const auto& [path, result] : recorded) {
      read = fnv1a(path, read);
      read = fnv1a(boost::json::serialize(result_to_json(result)), read);
    }
    jobs = plan_reruns(recorded, options, size, &skipped);
  } catch (const UsageError& e) {
    why = e.what();
  }
  int first_bad = why.empty() ? size : rank;
  PPB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT, MPI_MIN, comm));
  if (first_bad == size) {
    agree_alike(read,
                "--rerun: the ranks read different result files (every rank reads them: give "
                "paths all hosts see alike)",
                rank, size, comm);
    return jobs;
  }
  if (rank != 0) throw cli::ExitCode{kUsageExitCode};
  if (!why.empty()) throw UsageError(why);
  throw UsageError("--rerun: rank " + std::to_string(first_bad) +
                   " cannot read the result files rank 0 reads (every rank reads them: give "
                   "paths all hosts see)");
}

/// `run --rerun`: each job (one set of recorded settings) is a sweep of its
/// own over the recorded combinations, all into one --out folder.
void rerun_command(const RunOptions& options, MpiSession& mpi, JobWatchdog& watch) {
  const int rank = mpi.rank();
  std::vector<std::string> skipped;
  watch.begin("reading the result files of --rerun");
  const std::vector<RerunJob> jobs =
      agree_on_reruns(options, rank, mpi.size(), mpi.comm(), skipped);
  watch.end();
  // Every job's settings are validated before any runs (and before the output folder is made),
  // outside run_or_abort as for a sweep: a refusal (a backend this machine cannot run) is one line
  // from rank 0 and exit 2 on every rank.
  std::vector<std::unique_ptr<Sweep>> sweeps;
  for (const RerunJob& job : jobs) {
    sweeps.push_back(std::make_unique<Sweep>(job.options, mpi.comm(), rank, mpi.size(), &watch));
    validate(*sweeps.back());
  }
  std::vector<Combination> all;
  for (const RerunJob& j : jobs)
    all.insert(all.end(), j.combinations.begin(), j.combinations.end());
  const std::string out_dir = agree_out_dir(options, all, watch, rank, mpi.comm());
  int total = 0;
  for (const RerunJob& j : jobs) total += static_cast<int>(j.combinations.size());
  if (rank == 0) {
    log::info(
        "run: --rerun: %d combination(s) measured again with their recorded settings (%zu "
        "job(s)) on %d ranks -> %s",
        total, jobs.size(), mpi.size(), out_dir.c_str());
    for (const std::string& s : skipped) log::info("run: --rerun: not run again: %s", s.c_str());
  }
  bool failed = false;
  std::optional<StopNotice> stop;
  if (rank == 0) stop.emplace(out_dir);
  run_or_abort(
      [&] {
        std::vector<ProgressRow> rows;
        bool any_failed = false;
        for (size_t j = 0; j < jobs.size(); ++j) {
          const RerunJob& job = jobs[j];
          Sweep& sw = *sweeps[j];
          sw.out_dir = out_dir;
          connect(sw);
          run_all(sw, job.combinations, total, rows);
          any_failed = any_failed || sw.any_failed;
        }
        failed = finish(rows, out_dir, any_failed, watch, rank, mpi.comm());
      },
      mpi.comm());
  if (failed) throw cli::ExitCode{1};
}

}  // namespace

void run_command(const RunOptions& options) {
  // The watchdog covers validation too (it makes every named partition);
  // --timeout itself is checked there, and until then a bad value is "off".
  // MPI's own start and end are bounded by it as well (MpiSession).
  const double timeout =
      std::isfinite(options.timeout) && options.timeout > 0 ? options.timeout : 0.0;
  MpiSession mpi(timeout);
  JobWatchdog watch(mpi.rank(), timeout);
  // Every rank must be asked the same: ranks started with other flags (an
  // MPMD launch, a wrapper that adds one) would otherwise run different
  // schedules and exchange mismatched messages.
  watch.begin("agreeing on the command line with the other ranks");
  agree_alike(fnv1a(cli::command_line()),
              "the ranks were started with different flags (start every rank with the same "
              "pipebench command line)",
              mpi.rank(), mpi.size(), mpi.comm());
  watch.end();
  if (!options.rerun.empty()) {
    rerun_command(options, mpi, watch);
    return;
  }
  Sweep sw(options, mpi.comm(), mpi.rank(), mpi.size(), &watch);
  validate(sw);
  const std::vector<Combination> combos = sweep_combinations(sw);
  sw.out_dir = agree_out_dir(options, combos, watch, sw.rank, sw.comm);
  // Outside run_or_abort: a transport's refusal (no GPU, two ranks of a link
  // on one GPU) is alike on every rank and printed once by rank 0.
  connect(sw);
  bool failed = false;
  run_or_abort([&] { failed = run_sweep(sw, combos); }, sw.comm);
  if (failed) throw cli::ExitCode{1};
}

}  // namespace ppb::run
