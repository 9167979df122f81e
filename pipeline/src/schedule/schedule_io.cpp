// Schedule files: JSON (pipebench.schedule/1) and the one-line-per-stage text form.
#include "ppb/pipeline/schedule_io.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ppb/pipeline/validator.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/input_file.hpp"
#include "ppb/profiling/json_fields.hpp"

namespace ppb {
namespace {

namespace json = boost::json;

constexpr const char* kSchema = "pipebench.schedule/1";

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

/// A required (or, with `fallback`, optional) integer in [lo, hi].
int in_range(const JsonObject& o, std::string_view key, int lo, int hi,
             std::optional<int> fallback = std::nullopt) {
  const int64_t x = fallback && !o.has(key) ? *fallback : o.get<int64_t>(key);
  if (x < lo || x > hi) {
    o.fail(key, std::to_string(x) + " is out of range " + std::to_string(lo) + ".." +
                    std::to_string(hi));
  }
  return static_cast<int>(x);
}

// True when the schedule's placement is the default (left out when written).
bool looping(const Schedule& s) {
  for (size_t v = 0; v < s.placement.size(); ++v) {
    if (s.placement[v] != static_cast<int32_t>(v % static_cast<size_t>(std::max(s.stages, 1))))
      return false;
  }
  return true;
}

Action read_action(const JsonObject& a, int total_microbatches, int chunks) {
  const json::value& op = a.at("op");
  ActionKind kind{};
  if (!op.is_string() || !parse_kind(std::string_view(op.get_string()), kind)) {
    const std::string got =
        op.is_string() ? "\"" + std::string(op.get_string()) + "\"" : JsonReader::kind_name(op);
    a.fail("op", "expected one of F,B,I,W,SYNC, got " + got);
  }
  if (kind == ActionKind::kSync) return Sync();
  Action act;
  act.kind = kind;
  act.microbatch = in_range(a, "mb", 0, total_microbatches - 1);
  act.chunk = in_range(a, "chunk", 0, chunks - 1, 0);
  act.overlap = a.get_or<bool>("overlap", false);
  return act;
}

}  // namespace

std::string action_to_text(const Action& a, bool with_chunk) {
  if (a.kind == ActionKind::kSync) return "|";
  std::string t = action_kind_name(a.kind);
  t += std::to_string(a.microbatch);
  if (with_chunk) t += "." + std::to_string(a.chunk);
  if (a.overlap) t += '+';
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
        json::object o{{"op", action_kind_name(a.kind)}, {"mb", a.microbatch}, {"chunk", a.chunk}};
        if (a.overlap) o["overlap"] = true;
        acts.push_back(std::move(o));
      }
    }
    stages.push_back(std::move(acts));
  }
  // Field order as docs/cli.md writes it; boost::json::object keeps insertion order.
  json::object doc;
  doc["schema"] = kSchema;
  doc["name"] = s.name;
  doc["stages"] = s.stages;
  doc["microbatches"] = s.microbatches;
  doc["chunks"] = s.chunks;
  doc["batches"] = s.batches;
  if (!looping(s)) {
    json::array map;
    for (const int32_t st : s.placement) map.push_back(st);
    doc["placement"] = std::move(map);
  }
  doc["actions"] = std::move(stages);
  return json::serialize(doc);
}

