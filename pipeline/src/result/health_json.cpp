// Health file <-> JSON. The GPU state and the environment go through the
// result's own field lists (result.hpp), so the two files cannot disagree
// on them.
#include <boost/json.hpp>
#include <cmath>
#include <string>

#include "ppb/pipeline/health.hpp"
#include "ppb/pipeline/result.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/input_file.hpp"
#include "ppb/profiling/json_fields.hpp"

namespace ppb {

namespace json = boost::json;

bool is_health_document(const json::value& doc) {
  if (!doc.is_object()) return false;
  const json::value* s = doc.get_object().if_contains("schema");
  return s != nullptr && s->is_string() &&
         std::string_view(s->get_string()).starts_with("pipebench.health/");
}

json::value health_to_json(const HealthFile& h) {
  json::array gpus;
  for (const HealthGpu& g : h.gpus) {
    json::object figures;
    for (const auto& [name, samples] : g.figures) {
      json::array a;
      for (double x : samples) a.push_back(std::isfinite(x) ? json::value(x) : json::value());
      figures[name] = std::move(a);
    }
    json::object o{
        {"device", g.device}, {"name", g.name}, {"bus", g.bus}, {"figures", std::move(figures)}};
    if (g.gpu_state) o["gpu_state"] = gpu_state_to_json(*g.gpu_state);
    gpus.push_back(std::move(o));
  }
  return json::object{{"schema", kHealthSchema},
                      {"date", h.date},
                      {"config", json::object{{"model", h.config.model},
                                              {"iters", h.config.iters},
                                              {"repeats", h.config.repeats},
                                              {"copy_bytes", h.config.copy_bytes}}},
                      {"gpus", std::move(gpus)},
                      {"gpu_state_note", h.gpu_state_note},
                      {"environment", environment_to_json(h.environment)}};
}

namespace {

HealthGpu read_gpu(const JsonObject& o) {
  HealthGpu g;
  g.device = o.get<int>("device");
  g.name = o.get<std::string>("name");
  g.bus = o.get_or<std::string>("bus", "");
  const JsonObject figures = o.object("figures");
  for (const auto& kv : figures.raw()) {
    const std::string key(kv.key());
    std::vector<double> samples = figures.get<std::vector<double>>(key);
    if (samples.empty()) figures.fail(key, "expected at least one sample");
    for (double x : samples) {
      if (!(std::isfinite(x) && x > 0))
        figures.fail(key, "expected samples > 0, got " + std::to_string(x));
    }
    g.figures[key] = std::move(samples);
  }
  if (const auto s = o.find_object("gpu_state")) g.gpu_state = gpu_state_from_json(*s);
  return g;
}

}  // namespace

HealthFile health_from_json(const json::value& doc, std::string_view source) {
  const JsonReader r{std::string(source)};
  if (!doc.is_object()) {
    throw UsageError(std::string(source) +
                     ": expected a JSON object (a pipebench health file), got " +
                     JsonReader::kind_name(doc));
  }
  const JsonObject root = r.root(doc);
  const std::string schema = root.get<std::string>("schema");
  if (schema != kHealthSchema)
    root.fail("schema", std::string("expected \"") + kHealthSchema + "\", got \"" + schema + "\"");
  HealthFile h;
  h.date = root.get<std::string>("date");
  check_utc_date(root, "date", h.date);
  const JsonObject c = root.object("config");
  h.config.model = c.get<std::string>("model");
  h.config.iters = c.get<int>("iters");
  h.config.repeats = c.get<int>("repeats");
  h.config.copy_bytes = c.get<int64_t>("copy_bytes");
  h.gpus = root.objects("gpus", read_gpu);
  h.gpu_state_note = root.get_or<std::string>("gpu_state_note", "");
  h.environment = environment_from_json(root.object("environment"));
  return h;
}

json::value parse_health_text(const std::string& text, const std::string& path) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw UsageError(path + ": empty file, expected a pipebench health file");
  json::error_code ec;
  json::value doc = json::parse(text, ec);
  if (ec) throw UsageError(path + ": malformed JSON (" + ec.message() + ")");
  return doc;
}

HealthFile read_health_file(const std::string& path) {
  const std::string text = read_input_file(path, "health file", kMaxResultFileBytes);
  return health_from_json(parse_health_text(text, path), path);
}

void write_health_file(const OutputPath& path, const HealthFile& health) {
  write_json_file(path, health_to_json(health));
}

}  // namespace ppb
