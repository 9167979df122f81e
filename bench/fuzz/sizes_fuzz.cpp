// Size and list flags (--memory-budget 16GiB, --microbatches 4,8): any text
// is a value or a UsageError naming the flag; accepted sizes are >= 0 and
// accepted lists are non-empty and positive.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ppb::fuzz::accept_or_usage_error(
      [&] { PPB_FUZZ_REQUIRE(ppb::cli::parse_bytes(text, "--memory-budget") >= 0); });
  ppb::fuzz::accept_or_usage_error([&] {
    const std::vector<int> list = ppb::cli::parse_int_list(text, "--microbatches");
    PPB_FUZZ_REQUIRE(!list.empty());
    for (int v : list) PPB_FUZZ_REQUIRE(v >= 1);
  });
  return 0;
}
