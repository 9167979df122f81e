// `pipebench simulate`: runs a schedule on the cost model — from the Zero
// Bubble cost flags (--fwd --bwd --wgrad --comm) or from a model, partition
// and device — and prints the predicted timeline and figures.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "cli.hpp"
#include "ppb/pipeline/attention.hpp"
#include "ppb/pipeline/costs.hpp"
#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/pipeline/partition.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/schedule_io.hpp"
#include "ppb/pipeline/simulator.hpp"
#include "ppb/pipeline/timeline_text.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::cli {
namespace {

struct SimulateOptions {
  std::string schedule;
  std::string schedule_file;
  ScheduleParams params;
  double fwd = 1, bwd = 1, wgrad = 1, comm = 0;
  double wgrad_share = 1;  // zb-1p, zb-2p: ScheduleParams::wgrad_share
  int data_parallel = 1;   // D replicas: a ring all-reduce of each stage's gradients
  double allreduce = 0;    // with the cost flags: one chunk's all-reduce time
  std::string model, partition, device = "cpu";
  std::string dtype = "fp32";                // storage, with --model (as run's --dtype)
  std::string attention = "auto";            // --attention, with --model
  int vocab_divisor = kDefaultVocabDivisor;  // --make-vocab-size-divisible-by, with --model
  std::string format = "text";
  std::string trace;
  int width = 100;
  ValidateOptions validate;
  // Which optional flags were given (the schedule file carries its own P, M, V).
  CLI::Option* stages_flag = nullptr;
  CLI::Option* microbatches_flag = nullptr;
  CLI::Option* chunks_flag = nullptr;
  CLI::Option* batches_flag = nullptr;
  std::vector<CLI::Option*> model_flags;  // meaningful only with --model
  bool cost_flags_given = false;
};

Schedule load_schedule(const SimulateOptions& opt) {
  if (opt.schedule_file.empty()) {
    if (!*opt.stages_flag) throw UsageError("--stages: required with --schedule");
    if (!*opt.microbatches_flag) throw UsageError("--microbatches: required with --schedule");
    ScheduleParams params = opt.params;
    schedule_defaults(opt.schedule, opt.chunks_flag->count() > 0, opt.batches_flag->count() > 0,
                      params);
    // zb-1p and zb-2p place I and W by the same times the simulation uses.
    params.tf = opt.fwd;
    params.tb = opt.bwd;
    params.tw = opt.wgrad;
    params.tc = opt.comm;
    params.wgrad_share = opt.wgrad_share;
    Schedule s = generate_schedule(opt.schedule, params);
    if (opt.validate.link_buffers > 0) validate_or_throw(s, "", opt.validate);
    return s;
  }
  Schedule s = read_schedule_file(opt.schedule_file, opt.validate);
  auto mismatch = [&](const char* flag, int given, int in_file) {
    throw UsageError(std::string(flag) + ": " + std::to_string(given) + " does not match " +
                     opt.schedule_file + " (" + std::to_string(in_file) + ")");
  };
  if (*opt.stages_flag && opt.params.stages != s.stages)
    mismatch("--stages", opt.params.stages, s.stages);
  if (*opt.microbatches_flag && opt.params.microbatches != s.microbatches) {
    mismatch("--microbatches", opt.params.microbatches, s.microbatches);
  }
  if (*opt.chunks_flag && opt.params.chunks != s.chunks)
    mismatch("--chunks", opt.params.chunks, s.chunks);
  return s;
}

// What --model priced, for the printers and the all-reduce: the spec (the
// padding flag's vocabulary, --dtype's storage), the attention `run
// --attention` picks on the device (auto: fused on a GPU, cuDNN's or the
// flash kernels; naive on the cpu device), as `plan` prices it, and the
// device preset at that storage.
struct PricedModel {
  ModelSpec spec;
  AttentionChoice attention;
  DeviceSpec device;
};

// The schedule's costs: the flags', or --model's (then `model` says what
// it priced).
StageCosts build_costs(const SimulateOptions& opt, const Schedule& s,
                       std::optional<PricedModel>& model) {
  if (opt.model.empty()) {
    for (const CLI::Option* flag : opt.model_flags)
      if (*flag) throw UsageError(flag->get_name() + ": needs --model");
    return uniform_costs(s.stages, s.chunks, opt.fwd, opt.bwd, opt.wgrad, opt.comm);
  }
  if (opt.cost_flags_given)
    throw UsageError(
        "--model: give either --model or the cost flags (--fwd --bwd --wgrad --comm), not both");
  PricedModel& m = model.emplace();
  m.spec = parse_model_spec(opt.model);
  m.spec.vocab_divisor = opt.vocab_divisor;
  m.spec.bytes_per_element = parse_dtype(opt.dtype);
  const Kernels kernels = kernels_for("", opt.device);
  m.attention = modelled_attention(parse_attention_request(opt.attention), kernels, m.spec);
  std::vector<Unit> units = expand_units(m.spec, kernels, m.attention.attention);
  m.device = device_preset(opt.device, m.spec.bytes_per_element);
  std::vector<UnitTime> times = unit_times(units, m.device);
  const LinkModel link = m.device.link();
  PartitionOptions popt;
  popt.link = link;
  std::vector<UnitRange> parts = make_partition(opt.partition.empty() ? "balanced" : opt.partition,
                                                units, times, s.stages * s.chunks, popt);
  return model_costs(units, times, parts, s.stages, s.chunks, link);
}

/// Data parallelism (--data-parallel D): the ring all-reduce after each
/// chunk's last backward. With --model it moves the chunk's gradients (fp32
/// under bf16, as the memory model counts them) over the device's link; with the cost flags it
/// takes --allreduce time units (as latency: the flags have no bytes).
void add_allreduce(const SimulateOptions& opt, const Schedule& s,
                   const std::optional<PricedModel>& model, StageCosts& costs) {
  if (opt.data_parallel <= 1) {
    if (opt.allreduce > 0) throw UsageError("--allreduce: needs --data-parallel D > 1");
    return;
  }
  AllReduceModel& a = costs.allreduce;
  a.replicas = opt.data_parallel;
  const ScheduleInfo* info = find_schedule_info(s.name);
  a.per_backward = info != nullptr && info->optimizer_per_backward;
  if (!model) {
    a.latency = opt.allreduce / (2.0 * (opt.data_parallel - 1));
    return;
  }
  if (opt.allreduce > 0) throw UsageError("--allreduce: with --model the device's link prices it");
  a.element_bytes = model->spec.bytes_per_element;
  a.latency = model->device.link_latency;
  a.bandwidth = model->device.link_bandwidth;
}

void print_text(const Schedule& s, const StageCosts& costs, const SimResult& r,
                const SimulateOptions& opt, const std::optional<PricedModel>& model) {
  std::printf("schedule %s  P=%d M=%d V=%d", s.name.c_str(), s.stages, s.microbatches, s.chunks);
  if (s.batches > 1) std::printf(" batches=%d", s.batches);
  if (!model) {
    std::printf("  costs TF=%g TB=%g TW=%g TC=%g (time units)\n", opt.fwd, opt.bwd, opt.wgrad,
                opt.comm);
  } else {
    std::printf("  model %s, partition %s, device %s, %s, %s (seconds)\n", opt.model.c_str(),
                opt.partition.empty() ? "balanced" : opt.partition.c_str(), opt.device.c_str(),
                opt.dtype.c_str(), attention_words(model->attention).c_str());
  }
  std::printf("step time        %.6g\n", r.step_time);
  std::printf("bubble ratio     %.4f   (idle share of the step, mean over stages)\n",
              r.bubble_ratio);
  std::printf("bubble overhead  %.4f   (idle / busy, Megatron-LM's normalisation)\n",
              r.bubble_overhead);
  // The words in parentheses on two lines, the second under the first.
  char span[32];
  std::snprintf(span, sizeof span, "%.6g", r.stage_span);
  std::printf(
      "stage span       %s   (longest first-start to last-end of one stage: the step time when\n"
      "%*ssteps overlap, as the Zero Bubble paper counts)\n",
      span, static_cast<int>(17 + std::strlen(span) + 4), "");
  if (s.batches > 1)
    std::printf("time per batch   %.6g   (steady state, no flush)\n", r.time_per_batch());
  if (costs.allreduce.replicas > 1) {
    double longest = 0;
    for (const SimStage& st : r.stages) longest = std::max(longest, st.allreduce);
    std::printf(
        "data parallel    %d replicas: ring all-reduce of each stage's gradients, up to %.6g "
        "per stage\n",
        costs.allreduce.replicas, longest);
    std::printf(
        "pipeline time    %.6g   (end of the last action: the step without the all-reduce)\n",
        r.pipeline_time);
    std::printf(
        "bubble without   %.4f   (over the pipeline time; the bubble ratio above is with "
        "the all-reduce)\n",
        r.bubble_ratio_pipeline);
  }
  std::printf("\n");
  std::printf("stage %12s %12s %9s %s\n", "busy", "idle", "in-flight",
              costs.has_bytes ? "peak activations" : "");
  for (size_t i = 0; i < r.stages.size(); ++i) {
    const SimStage& st = r.stages[i];
    std::printf("%5zu %12.6g %12.6g %9d %s\n", i, st.busy, st.idle, st.peak_inflight,
                costs.has_bytes ? format_bytes(st.peak_activation_bytes).c_str() : "");
  }
  std::printf("\n%s", render_timeline(s, r, opt.width).c_str());
}

void print_json(const Schedule& s, const StageCosts& costs, const SimResult& r,
                const SimulateOptions& opt, const std::optional<PricedModel>& model) {
  boost::json::object config{{"schedule", s.name},
                             {"stages", s.stages},
                             {"microbatches", s.microbatches},
                             {"chunks", s.chunks},
                             {"batches", s.batches}};
  if (!model) {
    config["costs"] = {
        {"fwd", opt.fwd}, {"bwd", opt.bwd}, {"wgrad", opt.wgrad}, {"comm", opt.comm}};
  } else {
    config["model"] = opt.model;
    config["vocab_padding"] = {{"make_vocab_size_divisible_by", model->spec.vocab_divisor},
                               {"vocab", model->spec.vocab},
                               {"padded_vocab", model->spec.padded_vocab()}};
    config["partition"] = opt.partition.empty() ? "balanced" : opt.partition;
    config["device"] = opt.device;
    config["dtype"] = opt.dtype;
    const AttentionChoice& attention = model->attention;
    config["attention"] = attention_name(attention.attention);
    config["attention_reason"] = attention.reason.empty() ? boost::json::value(nullptr)
                                                          : boost::json::value(attention.reason);
  }
  boost::json::array stages;
  for (const SimStage& st : r.stages) {
    boost::json::object o{{"busy", st.busy},
                          {"idle", st.idle},
                          {"span", st.span()},
                          {"peak_inflight", st.peak_inflight}};
    if (costs.has_bytes) o["peak_activation_bytes"] = st.peak_activation_bytes;
    if (costs.allreduce.replicas > 1) o["allreduce"] = st.allreduce;
    stages.push_back(std::move(o));
  }
  boost::json::object out{{"schema", "pipebench.simulation/1"},
                          {"config", std::move(config)},
                          {"step_time", r.step_time},
                          {"bubble_ratio", r.bubble_ratio},
                          {"bubble_overhead", r.bubble_overhead},
                          {"stage_span", r.stage_span},
                          {"time_per_batch", r.time_per_batch()},
                          {"stages", std::move(stages)}};
  if (costs.allreduce.replicas > 1) {
    out["data_parallel"] = costs.allreduce.replicas;
    out["pipeline_time"] = r.pipeline_time;
    out["bubble_ratio_pipeline"] = r.bubble_ratio_pipeline;
  }
  std::printf("%s\n", boost::json::serialize(out).c_str());
}

void run_simulate(const SimulateOptions& opt) {
  Schedule s = load_schedule(opt);
  std::optional<PricedModel> model;
  StageCosts costs = build_costs(opt, s, model);
  add_allreduce(opt, s, model, costs);
  SimResult r = simulate(s, costs);
  if (!opt.trace.empty()) write_sim_trace(s, r, opt.trace);
  if (opt.format == "json")
    print_json(s, costs, r, opt, model);
  else
    print_text(s, costs, r, opt, model);
}

}  // namespace

