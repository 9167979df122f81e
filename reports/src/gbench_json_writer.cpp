// Google Benchmark's JSON reporter format, so benchmark's tools/compare.py and
// dashboards that read it take pipebench results as they are: one
// "iteration" run per timed step (so compare.py's U test has repetitions)
// plus a "median" aggregate per combination. Runs are serialized one at a
// time into the text (no document of them all), so the memory is the
// output's size: a result of a million steps costs a million runs of text,
// not a tree of them.
#include <boost/json.hpp>
#include <cmath>
#include <set>

#include "ppb/pipeline/schedule.hpp"
#include "ppb/reports/format.hpp"
#include "ppb/reports/writers.hpp"

namespace ppb::reports {

namespace json = boost::json;

namespace {

// Which of the results' machines, builds and backends a name must tell
// apart: only where the results hold more than one.
struct NameParts {
  bool machine = false;  // machine and backend
  bool build = false;
};

// A name per measurement: what config_key tells apart, as Google
// Benchmark's path of arguments (compare.py matches runs by name, so two
// measurements must never share one).
std::string bench_name(const ResultEntry& e, NameParts parts) {
  const ResultConfig& c = e.result.config;
  std::string name = "pipebench/" + c.schedule + "/" + c.partition +
                     "/P:" + std::to_string(c.stages) + "/M:" + std::to_string(c.microbatches);
  const ScheduleInfo* info = find_schedule_info(c.schedule);
  if (info != nullptr && info->uses_inflight) name += "/N:" + std::to_string(c.inflight);
  if (info != nullptr && info->uses_sync_warmup) name += "/K:" + std::to_string(c.sync_warmup);
  if (c.chunks > 1) name += "/V:" + std::to_string(c.chunks);
  if (c.data_parallel > 1) name += "/D:" + std::to_string(c.data_parallel);
  if (c.memory_budget > 0) name += "/budget:" + std::to_string(c.memory_budget);
  if (c.memory_guard > 0) name += "/guard:" + format_trimmed(c.memory_guard);
  if (c.batches > 1) name += "/batches:" + std::to_string(c.batches);
  for (const WorkField& f : work_fields(c)) name += "/" + std::string(f.name) + ":" + f.value;
  // The default transport (the registry's first) is left unsaid.
  if (!c.transport.empty() && c.transport != "mpi") name += "/transport:" + c.transport;
  if (e.result.metrics && !e.result.metrics->peak_memory_bytes.device_profiler.empty())
    name += "/profiler:" + e.result.metrics->peak_memory_bytes.device_profiler;
  if (parts.machine) name += "/machine:" + e.machine + "/backend:" + c.backend;
  if (parts.build) name += "/build:" + e.build;
  return name;
}

json::object run(const std::string& name, int64_t family, int reps, int rep, double seconds,
                 double samples) {
  const double ms = seconds * 1e3;
  json::object b;
  b["name"] = name;
  b["family_index"] = family;
  b["per_family_instance_index"] = 0;
  b["run_name"] = name;
  b["run_type"] = "iteration";
  b["repetitions"] = reps;
  b["repetition_index"] = rep;
  b["threads"] = 1;
  b["iterations"] = 1;
  b["real_time"] = ms;
  b["cpu_time"] = ms;
  b["time_unit"] = "ms";
  b["items_per_second"] = seconds > 0 ? samples / seconds : 0.0;
  return b;
}

}  // namespace

std::string write_gbench_json(const ReportModel& model) {
  json::object context;
  const ResultEnvironment* env = model.groups.empty() ? nullptr : &model.groups.front().environment;
  context["date"] = model.generated_at;
  context["host_name"] = env != nullptr ? env->hostname : "";
  context["executable"] = "pipebench report";
  context["num_cpus"] = env != nullptr ? env->ranks : 0;
  context["mhz_per_cpu"] = 0;
  context["cpu_scaling_enabled"] = false;
  context["caches"] = json::array();
  context["load_avg"] = json::array();
  context["library_build_type"] =
      env != nullptr && env->build_type.find("Deb") != std::string::npos ? "debug" : "release";
  context["json_schema_version"] = 1;
  context["pipebench_git"] = env != nullptr ? env->git : "";
  std::string out = "{\"context\":" + json::serialize(context) + ",\"benchmarks\":[";
  bool first = true;
  auto add = [&](const json::object& b) {
    if (!first) out += ',';
    first = false;
    out += json::serialize(b);
  };
  // The work is in every name; the machine and backend only when the
  // results hold more than one machine or backend, the build only when
  // they hold more than one build (two builds on one machine: an A/B).
  std::set<std::string> machines;
  std::set<std::string> builds;
  for (const GroupView& g : model.groups) {
    machines.insert(g.machine + " @ " + g.backend);
    builds.insert(g.build);
  }
  const NameParts parts{machines.size() > 1, builds.size() > 1};
  int64_t family = 0;
  for (const GroupView& g : model.groups) {
    for (const ResultEntry* e : g.entries) {
      if (e->result.status != ResultStatus::kOk || !e->result.metrics) continue;
      const ResultMetrics& m = *e->result.metrics;
      const std::string name = bench_name(*e, parts);
      const double samples =
          static_cast<double>(e->result.config.micro_batch_size) * e->result.config.microbatches;
      const std::vector<double>& steps = m.step_time_seconds.samples;
      const int reps = steps.empty() ? 1 : static_cast<int>(steps.size());
      if (steps.empty()) add(run(name, family, 1, 0, m.step_time_seconds.median, samples));
      for (size_t i = 0; i < steps.size(); ++i) {
        add(run(name, family, reps, static_cast<int>(i), steps[i], samples));
      }
      json::object med =
          run(name + "_median", family, reps, 0, m.step_time_seconds.median, samples);
      med["run_name"] = name;
      med["run_type"] = "aggregate";
      med["aggregate_name"] = "median";
      med["aggregate_unit"] = "time";
      med["iterations"] = reps;
      med["items_per_second"] = std::isfinite(m.samples_per_second) ? m.samples_per_second : 0.0;
      add(med);
      ++family;
    }
  }
  out += "]}\n";
  return out;
}

}  // namespace ppb::reports
