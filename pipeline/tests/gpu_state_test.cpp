// The GPU state's pure parts (gpu_state.hpp) and the health file's schema
// (health.hpp): throttle reasons decoded, samples summarised, files
// round-tripped and bad fields named.
#include "ppb/pipeline/gpu_state.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ppb/pipeline/health.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

using Names = std::vector<std::string>;

TEST(ThrottleReasons, BitsDecodeToNvmlsNamesInBitOrder) {
  EXPECT_EQ(throttle_reason_names(0), Names{});
  EXPECT_EQ(throttle_reason_names(0x48), (Names{"hw_slowdown", "hw_thermal_slowdown"}));
  EXPECT_EQ(throttle_reason_names(0x1FF),
            (Names{"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
                   "sync_boost", "sw_thermal_slowdown", "hw_thermal_slowdown",
                   "hw_power_brake_slowdown", "display_clock_setting"}));
  // A bit NVML adds later reads as itself, not as nothing.
  EXPECT_EQ(throttle_reason_names(0x204), (Names{"sw_power_cap", "0x200"}));
}

TEST(ThrottleReasons, SettingsAndIdleDoNotCountAsSlowing) {
  EXPECT_FALSE(throttle_reason_slows("gpu_idle"));
  EXPECT_FALSE(throttle_reason_slows("applications_clocks_setting"));
  EXPECT_FALSE(throttle_reason_slows("sync_boost"));
  EXPECT_FALSE(throttle_reason_slows("display_clock_setting"));
  for (const char* r : {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                        "hw_power_brake_slowdown", "0x200"}) {
    EXPECT_TRUE(throttle_reason_slows(r)) << r;
  }
}

GpuSample sample(double sm, double power, double temp, uint64_t reasons, int64_t ecc_c,
                 int64_t ecc_u) {
  GpuSample s;
  s.sm_clock_mhz = sm;
  s.memory_clock_mhz = 3200;
  s.power_watts = power;
  s.power_limit_watts = 700;
  s.temperature_c = temp;
  s.throttle_reasons = reasons;
  s.throttle_read = true;
  s.ecc_corrected = ecc_c;
  s.ecc_uncorrected = ecc_u;
  return s;
}

TEST(GpuStateSummary, MinMedianMeanMaxUnionOfReasonsAndEccArrivals) {
  const std::vector<GpuSample> s = {sample(345, 300, 60, 0x1, 5, 0),  // idle: no clock figure
                                    sample(1500, 690, 84, 0x4, 5, 0),
                                    sample(1755, 600, 81, 0x40, 7, 1),
                                    sample(1980, 690, 80, 0, 7, 1)};
  const GpuState g = summarise_gpu_samples(s);
  EXPECT_EQ(g.samples, 4);
  EXPECT_DOUBLE_EQ(g.sm_clock_mhz_min, 1500);
  EXPECT_DOUBLE_EQ(g.sm_clock_mhz_median, 1755);
  EXPECT_DOUBLE_EQ(g.memory_clock_mhz_median, 3200);
  EXPECT_DOUBLE_EQ(g.power_watts_mean, 570);
  EXPECT_DOUBLE_EQ(g.power_limit_watts, 700);
  EXPECT_DOUBLE_EQ(g.temperature_c_max, 84);
  EXPECT_EQ(g.throttle_reasons, (Names{"gpu_idle", "sw_power_cap", "hw_thermal_slowdown"}));
  EXPECT_EQ(slowing_reasons(g), (Names{"sw_power_cap", "hw_thermal_slowdown"}));
  EXPECT_EQ(g.ecc_corrected, 2);  // 5 -> 7 while sampling
  EXPECT_EQ(g.ecc_uncorrected, 1);
  // Only idle samples: their clocks are all there is.
  const GpuState idle = summarise_gpu_samples({sample(345, 80, 40, 0x1, 0, 0)});
  EXPECT_DOUBLE_EQ(idle.sm_clock_mhz_min, 345);
}

TEST(GpuStateSummary, WhatNvmlCouldNotSayStaysUnknown) {
  GpuSample blank;  // every reading unknown
  GpuSample some = blank;
  some.sm_clock_mhz = 1000;
  const GpuState g = summarise_gpu_samples({blank, some, blank});
  EXPECT_EQ(g.samples, 3);
  EXPECT_DOUBLE_EQ(g.sm_clock_mhz_min, 1000);
  EXPECT_DOUBLE_EQ(g.sm_clock_mhz_median, 1000);
  EXPECT_TRUE(std::isnan(g.power_watts_mean));
  EXPECT_TRUE(std::isnan(g.temperature_c_max));
  EXPECT_TRUE(g.throttle_reasons.empty());
  EXPECT_EQ(g.ecc_corrected, -1);
  const GpuState none = summarise_gpu_samples({});
  EXPECT_EQ(none.samples, 0);
  EXPECT_TRUE(std::isnan(none.sm_clock_mhz_min));
}