Schedule schedule_from_json(std::string_view text, std::string_view source) {
  const JsonReader r{std::string(source)};
  boost::system::error_code ec;
  json::value doc = json::parse(text, ec);
  if (ec) throw UsageError(std::string(source) + ": not valid JSON (" + ec.message() + ")");
  if (!doc.is_object()) {
    throw UsageError(std::string(source) + ": expected a JSON object at the top, got " +
                     JsonReader::kind_name(doc));
  }
  const JsonObject o = r.root(doc);
  const std::string schema = o.get<std::string>("schema");
  if (schema != kSchema)
    o.fail("schema", "expected \"" + std::string(kSchema) + "\", got \"" + schema + "\"");
  Schedule s;
  s.name = o.get<std::string>("name");
  s.stages = in_range(o, "stages", 1, kMaxSize);
  s.microbatches = in_range(o, "microbatches", 1, kMaxSize);
  s.chunks = in_range(o, "chunks", 1, kMaxSize, 1);
  s.batches = in_range(o, "batches", 1, kMaxSize, 1);
  if (int64_t{s.microbatches} * s.batches > kMaxSize)
    o.fail("batches", "microbatches x batches is too large");
  if (o.has("placement")) {
    s.placement = o.array("placement", [&](const json::value& v, const std::string& path) {
      const int64_t st = r.integer(v, path);
      if (st < 0 || st >= s.stages)
        r.fail(path, std::to_string(st) + " is out of range 0.." + std::to_string(s.stages - 1));
      return static_cast<int32_t>(st);
    });
    if (std::string e = placement_error(s.placement, s.stages, s.chunks); !e.empty())
      o.fail("placement", e);
  }

  const json::array& stages = r.array(o.at("actions"), "actions");
  if (stages.size() != static_cast<size_t>(s.stages)) {
    o.fail("actions", "expected " + std::to_string(s.stages) + " stage lists (stages = " +
                          std::to_string(s.stages) + "), got " + std::to_string(stages.size()));
  }
  const int total = s.total_microbatches();
  for (size_t st = 0; st < stages.size(); ++st) {
    s.actions.push_back(r.array_of(stages[st], JsonReader::index("actions", st),
                                   [&](const json::value& v, const std::string& path) {
                                     return read_action(r.object(v, path), total, s.chunks);
                                   }));
  }
  return s;
}

Schedule read_schedule_file(const std::string& path, const ValidateOptions& options) {
  const std::string text = read_input_file(path, "schedule file", kMaxScheduleFileBytes);
  // The extension in any case: FILE.CSV is a CSV too.
  std::string tail = path.size() >= 4 ? path.substr(path.size() - 4) : std::string();
  std::transform(tail.begin(), tail.end(), tail.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const bool csv = tail == ".csv";
  Schedule s = csv ? schedule_from_csv(text, path) : schedule_from_json(text, path);
  validate_or_throw(s, path, options);
  return s;
}

std::string schedule_to_text(const Schedule& s) {
  std::string out = "# " + s.name + " stages=" + std::to_string(s.stages) +
                    " microbatches=" + std::to_string(s.microbatches) +
                    " chunks=" + std::to_string(s.chunks) + " batches=" + std::to_string(s.batches);
  if (!looping(s)) {
    out += " placement=";
    for (size_t v = 0; v < s.placement.size(); ++v)
      out += (v ? "," : "") + std::to_string(s.placement[v]);
  }
  out += '\n';
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
  std::string_view placement_text;
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
        if (key == "placement") {
          placement_text = words[i].substr(eq + 1);
          continue;
        }
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
      if (!w.empty() && w.back() == '+') {  // the F of an overlapped pair
        a.overlap = true;
        w.remove_suffix(1);
      }
      const size_t dot = w.find('.');
      if (!parse_int(w.substr(0, dot), a.microbatch) ||
          (dot != std::string_view::npos && !parse_int(w.substr(dot + 1), a.chunk))) {
        fail(line_no, "action '" + std::string(words[i]) +
                          "': expected F, B, I or W then a micro-batch (F3, B3.1), or |");
      }
      // Bounded as the JSON form's sizes are, so that max + 1 cannot overflow.
      if (a.microbatch >= kMaxSize || a.chunk >= kMaxSize) {
        fail(line_no, "action '" + std::string(words[i]) + "': micro-batch and chunk must be < " +
                          std::to_string(kMaxSize));
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
  if (!placement_text.empty()) {
    const std::string where = std::string(source) + ": header field 'placement': ";
    for (size_t at = 0; at <= placement_text.size();) {
      const size_t comma = std::min(placement_text.find(',', at), placement_text.size());
      int st = 0;
      if (!parse_int(placement_text.substr(at, comma - at), st) || st >= kMaxSize)
        throw UsageError(where + "expected stage numbers separated by commas, got '" +
                         std::string(placement_text) + "'");
      s.placement.push_back(st);
      at = comma + 1;
    }
    if (std::string e = placement_error(s.placement, s.stages, s.chunks); !e.empty())
      throw UsageError(where + e);
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
