// `pipebench list`: every registered schedule, partition, backend and
// collector (with whether it is available here), transport, model and device, each with
// one line of help.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cli.hpp"
#include "ppb/exec/backend.hpp"
#include "ppb/exec/collector.hpp"
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

void run_list() {
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
    DeviceSpec d = device_preset(name);
    char help[160];
    std::snprintf(help, sizeof help, "%.1f TFLOP/s peak, %.0f GB/s memory, %.0f GB/s link",
                  d.peak_flops / 1e12, d.mem_bandwidth / 1e9, d.link_bandwidth / 1e9);
    print_row(name, help);
  }
}

}  // namespace

void register_list(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "list", "List schedules, partitions, backends, transports, collectors, models and devices");
  cmd->callback(run_list);
}

}  // namespace ppb::cli
