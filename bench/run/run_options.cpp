#include "run/run_options.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <optional>

#include "cli.hpp"
#include "ppb/exec/backend.hpp"
#include "ppb/exec/collector.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/exec/transport.hpp"
#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/partition.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::run {

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::vector<std::string> expand_schedules(const std::string& text) {
  std::vector<std::string> known;
  for (const ScheduleInfo& info : schedule_list()) known.push_back(info.name);
  const std::vector<std::string> items = cli::split_list(text);
  if (items.empty())
    throw UsageError("--schedule: expected a schedule name or 'all' (schedules: " + join(known) +
                     ")");
  std::vector<std::string> out;
  for (const std::string& item : items) {
    if (item == "all") {
      for (const std::string& k : known) out.push_back(k);
      continue;
    }
    bool found = false;
    for (const std::string& k : known) found = found || k == item;
    if (!found)
      throw UsageError("--schedule: unknown schedule '" + item + "' (schedules: " + join(known) +
                       ", all)");
    out.push_back(item);
  }
  return out;
}

// A schedule parameter (--chunks, --inflight, --sync-warmup, --batches)
// given for a sweep none of whose schedules takes it would be dropped
// without a word: the result would record V = 1 where V = 2 was asked for.
// Refused instead, naming the schedules that take it. A value the other
// schedules run anyway (--chunks 1, --inflight 0, --batches 1) is harmless
// and let through; --sync-warmup has none (the others run no K).
void refuse_unused_schedule_parameters(const RunOptions& o,
                                       const std::vector<std::string>& schedules) {
  struct Parameter {
    const char* flag;
    int value;
    std::optional<int> neutral;                     // what the other schedules run
    bool (*takes)(const ScheduleInfo&, int value);  // whether a schedule uses it
  };
  const Parameter parameters[] = {
      {"--chunks", o.chunks, 1,
       [](const ScheduleInfo& i, int v) {
         return i.uses_chunks || (i.fixed_chunks > 0 && v == i.fixed_chunks);
       }},
      {"--inflight", o.inflight, 0, [](const ScheduleInfo& i, int) { return i.uses_inflight; }},
      {"--sync-warmup", o.sync_warmup, std::nullopt,
       [](const ScheduleInfo& i, int) { return i.uses_sync_warmup; }},
      {"--batches", o.batches, 1, [](const ScheduleInfo& i, int) { return i.no_flush; }},
  };
  for (const Parameter& p : parameters) {
    if (std::find(o.given.begin(), o.given.end(), p.flag) == o.given.end()) continue;
    if (p.neutral && p.value == *p.neutral) continue;
    const bool taken = std::any_of(schedules.begin(), schedules.end(), [&](const std::string& s) {
      return p.takes(schedule_info(s), p.value);
    });
    if (taken) continue;
    std::vector<std::string> takers;
    for (const ScheduleInfo& info : schedule_list()) {
      if (p.takes(info, p.value)) takers.push_back(info.name);
    }
    throw UsageError(std::string(p.flag) + " " + std::to_string(p.value) +
                     ": no schedule of the sweep (" + join(schedules) + ") takes it (" +
                     join(takers) + (takers.size() == 1 ? " does" : " do") +
                     "); leave it out or add such a schedule");
  }
}

/// The registry entry called `name` ("" = the first one, the default).
/// Throws "--backend: unknown backend 'x' (backends: cpu, timed, cuda)".
template <class Info>
const Info& registered(const char* flag, const char* what, const std::vector<Info>& list,
                       const std::string& name) {
  PPB_CHECK(!list.empty(), "an empty registry");
  if (name.empty()) return list.front();
  std::vector<std::string> names;
  for (const Info& info : list) {
    if (info.name == name) return info;
    names.push_back(info.name);
  }
  throw UsageError(std::string(flag) + ": unknown " + what + " '" + name + "' (" + what +
                   "s: " + join(names) + ")");
}