TEST(GpuStateSummary, ItsLineSaysWhatTheDriverDidNotRead) {
  std::vector<GpuSample> s = {sample(1980, 300, 60, 0x8, 5, 0), sample(1410, 500, 70, 0x0, 8, 0)};
  EXPECT_EQ(gpu_state_text(summarise_gpu_samples(s)),
            "SM clock min 1410 / median 1695 MHz, memory clock 3200 MHz, power mean 400 W of "
            "700 W, temperature max 70 C, throttle reasons hw_slowdown, ECC errors +3 corrected "
            "+0 uncorrected (2 samples)");
  // A GPU whose driver does not expose its clocks, power draw or ECC.
  const double kNaN = std::numeric_limits<double>::quiet_NaN();
  for (GpuSample& x : s) {
    x.sm_clock_mhz = x.memory_clock_mhz = x.power_watts = kNaN;
    x.ecc_corrected = x.ecc_uncorrected = -1;
  }
  EXPECT_EQ(gpu_state_text(summarise_gpu_samples(s)),
            "SM clock not read, memory clock not read, power not read (limit 700 W), temperature "
            "max 70 C, throttle reasons hw_slowdown, ECC errors not read (2 samples)");
  // Reasons read and none set, against reasons the driver did not give.
  s[0].throttle_reasons = 0;
  EXPECT_NE(gpu_state_text(summarise_gpu_samples(s)).find(", throttle reasons none, "),
            std::string::npos);
  for (GpuSample& x : s) x.throttle_read = false;
  const GpuState unread = summarise_gpu_samples(s);
  EXPECT_FALSE(unread.throttle_reasons_read);
  EXPECT_NE(gpu_state_text(unread).find(", throttle reasons not read, "), std::string::npos);
  EXPECT_EQ(gpu_state_text(summarise_gpu_samples({})),
            "SM clock not read, memory clock not read, power not read, temperature not read, "
            "throttle reasons not read, ECC errors not read (0 samples)");
}

HealthFile a_health_file() {
  HealthFile h;
  h.date = "2026-12-05T01:00:00Z";
  h.config = {.model = "gpt-small", .iters = 20, .repeats = 2, .copy_bytes = 1 << 20};
  HealthGpu g{
      .device = 0, .name = "NVIDIA H200", .bus = "0000:3B:00.0", .figures = {}, .gpu_state = {}};
  g.figures["gemm_bf16_tflops"] = {600.5, 601.25};
  g.figures["copy_h2d_gbps"] = {52.5, 53};
  GpuState st = summarise_gpu_samples({sample(1980, 300, 60, 0x8, 0, 0)});
  st.gpu = "NVIDIA H200 (0000:3B:00.0)";
  g.gpu_state = st;
  h.gpus.push_back(g);
  h.environment.hosts = {"node1"};
  h.environment.ranks = 1;
  h.environment.gpus = {"NVIDIA H200"};
  h.environment.date = h.date;
  return h;
}

TEST(HealthFile, RoundTripsThroughJson) {
  const HealthFile h = a_health_file();
  const boost::json::value doc = health_to_json(h);
  EXPECT_TRUE(is_health_document(doc));
  EXPECT_EQ(doc.at("schema").as_string(), "pipebench.health/1");
  EXPECT_EQ(health_from_json(boost::json::parse(boost::json::serialize(doc)), "h.json"), h);
  HealthFile quiet = h;  // without NVML: no gpu_state, the note says why
  quiet.gpus[0].gpu_state.reset();
  quiet.gpu_state_note = "gpu state: NVML not found";
  EXPECT_EQ(health_from_json(health_to_json(quiet), "h.json"), quiet);
  // Reasons the driver did not give round-trip as unread; a file from
  // before the field reads as read.
  HealthFile unread = h;
  unread.gpus[0].gpu_state->throttle_reasons.clear();
  unread.gpus[0].gpu_state->throttle_reasons_read = false;
  boost::json::value written = health_to_json(unread);
  EXPECT_FALSE(
      written.at("gpus").as_array()[0].at("gpu_state").at("throttle_reasons_read").as_bool());
  EXPECT_EQ(health_from_json(written, "h.json"), unread);
  written.at("gpus").as_array()[0].at("gpu_state").as_object().erase("throttle_reasons_read");
  EXPECT_TRUE(health_from_json(written, "h.json").gpus[0].gpu_state->throttle_reasons_read);
}

std::string error_of(const boost::json::value& doc) {
  try {
    (void)health_from_json(doc, "h.json");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HealthFile, BadFieldsAreNamed) {
  boost::json::value doc = health_to_json(a_health_file());
  EXPECT_FALSE(is_health_document(boost::json::parse(R"({"schema":"pipebench.result/1"})")));
  boost::json::value other = doc;
  other.as_object()["schema"] = "pipebench.health/9";
  EXPECT_NE(error_of(other).find("field 'schema': expected \"pipebench.health/1\""),
            std::string::npos)
      << error_of(other);
  boost::json::value zero = doc;
  zero.at("gpus").as_array()[0].at("figures").as_object()["copy_h2d_gbps"] =
      boost::json::array{0.0};
  EXPECT_NE(error_of(zero).find("gpus[0].figures.copy_h2d_gbps"), std::string::npos)
      << error_of(zero);
  boost::json::value empty = doc;
  empty.at("gpus").as_array()[0].at("figures").as_object()["copy_h2d_gbps"] = boost::json::array{};
  EXPECT_NE(error_of(empty).find("expected at least one sample"), std::string::npos)
      << error_of(empty);
  boost::json::value no_samples = doc;
  no_samples.at("gpus").as_array()[0].at("gpu_state").as_object().erase("samples");
  EXPECT_NE(error_of(no_samples).find("gpus[0].gpu_state.samples"), std::string::npos)
      << error_of(no_samples);
  // The gate orders nights by this date: a day the calendar lacks is refused,
  // as in a result file.
  boost::json::value no_day = doc;
  no_day.as_object()["date"] = "2026-02-30T00:00:00Z";
  EXPECT_EQ(error_of(no_day),
            "h.json: field 'date': expected a UTC time such as \"2026-12-06T19:47:54Z\", got "
            "\"2026-02-30T00:00:00Z\"");
}

}  // namespace
}  // namespace ppb
