// Logging with a rank prefix (Caliper's convention): every line starts with
// "pipebench[r3]: " once the rank is known, "pipebench: " before. By default
// ranks > 0 print only warnings and errors, so a 16-rank job reads like one.
//
// Example:
//   ppb::log::set_rank(rank, /*quiet_nonzero=*/true);
//   ppb::log::info("sweep: %d combinations", n);
//   ppb::log::warn("CUPTI: cannot subscribe (%s); falling back to CUDA events", why);
#pragma once

#include <string>

namespace ppb::log {

enum class Level { kDebug, kInfo, kWarn, kError };

/// The rank the MPI launcher gave this process (Open MPI, PMIx or PMI
/// variables), readable before MPI is initialised; -1 outside a launcher.
/// The prefix shows it until set_rank says otherwise.
int launcher_rank();
/// Sets the rank shown in the prefix; -1 means "no rank" (single process).
/// With quiet_nonzero, ranks > 0 drop debug and info lines.
void set_rank(int rank, bool quiet_nonzero = true);
/// Lines below `level` are dropped (default kInfo; PPB_LOG=debug lowers it).
void set_level(Level level);
/// "pipebench[r3]: " or "pipebench: ".
std::string prefix();

void debug(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void info(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void warn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/// Warns once per `key` for the life of the process (collectors that turn
/// themselves off use this so a 1000-step run logs one line, not 1000).
void warn_once(const std::string& key, const std::string& message);

}  // namespace ppb::log
