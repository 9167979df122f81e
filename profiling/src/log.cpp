#include "ppb/profiling/log.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "ppb/profiling/check.hpp"

namespace ppb::log {

int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return -1;
}

namespace {

struct State {
  int rank = -1;
  bool quiet_nonzero = true;
  Level level = Level::kInfo;
  std::mutex mutex;
  std::set<std::string> warned;
  State() : rank(launcher_rank()) {
    if (const char* env = std::getenv("PPB_LOG"); env && std::strcmp(env, "debug") == 0) {
      level = Level::kDebug;
    }
  }
};

State& state() {
  static State s;
  return s;
}

void emit(Level level, const char* fmt, va_list args) {
  State& s = state();
  if (level < s.level) return;
  if (s.quiet_nonzero && s.rank > 0 && level < Level::kWarn) return;
  const char* tag = "";
  switch (level) {
    case Level::kDebug:
      tag = "debug: ";
      break;
    case Level::kInfo:
      tag = "";
      break;
    case Level::kWarn:
      tag = "warning: ";
      break;
    case Level::kError:
      tag = "error: ";
      break;
  }
  char body[4096];
  std::vsnprintf(body, sizeof body, fmt, args);
  FILE* out = level >= Level::kWarn ? stderr : stdout;
  // Warnings and errors may quote what a file holds.
  const std::string line = level >= Level::kWarn ? ppb::printable(body) : std::string(body);
  std::lock_guard lock(s.mutex);
  std::fprintf(out, "%s%s%s\n", prefix().c_str(), tag, line.c_str());
  std::fflush(out);
}

}  // namespace

void set_rank(int rank, bool quiet_nonzero) {
  state().rank = rank;
  state().quiet_nonzero = quiet_nonzero;
}

void set_level(Level level) { state().level = level; }

std::string prefix() {
  int rank = state().rank;
  return rank < 0 ? std::string("pipebench: ") : "pipebench[r" + std::to_string(rank) + "]: ";
}

#define PPB_LOG_FN(name, lvl)       \
  void name(const char* fmt, ...) { \
    va_list args;                   \
    va_start(args, fmt);            \
    emit(lvl, fmt, args);           \
    va_end(args);                   \
  }
PPB_LOG_FN(debug, Level::kDebug)
PPB_LOG_FN(info, Level::kInfo)
PPB_LOG_FN(warn, Level::kWarn)
PPB_LOG_FN(error, Level::kError)
#undef PPB_LOG_FN

void warn_once(const std::string& key, const std::string& message) {
  {
    std::lock_guard lock(state().mutex);
    if (!state().warned.insert(key).second) return;
  }
  warn("%s", message.c_str());
}

}  // namespace ppb::log
