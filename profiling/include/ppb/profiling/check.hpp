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
#include <string_view>

namespace ppb {

/// `text` as one line a terminal shows as it is: control bytes (NUL, ESC,
/// a newline) and bytes that are not UTF-8 become \xNN; the C1 controls
/// (U+0080..U+009F), a byte-order mark, the noncharacters U+FFFE and
/// U+FFFF, the line and paragraph separators and the bidirectional
/// overrides and isolates become \uXXXX (\ufeff, \u009b, \u202e); a
/// backslash stays one, so printable(printable(t)) == printable(t).
/// Example: printable("F\0\xff") == "F\\x00\\xff".
std::string printable(std::string_view text);

/// A number in a message as a person would write it (%g): "-1", "0.5",
/// "1e+300", "inf", "nan".
std::string number_text(double x);

/// Bad input from the user (flag, file, field). Exit code 2, one-line message.
/// The message must name what is wrong: "--microbatches: expected >= 1, got 0".
/// It is kept as printable(message): one that quotes a file's bytes can be
/// cut neither at a NUL nor by a newline, and cannot drive the terminal.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(std::string_view message);
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
