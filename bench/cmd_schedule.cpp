// `pipebench schedule`: prints a generated schedule as text (one line per
// stage) or as the JSON document that --schedule-file reads back.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>

#include "cli.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/schedule_io.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::cli {
namespace {

struct ScheduleOptions {
  std::string name;
  ScheduleParams params;
  std::string format = "text";
  CLI::Option* chunks_flag = nullptr;
  CLI::Option* batches_flag = nullptr;
};

void run_schedule(const ScheduleOptions& opt) {
  ScheduleParams params = opt.params;
  schedule_defaults(opt.name, opt.chunks_flag->count() > 0, opt.batches_flag->count() > 0, params);
  Schedule s = generate_schedule(opt.name, params);
  if (opt.format == "json") {
    std::printf("%s\n", schedule_to_json(s).c_str());
  } else if (opt.format == "csv") {
    std::printf("%s", schedule_to_csv(s).c_str());
  } else {
    std::printf("%s", schedule_to_text(s).c_str());
  }
}

}  // namespace

void register_schedule(CLI::App& app) {
  auto opt = std::make_shared<ScheduleOptions>();
  CLI::App* cmd = app.add_subcommand("schedule", "Print a schedule's per-stage action lists");
  cmd->add_option("--name", opt->name, "Schedule name (see pipebench list)")->required();
  cmd->add_option("--stages,-p", opt->params.stages, "Pipeline stages P")->required();
  cmd->add_option("--microbatches,-m", opt->params.microbatches, "Micro-batches per batch M")
      ->required();
  opt->chunks_flag = cmd->add_option("--chunks,-v", opt->params.chunks,
                                     "Model chunks per stage V (interleaved-1f1b; default 2)");
  cmd->add_option("--inflight", opt->params.inflight,
                  "Micro-batches in flight per stage N (async-1f1b, hybrid, adaptive; default P)");
  cmd->add_option("--sync-warmup", opt->params.sync_warmup,
                  "Synchronous warm-up micro-batches K (hybrid)");
  opt->batches_flag = cmd->add_option("--batches", opt->params.batches,
                                      "Batches without flush (pipedream; default 2)");
  for (auto [flag, value, what] :
       {std::tuple{"--fwd", &opt->params.tf,
                   "TF: forward time per stage (zb-1p, zb-2p; default 1)"},
        {"--bwd", &opt->params.tb, "TB: input-gradient time per stage (zb-1p, zb-2p; default 1)"},
        {"--wgrad", &opt->params.tw,
         "TW: weight-gradient time per stage (zb-1p, zb-2p; default 1)"},
        {"--comm", &opt->params.tc, "TC: one transfer's time (zb-1p, zb-2p; default 0)"}}) {
    cmd->add_option(flag, *value, what)->check(cost_time());
  }
  cmd->add_option("--wgrad-share", opt->params.wgrad_share,
                  "Share of a micro-batch's activations W keeps after I (zb-1p, zb-2p; default 1)");
  cmd->add_option("--format", opt->format, "text, json or csv (PyTorch pipelining's)")
      ->check(CLI::IsMember({"text", "json", "csv"}));
  cmd->callback([opt] { run_schedule(*opt); });
}

}  // namespace ppb::cli
