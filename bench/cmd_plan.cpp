// `pipebench plan`: which schedule, partition, pipeline depth, micro-batch
// count and size, in-flight limit and chunk count to run on a described
// cluster, and whether it fits (the planner of reports/plan.hpp).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "ppb/pipeline/backend_traits.hpp"
#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/output_file.hpp"
#include "ppb/reports/format.hpp"
#include "ppb/reports/load.hpp"
#include "ppb/reports/plan.hpp"
#include "run/run_options.hpp"

namespace ppb::cli {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct PlanCommandOptions {
  std::string cluster_file;
  reports::ClusterInput cluster;
  std::string gpu_memory;
  std::string model;
  int vocab_divisor = kDefaultVocabDivisor;  // --make-vocab-size-divisible-by
  int64_t global_batch = 0;
  std::string micro_batch_sizes = "1,2,4,8";
  std::string schedules = "all";
  std::string partitions = "all";
  std::string optimizer = "adam";
  std::string dtype = "fp32";
  std::string attention = "auto";
  double memory_guard = 0.85;
  int top = 10;
  std::vector<std::string> calibration;  // a calibration file, or result files / folders
  std::string format = "text";
  std::string trace;
  std::vector<std::string> validate;       // result files or folders
  std::vector<CLI::Option*> search_flags;  // what only the search uses (not --validate)
  // Flags given on the command line override the cluster file's fields.
  std::vector<std::pair<CLI::Option*, std::function<void(reports::ClusterInput&)>>> overrides;
};

reports::ClusterInput cluster_input(const PlanCommandOptions& opt) {
  reports::ClusterInput in =
      opt.cluster_file.empty() ? opt.cluster : reports::read_cluster_file(opt.cluster_file);
  if (!opt.cluster_file.empty()) {
    for (const auto& [flag, apply] : opt.overrides) {
      if (*flag) apply(in);
    }
  }
  if (!opt.gpu_memory.empty()) {
    in.gpu_memory_bytes = parse_bytes(opt.gpu_memory, "--gpu-memory");
    if (!reports::kGpuMemoryRange.contains(static_cast<double>(in.gpu_memory_bytes))) {
      throw UsageError("--gpu-memory: expected a size in " + reports::kGpuMemoryRange.text() +
                       " bytes, got '" + opt.gpu_memory + "'");
    }
  }
  if (in.gpus < 1) throw UsageError("--gpus: required (or a --cluster file with \"gpus\")");
  return in;
}

// The check of a cluster figure's flag: the range a cluster file's field
// must lie in, too.
CLI::Validator figure_in(const reports::FigureRange& range, const std::string& unit) {
  return number_in(range.lo, range.hi, range.text() + " (" + unit + ")");
}

std::vector<std::string> names_or_all(const std::string& text) {
  if (text == "all") return {};
  return split_list(text);
}

boost::json::value number_or_null(double x) {
  return std::isfinite(x) ? boost::json::value(x) : boost::json::value(nullptr);
}

// A figure only a fitting (simulated) candidate has.
boost::json::value simulated(const reports::Candidate& c, double x) {
  return c.fits ? number_or_null(x) : boost::json::value(nullptr);
}

boost::json::object candidate_json(const reports::Candidate& c) {
  boost::json::array peaks;
  for (int64_t b : c.peak_memory_bytes) peaks.push_back(b);
  boost::json::array same_cut;
  for (const std::string& p : c.same_cut) same_cut.emplace_back(p);
  return boost::json::object{{"schedule", c.schedule},
                             {"partition", c.partition},
                             {"same_cut", std::move(same_cut)},
                             {"stages", c.stages},
                             {"data_parallel", c.data_parallel},
                             {"microbatches", c.microbatches},
                             {"micro_batch_size", c.micro_batch_size},
                             {"chunks", c.chunks},
                             {"inflight", c.inflight},
                             {"samples_per_second", simulated(c, c.samples_per_second)},
                             {"step_seconds", simulated(c, c.step_seconds)},
                             {"allreduce_seconds", c.allreduce_seconds},
                             {"bubble_ratio", simulated(c, c.bubble_ratio)},
                             {"peak_memory_bytes", std::move(peaks)},
                             {"worst_stage", c.worst_stage},
                             {"fits", c.fits},
                             {"why", c.why}};
}

void print_json(const reports::PlanOptions& o, const reports::Plan& plan,
                const PlanCommandOptions& opt) {
  const reports::ClusterSpec& c = o.cluster;
  boost::json::object cluster{
      {"gpus", c.gpus},
      {"gpus_per_node", c.gpus_per_node},
      {"device", c.device.name},
      {"peak_flops", c.device.peak_flops},
      {"memory_bandwidth", c.device.mem_bandwidth},
      {"gpu_memory_bytes", c.gpu_memory_bytes},
      {"intra_node", {{"bandwidth", c.intra_node.bandwidth}, {"latency", c.intra_node.latency}}},
      {"inter_node", {{"bandwidth", c.inter_node.bandwidth}, {"latency", c.inter_node.latency}}}};
  boost::json::array candidates;
  for (const reports::Candidate& k : plan.ranked) candidates.push_back(candidate_json(k));
  for (const reports::Candidate& k : plan.alternatives) candidates.push_back(candidate_json(k));
  boost::json::object out{
      {"schema", "pipebench.plan/1"},
      {"cluster", std::move(cluster)},
      {"model", opt.model},
      {"global_batch", o.global_batch},
      {"calibration", o.calibration != nullptr ? boost::json::value(o.calibration->summary)
                                               : boost::json::value(nullptr)},
      {"optimizer", optimizer_name(o.memory.optimizer)},
      {"dtype", opt.dtype},
      {"attention", attention_name(plan.attention.attention)},
      {"attention_reason", plan.attention.reason.empty()
                               ? boost::json::value(nullptr)
                               : boost::json::value(plan.attention.reason)},
      {"memory_guard", o.memory_guard},
      {"capacity_bytes", plan.capacity_bytes},
      {"considered", plan.considered},
      {"simulated", plan.evaluated},
      {"candidates", std::move(candidates)},
      {"advice", plan.advice}};
  std::printf("%s\n", boost::json::serialize(out).c_str());
}

std::string peak_text(const reports::Candidate& c, int64_t capacity) {
  const int64_t peak = c.peak_memory_bytes[static_cast<size_t>(c.worst_stage)];
  return reports::format_bytes(static_cast<double>(peak)) + " / " +
         reports::format_bytes(static_cast<double>(capacity)) + " (s" +
         std::to_string(c.worst_stage) + ")";
}

void print_row(const std::string& rank, const reports::Candidate& c, int64_t capacity) {
  // One stage is no pipeline, whichever schedule ranked it: no partition,
  // N or V (reports::candidate_label).
  const bool single = c.stages == 1;
  const std::string partition = single ? "-" : c.partition;
  const std::string pd = std::to_string(c.stages) + "x" + std::to_string(c.data_parallel);
  const std::string n = c.inflight > 0 && !single ? std::to_string(c.inflight) : "-";
  const std::string v = single ? "-" : std::to_string(c.chunks);
  const std::string sps = c.fits ? reports::format_number(c.samples_per_second) : "-";
  const std::string bubble = c.fits ? reports::format_fixed(c.bubble_ratio, 3) : "-";
  std::printf("%-4s %-16s %-9s %9s %5d %4d %4s %2s %11s %7s  %s\n", rank.c_str(),
              reports::shown_schedule(c).c_str(), partition.c_str(), pd.c_str(), c.microbatches,
              c.micro_batch_size, n.c_str(), v.c_str(), sps.c_str(), bubble.c_str(),
              peak_text(c, capacity).c_str());
}

void print_text(const reports::PlanOptions& o, const reports::Plan& plan,
                const PlanCommandOptions& opt) {
  const reports::ClusterSpec& c = o.cluster;
  std::printf("plan for %s on %d x %s (%d per node, %s each; guard %s%%: %s), %s, %s",
              opt.model.c_str(), c.gpus, c.device.name.c_str(), c.gpus_per_node,
              reports::format_bytes(static_cast<double>(c.gpu_memory_bytes)).c_str(),
              reports::format_trimmed(o.memory_guard * 100).c_str(),
              reports::format_bytes(static_cast<double>(plan.capacity_bytes)).c_str(),
              optimizer_name(o.memory.optimizer), opt.dtype.c_str());
  std::printf(", %s", attention_words(plan.attention).c_str());
  if (o.global_batch > 0)
    std::printf(", global batch %lld", static_cast<long long>(o.global_batch));
  if (o.calibration != nullptr && !o.calibration->summary.empty())
    std::printf("\ncalibration: %s", o.calibration->summary.c_str());
  std::printf(
      "\n%lld configurations, %lld simulated (the rest pruned: cannot fit or cannot win)\n\n",
      static_cast<long long>(plan.considered), static_cast<long long>(plan.evaluated));
  const char* header = "%-4s %-16s %-9s %9s %5s %4s %4s %2s %11s %7s  %s\n";
  if (!plan.ranked.empty()) {
    std::printf(header, "rank", "schedule", "partition", "P x DP", "M", "mbs", "N", "V",
                "samples/s", "bubble", "peak memory / capacity (worst stage)");
    for (size_t i = 0; i < plan.ranked.size(); ++i)
      print_row(std::to_string(i + 1), plan.ranked[i], plan.capacity_bytes);
    std::printf("\nwhy:\n");
    for (size_t i = 0; i < plan.ranked.size(); ++i)
      std::printf("  %zu. %s\n", i + 1, plan.ranked[i].why.c_str());
  } else {
    std::printf("%s\n", plan.advice.c_str());
  }
  if (!plan.alternatives.empty()) {
    std::printf("\nthe other schedules (the best configuration of each):\n");
    std::printf(header, "", "schedule", "partition", "P x DP", "M", "mbs", "N", "V", "samples/s",
                "bubble", "peak memory / capacity (worst stage)");
    for (const reports::Candidate& k : plan.alternatives) print_row("", k, plan.capacity_bytes);
    std::printf("\nwhy they lose:\n");
    for (const reports::Candidate& k : plan.alternatives)
      std::printf("  %-16s %s\n", reports::shown_schedule(k).c_str(), k.why.c_str());
  }
}

boost::json::object validation_row_json(const reports::ValidationRow& r) {
  const ResultConfig& c = r.config;
  boost::json::object config{{"schedule", c.schedule},
                             {"partition", c.partition},
                             {"stages", c.stages},
                             {"microbatches", c.microbatches},
                             {"micro_batch_size", c.micro_batch_size},
                             {"chunks", c.chunks},
                             {"inflight", c.inflight},
                             {"batches", c.batches},
                             {"backend", c.backend},
                             {"model", c.model},
                             {"device", c.device}};
  return boost::json::object{
      {"source", r.source},
      {"config", std::move(config)},
      {"calibrated_on", r.calibrated_on},
      {"measurements", r.measurements},
      {"foreign_cpu", number_or_null(r.foreign_cpu)},
      {"predicted",
       {{"samples_per_second", number_or_null(r.predicted_samples_per_second)},
        {"peak_memory_bytes", r.predicted_peak_bytes}}},
      {"measured",
       {{"samples_per_second", r.measured_samples_per_second},
        {"peak_memory_bytes", r.measured_peak_bytes}}},
      {"error",
       {{"samples_per_second", number_or_null(r.samples_error)},
        {"peak_memory_bytes", number_or_null(r.memory_error)}}}};
}

void print_validation(const reports::Validation& v, const std::string& format) {
  if (format == "json") {
    boost::json::array rows;
    for (const reports::ValidationRow& r : v.rows) rows.push_back(validation_row_json(r));
    const auto strings = [](const std::vector<std::string>& lines) {
      boost::json::array a;
      for (const std::string& s : lines) a.push_back(boost::json::string(s));
      return a;
    };
    boost::json::object out{
        {"schema", "pipebench.plan-validation/1"},
        {"method", "leave-one-out within each setup (machine, backend, device, model, dtype)"},
        {"combinations", std::move(rows)},
        {"mean_abs_error",
         {{"samples_per_second", number_or_null(v.rows.empty() ? kNaN : v.mean_abs_samples_error)},
          {"peak_memory_bytes", number_or_null(v.rows.empty() ? kNaN : v.mean_abs_memory_error)}}},
        {"calibrations", strings(v.calibrations)},
        {"warnings", strings(v.warnings)},
        {"skipped", strings(v.skipped)},
        {"refused", strings(v.refused)}};
    std::printf("%s\n", boost::json::serialize(out).c_str());
    return;
  }
  // An error that could not be computed (a figure the planner refused to
  // predict) reads "n/a", not "n/a%".
  const auto percent = [](double fraction) { return reports::format_percent(fraction, 2); };
  std::printf("%-44s %12s %12s %8s %12s %12s %8s\n", "combination (calibrated on the others)",
              "samples/s", "measured", "error", "peak memory", "measured", "error");
  for (const reports::ValidationRow& r : v.rows) {
    const std::string label =
        reports::config_label(r.config) +
        (r.measurements > 1 ? " (x" + std::to_string(r.measurements) + ")" : "") +
        (reports::measured_on_busy_host(r) ? " *" : "");
    std::printf("%-44s %12s %12s %8s %12s %12s %8s\n", label.c_str(),
                reports::format_number(r.predicted_samples_per_second).c_str(),
                reports::format_number(r.measured_samples_per_second).c_str(),
                percent(r.samples_error).c_str(),
                reports::format_bytes(static_cast<double>(r.predicted_peak_bytes)).c_str(),
                reports::format_bytes(static_cast<double>(r.measured_peak_bytes)).c_str(),
                percent(r.memory_error).c_str());
  }
  if (v.rows.empty()) {
    std::printf("no combination could be predicted\n");
  } else {
    int files = 0;
    for (const reports::ValidationRow& r : v.rows) files += r.measurements;
    const std::string merged =
        files > static_cast<int>(v.rows.size())
            ? " (" + std::to_string(files) + " measurements; (xN): the median of N)"
            : "";
    std::printf("\nmean absolute error over %zu combinations%s: samples/s %s, peak memory %s\n",
                v.rows.size(), merged.c_str(), percent(v.mean_abs_samples_error).c_str(),
                percent(v.mean_abs_memory_error).c_str());
  }
  for (const std::string& s : v.calibrations) std::printf("calibrated %s\n", s.c_str());
  for (const std::string& s : v.warnings) std::printf("warning: %s\n", s.c_str());
  for (const std::string& s : v.skipped) std::printf("skipped %s\n", s.c_str());
  for (const std::string& s : v.refused) std::printf("%s\n", s.c_str());
}

// --validate predicts measured results: the flags that describe a search
// would be ignored, so they are refused, all of them named.
void refuse_search_flags(const PlanCommandOptions& opt) {
  std::string given;
  for (const CLI::Option* o : opt.search_flags) {
    if (o->count() > 0) given += (given.empty() ? "" : ", ") + o->get_name();
  }
  if (!given.empty()) {
    throw UsageError("--validate: takes only result files or folders and --format, not " + given +
                     " (they describe a search)");
  }
}

// For a person at a terminal: how far the search is, on one line of
// stderr rewritten at most twice a second and cleared at the end.
std::function<void(int64_t, int64_t)> progress_line() {
  auto last = std::make_shared<std::chrono::steady_clock::time_point>();
  return [last](int64_t done, int64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (done == total) {
      std::fprintf(stderr, "\r\033[K");
    } else if (now - *last >= std::chrono::milliseconds(500)) {
      *last = now;
      std::fprintf(stderr, "\rplan: %lld of %lld configurations searched",
                   static_cast<long long>(done), static_cast<long long>(total));
    }
    std::fflush(stderr);
  };
}

void run_plan(const PlanCommandOptions& opt) {
  if (!opt.validate.empty()) {
    refuse_search_flags(opt);
    const reports::LoadedResults loaded =
        reports::load_results(opt.validate, false, {}, /*keep_repeats=*/true);
    print_validation(reports::validate_plan(loaded.results), opt.format);
    return;
  }
  if (opt.model.empty()) throw UsageError("--model: required (or --validate RESULTS...)");
  // The search can take minutes: an output it cannot write is refused first.
  if (!opt.trace.empty()) check_output_path(opt.trace);
  reports::PlanOptions o;
  o.model = parse_model_spec(opt.model);
  o.model.bytes_per_element = parse_dtype(opt.dtype);
  o.cluster = reports::resolve_cluster(cluster_input(opt), o.model.bytes_per_element);
  o.model.vocab_divisor = opt.vocab_divisor;
  o.global_batch = opt.global_batch;
  o.micro_batch_sizes = parse_int_list(opt.micro_batch_sizes, "--micro-batch-size");
  o.schedules = names_or_all(opt.schedules);
  o.partitions = run::expand_partitions(opt.partitions);
  o.memory.optimizer = parse_optimizer(opt.optimizer, "--optimizer");
  o.memory.element_bytes = o.model.bytes_per_element;
  // --attention fused where it cannot run: make_plan refuses it before it searches.
  o.attention = parse_attention_request(opt.attention);
  o.memory.resident_bytes = device_backend_traits().resident_bytes;  // the GPUs run it
  o.memory_guard = opt.memory_guard;
  o.top = opt.top;
  if (isatty(STDERR_FILENO) != 0) o.progress = progress_line();
  std::optional<Calibration> cal;
  if (!opt.calibration.empty()) {
    cal = reports::calibration_from(opt.calibration, o.cluster.device.name);
    o.calibration = &*cal;
  }
  const reports::Plan plan = reports::make_plan(o);
  if (!opt.trace.empty() && !plan.ranked.empty())
    reports::write_plan_trace(o, plan.ranked.front(), opt.trace);
  if (opt.format == "json")
    print_json(o, plan, opt);
  else
    print_text(o, plan, opt);
}

/// The flags that describe the cluster, each replacing the same field of a
/// --cluster file (the flag is what messages then name).
void add_cluster_flags(CLI::App* cmd, PlanCommandOptions& opt) {
  reports::ClusterInput& in = opt.cluster;
  // Not the shared pointer: the options would hold themselves.
  const reports::ClusterInput* flags = &opt.cluster;
  auto field = [&](CLI::Option* flag, auto member) {
    opt.overrides.emplace_back(
        flag, [flags, member](reports::ClusterInput& c) { c.*member = flags->*member; });
  };
  field(cmd->add_option("--gpus", in.gpus, "GPUs in the cluster")
            ->check(integer_in(1, reports::kMaxClusterGpus)),
        &reports::ClusterInput::gpus);
  opt.overrides.emplace_back(
      cmd->add_option("--gpus-per-node", in.gpus_per_node, "GPUs per node (default: all)")
          ->check(integer_in(1, reports::kMaxClusterGpus)),
      [flags](reports::ClusterInput& c) {
        c.gpus_per_node = flags->gpus_per_node;
        c.gpus_per_node_named = "--gpus-per-node";
      });
  opt.overrides.emplace_back(
      cmd->add_option("--device", in.device, "Device preset (see pipebench list)"),
      [flags](reports::ClusterInput& c) {
        c.device = flags->device;
        c.device_named = "--device";
      });
  field(
      cmd->add_option("--peak-flops", in.peak_flops, "Peak FLOP/s per GPU (replaces the preset's)")
          ->check(figure_in(reports::kPeakFlopsRange, "FLOP/s")),
      &reports::ClusterInput::peak_flops);
  field(cmd->add_option("--memory-bandwidth", in.memory_bandwidth,
                        "Memory bandwidth per GPU, bytes/s (replaces the preset's)")
            ->check(figure_in(reports::kBandwidthRange, "bytes/s")),
        &reports::ClusterInput::memory_bandwidth);
  field(cmd->add_option("--link-bandwidth", in.link_bandwidth,
                        "GPU-to-GPU bandwidth inside a node, bytes/s one direction")
            ->check(figure_in(reports::kBandwidthRange, "bytes/s")),
        &reports::ClusterInput::link_bandwidth);
  field(cmd->add_option("--link-latency", in.link_latency, "Latency inside a node, seconds")
            ->check(figure_in(reports::kLatencyRange, "seconds")),
        &reports::ClusterInput::link_latency);
  field(cmd->add_option("--inter-node-bandwidth", in.inter_node_bandwidth,
                        "Bandwidth between nodes per GPU, bytes/s one direction")
            ->check(figure_in(reports::kBandwidthRange, "bytes/s")),
        &reports::ClusterInput::inter_node_bandwidth);
  field(cmd->add_option("--inter-node-latency", in.inter_node_latency,
                        "Latency between nodes, seconds")
            ->check(figure_in(reports::kLatencyRange, "seconds")),
        &reports::ClusterInput::inter_node_latency);
}

}  // namespace

