// The one way pipebench reads an input file (schedules, results, reference
// figures, calibrations, per-rank traces): whole, with a size limit checked
// while reading, so `--schedule-file /dev/zero` or a huge file ends with a
// one-line error naming the file instead of exhausting memory.
//
// Errors (UsageError, one line, naming the path and what was expected):
//   "plan.json: cannot open schedule file: No such file or directory"
//   "out/: is a directory, expected a schedule file"
//   "/dev/zero: schedule file larger than 256 MiB (the limit for this input)"
//
// Example:
//   std::string text = ppb::read_input_file(path, "schedule file", ppb::kMaxScheduleFileBytes);
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace ppb {

/// Limits per kind of input (documented in the README's limits section).
inline constexpr int64_t kMaxScheduleFileBytes = int64_t{256} << 20;
inline constexpr int64_t kMaxResultFileBytes = int64_t{256} << 20;
inline constexpr int64_t kMaxSmallInputBytes = int64_t{16} << 20;  ///< reference, calibration
inline constexpr int64_t kMaxTraceFileBytes = int64_t{1} << 30;

/// How long a named pipe is waited on for a program to write to it.
inline constexpr std::chrono::milliseconds kFifoWriterWait{10000};

/// Returns the whole content of `path`; `what` names the kind of input in
/// errors ("schedule file"). REQUIRES: max_bytes >= 0. Regular files,
/// character devices and FIFOs are read (a device is read until EOF or the
/// limit); a directory is refused. An anonymous pipe (a shell's <(...)) is
/// read to its end; a named pipe (mkfifo) once a program has written to it
/// or closed it, waiting at most `fifo_wait` for that:
///   "p.json: named pipe given as schedule file, and no program wrote to it within 10 s"
std::string read_input_file(const std::string& path, std::string_view what, int64_t max_bytes,
                            std::chrono::milliseconds fifo_wait = kFifoWriterWait);

}  // namespace ppb
