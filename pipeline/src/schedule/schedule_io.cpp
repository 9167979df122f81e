// Schedule files: JSON (pipebench.schedule/1) and the one-line-per-stage text form.
#include "ppb/pipeline/schedule_io.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ppb/pipeline/validator.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

namespace json = boost::json;

constexpr const char* kSchema = "pipebench.schedule/1";

// Reading a JSON document with errors that name the source and the field.
class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw UsageError(std::string(source_) + ": field '" + field + "': " + what);
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw UsageError(std::string(source_) + ": " + what);
  }

  static const char* kind_name(const json::value& v) {
    switch (v.kind()) {
      case json::kind::null:
        return "null";
      case json::kind::bool_:
        return "a boolean";
      case json::kind::int64:
      case json::kind::uint64:
        return "an integer";
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

  const json::value& required(const json::object& o, const std::string& key,
                              const std::string& field) const {
    const json::value* v = o.if_contains(key);
    if (v == nullptr) fail("missing field '" + field + "'");
    return *v;
  }

  int integer(const json::value& v, const std::string& field, int lo, int hi) const {
    int64_t x = 0;
    if (v.is_int64()) {
      x = v.get_int64();
    } else if (v.is_uint64()) {
      x = v.get_uint64() > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX
                                                            : static_cast<int64_t>(v.get_uint64());
    } else {
      fail(field, std::string("expected an integer, got ") + kind_name(v));
    }
    if (x < lo || x > hi) {
      fail(field, std::to_string(x) + " is out of range " + std::to_string(lo) + ".." +
                      std::to_string(hi));
    }
    return static_cast<int>(x);
  }

  std::string string(const json::value& v, const std::string& field) const {
    if (!v.is_string()) fail(field, std::string("expected a string, got ") + kind_name(v));
    return std::string(v.get_string());
  }

 private:
  std::string_view source_;
};

constexpr int kMaxSize = 1 << 24;

bool parse_kind(std::string_view op, ActionKind& kind) {
  if (op == "F")
    kind = ActionKind::kForward;
  else if (op == "B")
    kind = ActionKind::kBackward;
  else if (op == "I")
    kind = ActionKind::kBackwardInput;
  else if (op == "W")
    kind = ActionKind::kBackwardWeight;
  else if (op == "SYNC")
    kind = ActionKind::kSync;
  else
    return false;
  return true;
}

}  // namespace

std::string action_to_text(const Action& a, bool with_chunk) {
  if (a.kind == ActionKind::kSync) return "|";
  std::string t = action_kind_name(a.kind);
  t += std::to_string(a.microbatch);
  if (with_chunk) t += "." + std::to_string(a.chunk);
  return t;
}

std::string schedule_to_json(const Schedule& s) {
  json::array stages;
  stages.reserve(s.actions.size());
  for (const auto& list : s.actions) {
    json::array acts;
    acts.reserve(list.size());
    for (const Action& a : list) {
      if (a.kind == ActionKind::kSync) {
        acts.push_back(json::object{{"op", "SYNC"}});
      } else {
        acts.push_back(json::object{
            {"op", action_kind_name(a.kind)}, {"mb", a.microbatch}, {"chunk", a.chunk}});
      }
    }
    stages.push_back(std::move(acts));
  }
  // Field order as DESIGN.md writes it; boost::json::object keeps insertion order.
  json::object doc;
  doc["schema"] = kSchema;
  doc["name"] = s.name;
  doc["stages"] = s.stages;
  doc["microbatches"] = s.microbatches;
  doc["chunks"] = s.chunks;
  doc["batches"] = s.batches;
  doc["actions"] = std::move(stages);
  return json::serialize(doc);
}

