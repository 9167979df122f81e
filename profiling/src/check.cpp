#include "ppb/profiling/check.hpp"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "ppb/profiling/log.hpp"

namespace ppb {
namespace {
std::atomic<AbortHook> g_abort_hook{nullptr};
}  // namespace

std::string number_text(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", x);
  return text;
}

namespace {

// Valid UTF-8 that is still no text to show as it is: the C1 controls (a
// terminal takes U+009B as CSI, the start of an escape sequence), the
// byte-order mark, the two noncharacters XML 1.0 forbids (a JUnit file
// with one does not parse), the line and paragraph separators, and the
// bidirectional overrides and isolates that make a line read otherwise
// than it is (U+202E).
bool shown_as_code(uint32_t code) {
  return (code >= 0x80 && code <= 0x9f) || code == 0xfeff || code == 0xfffe || code == 0xffff ||
         code == 0x2028 || code == 0x2029 || (code >= 0x202a && code <= 0x202e) ||
         (code >= 0x2066 && code <= 0x2069);
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  auto escape = [&out](unsigned char byte) {
    constexpr char kHex[] = "0123456789abcdef";
    out += "\\x";
    out += kHex[byte >> 4];
    out += kHex[byte & 15];
  };
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f)
        escape(c);
      else
        out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, then continuation
    // bytes, no overlong form, no surrogate, nothing above U+10FFFF.
    const size_t len = c >= 0xc2 && c <= 0xdf   ? 2
                       : c >= 0xe0 && c <= 0xef ? 3
                       : c >= 0xf0 && c <= 0xf4 ? 4
                                                : 0;
    uint32_t code = len == 2 ? c & 0x1fU : len == 3 ? c & 0x0fU : c & 0x07U;
    bool ok = len > 0 && i + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      ok = (b & 0xc0) == 0x80;
      code = (code << 6) | (b & 0x3fU);
    }
    ok = ok && !(len == 3 && (code < 0x800 || (code >= 0xd800 && code <= 0xdfff))) &&
         !(len == 4 && (code < 0x10000 || code > 0x10ffff));
    if (!ok) {
      escape(c);
      ++i;
    } else if (shown_as_code(code)) {
      char u[8];
      std::snprintf(u, sizeof u, "\\u%04x", static_cast<unsigned>(code));
      out += u;
      i += len;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

UsageError::UsageError(std::string_view message) : std::runtime_error(printable(message)) {}

void set_abort_hook(AbortHook hook) { g_abort_hook.store(hook); }

void check_failed(const char* expr, const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "%sinternal error at %s:%d: %s: %s\n", log::prefix().c_str(), file, line,
               expr, message.c_str());
  std::fflush(stderr);
  if (AbortHook hook = g_abort_hook.load()) hook();
  std::abort();
}

}  // namespace ppb