void register_simulate(CLI::App& app) {
  auto opt = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand("simulate", "Run a schedule on the cost model");
  auto* by_name =
      cmd->add_option("--schedule", opt->schedule, "Schedule name (see pipebench list)");
  auto* by_file =
      cmd->add_option("--schedule-file", opt->schedule_file,
                      "A pipebench.schedule/1 JSON file, or PyTorch pipelining's CSV (*.csv)");
  cmd->add_option("--link-buffers", opt->validate.link_buffers,
                  "Validate under in-order matching (NCCL, mpi-ordered) with this many receive "
                  "buffers per link; 0 = matching by tag")
      ->check(CLI::Range(0, 1 << 20));
  by_name->excludes(by_file);
  opt->stages_flag = cmd->add_option("--stages,-p", opt->params.stages, "Pipeline stages P");
  opt->microbatches_flag =
      cmd->add_option("--microbatches,-m", opt->params.microbatches, "Micro-batches M");
  opt->chunks_flag = cmd->add_option("--chunks,-v", opt->params.chunks,
                                     "Model chunks per stage V (interleaved-1f1b; default 2)");
  cmd->add_option("--inflight", opt->params.inflight, "Micro-batches in flight N (default P)");
  cmd->add_option("--sync-warmup", opt->params.sync_warmup,
                  "Synchronous warm-up micro-batches K (hybrid)");
  opt->batches_flag = cmd->add_option("--batches", opt->params.batches,
                                      "Batches without flush (pipedream; default 2)");
  auto* f = cmd->add_option("--fwd", opt->fwd, "TF: forward time per stage (default 1)");
  auto* b =
      cmd->add_option("--bwd", opt->bwd, "TB: input-gradient backward time per stage (default 1)");
  auto* w = cmd->add_option("--wgrad", opt->wgrad,
                            "TW: weight-gradient backward time per stage (default 1)");
  auto* c =
      cmd->add_option("--comm", opt->comm, "TC: time of one stage-to-stage transfer (default 0)");
  for (CLI::Option* o : {f, b, w, c}) o->check(cost_time());
  cmd->add_option("--wgrad-share", opt->wgrad_share,
                  "Share of a micro-batch's activations W keeps after I (zb-1p, zb-2p; default 1)");
  cmd->add_option("--model", opt->model, "Model spec: a preset or gpt:layers=..,hidden=..")
      ->check(non_empty("a model"));
  opt->model_flags = {
      cmd->add_option("--partition", opt->partition, "Partition with --model (default balanced)"),
      cmd->add_option("--device", opt->device, "Device preset with --model (default cpu)"),
      cmd->add_option("--dtype", opt->dtype,
                      "Storage with --model, as run's: fp32 or bf16 (the device's GEMM peak "
                      "for it, the attention's kernels, the activations' bytes)"),
      add_attention_flag(*cmd, opt->attention), add_vocab_divisor_flag(*cmd, opt->vocab_divisor)};
  cmd->add_option("--data-parallel", opt->data_parallel,
                  "D replicas: add a ring all-reduce of each stage's gradients after each "
                  "chunk's last backward (default 1)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--allreduce", opt->allreduce,
                  "With --data-parallel and the cost flags: one chunk's all-reduce time")
      ->check(cost_time());
  cmd->add_option("--format", opt->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("--trace", opt->trace, "Write the predicted timeline as a Chrome/Perfetto trace")
      ->check(non_empty("a file"));
  cmd->add_option("--width", opt->width, "Columns of the text timeline")
      ->check(CLI::Range(20, 1000));
  cmd->callback([opt, f, b, w, c] {
    if (opt->schedule.empty() && opt->schedule_file.empty()) {
      throw UsageError("simulate: give --schedule NAME or --schedule-file FILE");
    }
    opt->cost_flags_given = *f || *b || *w || *c;
    run_simulate(*opt);
  });
}

}  // namespace ppb::cli