/// --plant STAGE:FACTOR into the plan.
void parse_plant(const std::string& text, int world_size, const BackendInfo& backend,
                 RunPlan& plan) {
  if (text.empty()) return;
  const std::string usage = "--plant: expected STAGE:FACTOR (e.g. 1:1.1), got '" + text + "'";
  const auto colon = text.find(':');
  // stoi and stod skip leading blanks: "1: 2" and a tab or line break in it
  // would reach the result's label.
  if (colon == std::string::npos || text.find_first_of(" \t\n\v\f\r") != std::string::npos) {
    throw UsageError(usage);
  }
  std::size_t used = 0;
  int stage = 0;
  double factor = 0;
  try {
    stage = std::stoi(text.substr(0, colon), &used);
    if (used != colon) throw UsageError(usage);
    factor = std::stod(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1) throw UsageError(usage);
  } catch (const std::logic_error&) {
    throw UsageError(usage);
  }
  if (stage < 0 || stage >= world_size) {
    throw UsageError("--plant: stage " + std::to_string(stage) + " is not one of the " +
                     std::to_string(world_size) + " stages (0.." + std::to_string(world_size - 1) +
                     ")");
  }
  // At most 100: a larger factor would make a step run for hours.
  if (!(factor > 0 && factor <= 100))
    throw UsageError("--plant: expected a factor in (0, 100], got " + text.substr(colon + 1));
  if (factor < 1 && !backend.modelled_time) {
    throw UsageError("--plant: the " + backend.name +
                     " backend can only add work (factor >= 1), got " + text.substr(colon + 1));
  }
  plan.plant_stage = stage;
  plan.plant_factor = factor;
  plan.plant_label = "stage " + std::to_string(stage) + " x" + text.substr(colon + 1);
}

// --debug-fault RANK:PHASE:WHAT (tests only): RANK a rank of the job.
DebugFault parse_fault(const std::string& text, int world_size) {
  DebugFault f;
  if (text.empty()) return f;
  const std::string usage =
      "--debug-fault: expected RANK:PHASE:WHAT (PHASE setup|measure|write|trace, WHAT "
      "kill|stop|throw), "
      "got '" +
      text + "'";
  const auto a = text.find(':');
  const auto b = a == std::string::npos ? a : text.find(':', a + 1);
  if (b == std::string::npos) throw UsageError(usage);
  const std::string rank = text.substr(0, a);
  const std::string phase = text.substr(a + 1, b - a - 1);
  const std::string what = text.substr(b + 1);
  if (rank.empty() || rank.size() > 7 || rank.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError(usage);
  f.rank = std::stoi(rank);
  if (f.rank >= world_size) throw UsageError(usage + ": no such rank");
  if (phase == "setup") {
    f.phase = DebugFault::Phase::kSetup;
  } else if (phase == "measure") {
    f.phase = DebugFault::Phase::kMeasure;
  } else if (phase == "write") {
    f.phase = DebugFault::Phase::kWrite;
  } else if (phase == "trace") {
    f.phase = DebugFault::Phase::kTrace;
  } else {
    throw UsageError(usage);
  }
  if (what == "kill") {
    f.what = DebugFault::What::kKill;
  } else if (what == "stop") {
    f.what = DebugFault::What::kStop;
  } else if (what == "throw") {
    f.what = DebugFault::What::kThrow;
  } else {
    throw UsageError(usage);
  }
  return f;
}

// --dtype: bytes per stored element; bf16 only where the backend's registry
// entry stores it.
int dtype_bytes(const std::string& dtype, const BackendInfo& backend) {
  const int bytes = parse_dtype(dtype);
  if (bytes == 4 || backend.bf16) return bytes;
  std::string with;
  for (const BackendInfo& b : backend_list()) {
    if (b.bf16) with += (with.empty() ? "" : ", ") + b.name;
  }
  throw UsageError("--dtype bf16: --backend " + backend.name +
                   " computes in fp32 only (bf16: --backend " + with + ")");
}

}  // namespace

