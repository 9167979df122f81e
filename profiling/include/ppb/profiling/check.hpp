// Error tiers of STYLE.md rule 5.
//
//  * A broken invariant is a bug: PPB_CHECK(cond, "what") prints file:line and
//    aborts the process (through the abort hook, which the MPI executor sets to
//    MPI_Abort so that one rank's failure ends the whole job).
//  * Bad user input is not a bug: throw ppb::UsageError("--stages: must be >= 1").
//    The command's main() prints the message as one line and exits with 2.
//  * API failures (CUDA, MPI, CUPTI) have their own macros next to the API.
#pragma once

#include <stdexcept>
#include <string>

namespace ppb {

/// Bad input from the user (flag, file, field). Exit code 2, one-line message.
/// The message must name what is wrong: "--microbatches: expected >= 1, got 0".
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The exit code for bad input, and for a job that could not start.
inline constexpr int kUsageExitCode = 2;

/// Called by PPB_CHECK after printing. Default: std::abort(). The executor
/// installs one that calls MPI_Abort. REQUIRES: the hook never returns.
using AbortHook = void (*)();
void set_abort_hook(AbortHook hook);

/// Prints "pipebench: internal error at FILE:LINE: EXPR: MESSAGE" and calls the
/// abort hook. Used by PPB_CHECK; not meant to be called directly.
[[noreturn]] void check_failed(const char* expr, const char* file, int line,
                               const std::string& message);

}  // namespace ppb

/// Aborts with file and line when `cond` is false. For invariants only: never
/// for input a user can get wrong (throw ppb::UsageError for that).
/// Example: PPB_CHECK(stage < stages, "stage out of range");
#define PPB_CHECK(cond, message)                                 \
  do {                                                           \
    if (!(cond)) [[unlikely]] {                                  \
      ::ppb::check_failed(#cond, __FILE__, __LINE__, (message)); \
    }                                                            \
  } while (false)
