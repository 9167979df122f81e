// Schedule files in JSON (--schedule-file): any input is a schedule or a
// UsageError; an accepted schedule survives a round trip unchanged, and
// validating it ends in a verdict, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.hpp"
#include "ppb/pipeline/schedule_io.hpp"
#include "ppb/pipeline/validator.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ppb::fuzz::accept_or_usage_error([&] {
    const ppb::Schedule s = ppb::schedule_from_json(text, "fuzz.json");
    const ppb::Schedule back = ppb::schedule_from_json(ppb::schedule_to_json(s), "round-trip");
    PPB_FUZZ_REQUIRE(back.stages == s.stages && back.microbatches == s.microbatches &&
                     back.chunks == s.chunks && back.batches == s.batches &&
                     back.actions == s.actions);
    (void)ppb::validate_schedule(s);
  });
  return 0;
}