void check_counts(const RunOptions& o) {
  // The step counts bound how long a combination runs (each step is bounded
  // by --timeout): the same limits whether typed or read from a result
  // file by --rerun.
  if (o.iters < 1 || o.iters > kMaxSteps) {
    throw UsageError("--iters: expected 1.." + std::to_string(kMaxSteps) + " steps, got " +
                     std::to_string(o.iters));
  }
  if (o.warmup < 0 || o.warmup > kMaxSteps) {
    throw UsageError("--warmup: expected 0.." + std::to_string(kMaxSteps) + " steps, got " +
                     std::to_string(o.warmup));
  }
  if (!(o.min_time >= 0 && o.min_time <= kMaxMinTimeSeconds)) {
    throw UsageError("--min-time: expected 0.." + std::to_string(kMaxMinTimeSeconds) +
                     " seconds, got " + number_text(o.min_time));
  }
  if (o.max_iters < o.iters || o.max_iters > kMaxSteps) {
    throw UsageError("--max-iters: expected --iters (" + std::to_string(o.iters) + ").." +
                     std::to_string(kMaxSteps) + " steps, got " + std::to_string(o.max_iters));
  }
  if (o.chunks < 1 || o.chunks > kMaxChunks) {
    throw UsageError("--chunks: expected 1.." + std::to_string(kMaxChunks) + ", got " +
                     std::to_string(o.chunks));
  }
  if (o.inflight < 0)
    throw UsageError("--inflight: expected >= 1, got " + std::to_string(o.inflight));
  if (o.sync_warmup < 0)
    throw UsageError("--sync-warmup: expected >= 0, got " + std::to_string(o.sync_warmup));
  if (o.batches < 1 || o.batches > kMaxBatches) {
    throw UsageError("--batches: expected 1.." + std::to_string(kMaxBatches) + ", got " +
                     std::to_string(o.batches));
  }
  if (!(o.memory_guard > 0 && o.memory_guard <= 1)) {
    throw UsageError("--memory-guard: expected a fraction in (0, 1], got " +
                     number_text(o.memory_guard));
  }
  cli::check_timeout_flag(o.timeout);
  if (!(o.time_scale >= 0) || !std::isfinite(o.time_scale)) {
    throw UsageError("--time-scale: expected a finite factor >= 0 (0 = automatic), got " +
                     number_text(o.time_scale));
  }
}

