// The one JSON field reader of pipebench: result files, schedule files,
// calibration files, the report's reference document and baselines all read
// their fields through it, so every bad input reads alike:
//
//   "run/1f1b.json: field 'metrics.step_time_seconds.median': expected a number, got a string"
//   "ref.json: field 'claims[0].checks[1].metric': missing"
//
// A JsonObject is an object at a path; each field is one line:
//
//   const ppb::JsonReader reader("run/1f1b.json");
//   const ppb::JsonObject root = reader.root(doc);          // "expected an object" otherwise
//   const ppb::JsonObject config = root.object("config");   // required
//   int stages = config.get<int>("stages");                 // required
//   double scale = config.get_or("time_scale", 0.0);        // optional: absent or null -> 0.0
//   double theory = config.number_or_null("theoretical");   // required, null -> NaN
//   if (auto theory = root.find_object("theory")) { ... }   // optional object
//
// Numbers: integer fields accept JSON integers and integral doubles; number
// fields any JSON number. Unknown keys are ignored unless a caller asks
// only() for a closed set.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ppb {

class JsonObject;

/// Typed conversions of values at a path of one document named `source`.
/// Every failure throws UsageError "<source>: field '<path>': <what>".
class JsonReader {
 public:
  explicit JsonReader(std::string source) : source_(std::move(source)) {}

  const std::string& source() const { return source_; }
  [[noreturn]] void fail(const std::string& path, const std::string& what) const;

  /// The document's top level as an object ("expected an object" at path
  /// `path`, "" by default).
  JsonObject root(const boost::json::value& doc, const std::string& path = "") const;

  double number(const boost::json::value& v, const std::string& path) const;
  /// A number, or NaN for null.
  double number_or_null(const boost::json::value& v, const std::string& path) const;
  int64_t integer(const boost::json::value& v, const std::string& path) const;
  int int32(const boost::json::value& v, const std::string& path) const;
  uint64_t uinteger(const boost::json::value& v, const std::string& path) const;
  bool boolean(const boost::json::value& v, const std::string& path) const;
  std::string string(const boost::json::value& v, const std::string& path) const;
  JsonObject object(const boost::json::value& v, const std::string& path) const;
  const boost::json::array& array(const boost::json::value& v, const std::string& path) const;

  /// Each element through `element(value, path)`; paths "x[0]", "x[1]"...
  template <class F>
  auto array_of(const boost::json::value& v, const std::string& path, F&& element) const {
    using T = decltype(element(v, path));
    std::vector<T> out;
    const boost::json::array& a = array(v, path);
    out.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i) out.push_back(element(a[i], index(path, i)));
    return out;
  }

  /// "a number", "a string", ...: what a value is, for messages.
  static const char* kind_name(const boost::json::value& v);
  /// "parent.key" ("key" at the top).
  static std::string join(const std::string& parent, std::string_view key);
  /// "parent[i]".
  static std::string index(const std::string& parent, size_t i);

 private:
  std::string source_;
};

/// An object of the document at `path`, with one accessor per field.
class JsonObject {
 public:
  JsonObject(const JsonReader& reader, const boost::json::object& object, std::string path)
      : reader_(&reader), object_(&object), path_(std::move(path)) {}

  const JsonReader& reader() const { return *reader_; }
  const std::string& path() const { return path_; }
  const boost::json::object& raw() const { return *object_; }
  /// The path of a field of this object.
  std::string field(std::string_view key) const { return JsonReader::join(path_, key); }
  [[noreturn]] void fail(std::string_view key, const std::string& what) const {
    reader_->fail(field(key), what);
  }

  /// The value of a required key ("missing" otherwise; null is a value).
  const boost::json::value& at(std::string_view key) const;
  /// The value, or nullptr when absent or null (optional keys).
  const boost::json::value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  /// Required field of type T: double, int, int64_t, uint64_t, bool,
  /// std::string, or a std::vector of one of those.
  template <class T>
  T get(std::string_view key) const {
    return convert<T>(at(key), field(key));
  }
  /// Optional field: `fallback` when absent or null.
  template <class T>
  T get_or(std::string_view key, T fallback) const {
    const boost::json::value* v = find(key);
    return v == nullptr ? fallback : convert<T>(*v, field(key));
  }
  /// Required number or null (NaN).
  double number_or_null(std::string_view key) const;
  /// Optional number or null: NaN when absent.
  double optional_number_or_null(std::string_view key) const;
  /// Required array of numbers or nulls (NaN).
  std::vector<double> numbers_or_null(std::string_view key) const;

  JsonObject object(std::string_view key) const;
  std::optional<JsonObject> find_object(std::string_view key) const;
  /// Required array, each element through `element(value, path)`.
  template <class F>
  auto array(std::string_view key, F&& element) const {
    return reader_->array_of(at(key), field(key), element);
  }
  /// Optional array: empty when absent or null.
  template <class F>
  auto optional_array(std::string_view key, F&& element) const {
    using T = decltype(element(boost::json::value(), std::string()));
    const boost::json::value* v = find(key);
    return v == nullptr ? std::vector<T>{} : reader_->array_of(*v, field(key), element);
  }
  /// Required array of objects, each through `element(JsonObject)`.
  template <class F>
  auto objects(std::string_view key, F&& element) const {
    return array(key, [&](const boost::json::value& v, const std::string& p) {
      return element(reader_->object(v, p));
    });
  }
  /// Fails "unknown field (expected <expected>)" on a key outside `keys`.
  void only(std::initializer_list<std::string_view> keys, const std::string& expected) const;

  /// Value conversion used by get(); public for array elements.
  template <class T>
  T convert(const boost::json::value& v, const std::string& path) const;

 private:
  const JsonReader* reader_;
  const boost::json::object* object_;
  std::string path_;
};

// The types get() and get_or() accept (defined in json_fields.cpp).
template <>
double JsonObject::convert<double>(const boost::json::value&, const std::string&) const;
template <>
int JsonObject::convert<int>(const boost::json::value&, const std::string&) const;
template <>
int64_t JsonObject::convert<int64_t>(const boost::json::value&, const std::string&) const;
template <>
uint64_t JsonObject::convert<uint64_t>(const boost::json::value&, const std::string&) const;
template <>
bool JsonObject::convert<bool>(const boost::json::value&, const std::string&) const;
template <>
std::string JsonObject::convert<std::string>(const boost::json::value&, const std::string&) const;
template <>
std::vector<double> JsonObject::convert<std::vector<double>>(const boost::json::value&,
                                                             const std::string&) const;
template <>
std::vector<int> JsonObject::convert<std::vector<int>>(const boost::json::value&,
                                                       const std::string&) const;
template <>
std::vector<int64_t> JsonObject::convert<std::vector<int64_t>>(const boost::json::value&,
                                                               const std::string&) const;
template <>
std::vector<std::string> JsonObject::convert<std::vector<std::string>>(const boost::json::value&,
                                                                       const std::string&) const;

}  // namespace ppb
