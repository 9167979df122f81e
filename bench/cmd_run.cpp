// `pipebench run`: the measured sweep on MPI ranks (docs/cli.md).
//
//   mpirun -np 4 pipebench run --schedule all --partition all --microbatches 4,8 --check
//
// The flags land in one RunOptions (STYLE.md rule 9); bench/run/runner.cpp
// does the work: MPI_Init/Finalize happen only inside this command.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "cli.hpp"
#include "ppb/exec/backend.hpp"
#include "ppb/exec/collector.hpp"
#include "ppb/exec/transport.hpp"
#include "run/run_options.hpp"
#include "run/runner.hpp"

namespace ppb::cli {
namespace {

/// "cpu, timed": the names of a registry, for --help.
template <class Info>
std::string names(const std::vector<Info>& list) {
  std::string out;
  for (const Info& info : list) out += (out.empty() ? "" : ", ") + info.name;
  return out;
}

/// What is swept and on what: schedules, partitions, M, the model, the backend.
void add_sweep_flags(CLI::App& cmd, run::RunOptions& o) {
  cmd.add_option("--schedule", o.schedules, "Schedules, comma-separated, or 'all'")
      ->capture_default_str();
  cmd.add_option("--partition", o.partitions,
                 "Partitions (layer, operator, balanced, manual:<ranges>) or 'all'")
      ->capture_default_str();
  cmd.add_option("--microbatches", o.microbatches, "Micro-batch counts M, comma-separated")
      ->capture_default_str();
  cmd.add_option("--model", o.model, "Model preset or gpt:layers=..,hidden=..,...")
      ->capture_default_str();
  cmd.add_option("--dtype", o.dtype,
                 "Storage of activations, messages and weights: fp32 or bf16 (bf16: fp32 "
                 "accumulation and master weights; backends whose entry allows it)")
      ->capture_default_str();
  add_vocab_divisor_flag(cmd, o.vocab_divisor);
  add_attention_flag(cmd, o.attention);
  // Backends, transports and collectors: the help lists their registries.
  o.backend = backend_list().front().name;
  o.transport = transport_list().front().name;
  cmd.add_option("--backend", o.backend, "Backend: " + names(backend_list()))
      ->capture_default_str();
  cmd.add_option("--transport", o.transport, "Transport: " + names(transport_list()))
      ->capture_default_str();
  cmd.add_option("--cuda-graphs", o.cuda_graphs,
                 "on or off: a device backend captures its work into CUDA graphs and replays "
                 "them where the device can (the result says what ran eagerly and why)")
      ->capture_default_str();
}

/// How each combination is measured and where its results go.
void add_measure_flags(CLI::App& cmd, run::RunOptions& o) {
  cmd.add_option("-n,--iters", o.iters, "Timed iterations (steps)")->capture_default_str();
  cmd.add_option("-w,--warmup", o.warmup, "Warm-up iterations (not timed)")->capture_default_str();
  cmd.add_option("--min-time", o.min_time,
                 "After --iters timed steps, keep timing until they sum to this many seconds "
                 "(0 = exactly --iters)")
      ->capture_default_str();
  cmd.add_option("--max-iters", o.max_iters,
                 "Cap on timed steps under --min-time (default: the larger of 1000 and --iters)");
  cmd.add_option("--plant", o.plant,
                 "STAGE:FACTOR: plant a slowdown of one stage's actions to test the regression "
                 "gate (recorded in the results as config.plant)");
  cmd.add_option("--out", o.out, "Result folder (default results/<UTC date-time>)")
      ->check(non_empty("a folder"));
  cmd.add_flag("--resume", o.resume,
               "Skip combinations whose result file exists, is not error and holds these settings");
  cmd.add_flag("--trace", o.trace,
               "Write Chrome/Perfetto traces per combination: one merged file and one per rank "
               "(Holistic Trace Analysis)");
  cmd.add_flag("-c,--check", o.check,
               "Check loss and gradients against a single-process reference (backends with real "
               "gradients)");
  cmd.add_option("--profile", o.profile,
                 "Collectors, comma-separated (pipebench list): " + names(collector_list()));
}

/// Memory, watchdog, the schedules' shape parameters, the seed, the rank grid.
void add_shape_flags(CLI::App& cmd, run::RunOptions& o) {
  cmd.add_option("--memory-budget", o.memory_budget,
                 "Per-stage memory budget (e.g. 512MiB); over it: status oom");
  cmd.add_option("--memory-guard", o.memory_guard, "adaptive: guard fraction of the budget")
      ->capture_default_str();
  cmd.add_option("-T,--timeout", o.timeout,
                 "Watchdog in seconds for each step and every other phase (setup, partition, "
                 "check, writing results); 0 = off")
      ->capture_default_str();
  cmd.add_option("--chunks", o.chunks,
                 "interleaved-1f1b: model chunks per stage V (zb-v and dualpipe-v "
                 "always have 2, the others 1)")
      ->capture_default_str();
  cmd.add_option("--inflight", o.inflight,
                 "In-flight limit N (async-1f1b, adaptive, hybrid; 0 = P)")
      ->capture_default_str();
  cmd.add_option("--sync-warmup", o.sync_warmup, "hybrid: synchronous micro-batches K")
      ->capture_default_str();
  cmd.add_option("--batches", o.batches,
                 "pipedream: batches per step without a flush (the others run 1)")
      ->capture_default_str();
  cmd.add_option("--time-scale", o.time_scale,
                 "timed: wall seconds per modelled second (0 = the model's: the mean stage's F + B "
                 "of one micro-batch sleeps 12 ms, the same for every combination)")
      ->capture_default_str();
  cmd.add_option("--seed", o.seed, "Parameters and synthetic data")
      ->capture_default_str()
      ->check(integer_in(0, std::numeric_limits<int64_t>::max()));
  cmd.add_option("--stages", o.stages,
                 "P (default: the number of MPI ranks W); W = P x D runs D data-parallel "
                 "replicas of the pipeline")
      ->check(integer_in(1, int64_t{1} << 20));
  cmd.add_option("--rank-order", o.rank_order,
                 "With replicas: dp-pp (a stage's D ranks adjacent, Megatron-LM's order) or "
                 "pp-dp (a replica's P ranks adjacent)")
      ->capture_default_str();
  cmd.add_option("--device", o.device,
                 "Cost model of the timed backend and of balanced (cpu, a100, h100, h200)")
      ->capture_default_str();
}

/// --rerun, and the flags only tests use (hidden from --help).
void add_rerun_and_test_flags(CLI::App& cmd, run::RunOptions& o) {
  cmd.add_option("--rerun", o.rerun,
                 "Result files or folders: measure their combinations again with the recorded "
                 "settings (to confirm a regression; only --out, --resume, --trace, --timeout and "
                 "--plant go with it)");
  cmd.add_option("--debug-stall-rank", o.debug_stall_rank,
                 "TEST ONLY: this rank stalls in its first action")
      ->group("");
  cmd.add_option("--debug-fault", o.debug_fault,
                 "TEST ONLY: RANK:PHASE:WHAT, a planted failure in the last combination")
      ->group("");
}

}  // namespace

void register_run(CLI::App& app) {
  auto options = std::make_shared<run::RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Measure schedules x partitions x micro-batch counts on MPI ranks (one rank per stage), "
      "one result file per combination");
  run::RunOptions& o = *options;
  // In this order: --help lists the flags as they are added.
  add_sweep_flags(*cmd, o);
  add_measure_flags(*cmd, o);
  add_shape_flags(*cmd, o);
  add_rerun_and_test_flags(*cmd, o);
  // Unknown flags reach the callback, which reports them once (rank 0) after
  // MPI is up, instead of every rank printing CLI11's message.
  cmd->allow_extras();
  cmd->callback([options, cmd] {
    options->extras = cmd->remaining();
    for (const CLI::Option* opt : cmd->get_options()) {
      if (opt->count() == 0) continue;
      // A hidden option has no name to CLI11's get_name(): its long one.
      const std::string name = opt->get_name();
      options->given.push_back(
          name.empty() && !opt->get_lnames().empty() ? "--" + opt->get_lnames().front() : name);
    }
    // The cap's default never refuses the --iters given with it.
    if (cmd->get_option("--max-iters")->count() == 0)
      options->max_iters = std::max(options->max_iters, options->iters);
    run::run_command(*options);
  });
}

}  // namespace ppb::cli
