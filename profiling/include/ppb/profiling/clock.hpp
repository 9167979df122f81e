// The one clock every measurement uses: steady, monotonic, in seconds.
#pragma once

#include <chrono>

namespace ppb {

/// Seconds since an arbitrary fixed origin (steady_clock). Differences are
/// exact to the clock's resolution; never compare values across processes.
inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace ppb
