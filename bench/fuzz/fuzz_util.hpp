// Shared by the libFuzzer targets: the contract every reader must keep on any
// input is "a value, or ppb::UsageError" (exit 2 with one line in the
// command). Anything else (another exception, a crash, a sanitizer report)
// is a finding. PPB_FUZZ_REQUIRE checks a property of an accepted input.
#pragma once

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "ppb/profiling/check.hpp"

namespace ppb::fuzz {

/// Runs `read` and swallows UsageError, the documented answer to bad input.
template <typename F>
void accept_or_usage_error(F&& read) {
  try {
    read();
  } catch (const UsageError&) {
  }
}

/// Equal JSON documents, numbers within a few ulps: Boost.JSON 1.81 reads
/// some doubles back one ulp off what it wrote, which a round trip must
/// tolerate (pipebench's own readers and writers add no error).
inline bool json_near(const boost::json::value& a, const boost::json::value& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.to_number<double>();
    const double y = b.to_number<double>();
    return x == y || std::fabs(x - y) <= 4 * std::numeric_limits<double>::epsilon() *
                                             std::max(std::fabs(x), std::fabs(y));
  }
  if (a.kind() != b.kind()) return false;
  if (a.is_array()) {
    const auto& p = a.get_array();
    const auto& q = b.get_array();
    if (p.size() != q.size()) return false;
    for (size_t i = 0; i < p.size(); ++i) {
      if (!json_near(p[i], q[i])) return false;
    }
    return true;
  }
  if (a.is_object()) {
    const auto& p = a.get_object();
    const auto& q = b.get_object();
    if (p.size() != q.size()) return false;
    for (const auto& kv : p) {
      const boost::json::value* other = q.if_contains(kv.key());
      if (other == nullptr || !json_near(kv.value(), *other)) return false;
    }
    return true;
  }
  return a == b;
}

}  // namespace ppb::fuzz

#define PPB_FUZZ_REQUIRE(cond)                                                                \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "fuzz property failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)
