// pipebench: benchmarking and profiling of pipeline-parallel training.
// One CLI11 app; each subcommand is a plug-in in bench/cmd_<name>.cpp.
#include <CLI/CLI.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <thread>

#include "cli.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/pipeline/validator.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/log.hpp"

namespace {

// Under mpirun every rank parses the same command line; a bad flag is then
// reported once, by rank 0 (the launcher's rank variables tell who is who
// before MPI is initialised), and every rank exits 2.
bool quiet_rank() { return ppb::log::launcher_rank() > 0; }

// Whether the command line was parsed whole (the command runs from then on,
// MPI started): a bad flag found before then is this rank's alone when
// rank 0 parsed the same line without one (an MPMD launch, a wrapper that
// adds a flag on some hosts).
bool g_parsed = false;

// CLI11 reports a misspelt command as "A subcommand is required"; name it
// and list the commands instead.
void reject_unknown_command(CLI::App& app, int argc, char** argv) {
  if (argc < 2) return;
  const std::string word = argv[1];
  if (word == "-h" || word == "--help" || word == "--help-all" || word == "--version") return;
  std::string names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->check_name(word)) return;
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  // Flags belong after the command: `pipebench --stages 2` names the flag.
  if (word[0] == '-') {
    throw ppb::cli::FlagError("unknown flag '" + word + "' before the command (commands: " + names +
                              ")");
  }
  throw ppb::cli::FlagError("unknown command '" + word + "' (commands: " + names + ")");
}

// CLI11 takes the token after an option as its value even when it is
// another flag (`run --microbatches --iters 3` set M to "--iters" and left
// "3" over); name the option whose value is missing instead. Negative
// numbers ("--seed -1") are values.
void reject_flag_as_value(CLI::App& app, int argc, char** argv) {
  if (argc < 3) return;
  CLI::App* cmd = nullptr;
  for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->check_name(argv[1])) cmd = sub;
  }
  if (cmd == nullptr) return;
  auto looks_like_flag = [](const std::string& t) {
    return t.size() > 1 && t[0] == '-' &&
           (t[1] == '-' || std::isalpha(static_cast<unsigned char>(t[1])));
  };
  for (int i = 2; i + 1 < argc; ++i) {
    const std::string token = argv[i];
    if (!looks_like_flag(token) || token.find('=') != std::string::npos) continue;
    const CLI::Option* opt = cmd->get_option_no_throw(token);
    if (opt == nullptr || opt->get_items_expected_min() < 1) continue;
    const std::string next = argv[i + 1];
    if (looks_like_flag(next)) {
      throw ppb::cli::FlagError(token + ": expected a value, got the flag '" + next + "'");
    }
    ++i;  // the value
  }
}

// Every integer option reads its value as a decimal integer: CLI11 would
// read "010" as octal 8 and "0x10" as 16, silently another number than the
// one typed.
void decimal_integers_only(CLI::App& app) {
  const CLI::Validator decimal(
      [](const std::string& text) -> std::string {
        if (!ppb::cli::is_decimal_integer(text))
          return "expected a decimal integer, got '" + text + "'";
        return {};
      },
      "");
  for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    for (CLI::Option* opt : sub->get_options()) {
      const std::string type = opt->get_type_name();
      if (type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0) opt->check(decimal);
    }
  }
}

// An option given an empty value is refused ("--memory-budget: expected a
// value, got ''"), not taken as its default: a script's unset variable
// would otherwise change the run without a word. `--plant ''` alone means
// something (no plant).
void no_empty_values(CLI::App& app) {
  const CLI::Validator given(
      [](const std::string& text) -> std::string {
        return text.empty() ? "expected a value, got ''" : std::string();
      },
      "");
  for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    for (CLI::Option* opt : sub->get_options()) {
      if (opt->get_items_expected_min() < 1 || opt->check_lname("plant")) continue;
      opt->check(given);
    }
  }
}

// One line on stderr: the rank's prefix and the message, its bytes as a
// terminal can show them (a message may quote a file's content).
void print_error(const std::string& what) {
  std::fprintf(stderr, "%s%s\n", ppb::log::prefix().c_str(), ppb::printable(what).c_str());
}

// Returns the usage exit code, having printed `what` (with the rank in the
// prefix) unless rank 0 says it.
// A quiet rank's flag error from before MPI starts: where rank 0 has it
// too, rank 0 says it and exits, and mpirun ends this rank within the
// grace; where rank 0 parsed its line whole (it waits in MPI_Init for this
// rank), this rank says it, so the job never ends without a word.
int flag_error(const std::string& what) {
  if (quiet_rank()) {
    if (g_parsed) return ppb::kUsageExitCode;  // alike on every rank: rank 0 says it
    std::this_thread::sleep_for(std::chrono::duration<double>(ppb::kFlagErrorGraceSeconds));
  }
  print_error(what);
  return ppb::kUsageExitCode;
}

// Whether what the command printed reached standard output: a full disk
// or a closed pipe under `> out.json` would otherwise end with exit 0 and
// a truncated file. Flushes both streams.
bool stdout_lost() {
  std::cout.flush();
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0 || std::cout.fail();
  if (failed) print_error("standard output: cannot write (a full disk or a closed pipe?)");
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "pipebench: measures pipeline-parallel training schedules (GPipe, 1F1B, interleaved, "
      "zero bubble, ...) on real MPI ranks, simulates them on a cost model, and reports."};
  app.name("pipebench");
  app.require_subcommand(1);
  app.fallthrough(false);
  app.set_version_flag("--version", "pipebench 0.1");

  ppb::cli::register_list(app);
  ppb::cli::register_schedule(app);
  ppb::cli::register_simulate(app);
  ppb::cli::register_run(app);
  ppb::cli::register_p2p(app);
  ppb::cli::register_report(app);
  ppb::cli::register_plan(app);
  ppb::cli::register_health(app);
  decimal_integers_only(app);
  no_empty_values(app);

  try {
    reject_unknown_command(app, argc, argv);
    reject_flag_as_value(app, argc, argv);
    ppb::cli::set_command_line(argc, argv);
    app.parse_complete_callback([] { g_parsed = true; });
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return quiet_rank() ? 0 : app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return quiet_rank() ? 0 : app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return quiet_rank() ? 0 : app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Bad flags: one line, exit 2 (CLI11's own codes are for its tests, not ours).
    return flag_error(std::string(e.what()) + " (see pipebench --help)");
  } catch (const ppb::ScheduleError& e) {
    // The one-line error goes to stderr; the picture of where each stage
    // stuck (PyTorch pipelining's "not progressing" grid) to stdout.
    if (!e.grid().empty()) std::printf("where each stage stuck:\n%s", e.grid().c_str());
    std::fflush(stdout);
    print_error(e.what());
    return ppb::kUsageExitCode;
  } catch (const ppb::cli::FlagError& e) {
    return flag_error(e.what());
  } catch (const ppb::UsageError& e) {
    print_error(e.what());
    return ppb::kUsageExitCode;
  } catch (const ppb::cli::ExitCode& e) {
    if (stdout_lost()) return ppb::kUsageExitCode;
    return e.code;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%sout of host memory\n", ppb::log::prefix().c_str());
    return 1;
  } catch (const std::exception& e) {
    print_error(std::string("error: ") + e.what());
    return 1;
  }
  return stdout_lost() ? ppb::kUsageExitCode : 0;
}
