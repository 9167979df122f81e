// Schedules in the text form ("s0: F0 B0 ..."): any input is a schedule or
// a UsageError; an accepted schedule's actions survive a round trip.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.hpp"
#include "ppb/pipeline/schedule_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ppb::fuzz::accept_or_usage_error([&] {
    const ppb::Schedule s = ppb::schedule_from_text(text, "fuzz.txt");
    const ppb::Schedule back = ppb::schedule_from_text(ppb::schedule_to_text(s), "round-trip");
    PPB_FUZZ_REQUIRE(back.stages == s.stages && back.microbatches == s.microbatches &&
                     back.chunks == s.chunks && back.actions == s.actions);
  });
  return 0;
}