namespace {

/// The model against the plan's P stages: every message at a possible cut
/// fits one MPI message, and there are at least P units to place.
void check_stage_cuts(const RunPlan& plan, const std::string& model) {
  const int units = static_cast<int>(plan.units.size());
  // A message between stages is one MPI message of at most INT_MAX bytes:
  // a model whose activations at a possible cut are larger is refused now,
  // not by the transport in the middle of the first step.
  const int stages = plan.stages;
  if (stages > 1) {
    for (int u = 0; u + 1 < units; ++u) {
      const Unit& unit = plan.units[static_cast<size_t>(u)];
      if (unit.boundary_bytes > kMaxMessageBytes) {
        throw UsageError("--model " + model + ": a message between stages after " + unit.name +
                         " would be " + std::to_string(unit.boundary_bytes) +
                         " bytes, over the transport's limit of " +
                         std::to_string(kMaxMessageBytes) +
                         " bytes (2 GiB) per message (lower seq, hidden or mbs)");
      }
    }
  }
  if (stages > units) {
    throw UsageError(std::to_string(stages) + " stages but --model " + model + " has only " +
                     std::to_string(units) + " units: at most " + std::to_string(units) +
                     " stages (run with fewer ranks or a larger model)");
  }
}

/// A --time-scale with which the mean stage's forward and backward of one
/// micro-batch would sleep more than kMaxTimedStageSeconds (a step of
/// hours) is refused before the sweep, by every rank alike (the timed
/// backend refuses it too). The sum is the whole model's over P, whatever
/// the cut, as default_time_scale takes it.
void check_time_scale(const RunOptions& o, const RunPlan& plan) {
  if (o.time_scale <= 0) return;
  double total = 0;
  for (const UnitTime& t :
       unit_times(plan.units, device_preset(o.device, plan.model.bytes_per_element)))
    total += t.total();
  if (std::string why = time_scale_problem(o.time_scale, total / std::max(plan.stages, 1));
      !why.empty())
    throw UsageError(why);
}

/// Every partition named on the command line places the sweep's stages.
void check_partitions_place(const RunOptions& o, const RunPlan& plan) {
  // A partition named on the command line must place the P x V virtual
  // stages of at least one of the sweep's schedules (V: --chunks, a fixed
  // chunk count, or 1); a combination it cannot place is recorded as
  // invalid by the sweep, as is every one under "all".
  const int stages = plan.stages;
  const bool all_partitions = o.partitions.find("all") != std::string::npos;
  if (!all_partitions) {
    std::vector<int> chunk_counts;
    for (const std::string& s : plan.schedules) {
      const ScheduleInfo& info = schedule_info(s);
      const int v = info.fixed_chunks > 0 ? info.fixed_chunks : info.uses_chunks ? o.chunks : 1;
      if (std::find(chunk_counts.begin(), chunk_counts.end(), v) == chunk_counts.end())
        chunk_counts.push_back(v);
    }
    std::sort(chunk_counts.begin(), chunk_counts.end());
    const std::vector<UnitTime> times =
        unit_times(plan.units, device_preset(o.device, plan.model.bytes_per_element));
    for (const std::string& p : plan.partitions) {
      std::string first_error;
      for (const int v : chunk_counts) {
        try {
          (void)make_partition(p, plan.units, times, stages * v);
          first_error.clear();
          break;
        } catch (const UsageError& e) {
          if (first_error.empty()) {
            first_error = std::to_string(stages) + " stages" +
                          (v > 1 ? " x " + std::to_string(v) + " chunks" : "") + ": " + e.what();
          }
        }
      }
      if (!first_error.empty())
        throw UsageError(std::string("--partition ") + p + " cannot place " + first_error);
    }
  }
}

/// Every micro-batch count given runs under at least one of the sweep's
/// schedules on its P stages (with its V, N, K, B); a combination one
/// schedule refuses is recorded as invalid by the sweep, as with
/// partitions, but a sweep in which an M runs nowhere measures nothing of
/// it.
void check_microbatches_run(const RunOptions& o, const RunPlan& plan) {
  const SweepParams sp = sweep_params(o, plan);
  for (const int m : plan.microbatches) {
    std::string first_error;
    bool runs = false;
    for (const Combination& c :
         enumerate_sweep(plan.schedules, {plan.partitions.front()}, {m}, sp)) {
      ScheduleParams params;
      copy_schedule_params(params, c);
      try {
        (void)generate_schedule(c.schedule, params);
        runs = true;
        break;
      } catch (const UsageError& e) {
        if (!first_error.empty()) continue;
        first_error = e.what();
      }
    }
    if (runs) continue;
    // A sweep of one schedule refused for another flag (hybrid's
    // --sync-warmup above M) names that flag, as schedule would.
    if (plan.schedules.size() == 1 && !first_error.starts_with("--microbatches: "))
      throw UsageError(first_error);
    // "--microbatches: dualpipe-v needs ..." -> "dualpipe-v needs ...".
    std::string why = first_error;
    if (why.starts_with("--microbatches: ")) why.erase(0, 16);
    const std::string& first = plan.schedules.front();
    throw UsageError("--microbatches " + std::to_string(m) +
                     ": no schedule of the sweep runs it on " + std::to_string(plan.stages) +
                     " stages (" + (why.starts_with(first + " ") ? why : first + ": " + why) + ")");
  }
}

// --cuda-graphs: on or off; given explicitly only with a device backend.
bool parse_cuda_graphs(const RunOptions& o, const BackendInfo& backend) {
  if (o.cuda_graphs != "on" && o.cuda_graphs != "off") {
    throw UsageError("--cuda-graphs: expected on or off, got '" + o.cuda_graphs + "'");
  }
  const bool given = std::find(o.given.begin(), o.given.end(), "--cuda-graphs") != o.given.end();
  if (given && !backend.traits.device) {
    std::string devices;
    for (const BackendInfo& b : backend_list()) {
      if (b.traits.device) devices += (devices.empty() ? "" : ", ") + b.name;
    }
    throw UsageError("--cuda-graphs: only a device backend (--backend " + devices +
                     ") launches CUDA graphs (got --backend " + backend.name + ")");
  }
  return o.cuda_graphs == "on";
}

}  // namespace

std::vector<std::string> expand_partitions(const std::string& text) {
  std::vector<std::string> known;
  for (const PartitionInfo& info : partition_list()) {
    if (info.name.rfind("manual", 0) != 0) known.push_back(info.name);
  }
  std::vector<std::string> out;
  const auto add = [&](const std::string& name) {  // a name given twice is one partition
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  };
  for (const std::string& item : cli::split_list(text)) {
    // "manual:0-9,10-58" arrives as "manual:0-9" and "10-58".
    if (!out.empty() && out.back().rfind("manual:", 0) == 0 && !item.empty() &&
        std::isdigit(static_cast<unsigned char>(item[0])) != 0) {
      out.back() += "," + item;
      continue;
    }
    if (item == "all") {
      for (const std::string& k : known) add(k);
      continue;
    }
    bool found = item.rfind("manual:", 0) == 0;
    for (const std::string& k : known) found = found || k == item;
    if (!found) {
      throw UsageError("--partition: unknown partition '" + item + "' (partitions: " + join(known) +
                       ", manual:<ranges>, all)");
    }
    add(item);
  }
  if (out.empty()) throw UsageError("--partition: expected a partition name or 'all'");
  return out;
}

