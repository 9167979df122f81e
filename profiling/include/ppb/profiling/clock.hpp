// The one clock every measurement uses: steady, monotonic, in seconds.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace ppb {

/// Seconds since an arbitrary fixed origin (steady_clock). Differences are
/// exact to the clock's resolution; never compare values across processes.
inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// A time for a line a person reads, in seconds without the unit: one
/// decimal from 1 s ("6.0", "301.2"), two significant digits below ("0.5",
/// "0.02"), so that a short time never reads as zero.
inline std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, seconds >= 1 ? "%.1f" : "%.2g", seconds);
  return text;
}

}  // namespace ppb
