// The NVML reader (nvml.hpp) against the tests' stand-in libnvidia-ml.so.1
// (fake_nvml.cpp, found through LD_LIBRARY_PATH; ctest sets it): every
// figure read from its call and converted (milliwatts to watts), the
// versioned temperature call preferred and the deprecated one used where
// the driver refuses its version, a bus id NVML does not know all unknown,
// nvmlInit's refusal named, readings the driver does not support left
// unknown, the clocks-event reasons read under the name the driver has
// (ctest runs these tests against a driver from before CUDA 12.2's rename
// too), and a sampler's readings per GPU in order.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ppb/exec/nvml.hpp"

namespace ppb::nvml {
namespace {

// Whether the NVML dlopen finds is the tests' fake (a driver's would answer
// with its own figures).
bool fake_loaded() {
  void* h = dlopen(kLibrary, RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) return false;
  const bool fake = dlsym(h, "ppb_fake_nvml") != nullptr;
  dlclose(h);
  return fake;
}

class FakeNvml : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_loaded()) << "run with the folder of the fake libnvidia-ml.so.1 on "
                                  "LD_LIBRARY_PATH (ctest does)";
    unsetenv("PPB_FAKE_NVML_REASONS");
    unsetenv("PPB_FAKE_NVML_TEMPERATURE_V");
    unsetenv("PPB_FAKE_NVML_INIT");
    unsetenv("PPB_FAKE_NVML_NOT_SUPPORTED");
  }
};

// Whether the NVML dlopen finds exports `symbol`.
bool exports(const char* symbol) {
  void* h = dlopen(kLibrary, RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) return false;
  const bool found = dlsym(h, symbol) != nullptr;
  dlclose(h);
  return found;
}

TEST_F(FakeNvml, EveryFigureComesFromItsCallInItsUnit) {
  std::string why;
  const std::shared_ptr<Library> lib = Library::open(&why);
  ASSERT_NE(lib, nullptr) << why;
  EXPECT_EQ(lib->driver_version(), "999.12.34");
  const GpuSample s = lib->sample("0000:01:00.0");
  EXPECT_EQ(s.sm_clock_mhz, 1980);
  EXPECT_EQ(s.memory_clock_mhz, 3201);
  EXPECT_DOUBLE_EQ(s.power_watts, 512.345);
  EXPECT_DOUBLE_EQ(s.power_limit_watts, 700.0);
  EXPECT_EQ(s.temperature_c, 42);  // nvmlDeviceGetTemperatureV's answer
  EXPECT_EQ(s.throttle_reasons, 0U);
  EXPECT_EQ(s.ecc_uncorrected, 0);
  const int64_t corrected = s.ecc_corrected;
  EXPECT_GT(corrected, 0);
  EXPECT_EQ(lib->sample("0000:01:00.0").ecc_corrected, corrected + 3);
  EXPECT_EQ(lib->sample("0000:02:00.0").sm_clock_mhz, 1410);  // the other GPU
}

TEST_F(FakeNvml, TheDeprecatedTemperatureCallServesWhereTheVersionedOneRefuses) {
  setenv("PPB_FAKE_NVML_TEMPERATURE_V", "mismatch", 1);
  std::string why;
  const std::shared_ptr<Library> lib = Library::open(&why);
  ASSERT_NE(lib, nullptr) << why;
  EXPECT_EQ(lib->sample("0000:01:00.0").temperature_c, 41);
}

TEST_F(FakeNvml, ThrottleReasonBitsAreReadAsGiven) {
  setenv("PPB_FAKE_NVML_REASONS", "0x48", 1);
  std::string why;
  const std::shared_ptr<Library> lib = Library::open(&why);
  ASSERT_NE(lib, nullptr) << why;
  const GpuSample s = lib->sample("0000:01:00.0");
  EXPECT_EQ(s.throttle_reasons, 0x48U);
  EXPECT_EQ(summarise_gpu_samples({s}).throttle_reasons,
            (std::vector<std::string>{"hw_slowdown", "hw_thermal_slowdown"}));
}

TEST_F(FakeNvml, TheReasonsAreReadUnderTheNameTheDriverHas) {
  // PPB_FAKE_NVML_DRIVER (set by ctest) says which stand-in this run loads.
  const char* driver = std::getenv("PPB_FAKE_NVML_DRIVER");
  const bool before_rename = driver != nullptr && std::string(driver) == "before-12.2";
  EXPECT_EQ(exports("nvmlDeviceGetCurrentClocksEventReasons"), !before_rename);
  EXPECT_EQ(exports("nvmlDeviceGetCurrentClocksThrottleReasons"), before_rename);
  setenv("PPB_FAKE_NVML_REASONS", "0x20", 1);  // sw_thermal_slowdown
  std::string why;
  const std::shared_ptr<Library> lib = Library::open(&why);
  ASSERT_NE(lib, nullptr) << why;
  EXPECT_EQ(lib->sample("0000:02:00.0").throttle_reasons, 0x20U);
}

