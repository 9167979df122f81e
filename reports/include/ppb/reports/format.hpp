// Number formatting shared by the writers (tables for people).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

namespace ppb::reports {

/// "1.50 GiB", "143.0 MiB", "512 B"; "n/a" for negative values.
std::string format_bytes(double bytes);

/// Fixed-point with `digits` decimals; "n/a" for NaN or infinity.
/// Example: format_fixed(0.2734, 3) == "0.273".
std::string format_fixed(double x, int digits);

/// A fraction as a percentage with `digits` decimals: format_percent(0.0123, 2)
/// == "1.23%"; "n/a" (no sign) for NaN or infinity.
std::string format_percent(double fraction, int digits);

/// Three significant digits, no exponent for 1e-3 <= |x| < 1e6: "812", "0.273",
/// "12.4"; "n/a" for NaN.
std::string format_number(double x);

/// format_number without trailing zeros: "7", "2.5", "0.07" (for percentages
/// and tolerances in sentences).
std::string format_trimmed(double x);

/// Counts as people list them: "2", "2 or 4", "2, 4 or 8" (ascending).
std::string or_list(const std::set<int>& xs);

/// Shortest text that parses back to exactly x ("0.1", "812.25", "nan").
std::string format_exact(double x);

/// `text` with every line printable (check.hpp): control bytes other than
/// the newlines, and bytes that are not UTF-8, become \xNN. For what a
/// command prints that quotes a file's text.
std::string terminal_text(std::string_view text);

/// Escapes &, <, >, " and ' for HTML and XML text and attributes; other
/// control bytes than newlines, and bytes that are not UTF-8, become \xNN
/// (printable), which XML 1.0 could not hold.
std::string xml_escape(const std::string& text);

}  // namespace ppb::reports