RunPlan validate_run_options(const RunOptions& o, int world_size) {
  RunPlan plan;
  if (!o.extras.empty()) {
    const std::string& first = o.extras.front();
    throw UsageError((first.rfind('-', 0) == 0 ? "unknown flag " : "unexpected argument ") + first +
                     " (see pipebench run --help)");
  }
  const int stages = o.stages == 0 ? world_size : o.stages;
  if (stages < 1 || world_size % stages != 0) {
    throw UsageError("--stages " + std::to_string(o.stages) + ": the " +
                     std::to_string(world_size) + " MPI ranks are not a multiple of " +
                     std::to_string(o.stages) + " stages (W = P x D ranks run D data-parallel " +
                     "replicas: run with mpirun -np " + std::to_string(o.stages) + ", " +
                     std::to_string(2 * o.stages) + ", ...)");
  }
  plan.stages = stages;
  plan.data_parallel = world_size / stages;
  plan.rank_order = parse_rank_order(o.rank_order, "--rank-order");
  check_counts(o);
  plan.inflight = o.inflight == 0 ? stages : o.inflight;

  const BackendInfo& backend = registered("--backend", "backend", backend_list(), o.backend);
  plan.backend = backend.name;
  plan.transport = registered("--transport", "transport", transport_list(), o.transport).name;
  plan.collectors = cli::split_list(o.profile);
  check_collector_names(plan.collectors);
  if (o.check && !backend.real_gradients) {
    std::string real;
    for (const BackendInfo& b : backend_list()) {
      if (b.real_gradients) real += (real.empty() ? "" : ", ") + b.name;
    }
    throw UsageError("--check: compares real gradients, which only --backend " + real +
                     " computes (got --backend " + backend.name + ")");
  }
  parse_plant(o.plant, stages, backend, plan);
  plan.cuda_graphs = parse_cuda_graphs(o, backend);
  plan.fault = parse_fault(o.debug_fault, world_size);
  if (plan.fault.phase == DebugFault::Phase::kTrace && !o.trace)
    throw UsageError("--debug-fault: the trace phase comes only with --trace");
  if (!o.memory_budget.empty()) {
    plan.memory_budget = cli::parse_bytes(o.memory_budget, "--memory-budget");
    if (plan.memory_budget <= 0)
      throw UsageError("--memory-budget: expected a size > 0, got '" + o.memory_budget + "'");
  }

  plan.schedules = expand_schedules(o.schedules);
  if (!o.from_result) refuse_unused_schedule_parameters(o, plan.schedules);
  plan.partitions = expand_partitions(o.partitions);
  plan.microbatches = cli::parse_int_list(o.microbatches, "--microbatches");
  plan.model = parse_model_spec(o.model);
  plan.model.name = o.model;
  plan.model.vocab_divisor = o.vocab_divisor;
  plan.model.bytes_per_element = dtype_bytes(o.dtype, backend);
  // The attention's form changes what its unit keeps: chosen before the
  // units are expanded. The device is probed only for the cuda backend.
  const AttentionRequest attention = parse_attention_request(o.attention);
  const int e = plan.model.bytes_per_element;
  const std::string missing = backend.name == "cuda" ? cuda::fused_attention_unavailable_reason(
                                                           e, plan.model.hidden / plan.model.heads)
                                                     : "";
  std::string obstacle = fused_attention_obstacle(backend.name, e, plan.model, missing);
  if (obstacle.empty() && attention == AttentionRequest::kNaive) {
    obstacle = o.recorded_attention_reason;
  }
  plan.attention = choose_attention(attention, obstacle);
  plan.units =
      expand_units(plan.model, kernels_for(backend.name, o.device), plan.attention.attention);

  check_stage_cuts(plan, o.model);
  check_partitions_place(o, plan);
  if (!o.from_result) check_microbatches_run(o, plan);
  if (backend.modelled_time) check_time_scale(o, plan);
  return plan;
}

SweepParams sweep_params(const RunOptions& options, const RunPlan& plan) {
  SweepParams sp;
  sp.stages = plan.stages;
  sp.chunks = options.chunks;
  sp.inflight = plan.inflight;
  sp.sync_warmup = options.sync_warmup;
  sp.batches = options.batches;
  sp.data_parallel = plan.data_parallel;
  return sp;
}

std::string default_out_dir(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "results/%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::string iso8601_utc(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace ppb::run
