// Shared by the libFuzzer targets: the contract every reader must keep on any
// input is "a value, or ppb::UsageError" (exit 2 with one line in the
// command). Anything else (another exception, a crash, a sanitizer report)
// is a finding. PPB_FUZZ_REQUIRE checks a property of an accepted input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "ppb/profiling/check.hpp"

namespace ppb::fuzz {

/// Runs `read` and swallows UsageError, the documented answer to bad input.
template <typename F>
void accept_or_usage_error(F&& read) {
  try {
    read();
  } catch (const UsageError&) {
  }
}

}  // namespace ppb::fuzz

#define PPB_FUZZ_REQUIRE(cond)                                                                \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "fuzz property failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)
