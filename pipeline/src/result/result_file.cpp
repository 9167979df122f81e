// Result files on disk: strict reading (one-line errors naming the file) and
// writing through write_output_file (atomic for regular files, so a killed
// run never leaves a half file and `run --resume` can trust what it finds).
#include <boost/json.hpp>
#include <charconv>
#include <cstdio>
#include <string>

#include "ppb/pipeline/result.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/input_file.hpp"
#include "ppb/profiling/output_file.hpp"

namespace ppb {

namespace json = boost::json;

namespace {

// Short, scalar-only objects and arrays go on one line (a timeline event, a
// per-stage list); everything else is indented. Readable by people, and the
// result still parses back to the same value.
bool is_flat(const json::value& v) {
  if (v.is_array()) {
    for (const auto& x : v.get_array()) {
      if (x.is_array() || x.is_object()) return false;
    }
    return true;
  }
  if (v.is_object()) {
    if (v.get_object().size() > 8) return false;
    for (const auto& kv : v.get_object()) {
      if (kv.value().is_array() || kv.value().is_object()) return false;
    }
    return true;
  }
  return true;
}

// Doubles in their shortest round-trip form ("0.1", not Boost's "1E-1"), so
// the files read naturally and other JSON tools see the same numbers.
void scalar(std::string& out, const json::value& v) {
  if (v.is_double()) {
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof buf, v.get_double());
    std::string_view text(buf, static_cast<size_t>(res.ptr - buf));
    out += text;
    // Keep it a JSON double: "100" would read back as an integer.
    if (text.find_first_of(".eE") == std::string_view::npos) out += ".0";
    return;
  }
  out += json::serialize(v);
}

void pretty(std::string& out, const json::value& v, int indent) {
  if (v.is_array() && is_flat(v)) {
    out += '[';
    bool first = true;
    for (const auto& x : v.get_array()) {
      if (!first) out += ',';
      first = false;
      scalar(out, x);
    }
    out += ']';
    return;
  }
  if (v.is_object() && is_flat(v)) {
    out += '{';
    bool first = true;
    for (const auto& kv : v.get_object()) {
      if (!first) out += ',';
      first = false;
      out += json::serialize(json::value(kv.key()));
      out += ':';
      scalar(out, kv.value());
    }
    out += '}';
    return;
  }
  if (!v.is_array() && !v.is_object()) {
    scalar(out, v);
    return;
  }
  const std::string pad(static_cast<size_t>(indent + 2), ' ');
  if (v.is_array()) {
    const json::array& a = v.get_array();
    out += "[\n";
    for (size_t i = 0; i < a.size(); ++i) {
      out += pad;
      pretty(out, a[i], indent + 2);
      if (i + 1 < a.size()) out += ',';
      out += '\n';
    }
    out.append(static_cast<size_t>(indent), ' ');
    out += ']';
    return;
  }
  const json::object& o = v.get_object();
  out += "{\n";
  size_t i = 0;
  for (const auto& kv : o) {
    out += pad;
    out += json::serialize(json::value(kv.key()));
    out += ": ";
    pretty(out, kv.value(), indent + 2);
    if (++i < o.size()) out += ',';
    out += '\n';
  }
  out.append(static_cast<size_t>(indent), ' ');
  out += '}';
}

}  // namespace

void write_json_file(const OutputPath& path, const boost::json::value& json) {
  std::string text;
  pretty(text, json, 0);
  text += '\n';
  write_output_file(path, text);
}

void write_result_file(const OutputPath& path, const Result& result) {
  write_json_file(path, result_to_json(result));
}

Result result_from_text(std::string_view text, const std::string& source) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    throw UsageError(source + ": empty file, expected a pipebench result");
  }
  json::error_code jec;
  json::parse_options opts;
  opts.allow_invalid_utf8 = false;
  json::value doc = json::parse(text, jec, {}, opts);
  if (jec) {
    throw UsageError(source + ": malformed JSON (" + jec.message() +
                     "); truncated or not a pipebench result");
  }
  return result_from_json(doc, source);
}

Result read_result_file(const std::string& path) {
  return result_from_text(read_input_file(path, "result file", kMaxResultFileBytes), path);
}

}  // namespace ppb
