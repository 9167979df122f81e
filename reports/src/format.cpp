#include "ppb/reports/format.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "ppb/profiling/check.hpp"

namespace ppb::reports {

std::string format_bytes(double bytes) {
  if (!std::isfinite(bytes) || bytes < 0) return "n/a";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double x = bytes;
  while (x >= 1024.0 && u < 4) {
    x /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%.0f B", x);
  } else {
    std::snprintf(buf, sizeof buf, x >= 100 ? "%.0f %s" : (x >= 10 ? "%.1f %s" : "%.2f %s"), x,
                  units[u]);
  }
  return buf;
}

std::string format_fixed(double x, int digits) {
  if (!std::isfinite(x)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

std::string format_percent(double fraction, int digits) {
  return std::isfinite(fraction) ? format_fixed(fraction * 100, digits) + "%" : "n/a";
}

std::string format_number(double x) {
  if (!std::isfinite(x)) return "n/a";
  const double a = std::fabs(x);
  if (a == 0) return "0";
  if (a >= 1e6 || a < 1e-3) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g", x);
    return buf;
  }
  const int digits = a >= 100 ? 0 : (a >= 10 ? 1 : (a >= 1 ? 2 : 3));
  return format_fixed(x, digits);
}

std::string format_trimmed(double x) {
  std::string s = format_number(x);
  if (s.find('.') == std::string::npos || s.find_first_of("eE") != std::string::npos) return s;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

std::string format_exact(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, res.ptr);
}

std::string terminal_text(std::string_view raw) {
  std::string text;
  size_t start = 0;
  for (size_t nl = raw.find('\n'); start <= raw.size(); nl = raw.find('\n', start)) {
    const size_t end = nl == std::string::npos ? raw.size() : nl;
    text += printable(raw.substr(start, end - start));
    if (nl == std::string::npos) break;
    text += '\n';
    start = nl + 1;
  }
  return text;
}

std::string xml_escape(const std::string& raw) {
  // XML 1.0 holds no control characters but tab, newline and carriage
  // return, and only UTF-8: every control byte but the newline (an ESC in
  // a library's error text), and every byte that is not UTF-8, becomes
  // \xNN as on a terminal, so that a JUnit file stays well-formed whatever
  // a result holds.
  const std::string text = terminal_text(raw);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string or_list(const std::set<int>& xs) {
  std::string out;
  size_t i = 0;
  for (const int x : xs) {
    ++i;
    out += (i == 1 ? "" : (i == xs.size() ? " or " : ", ")) + std::to_string(x);
  }
  return out;
}

}  // namespace ppb::reports