Schedule schedule_from_json(std::string_view text, std::string_view source) {
  const Reader r(source);
  boost::system::error_code ec;
  json::value root = json::parse(text, ec);
  if (ec) r.fail("not valid JSON (" + ec.message() + ")");
  if (!root.is_object())
    r.fail(std::string("expected a JSON object at the top, got ") + Reader::kind_name(root));
  const json::object& o = root.get_object();

  const std::string schema = r.string(r.required(o, "schema", "schema"), "schema");
  if (schema != kSchema)
    r.fail("schema", "expected \"" + std::string(kSchema) + "\", got \"" + schema + "\"");
  Schedule s;
  s.name = r.string(r.required(o, "name", "name"), "name");
  s.stages = r.integer(r.required(o, "stages", "stages"), "stages", 1, kMaxSize);
  s.microbatches =
      r.integer(r.required(o, "microbatches", "microbatches"), "microbatches", 1, kMaxSize);
  s.chunks = o.contains("chunks") ? r.integer(o.at("chunks"), "chunks", 1, kMaxSize) : 1;
  s.batches = o.contains("batches") ? r.integer(o.at("batches"), "batches", 1, kMaxSize) : 1;
  if (int64_t{s.microbatches} * s.batches > kMaxSize)
    r.fail("batches", "microbatches x batches is too large");

  const json::value& acts = r.required(o, "actions", "actions");
  if (!acts.is_array())
    r.fail("actions",
           std::string("expected an array of stage lists, got ") + Reader::kind_name(acts));
  const json::array& stages = acts.get_array();
  if (stages.size() != static_cast<size_t>(s.stages)) {
    r.fail("actions", "expected " + std::to_string(s.stages) + " stage lists (stages = " +
                          std::to_string(s.stages) + "), got " + std::to_string(stages.size()));
  }
  const int total = s.total_microbatches();
  s.actions.resize(stages.size());
  for (size_t st = 0; st < stages.size(); ++st) {
    const std::string stage_field = "actions[" + std::to_string(st) + "]";
    if (!stages[st].is_array())
      r.fail(stage_field,
             std::string("expected an array of actions, got ") + Reader::kind_name(stages[st]));
    const json::array& list = stages[st].get_array();
    auto& out = s.actions[st];
    out.reserve(list.size());
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string field = stage_field + "[" + std::to_string(k) + "]";
      if (!list[k].is_object())
        r.fail(field, std::string("expected an action object, got ") + Reader::kind_name(list[k]));
      const json::object& a = list[k].get_object();
      const json::value* op = a.if_contains("op");
      if (op == nullptr) r.fail("missing field '" + field + ".op'");
      ActionKind kind{};
      if (!op->is_string() || !parse_kind(std::string_view(op->get_string()), kind)) {
        const std::string got =
            op->is_string() ? "\"" + std::string(op->get_string()) + "\"" : Reader::kind_name(*op);
        r.fail(field + ".op", "expected one of F,B,I,W,SYNC, got " + got);
      }
      if (kind == ActionKind::kSync) {
        out.push_back(Sync());
        continue;
      }
      const json::value* mb = a.if_contains("mb");
      if (mb == nullptr) r.fail("missing field '" + field + ".mb'");
      Action act;
      act.kind = kind;
      act.microbatch = r.integer(*mb, field + ".mb", 0, total - 1);
      act.chunk =
          a.contains("chunk") ? r.integer(a.at("chunk"), field + ".chunk", 0, s.chunks - 1) : 0;
      out.push_back(act);
    }
  }
  return s;
}

