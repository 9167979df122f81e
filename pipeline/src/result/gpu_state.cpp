#include "ppb/pipeline/gpu_state.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

namespace ppb {

namespace {

// NVML's nvmlClocksEventReason* bits, lowest first (nvml.h, "Clocks Event
// Reasons"; the older names are nvmlClocksThrottleReason*).
constexpr std::array<const char*, 9> kReasons = {
    "gpu_idle",                     // 0x1
    "applications_clocks_setting",  // 0x2
    "sw_power_cap",                 // 0x4
    "hw_slowdown",                  // 0x8
    "sync_boost",                   // 0x10
    "sw_thermal_slowdown",          // 0x20
    "hw_thermal_slowdown",          // 0x40
    "hw_power_brake_slowdown",      // 0x80
    "display_clock_setting",        // 0x100
};

constexpr uint64_t kIdleBit = 0x1;  // "gpu_idle"

std::vector<double> finite(const std::vector<GpuSample>& samples, double GpuSample::*field) {
  std::vector<double> out;
  for (const GpuSample& s : samples)
    if (std::isfinite(s.*field)) out.push_back(s.*field);
  return out;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Errors that arrived between the first and the last sample that had a
// count (-1 when fewer than one had).
int64_t ecc_delta(const std::vector<GpuSample>& samples, int64_t GpuSample::*field) {
  int64_t first = -1;
  int64_t last = -1;
  for (const GpuSample& s : samples) {
    if (s.*field < 0) continue;
    if (first < 0) first = s.*field;
    last = s.*field;
  }
  return first < 0 ? -1 : std::max<int64_t>(0, last - first);
}

}  // namespace

std::vector<std::string> throttle_reason_names(uint64_t mask) {
  std::vector<std::string> out;
  for (unsigned bit = 0; bit < 64; ++bit) {
    const uint64_t b = uint64_t{1} << bit;
    if ((mask & b) == 0) continue;
    if (bit < kReasons.size()) {
      out.emplace_back(kReasons[bit]);
    } else {
      char text[24];
      std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(b));
      out.emplace_back(text);
    }
  }
  return out;
}

bool throttle_reason_slows(const std::string& name) {
  return name != "gpu_idle" && name != "applications_clocks_setting" && name != "sync_boost" &&
         name != "display_clock_setting";
}

GpuState summarise_gpu_samples(const std::vector<GpuSample>& samples) {
  GpuState g;
  g.samples = static_cast<int>(samples.size());
  // The clocks of a GPU at work: an idle GPU clocks down by design (an
  // H100's 345 MHz), which says nothing of its health.
  std::vector<GpuSample> working;
  for (const GpuSample& s : samples)
    if ((s.throttle_reasons & kIdleBit) == 0) working.push_back(s);
  const std::vector<GpuSample>& clocked = working.empty() ? samples : working;
  const std::vector<double> sm = finite(clocked, &GpuSample::sm_clock_mhz);
  if (!sm.empty()) g.sm_clock_mhz_min = *std::min_element(sm.begin(), sm.end());
  g.sm_clock_mhz_median = median_of(sm);
  g.memory_clock_mhz_median = median_of(finite(clocked, &GpuSample::memory_clock_mhz));
  const std::vector<double> power = finite(samples, &GpuSample::power_watts);
  if (!power.empty()) {
    double sum = 0;
    for (double p : power) sum += p;
    g.power_watts_mean = sum / static_cast<double>(power.size());
  }
  const std::vector<double> limit = finite(samples, &GpuSample::power_limit_watts);
  if (!limit.empty()) g.power_limit_watts = *std::min_element(limit.begin(), limit.end());
  const std::vector<double> temp = finite(samples, &GpuSample::temperature_c);
  if (!temp.empty()) g.temperature_c_max = *std::max_element(temp.begin(), temp.end());
  uint64_t seen = 0;
  g.throttle_reasons_read = false;
  for (const GpuSample& s : samples) {
    seen |= s.throttle_reasons;
    g.throttle_reasons_read = g.throttle_reasons_read || s.throttle_read || s.throttle_reasons != 0;
  }
  g.throttle_reasons = throttle_reason_names(seen);
  g.ecc_corrected = ecc_delta(samples, &GpuSample::ecc_corrected);
  g.ecc_uncorrected = ecc_delta(samples, &GpuSample::ecc_uncorrected);
  return g;
}

std::vector<std::string> slowing_reasons(const GpuState& state) {
  std::vector<std::string> out;
  for (const std::string& r : state.throttle_reasons)
    if (throttle_reason_slows(r)) out.push_back(r);
  return out;
}

std::string gpu_state_text(const GpuState& st) {
  const auto num = [](double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.0f", x);
    return std::string(b);
  };
  const auto known = [](double x) { return std::isfinite(x); };
  std::string t = known(st.sm_clock_mhz_min)
                      ? "SM clock min " + num(st.sm_clock_mhz_min) + " / median " +
                            num(st.sm_clock_mhz_median) + " MHz"
                      : "SM clock not read";
  t += known(st.memory_clock_mhz_median)
           ? ", memory clock " + num(st.memory_clock_mhz_median) + " MHz"
           : ", memory clock not read";
  if (known(st.power_watts_mean)) {
    t += ", power mean " + num(st.power_watts_mean) + " W" +
         (known(st.power_limit_watts) ? " of " + num(st.power_limit_watts) + " W"
                                      : " (limit not read)");
  } else {
    t += ", power not read" + (known(st.power_limit_watts)
                                   ? " (limit " + num(st.power_limit_watts) + " W)"
                                   : std::string());
  }
  t += known(st.temperature_c_max) ? ", temperature max " + num(st.temperature_c_max) + " C"
                                   : ", temperature not read";
  std::string reasons;
  for (const std::string& r : st.throttle_reasons) reasons += (reasons.empty() ? "" : ",") + r;
  t += ", throttle reasons " + (!reasons.empty()           ? reasons
                                : st.throttle_reasons_read ? std::string("none")
                                                           : std::string("not read"));
  t += st.ecc_corrected >= 0 && st.ecc_uncorrected >= 0
           ? ", ECC errors +" + std::to_string(st.ecc_corrected) + " corrected +" +
                 std::to_string(st.ecc_uncorrected) + " uncorrected"
           : ", ECC errors not read";
  return t + " (" + std::to_string(st.samples) + " samples)";
}

}  // namespace ppb
