#include "run/rerun.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "ppb/profiling/check.hpp"
#include "ppb/reports/load.hpp"

namespace ppb::run {

namespace {

// config.plant ("stage 1 x1.10") back into the flag it came from ("1:1.10").
std::string plant_flag(const std::string& label, const std::string& source) {
  if (label.empty()) return "";
  const std::string prefix = "stage ";
  const auto x = label.find(" x");
  if (label.rfind(prefix, 0) != 0 || x == std::string::npos) {
    throw UsageError("--rerun " + source + ": field 'config.plant': expected 'stage S xF', got '" +
                     label + "'");
  }
  return label.substr(prefix.size(), x - prefix.size()) + ":" + label.substr(x + 2);
}

// The run's settings a result records, as the flags that made them. The
// combination's own fields (schedule, partition, M, V, N, K, batches) are in
// its Combination; the flags that do not change the measurement (--out,
// --resume, --trace, --timeout) come from this command line.
RunOptions recorded_options(const Result& r, const std::string& source, const RunOptions& given) {
  const ResultConfig& c = r.config;
  RunOptions o;
  o.model = c.model;
  // Files from before padding ran unpadded.
  o.vocab_divisor = c.vocab_padding ? c.vocab_padding->divisor : 1;
  o.dtype = c.dtype.empty() ? RunOptions{}.dtype : c.dtype;
  // The form that ran, not the rule again; naive, with the reason it had.
  o.attention = attention_ran(c);
  if (o.attention == attention_name(Attention::kNaive)) {
    o.recorded_attention_reason = c.attention_reason;
  }
  o.backend = c.backend;
  o.transport = c.transport;
  o.device = c.device.empty() ? RunOptions{}.device : c.device;
  o.seed = c.seed;
  o.time_scale = c.time_scale;
  o.iters = c.iters;
  o.warmup = c.warmup;
  o.min_time = c.min_time;
  // Files written before max_iters was recorded ran under the default cap.
  o.max_iters = c.max_iters > 0 ? c.max_iters : std::max(RunOptions{}.max_iters, c.iters);
  o.check = c.check;
  o.profile = c.profile;
  o.memory_budget = c.memory_budget > 0 ? std::to_string(c.memory_budget) : "";
  if (c.memory_guard > 0) o.memory_guard = c.memory_guard;
  const bool replant =
      std::find(given.given.begin(), given.given.end(), "--plant") != given.given.end();
  o.plant = replant ? given.plant : plant_flag(c.plant, source);
  o.out = given.out;
  o.resume = given.resume;
  o.trace = given.trace;
  o.timeout = given.timeout;
  o.debug_stall_rank = given.debug_stall_rank;
  o.stages = c.stages;
  o.rank_order = c.rank_order.empty() ? RunOptions{}.rank_order : c.rank_order;
  o.cuda_graphs = c.cuda_graphs.empty() ? RunOptions{}.cuda_graphs : c.cuda_graphs;
  o.from_result = true;
  return o;
}

// The settings that make two results one job: every flag recorded_options sets.
std::string settings_key(const RunOptions& o) {
  std::ostringstream s;
  s << o.model << '|' << o.vocab_divisor << '|' << o.dtype << '|' << o.attention << '|'
    << o.recorded_attention_reason << '|' << o.backend << '|' << o.transport << '|' << o.device
    << '|' << o.seed << '|' << o.time_scale << '|' << o.iters << '|' << o.warmup << '|'
    << o.min_time << '|' << o.max_iters << '|' << o.check << '|' << o.profile << '|'
    << o.memory_budget << '|' << o.memory_guard << '|' << o.plant << '|' << o.stages << '|'
    << o.rank_order << '|' << o.cuda_graphs;
  return s.str();
}

Combination recorded_combination(const ResultConfig& c) {
  Combination k;
  k.schedule = c.schedule;
  k.partition = c.partition;
  copy_schedule_params(k, c);
  k.data_parallel = c.data_parallel;
  return k;
}

// The job's lists as the flags would give them, so that validation checks
// every name (schedule, partition, M) as it does for a sweep.
void list_flags(RerunJob& job) {
  std::set<std::string> seen_s, seen_p, seen_m;
  auto add = [](std::string& list, std::set<std::string>& seen, const std::string& item) {
    if (seen.insert(item).second) list += (list.empty() ? "" : ",") + item;
  };
  job.options.schedules.clear();
  job.options.partitions.clear();
  job.options.microbatches.clear();
  for (const Combination& c : job.combinations) {
    add(job.options.schedules, seen_s, c.schedule);
    add(job.options.partitions, seen_p, c.partition);
    add(job.options.microbatches, seen_m, std::to_string(c.microbatches));
  }
}

}  // namespace

bool allowed_with_rerun(const std::string& flag) {
  static const std::set<std::string> kAllowed = {
      "--rerun", "--out", "--resume", "--trace", "--timeout", "--plant", "--debug-stall-rank"};
  return kAllowed.count(flag) != 0;
}

std::vector<std::pair<std::string, Result>> load_rerun_results(
    const std::vector<std::string>& paths) {
  // Each path as report reads it (a folder's newest measurement of each
  // combination: a night's sweep and its rerun/ are one combination), the
  // paths apart: two of them measuring one combination are two results,
  // which plan_reruns refuses as a pair that would write one file.
  std::vector<std::pair<std::string, Result>> out;
  std::set<std::string> seen;  // files two paths both hold, read once
  for (const std::string& path : paths) {
    reports::LoadedResults loaded;
    try {
      loaded = reports::load_results({path}, false);
    } catch (const UsageError& e) {
      throw UsageError(std::string("--rerun: ") + e.what());
    }
    for (reports::ResultEntry& e : loaded.results) {
      if (!seen.insert(reports::resolved_path(e.source).string()).second) continue;
      out.emplace_back(e.source, std::move(e.result));
    }
  }
  return out;
}

std::vector<RerunJob> plan_reruns(const std::vector<std::pair<std::string, Result>>& recorded,
                                  const RunOptions& options, int world_size,
                                  std::vector<std::string>* skipped) {
  for (const std::string& flag : options.given) {
    if (!allowed_with_rerun(flag)) {
      throw UsageError(flag +
                       ": --rerun takes every combination and setting from the result files "
                       "(only --out, --resume, --trace, --timeout and --plant go with it)");
    }
  }
  std::vector<RerunJob> jobs;
  std::map<std::string, size_t> job_of;
  std::map<std::string, std::string> file_of;  // result file name -> its source
  for (const auto& [source, r] : recorded) {
    if (r.status == ResultStatus::kInvalid) {
      if (skipped != nullptr) skipped->push_back(source + " (status invalid: nothing measured)");
      continue;
    }
    const int shape = r.config.stages * r.config.data_parallel;  // W = P x D
    const int ranks = r.environment.ranks > 0 ? r.environment.ranks : shape;
    if (ranks != world_size || shape != world_size) {
      const int want = ranks != world_size ? ranks : shape;
      throw UsageError("--rerun " + source + ": recorded on " + std::to_string(want) +
                       " ranks, this job has " + std::to_string(world_size) +
                       " (run it with mpirun -np " + std::to_string(want) + ")");
    }
    const Combination c = recorded_combination(r.config);
    const std::string name = result_file_name(c);
    const auto [named, fresh] = file_of.emplace(name, source);
    if (!fresh) {
      throw UsageError("--rerun: " + named->second + " and " + source +
                       " would both be written as " + name +
                       " (re-run them into separate --out folders)");
    }
    RunOptions o = recorded_options(r, source, options);
    // The combination's own numbers against run's limits, as if typed.
    RunOptions limits = o;
    limits.chunks = c.chunks;
    limits.batches = c.batches;
    limits.inflight = c.inflight;
    limits.sync_warmup = c.sync_warmup;
    try {
      check_counts(limits);
    } catch (const UsageError& e) {
      throw UsageError("--rerun " + source + ": " + e.what());
    }
    const auto [it, inserted] = job_of.emplace(settings_key(o), jobs.size());
    if (inserted) jobs.push_back({std::move(o), {}, {}});
    jobs[it->second].combinations.push_back(c);
    jobs[it->second].sources.push_back(source);
  }
  if (jobs.empty()) throw UsageError("--rerun: no measured combination to run again");
  int index = 0;
  for (RerunJob& job : jobs) {
    list_flags(job);
    for (Combination& c : job.combinations) c.index = index++;
    try {
      (void)validate_run_options(job.options, world_size);
    } catch (const UsageError& e) {
      throw UsageError("--rerun " + job.sources.front() + ": " + e.what());
    }
  }
  return jobs;
}

}  // namespace ppb::run
