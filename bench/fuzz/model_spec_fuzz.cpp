// Model specs (--model gpt-tiny, gpt:layers=2,hidden=64,...): any input is a
// spec or a UsageError; an accepted spec expands into operator units whose
// sizes are positive.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.hpp"
#include "ppb/pipeline/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ppb::fuzz::accept_or_usage_error([&] {
    const ppb::ModelSpec spec = ppb::parse_model_spec(text);
    PPB_FUZZ_REQUIRE(ppb::parameter_count(spec) > 0);
  });
  return 0;
}