TEST_F(FakeNvml, ReadingsTheDriverDoesNotSupportAreUnknownAndTheOthersRead) {
  setenv("PPB_FAKE_NVML_NOT_SUPPORTED", "clock,power,ecc", 1);
  setenv("PPB_FAKE_NVML_REASONS", "0x48", 1);
  std::string why;
  const std::shared_ptr<Library> lib = Library::open(&why);
  ASSERT_NE(lib, nullptr) << why;
  const GpuSample s = lib->sample("0000:01:00.0");
  EXPECT_TRUE(std::isnan(s.sm_clock_mhz));
  EXPECT_TRUE(std::isnan(s.memory_clock_mhz));
  EXPECT_TRUE(std::isnan(s.power_watts));
  EXPECT_DOUBLE_EQ(s.power_limit_watts, 700.0);  // its own call, supported
  EXPECT_EQ(s.temperature_c, 42);
  EXPECT_EQ(s.throttle_reasons, 0x48U);
  EXPECT_EQ(s.ecc_corrected, -1);
  EXPECT_EQ(s.ecc_uncorrected, -1);
  // The summary has no figure where no reading had one (null in JSON).
  const GpuState g = summarise_gpu_samples({s, lib->sample("0000:01:00.0")});
  EXPECT_EQ(g.samples, 2);
  EXPECT_TRUE(std::isnan(g.sm_clock_mhz_min));
  EXPECT_TRUE(std::isnan(g.power_watts_mean));
  EXPECT_DOUBLE_EQ(g.power_limit_watts, 700.0);
  EXPECT_EQ(g.temperature_c_max, 42);
  EXPECT_EQ(g.ecc_corrected, -1);
  EXPECT_EQ(g.throttle_reasons, (std::vector<std::string>{"hw_slowdown", "hw_thermal_slowdown"}));
  // Every reading refused: all unknown, none made up.
  setenv("PPB_FAKE_NVML_NOT_SUPPORTED", "clock,power,power_limit,temperature,reasons,ecc", 1);
  const GpuSample none = lib->sample("0000:01:00.0");
  EXPECT_TRUE(std::isnan(none.power_limit_watts));
  EXPECT_TRUE(std::isnan(none.temperature_c));
  EXPECT_EQ(none.throttle_reasons, 0U);
  EXPECT_FALSE(none.throttle_read);
  EXPECT_TRUE(s.throttle_read);
}

TEST_F(FakeNvml, AnUnknownBusIsAllUnknown) {
  std::string why;
  const std::shared_ptr<Library> lib = Library::open(&why);
  ASSERT_NE(lib, nullptr) << why;
  const GpuSample s = lib->sample("0000:3b:00.0");
  EXPECT_TRUE(std::isnan(s.sm_clock_mhz));
  EXPECT_TRUE(std::isnan(s.temperature_c));
  EXPECT_EQ(s.ecc_corrected, -1);
}

TEST_F(FakeNvml, AnInitThatFailsIsNamedWithNvmlsWords) {
  setenv("PPB_FAKE_NVML_INIT", "fail", 1);
  std::string why;
  EXPECT_EQ(Library::open(&why), nullptr);
  EXPECT_EQ(why, "nvmlInit_v2: Driver Not Loaded");
  EXPECT_EQ(unavailable_line(why),
            "gpu state: NVML not found (libnvidia-ml.so.1: nvmlInit_v2: Driver Not Loaded): "
            "clocks, power, temperature and throttling not sampled");
}

TEST_F(FakeNvml, ASamplerReadsEachGpuAtStartEachPeriodAndAtStop) {
  std::string why;
  const std::shared_ptr<Library> lib = Library::open(&why);
  ASSERT_NE(lib, nullptr) << why;
  Sampler sampler(lib, {"0000:01:00.0", "0000:02:00.0"}, std::chrono::milliseconds(1));
  sampler.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto per_gpu = sampler.stop();
  ASSERT_EQ(per_gpu.size(), 2U);
  ASSERT_GE(per_gpu[0].size(), 3U);  // at start, at least one period, at stop
  EXPECT_EQ(per_gpu[0].size(), per_gpu[1].size());
  for (const GpuSample& s : per_gpu[0]) EXPECT_EQ(s.sm_clock_mhz, 1980);
  for (const GpuSample& s : per_gpu[1]) EXPECT_EQ(s.sm_clock_mhz, 1410);
  // The counts grow by 3 at each reading of a GPU: the readings in order.
  for (size_t i = 1; i < per_gpu[1].size(); ++i)
    EXPECT_EQ(per_gpu[1][i].ecc_corrected, per_gpu[1][i - 1].ecc_corrected + 3);
  const GpuState g = summarise_gpu_samples(per_gpu[1]);
  EXPECT_EQ(g.samples, static_cast<int>(per_gpu[1].size()));
  EXPECT_EQ(g.ecc_corrected, 3 * (g.samples - 1));
  EXPECT_EQ(g.sm_clock_mhz_min, 1410);
}

}  // namespace
}  // namespace ppb::nvml
