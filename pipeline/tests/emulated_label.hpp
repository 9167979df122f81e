// Tests that need a CUDA device, under the ctest label `emulated`: ctest
// sets PPB_REQUIRE_EMULATOR=1 there, promising the CUDA emulator in place of
// the GPU, so a missing device fails the test (saying what is missing)
// instead of skipping it: the label cannot pass having run nothing. Run
// elsewhere (label gpu on a machine without a device, or by hand) the test
// skips, saying why.
//
//   if (!on_emulator()) PPB_SKIP_UNLESS_EMULATED("not running on the CUDA emulator");
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace ppb::testing {

/// Whether ctest runs this test under the label `emulated`.
inline bool emulator_required() {
  const char* v = std::getenv("PPB_REQUIRE_EMULATOR");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace ppb::testing

/// Fails (label emulated) or skips (elsewhere) the current test, saying
/// `missing` (a streamable value). Returns from the calling function.
#define PPB_SKIP_UNLESS_EMULATED(missing)                                                  \
  do {                                                                                     \
    if (::ppb::testing::emulator_required()) {                                             \
      GTEST_FAIL() << "label emulated promises the CUDA emulator (BUILD/cudaemu first on " \
                      "LD_LIBRARY_PATH), but: "                                            \
                   << (missing);                                                           \
    }                                                                                      \
    GTEST_SKIP() << (missing);                                                             \
  } while (false)
