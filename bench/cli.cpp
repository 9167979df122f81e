#include "cli.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "ppb/pipeline/model.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::cli {

namespace {

// The whole text as a number (NaN when it is not one).
double whole_number(const std::string& text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

CLI::Validator cost_time() {
  return CLI::Validator(
      [](const std::string& text) -> std::string {
        const double v = whole_number(text);
        if (!(v >= 0 && v <= 1e9)) return "expected a time in [0, 1e9], got '" + text + "'";
        return {};
      },
      "TIME in [0, 1e9]");
}

CLI::Validator number_in(double lo, double hi, const std::string& range) {
  return CLI::Validator(
      [lo, hi, range](const std::string& text) -> std::string {
        const double v = whole_number(text);
        if (!(v >= lo && v <= hi)) return "expected a number in " + range + ", got '" + text + "'";
        return {};
      },
      "NUMBER in " + range);
}

CLI::Validator integer_in(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](const std::string& text) -> std::string {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) {
          return "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                 "], got '" + text + "'";
        }
        return {};
      },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

CLI::Option* add_vocab_divisor_flag(CLI::App& cmd, int& divisor) {
  return cmd
      .add_option("--make-vocab-size-divisible-by", divisor,
                  "Pad the head's and embedding's vocabulary to a multiple of N, as Megatron-LM "
                  "(aligned GEMMs; the padding is masked out of the loss); 1: no padding")
      ->check(integer_in(1, kMaxVocabDivisor))
      ->capture_default_str();
}

CLI::Option* add_attention_flag(CLI::App& cmd, std::string& request) {
  return cmd
      .add_option("--attention", request,
                  "Attention: auto (a fused flash attention where it runs: on a GPU, cuDNN's "
                  "for bf16, pipebench's own 3xTF32 kernels for fp32, the softmax statistics "
                  "kept; else naive), fused, or naive (the probabilities kept); a run's result "
                  "says which ran and why")
      ->capture_default_str();
}

CLI::Validator non_empty(const std::string& what) {
  return CLI::Validator(
      [what](const std::string& text) -> std::string {
        return text.empty() ? "expected " + what + ", got ''" : std::string();
      },
      what);
}

std::int64_t parse_bytes(const std::string& text, const std::string& flag) {
  auto fail = [&]() -> std::int64_t {
    throw UsageError(flag + ": expected a size such as 1024, 512MiB or 16GiB, got '" + text + "'");
  };
  size_t pos = 0;
  while (pos < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.'))
    ++pos;
  if (pos == 0) return fail();
  double value = 0;
  try {
    size_t used = 0;
    value = std::stod(text.substr(0, pos), &used);
    if (used != pos) return fail();
  } catch (const std::exception&) {
    return fail();
  }
  std::string unit;
  for (size_t i = pos; i < text.size(); ++i) {
    if (!std::isspace(static_cast<unsigned char>(text[i]))) {
      unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
    }
  }
  double scale = 0;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "kib" || unit == "k")
    scale = 1024.0;
  else if (unit == "mib" || unit == "m")
    scale = 1024.0 * 1024;
  else if (unit == "gib" || unit == "g")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "tib" || unit == "t")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb")
    scale = 1e3;
  else if (unit == "mb")
    scale = 1e6;
  else if (unit == "gb")
    scale = 1e9;
  else if (unit == "tb")
    scale = 1e12;
  else
    return fail();
  double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes < 0 || bytes > 9.0e18) return fail();
  return static_cast<std::int64_t>(std::llround(bytes));
}

std::string format_bytes(std::int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

namespace {
std::string& recorded_command_line() {
  static std::string text;
  return text;
}
}  // namespace

const std::string& command_line() { return recorded_command_line(); }

void set_command_line(int argc, const char* const* argv) {
  std::string& text = recorded_command_line();
  text.clear();
  for (int i = 1; i < argc; ++i) {  // not argv[0]: installs may differ by host
    text += argv[i];
    text += '\0';
  }
}

void check_timeout_flag(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) {
    throw UsageError("--timeout: expected a finite number of seconds >= 0, got " +
                     number_text(seconds));
  }
}

bool is_decimal_integer(std::string_view text) {
  const size_t i = text.size() > 1 && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  return i < text.size() && text.find_first_not_of("0123456789", i) == std::string_view::npos &&
         !(text[i] == '0' && text.size() > i + 1);
}

std::vector<int> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) throw UsageError(flag + ": empty item in '" + text + "'");
    size_t used = 0;
    long value = 0;
    try {
      if (is_decimal_integer(item)) value = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || value < 1 || value > 1000000) {
      throw UsageError(flag + ": expected positive integers separated by commas, got '" + item +
                       "'");
    }
    out.push_back(static_cast<int>(value));
  }
  if (out.empty()) throw UsageError(flag + ": expected at least one value");
  return out;
}

}  // namespace ppb::cli