void register_plan(CLI::App& app) {
  auto opt = std::make_shared<PlanCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Rank schedule x partition x (P, M, micro-batch size, N, V) for a described cluster");
  cmd->add_option("--cluster", opt->cluster_file,
                  "A pipebench.cluster/1 JSON file (flags given beside it win)")
      ->check(non_empty("a file"));
  add_cluster_flags(cmd, *opt);
  cmd->add_option("--gpu-memory", opt->gpu_memory, "Memory per GPU: 80GB, 141GB, 24GiB");
  cmd->add_option("--model", opt->model, "Model spec: a preset or gpt:layers=..,hidden=..")
      ->check(non_empty("a model"));
  add_vocab_divisor_flag(*cmd, opt->vocab_divisor);
  cmd->add_option("--validate", opt->validate,
                  "Result files or folders: predict each measured combination from its "
                  "configuration, calibrated on the others, and print the errors");
  cmd->add_option("--global-batch", opt->global_batch,
                  "Samples per optimizer step over all replicas (default: M = P, 2P, 4P)")
      ->check(integer_in(1, int64_t{1} << 40));
  cmd->add_option("--micro-batch-size", opt->micro_batch_sizes,
                  "Micro-batch sizes to consider (default 1,2,4,8)");
  cmd->add_option("--schedule", opt->schedules, "Schedules to consider (default all)");
  cmd->add_option("--partition", opt->partitions,
                  "Partitions to consider (default all but manual)");
  cmd->add_option("--optimizer", opt->optimizer, "sgd or adam (default adam): its state counts");
  cmd->add_option("--dtype", opt->dtype, "fp32 or bf16 storage (bf16: fp32 gradients and master)");
  add_attention_flag(*cmd, opt->attention);
  cmd->add_option("--memory-guard", opt->memory_guard,
                  "Fraction of GPU memory a plan may use (default 0.85)");
  cmd->add_option("--top", opt->top, "Leaders to list (default 10)")->check(integer_in(1, 1000));
  cmd->add_option("--calibration", opt->calibration,
                  "A pipebench.calibration/1 file, or result files or folders measured on the "
                  "device: the roofline is fitted to them");
  cmd->add_option("--format", opt->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("--trace", opt->trace, "Write the winner's predicted timeline (Perfetto trace)")
      ->check(non_empty("a file"));
  for (CLI::Option* o : cmd->get_options()) {
    const std::string name = o->get_name();
    if (name != "--validate" && name != "--format" && name != "--help")
      opt->search_flags.push_back(o);
  }
  cmd->callback([opt] { run_plan(*opt); });
}

}  // namespace ppb::cli
