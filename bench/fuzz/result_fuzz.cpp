// Result files (what `report` and `run --resume` read): any input is a
// result or a UsageError naming the field; an accepted result survives a
// round trip through its JSON form.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.hpp"
#include "ppb/pipeline/result.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ppb::fuzz::accept_or_usage_error([&] {
    const ppb::Result r = ppb::result_from_text(text, "fuzz.json");
    const ppb::Result back = ppb::result_from_json(ppb::result_to_json(r), "round-trip");
    PPB_FUZZ_REQUIRE(ppb::fuzz::json_near(ppb::result_to_json(back), ppb::result_to_json(r)));
  });
  return 0;
}
