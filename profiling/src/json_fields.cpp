#include "ppb/profiling/json_fields.hpp"

#include <boost/json.hpp>
#include <cmath>
#include <limits>

#include "ppb/profiling/check.hpp"

namespace ppb {

namespace json = boost::json;

void JsonReader::fail(const std::string& path, const std::string& what) const {
  // One readable line: a message quoting a huge value (a 100 KB string
  // where a name belongs) keeps its start and says how long it was.
  constexpr size_t kMost = 400;
  std::string text = printable(what);
  if (text.size() > kMost) {
    size_t cut = kMost;  // not inside a UTF-8 character
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text = text.substr(0, cut) + "... (" + std::to_string(cut) + " of " +
           std::to_string(text.size()) + " bytes shown)";
  }
  throw UsageError(source_ + ": field '" + path + "': " + text);
}

JsonObject JsonReader::root(const json::value& doc, const std::string& path) const {
  return object(doc, path);
}

double JsonReader::number(const json::value& v, const std::string& path) const {
  // Boost.JSON reads 1e400 as infinity; no figure pipebench writes is one.
  if (v.is_double() && !std::isfinite(v.get_double())) fail(path, "expected a finite number");
  if (v.is_double()) return v.get_double();
  if (v.is_int64()) return static_cast<double>(v.get_int64());
  if (v.is_uint64()) return static_cast<double>(v.get_uint64());
  fail(path, std::string("expected a number, got ") + kind_name(v));
}

double JsonReader::number_or_null(const json::value& v, const std::string& path) const {
  if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (v.is_double() || v.is_int64() || v.is_uint64()) return number(v, path);
  fail(path, std::string("expected a number or null, got ") + kind_name(v));
}

int64_t JsonReader::integer(const json::value& v, const std::string& path) const {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64()) {
    if (v.get_uint64() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(path, "integer out of range");
    return static_cast<int64_t>(v.get_uint64());
  }
  if (v.is_double()) {
    const double d = v.get_double();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18)
      return static_cast<int64_t>(d);
    fail(path, "expected an integer, got " + std::to_string(d));
  }
  fail(path, std::string("expected an integer, got ") + kind_name(v));
}

int JsonReader::int32(const json::value& v, const std::string& path) const {
  const int64_t x = integer(v, path);
  if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max())
    fail(path, "integer out of range");
  return static_cast<int>(x);
}

uint64_t JsonReader::uinteger(const json::value& v, const std::string& path) const {
  if (v.is_uint64()) return v.get_uint64();
  const int64_t x = integer(v, path);
  if (x < 0) fail(path, "expected a non-negative integer");
  return static_cast<uint64_t>(x);
}

bool JsonReader::boolean(const json::value& v, const std::string& path) const {
  if (!v.is_bool()) fail(path, std::string("expected true or false, got ") + kind_name(v));
  return v.get_bool();
}

std::string JsonReader::string(const json::value& v, const std::string& path) const {
  if (!v.is_string()) fail(path, std::string("expected a string, got ") + kind_name(v));
  std::string text(v.get_string());
  // No field pipebench reads holds a line break, an escape or a NUL; printed
  // raw, such a value would break a report's lines or drive the terminal. A
  // tab may be in a library's version text (MPICH's "Version:\t4.1.2").
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f)
      fail(path, "expected text without control characters, got \"" + text + "\"");
  }
  return text;
}

JsonObject JsonReader::object(const json::value& v, const std::string& path) const {
  if (!v.is_object()) fail(path, std::string("expected an object, got ") + kind_name(v));
  return {*this, v.get_object(), path};
}

const json::array& JsonReader::array(const json::value& v, const std::string& path) const {
  if (!v.is_array()) fail(path, std::string("expected an array, got ") + kind_name(v));
  return v.get_array();
}

const char* JsonReader::kind_name(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "a boolean";
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_:
      return "a number";
    case json::kind::string:
      return "a string";
    case json::kind::array:
      return "an array";
    case json::kind::object:
      return "an object";
  }
  return "?";
}

std::string JsonReader::join(const std::string& parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return parent + "." + std::string(key);
}

std::string JsonReader::index(const std::string& parent, size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

const json::value& JsonObject::at(std::string_view key) const {
  const json::value* v = object_->if_contains(key);
  if (v == nullptr) fail(key, "missing");
  return *v;
}

const json::value* JsonObject::find(std::string_view key) const {
  const json::value* v = object_->if_contains(key);
  if (v == nullptr || v->is_null()) return nullptr;
  return v;
}

double JsonObject::number_or_null(std::string_view key) const {
  return reader_->number_or_null(at(key), field(key));
}

double JsonObject::optional_number_or_null(std::string_view key) const {
  const json::value* v = find(key);
  return v == nullptr ? std::numeric_limits<double>::quiet_NaN()
                      : reader_->number_or_null(*v, field(key));
}

std::vector<double> JsonObject::numbers_or_null(std::string_view key) const {
  return array(key, [this](const json::value& v, const std::string& p) {
    return reader_->number_or_null(v, p);
  });
}

JsonObject JsonObject::object(std::string_view key) const {
  return reader_->object(at(key), field(key));
}

std::optional<JsonObject> JsonObject::find_object(std::string_view key) const {
  const json::value* v = find(key);
  if (v == nullptr) return std::nullopt;
  return reader_->object(*v, field(key));
}

void JsonObject::only(std::initializer_list<std::string_view> keys,
                      const std::string& expected) const {
  for (const auto& kv : *object_) {
    bool known = false;
    for (std::string_view k : keys) known = known || kv.key() == k;
    if (!known) fail(kv.key(), "unknown field (expected " + expected + ")");
  }
}

template <>
double JsonObject::convert<double>(const json::value& v, const std::string& path) const {
  return reader_->number(v, path);
}
template <>
int JsonObject::convert<int>(const json::value& v, const std::string& path) const {
  return reader_->int32(v, path);
}
template <>
int64_t JsonObject::convert<int64_t>(const json::value& v, const std::string& path) const {
  return reader_->integer(v, path);
}
template <>
uint64_t JsonObject::convert<uint64_t>(const json::value& v, const std::string& path) const {
  return reader_->uinteger(v, path);
}
template <>
bool JsonObject::convert<bool>(const json::value& v, const std::string& path) const {
  return reader_->boolean(v, path);
}
template <>
std::string JsonObject::convert<std::string>(const json::value& v, const std::string& path) const {
  return reader_->string(v, path);
}
template <>
std::vector<double> JsonObject::convert<std::vector<double>>(const json::value& v,
                                                             const std::string& path) const {
  return reader_->array_of(v, path, [this](const json::value& x, const std::string& p) {
    return convert<double>(x, p);
  });
}
template <>
std::vector<int> JsonObject::convert<std::vector<int>>(const json::value& v,
                                                       const std::string& path) const {
  return reader_->array_of(
      v, path, [this](const json::value& x, const std::string& p) { return convert<int>(x, p); });
}
template <>
std::vector<int64_t> JsonObject::convert<std::vector<int64_t>>(const json::value& v,
                                                               const std::string& path) const {
  return reader_->array_of(v, path, [this](const json::value& x, const std::string& p) {
    return convert<int64_t>(x, p);
  });
}
template <>
std::vector<std::string> JsonObject::convert<std::vector<std::string>>(
    const json::value& v, const std::string& path) const {
  return reader_->array_of(v, path, [this](const json::value& x, const std::string& p) {
    return convert<std::string>(x, p);
  });
}

}  // namespace ppb
