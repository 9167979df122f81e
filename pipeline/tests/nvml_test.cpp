// NVML loaded at run time (nvml.hpp): where the library is not there (this
// build machine: no driver), open() says why in one phrase, the line a run
// prints names the library and what is not sampled, and a sampler without
// it samples nothing: the run goes on. Where it is there, a reading of a
// bus id NVML does not know is all unknown.
#include "ppb/exec/nvml.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>

namespace ppb::nvml {
namespace {

bool library_present() {
  void* h = dlopen(kLibrary, RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) return false;
  dlclose(h);
  return true;
}

TEST(Nvml, UnavailableLineNamesTheLibraryAndWhatIsNotSampled) {
  EXPECT_EQ(unavailable_line("cannot open shared object file: No such file or directory"),
            "gpu state: NVML not found (libnvidia-ml.so.1: cannot open shared object file: No "
            "such file or directory): clocks, power, temperature and throttling not sampled");
}

TEST(Nvml, OpenSucceedsExactlyWhereTheLibraryLoads) {
  std::string why;
  const std::shared_ptr<Library> lib = Library::open(&why);
  if (!library_present()) {
    ASSERT_EQ(lib, nullptr);
    // dlopen's own words, without the library's name twice.
    EXPECT_NE(why.find("cannot open shared object file"), std::string::npos) << why;
    EXPECT_EQ(why.find(kLibrary), std::string::npos) << why;
    return;
  }
  // A driver's NVML may still refuse to start (no device): then it says why.
  if (lib == nullptr) {
    EXPECT_NE(why.find("nvmlInit_v2"), std::string::npos) << why;
    return;
  }
  const GpuSample s = lib->sample("ffff:ff:1f.7");
  EXPECT_TRUE(std::isnan(s.sm_clock_mhz));
  EXPECT_EQ(s.throttle_reasons, 0U);
}

TEST(Nvml, SamplerWithoutTheLibrarySamplesNothingAndStops) {
  // What open() gives where NVML is absent.
  Sampler sampler(nullptr, {"0000:3B:00.0", "0000:86:00.0"}, std::chrono::milliseconds(10));
  sampler.start();
  const auto per_gpu = sampler.stop();
  ASSERT_EQ(per_gpu.size(), 2U);
  EXPECT_TRUE(per_gpu[0].empty());
  EXPECT_TRUE(per_gpu[1].empty());
  EXPECT_TRUE(sampler.stop().empty());  // a second stop: nothing more
}

}  // namespace
}  // namespace ppb::nvml