Schedule read_schedule_file(const std::string& path, const ValidateOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(path + ": cannot open schedule file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw UsageError(path + ": cannot read schedule file");
  Schedule s = schedule_from_json(buffer.str(), path);
  validate_or_throw(s, path, options);
  return s;
}

std::string schedule_to_text(const Schedule& s) {
  std::string out = "# " + s.name + " stages=" + std::to_string(s.stages) +
                    " microbatches=" + std::to_string(s.microbatches) +
                    " chunks=" + std::to_string(s.chunks) +
                    " batches=" + std::to_string(s.batches) + "\n";
  const bool with_chunk = s.chunks > 1;
  for (size_t st = 0; st < s.actions.size(); ++st) {
    out += "s" + std::to_string(st) + ":";
    for (const Action& a : s.actions[st]) {
      out += ' ';
      out += action_to_text(a, with_chunk);
    }
    out += '\n';
  }
  return out;
}

namespace {

// Parses a non-negative decimal integer that is the whole of `t`.
bool parse_int(std::string_view t, int& value) {
  if (t.empty()) return false;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  return ec == std::errc() && end == t.data() + t.size() && value >= 0;
}

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

}  // namespace

Schedule schedule_from_text(std::string_view text, std::string_view source) {
  auto fail = [&](size_t line, const std::string& what) -> void {
    throw UsageError(std::string(source) + ": line " + std::to_string(line) + ": " + what);
  };
  Schedule s;
  s.name = "custom";
  bool header = false;
  int max_mb = -1;
  int max_chunk = 0;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t eol = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    std::vector<std::string_view> words = split_words(line);
    if (words.empty()) continue;
    if (words[0] == "#" || words[0][0] == '#') {
      if (header || !s.actions.empty()) continue;  // a later comment
      header = true;
      size_t first = words[0] == "#" ? 1 : 0;
      if (words[0] != "#") words[0].remove_prefix(1);
      for (size_t i = first; i < words.size(); ++i) {
        const size_t eq = words[i].find('=');
        if (eq == std::string_view::npos) {
          if (i == first) s.name = std::string(words[i]);
          continue;
        }
        const std::string_view key = words[i].substr(0, eq);
        int value = 0;
        if (!parse_int(words[i].substr(eq + 1), value) || value < 1 || value > kMaxSize) {
          fail(line_no, "header field '" + std::string(key) +
                            "': expected a positive integer, got '" +
                            std::string(words[i].substr(eq + 1)) + "'");
        }
        if (key == "stages")
          s.stages = value;
        else if (key == "microbatches")
          s.microbatches = value;
        else if (key == "chunks")
          s.chunks = value;
        else if (key == "batches")
          s.batches = value;
      }
      continue;
    }
    const std::string expect = "s" + std::to_string(s.actions.size()) + ":";
    if (words[0] != expect)
      fail(line_no,
           "expected the line to start with '" + expect + "', got '" + std::string(words[0]) + "'");
    std::vector<Action> list;
    list.reserve(words.size() - 1);
    for (size_t i = 1; i < words.size(); ++i) {
      std::string_view w = words[i];
      if (w == "|") {
        list.push_back(Sync());
        continue;
      }
      ActionKind kind{};
      if (!parse_kind(w.substr(0, 1), kind) || kind == ActionKind::kSync) {
        fail(line_no, "action '" + std::string(w) +
                          "': expected F, B, I or W then a micro-batch (F3, B3.1), or |");
      }
      w.remove_prefix(1);
      Action a;
      a.kind = kind;
      const size_t dot = w.find('.');
      if (!parse_int(w.substr(0, dot), a.microbatch) ||
          (dot != std::string_view::npos && !parse_int(w.substr(dot + 1), a.chunk))) {
        fail(line_no, "action '" + std::string(words[i]) +
                          "': expected F, B, I or W then a micro-batch (F3, B3.1), or |");
      }
      max_mb = std::max(max_mb, a.microbatch);
      max_chunk = std::max(max_chunk, a.chunk);
      list.push_back(a);
    }
    s.actions.push_back(std::move(list));
  }
  if (s.actions.empty())
    throw UsageError(std::string(source) + ": no stage lines ('s0: F0 B0 ...')");
  if (!header) {
    s.stages = static_cast<int>(s.actions.size());
    s.microbatches = std::max(max_mb + 1, 1);
    s.chunks = max_chunk + 1;
  } else if (s.actions.size() != static_cast<size_t>(s.stages)) {
    throw UsageError(std::string(source) + ": header says stages=" + std::to_string(s.stages) +
                     " but there are " + std::to_string(s.actions.size()) + " stage lines");
  }
  const int total = s.total_microbatches();
  for (size_t st = 0; st < s.actions.size(); ++st) {
    for (const Action& a : s.actions[st]) {
      if (a.kind == ActionKind::kSync) continue;
      if (a.microbatch >= total || a.chunk >= s.chunks) {
        throw UsageError(std::string(source) + ": stage " + std::to_string(st) + ": action " +
                         action_to_text(a, true) + " out of range (microbatches x batches = " +
                         std::to_string(total) + ", chunks = " + std::to_string(s.chunks) + ")");
      }
    }
  }
  return s;
}

}  // namespace ppb
