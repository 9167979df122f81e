#include "ppb/profiling/check.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "ppb/profiling/log.hpp"

namespace ppb {
namespace {
std::atomic<AbortHook> g_abort_hook{nullptr};
}  // namespace

void set_abort_hook(AbortHook hook) { g_abort_hook.store(hook); }

void check_failed(const char* expr, const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "%sinternal error at %s:%d: %s: %s\n", log::prefix().c_str(), file, line,
               expr, message.c_str());
  std::fflush(stderr);
  if (AbortHook hook = g_abort_hook.load()) hook();
  std::abort();
}

}  // namespace ppb
