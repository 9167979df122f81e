// Schedules in PyTorch pipelining's CSV: any input is a valid schedule or a
// UsageError (a bad cell names its row and column); an accepted schedule
// survives a round trip through the CSV writer.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.hpp"
#include "ppb/pipeline/schedule_io.hpp"
#include "ppb/pipeline/validator.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ppb::fuzz::accept_or_usage_error([&] {
    const ppb::Schedule s = ppb::schedule_from_csv(text, "fuzz.csv");
    // As read_schedule_file does: the validator refuses what no rank can run
    // (a forward overlapped with its own backward, a deadlock).
    ppb::validate_or_throw(s, "fuzz.csv");
    const ppb::Schedule back = ppb::schedule_from_csv(ppb::schedule_to_csv(s), "round-trip");
    PPB_FUZZ_REQUIRE(back.stages == s.stages && back.microbatches == s.microbatches &&
                     back.chunks == s.chunks && back.placement == s.placement &&
                     back.actions == s.actions);
  });
  return 0;
}
