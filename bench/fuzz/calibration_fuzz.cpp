// Calibration files (--calibration): any input is a calibration or a
// UsageError; an accepted one survives a round trip.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.hpp"
#include "ppb/pipeline/device.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ppb::fuzz::accept_or_usage_error([&] {
    const ppb::Calibration c = ppb::parse_calibration(text, "fuzz.json");
    // Every accepted time and factor is one a plan can sum without overflow.
    auto bounded = [](const ppb::UnitTime& t) {
      for (const double x : {t.fwd, t.bwd_input, t.bwd_weight}) {
        if (!(x >= 0 && x <= ppb::kMaxCalibrationValue)) return false;
      }
      return true;
    };
    for (const auto& [name, t] : c.unit_seconds) PPB_FUZZ_REQUIRE(bounded(t));
    for (const auto& [name, t] : c.kind_scale) PPB_FUZZ_REQUIRE(bounded(t));
    const std::string json = ppb::calibration_to_json(c);
    const std::string back = ppb::calibration_to_json(ppb::parse_calibration(json, "round-trip"));
    PPB_FUZZ_REQUIRE(ppb::fuzz::json_near(boost::json::parse(back), boost::json::parse(json)));
  });
  return 0;
}
