// Shared pieces of the `pipebench` subcommands (bench/cmd_*.cpp).
//
// Each subcommand is one file exposing `void register_<name>(CLI::App& app)`,
// which adds the subcommand, its flags (into one options struct, STYLE rule 9)
// and a callback. The callback throws ppb::UsageError for bad input (main
// prints one line, exit 2) and ExitCode for any other non-zero exit.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/profiling/check.hpp"

namespace CLI {
class App;
}

namespace ppb::cli {

/// Thrown by a subcommand that wants a specific exit code (1 = regression).
struct ExitCode {
  int code = 0;
};

/// Bad input that every rank sees alike (a flag's value, checked before MPI
/// starts): under mpirun only rank 0 prints it; every rank exits 2. An error
/// that one rank alone can meet (a file it cannot write) stays a UsageError,
/// printed by the rank that met it.
class FlagError : public UsageError {
 public:
  using UsageError::UsageError;
};

/// CLI11 check for an abstract action time of the cost flags (--fwd, --bwd,
/// --wgrad, --comm, --allreduce): a number in [0, 1e9] ("--fwd: expected a
/// time in [0, 1e9], got -1"). The bound keeps a schedule's sums of them
/// finite; CLI::NonNegativeNumber would print DBL_MAX in full.
CLI::Validator cost_time();

/// CLI11 check for a number in [lo, hi], which `range` says in words
/// ("--link-latency: expected a number in [0, 1] (seconds), got '1e308'").
CLI::Validator number_in(double lo, double hi, const std::string& range);

/// CLI11 check for a whole number in [lo, hi] ("--stages: expected an
/// integer in [1, 1048576], got '0'"); unlike CLI11's own parse of an
/// unsigned option, "-1" is refused rather than wrapped around.
CLI::Validator integer_in(int64_t lo, int64_t hi);

/// --make-vocab-size-divisible-by N (Megatron-LM's flag, default
/// kDefaultVocabDivisor; 1: no padding) into `divisor`: an integer in
/// [1, kMaxVocabDivisor], else "--make-vocab-size-divisible-by: expected an
/// integer in [1, 16777216], got '0'" (exit 2).
CLI::Option* add_vocab_divisor_flag(CLI::App& cmd, int& divisor);

/// --attention auto|fused|naive (default auto) into `request`, parsed by
/// parse_attention_request (ppb/pipeline/attention.hpp) where it is used:
/// the same flag and help for a run and for a device that is modelled.
CLI::Option* add_attention_flag(CLI::App& cmd, std::string& request);

/// CLI11 check for a non-empty text ("--out: expected a path, got ''").
CLI::Validator non_empty(const std::string& what);

/// Parses a byte size: "1024", "512MiB", "16GiB", "1.5GB", "64KiB", "2TiB",
/// case-insensitive, binary (KiB, MiB, GiB, TiB) and decimal (KB, MB, GB, TB)
/// units, "B" alone. Throws UsageError naming `flag` on anything else.
/// Example: parse_bytes("16GiB", "--memory-budget") == 17179869184.
std::int64_t parse_bytes(const std::string& text, const std::string& flag);

/// "1.50 GiB", "143 MiB", "512 B": for tables.
std::string format_bytes(std::int64_t bytes);

/// Splits "a,b,c" into {"a","b","c"}; empty items are dropped.
std::vector<std::string> split_list(const std::string& text);

/// Parses a comma list of positive integers ("8,16") naming `flag` on error.
std::vector<int> parse_int_list(const std::string& text, const std::string& flag);

/// The arguments this process was started with (argv without the program's
/// path, each word followed by a NUL), as main() recorded them; "" where
/// it did not (tests).
const std::string& command_line();
void set_command_line(int argc, const char* const* argv);

/// --timeout (run, p2p): a finite number of seconds >= 0 (0 = none), else a
/// UsageError ("--timeout: expected a finite number of seconds >= 0, got -1").
void check_timeout_flag(double seconds);

/// Whether `text` is an integer in decimal digits, as every integer flag
/// takes it: an optional sign, then digits, no leading zero ("010" and
/// "0x8" are not; CLI11 would read them as octal and hex).
bool is_decimal_integer(std::string_view text);

void register_list(CLI::App& app);
void register_schedule(CLI::App& app);
void register_simulate(CLI::App& app);
void register_run(CLI::App& app);     // bench/cmd_run.cpp
void register_p2p(CLI::App& app);     // bench/cmd_p2p.cpp
void register_report(CLI::App& app);  // bench/cmd_report.cpp
void register_plan(CLI::App& app);    // bench/cmd_plan.cpp
void register_health(CLI::App& app);  // bench/cmd_health.cpp

}  // namespace ppb::cli
