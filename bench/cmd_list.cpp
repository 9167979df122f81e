// `pipebench list`: every registered schedule, partition, backend and
// collector (with whether it is available here), transport, model and device, each with
// one line of help; with --json, the same registries and every field of their
// entries as one JSON document (cmd_list.hpp).
#include "cmd_list.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "build_info.hpp"
#include "cli.hpp"
#include "ppb/exec/backend.hpp"
#include "ppb/exec/collector.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/exec/transport.hpp"
#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/pipeline/partition.hpp"
#include "ppb/pipeline/schedule.hpp"

namespace ppb::cli {
namespace {

void print_row(const std::string& name, const std::string& help) {
  std::printf("  %-18s %s\n", name.c_str(), help.c_str());
}

// The CUDA devices this process sees (the cuda backend's ranks bind them).
struct Gpus {
  int count = 0;
  std::string name;     // device 0's ("" without one)
  std::string why_not;  // "" with one
};

Gpus visible_gpus() {
  Gpus g;
  g.count = cuda::visible_devices();
  g.why_not = cuda::unusable_reason();
  if (g.count > 0) g.name = cuda::device_facts(0).name;
  return g;
}

void print_table() {
  std::printf("schedules (--schedule, simulate --schedule, schedule --name):\n");
  for (const ScheduleInfo& s : schedule_list()) print_row(s.name, s.help);
  std::printf("\npartitions (--partition):\n");
  for (const PartitionInfo& p : partition_list()) print_row(p.name, p.help);
  std::printf("\nbackends (--backend):\n");
  for (const auto& b : backend_list()) {
    const std::string why = b.unusable != nullptr ? b.unusable() : std::string();
    print_row(b.name, why.empty() ? b.help : b.help + " [not available here: " + why + "]");
  }
  std::printf("\ntransports (--transport):\n");
  for (const auto& t : transport_list())
    print_row(t.name, t.available ? t.help : t.help + " [not available here: " + t.why_not + "]");
  std::printf("\ncollectors (--profile a,b):\n");
  for (const auto& c : collector_list())
    print_row(c.name, c.available ? c.help : c.help + " [not available here: " + c.why_not + "]");
  std::printf("\nmodels (--model, or gpt:layers=L,hidden=H,heads=A,seq=S,vocab=V,ffn=F,mbs=B):\n");
  for (const std::string& name : model_preset_names()) {
    ModelSpec m = parse_model_spec(name);
    char help[160];
    std::snprintf(help, sizeof help, "%d layers, hidden %d, %d heads, seq %d, vocab %d, mbs %d",
                  m.layers, m.hidden, m.heads, m.seq, m.vocab, m.micro_batch_size);
    print_row(name, help);
  }
  std::printf("\ndevices (--device, cost model):\n");
  for (const std::string& name : device_preset_names()) {
    const DeviceSpec d = device_preset(name, 2);
    const DeviceSpec fp32 = device_preset(name, 4);
    char help[160];
    if (fp32.peak_flops == d.peak_flops) {
      std::snprintf(help, sizeof help, "%.1f TFLOP/s peak, %.0f GB/s memory, %.0f GB/s link",
                    d.peak_flops / 1e12, d.mem_bandwidth / 1e9, d.link_bandwidth / 1e9);
    } else {
      std::snprintf(help, sizeof help,
                    "%.1f TFLOP/s peak bf16, %.1f fp32, %.0f GB/s memory, %.0f GB/s link",
                    d.peak_flops / 1e12, fp32.peak_flops / 1e12, d.mem_bandwidth / 1e9,
                    d.link_bandwidth / 1e9);
    }
    print_row(name, help);
  }
  const Gpus g = visible_gpus();
  if (g.count > 0) {
    std::printf("\ngpus: %d visible (device 0: %s)\n", g.count, g.name.c_str());
  } else {
    std::printf("\ngpus: none (%s)\n", g.why_not.c_str());
  }
}

const char* kernels_name(const std::optional<Kernels>& kernels) {
  if (!kernels) return "device";  // those of the device it models
  switch (*kernels) {
    case Kernels::kCpu:
      return "cpu";
    case Kernels::kCuda:
      return "cuda";
  }
  return "?";
}

const char* baseline_name(RawBaseline baseline) {
  switch (baseline) {
    case RawBaseline::kMpi:
      return "mpi";
    case RawBaseline::kNccl:
      return "nccl";
  }
  return "?";
}

boost::json::object schedule_json(const ScheduleInfo& s) {
  return {{"name", s.name},
          {"help", s.help},
          {"splits_backward", s.splits_backward},
          {"uses_chunks", s.uses_chunks},
          {"fixed_chunks", s.fixed_chunks},
          {"uses_times", s.uses_times},
          {"no_flush", s.no_flush},
          {"uses_inflight", s.uses_inflight},
          {"uses_sync_warmup", s.uses_sync_warmup},
          {"weight_stashing", s.weight_stashing},
          {"optimizer_per_backward", s.optimizer_per_backward},
          {"memory_guarded", s.memory_guarded},
          {"closed_form_bubble", s.closed_form_bubble},
          {"colour", s.colour},
          {"report_order", s.report_order},
          {"inflight_formula", s.inflight_formula}};
}

boost::json::object backend_json(const BackendInfo& b) {
  const std::string why = b.unusable != nullptr ? b.unusable() : std::string();
  return {{"name", b.name},
          {"help", b.help},
          {"available", why.empty()},
          {"why_not", why},
          {"real_gradients", b.real_gradients},
          {"modelled_time", b.modelled_time},
          {"bf16", b.bf16},
          {"check_tolerance_fp32", b.check_tolerance_fp32},
          {"check_tolerance_bf16", b.check_tolerance_bf16},
          {"kernels", kernels_name(b.traits.kernels)},
          {"resident_bytes", b.traits.resident_bytes},
          {"device", b.traits.device}};
}

boost::json::object model_json(const std::string& name) {
  const ModelSpec m = parse_model_spec(name);
  return {{"name", name},
          {"layers", m.layers},
          {"hidden", m.hidden},
          {"heads", m.heads},
          {"seq", m.seq},
          {"vocab", m.vocab},
          {"ffn", m.ffn_mult},
          {"mbs", m.micro_batch_size},
          {"parameters", parameter_count(m)}};
}

boost::json::object device_json(const std::string& name) {
  const DeviceSpec d = device_preset(name, 2);
  const DeviceSpec fp32 = device_preset(name, 4);
  return {{"name", name},
          {"peak_flops", d.peak_flops},
          {"peak_flops_fp32", fp32.peak_flops},
          {"fused_flops_fp32", fp32.fused_flops},
          {"mem_bandwidth", d.mem_bandwidth},
          {"efficiency", d.efficiency},
          {"vector_flops", d.vector_flops},
          {"kernel_overhead_s", d.kernel_overhead_s},
          {"memory_bytes", d.memory_bytes},
          {"link_bandwidth", d.link_bandwidth},
          {"link_latency", d.link_latency}};
}

void run_list(bool json) {
  if (json) {
    std::printf("%s\n", boost::json::serialize(list_document()).c_str());
    return;
  }
  print_table();
}

}  // namespace

boost::json::object list_document() {
  boost::json::array schedules, partitions, backends, transports, collectors, models, devices;
  for (const ScheduleInfo& s : schedule_list()) schedules.push_back(schedule_json(s));
  for (const PartitionInfo& p : partition_list())
    partitions.push_back(boost::json::object{{"name", p.name}, {"help", p.help}});
  for (const BackendInfo& b : backend_list()) backends.push_back(backend_json(b));
  for (const TransportInfo& t : transport_list()) {
    transports.push_back(boost::json::object{{"name", t.name},
                                             {"help", t.help},
                                             {"available", t.available},
                                             {"why_not", t.why_not},
                                             {"baseline", baseline_name(t.baseline)}});
  }
  for (const CollectorInfo& c : collector_list()) {
    collectors.push_back(boost::json::object{{"name", c.name},
                                             {"help", c.help},
                                             {"available", c.available},
                                             {"why_not", c.why_not},
                                             {"device_profiler", c.device_profiler}});
  }
  for (const std::string& name : model_preset_names()) models.push_back(model_json(name));
  for (const std::string& name : device_preset_names()) devices.push_back(device_json(name));
  const Gpus g = visible_gpus();
  return {{"schema", "pipebench.list/1"},
          {"schedules", std::move(schedules)},
          {"partitions", std::move(partitions)},
          {"backends", std::move(backends)},
          {"transports", std::move(transports)},
          {"collectors", std::move(collectors)},
          {"models", std::move(models)},
          {"devices", std::move(devices)},
          {"gpus", {{"count", g.count}, {"name", g.name}, {"why_not", g.why_not}}},
          {"build", {{"git", build_info().git_revision}, {"cuda", build_info().with_cuda}}}};
}

void register_list(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "list", "List schedules, partitions, backends, transports, collectors, models and devices");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json,
                "Print the registries and every field of their entries as one JSON document");
  cmd->callback([json] { run_list(*json); });
}

}  // namespace ppb::cli
