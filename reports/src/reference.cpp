#include "ppb/reports/reference.hpp"

#include <boost/json.hpp>
#include <cmath>
#include <set>

#include "ppb/profiling/check.hpp"
#include "ppb/profiling/input_file.hpp"
#include "ppb/profiling/json_fields.hpp"
#include "ppb/reports/claims.hpp"

namespace ppb::reports {

namespace json = boost::json;

// Defined in the generated reference_data.cpp (reports.cmake embeds
// reports/reference/documents.json).
extern const char* const kBuiltinReferenceJson;

const char* check_kind_name(CheckKind kind) {
  switch (kind) {
    case CheckKind::kRatio:
      return "ratio";
    case CheckKind::kAbsolute:
      return "absolute";
    case CheckKind::kOrder:
      return "order";
    case CheckKind::kInflight:
      return "inflight";
    case CheckKind::kActivationFormula:
      return "activation_formula";
    case CheckKind::kBubbleFormula:
      return "bubble_formula";
    case CheckKind::kGuard:
      return "guard";
    case CheckKind::kQualitative:
      return "qualitative";
  }
  return "?";
}

namespace {

const std::set<std::string> kMetrics = {"samples_per_second", "step_time",       "bubble_ratio",
                                        "bubble_overhead",    "utilisation",     "peak_memory",
                                        "activations_sum",    "activations_max", "stage_imbalance"};

/// A schedule list: "1f1b" or ["async-1f1b", "1f1b"]; empty when absent.
std::vector<std::string> names(const JsonObject& o, std::string_view key) {
  const json::value* v = o.find(key);
  if (v == nullptr) return {};
  if (v->is_string()) return {std::string(v->get_string())};
  return o.get<std::vector<std::string>>(key);
}

/// An order's groups: each a name or a list of alternative names.
std::vector<std::vector<std::string>> groups(const JsonObject& o) {
  const JsonReader& r = o.reader();
  return o.optional_array("groups", [&r](const json::value& g, const std::string& gp) {
    if (g.is_string()) return std::vector<std::string>{std::string(g.get_string())};
    return r.array_of(
        g, gp, [&r](const json::value& n, const std::string& np) { return r.string(n, np); });
  });
}

CheckKind parse_kind(const JsonObject& o) {
  const std::string s = o.get<std::string>("kind");
  for (CheckKind k : {CheckKind::kRatio, CheckKind::kAbsolute, CheckKind::kOrder,
                      CheckKind::kInflight, CheckKind::kActivationFormula,
                      CheckKind::kBubbleFormula, CheckKind::kGuard, CheckKind::kQualitative}) {
    if (s == check_kind_name(k)) return k;
  }
  o.fail("kind", "unknown check kind \"" + s +
                     "\"; expected ratio, absolute, order, inflight, activation_formula, "
                     "bubble_formula, guard or qualitative");
}

// What each kind of check needs, named when missing or wrong.
void check_fields(const JsonObject& o, const ClaimCheck& c) {
  auto need = [&](bool ok, const char* field, const std::string& what) {
    if (!ok) o.fail(field, what);
  };
  auto need_metric = [&]() {
    need(!c.metric.empty(), "metric", "missing");
    need(kMetrics.count(c.metric) == 1, "metric", "unknown metric \"" + c.metric + "\"");
  };
  switch (c.kind) {
    case CheckKind::kRatio:
      need_metric();
      need(!c.numerator.empty(), "numerator", "missing");
      need(!c.denominator.empty(), "denominator", "missing");
      need(!std::isnan(c.documented), "documented", "missing");
      break;
    case CheckKind::kAbsolute:
      need_metric();
      need(!c.schedules.empty(), "schedules", "missing");
      need(!std::isnan(c.documented), "documented", "missing");
      break;
    case CheckKind::kOrder:
      need_metric();
      need(c.vary == "schedule" || c.vary == "partition" || c.vary == "microbatches", "vary",
           "expected schedule, partition or microbatches");
      need(c.direction == "increasing" || c.direction == "decreasing", "direction",
           "expected increasing or decreasing");
      need(c.vary == "microbatches" || c.groups.size() >= 2, "groups",
           "expected at least two groups");
      break;
    case CheckKind::kInflight:
      need(!c.schedules.empty(), "schedules", "missing");
      need(c.relation == "eq" || c.relation == "ge" || c.relation == "le", "relation",
           "expected eq, ge or le");
      need(!c.value.empty(), "value", "missing");
      need(inflight_expected(c.value, ResultConfig{}, 0).has_value(), "value",
           "expected N, M, P, min(P-s,M), min(N,M) or a whole number in [0, " +
               std::to_string(kMaxInflightValue) + "], got \"" + c.value + "\"");
      break;
    case CheckKind::kActivationFormula:
      need(!c.schedules.empty(), "schedules", "missing");
      need(c.formula == "doc_sync" || c.formula == "doc_async" || c.formula == "gpipe" ||
               c.formula == "1f1b" || c.formula == "sync",
           "formula", "expected doc_sync, doc_async, gpipe, 1f1b or sync");
      break;
    case CheckKind::kBubbleFormula:
      need(!c.schedules.empty(), "schedules", "missing");
      need(c.metric == "bubble_ratio" || c.metric == "bubble_overhead", "metric",
           "expected bubble_ratio or bubble_overhead");
      need(c.formula == "(P-1)/M" || c.formula == "(P-1)/(M+P-1)" || c.formula == "(P-1)/P",
           "formula", "expected (P-1)/M, (P-1)/(M+P-1) or (P-1)/P");
      break;
    case CheckKind::kGuard:
      need(!c.schedules.empty(), "schedules", "missing");
      need(!c.against.empty(), "against", "missing");
      break;
    case CheckKind::kQualitative:
      need(!c.why.empty(), "why", "missing");
      break;
  }
  // A negative margin is meaningful only for an order ("not above": -0.001).
  if (c.tolerance < 0 && c.kind != CheckKind::kOrder) o.fail("tolerance", "expected >= 0");
}

ClaimCheck parse_check(const JsonObject& o) {
  ClaimCheck c;
  c.kind = parse_kind(o);
  c.description = o.get_or<std::string>("description", "");
  c.metric = o.get_or<std::string>("metric", "");
  c.numerator = names(o, "numerator");
  c.denominator = names(o, "denominator");
  c.schedules = names(o, "schedules");
  c.against = names(o, "against");
  c.vary = o.get_or<std::string>("vary", "");
  c.direction = o.get_or<std::string>("direction", "");
  c.formula = o.get_or<std::string>("formula", "");
  c.relation = o.get_or<std::string>("relation", "");
  c.unit = o.get_or<std::string>("unit", "");
  c.why = o.get_or<std::string>("why", "");
  if (const json::value* x = o.find("value")) {
    if (x->is_string()) {
      c.value = std::string(x->get_string());
    } else {
      const double v = o.get<double>("value");
      if (!(v >= 0 && v <= kMaxInflightValue && v == std::floor(v)))
        o.fail("value",
               "expected a whole number in [0, " + std::to_string(kMaxInflightValue) + "]");
      c.value = std::to_string(static_cast<long>(v));
    }
  }
  const double stage = o.get_or("stage", static_cast<double>(c.stage));
  if (!(stage >= -1 && stage <= kMaxInflightValue && stage == std::floor(stage)))
    o.fail("stage", "expected -1 (every stage) or a stage's number");
  c.stage = static_cast<int>(stage);
  c.ranks = o.get_or("ranks", 0);
  if (c.ranks < 0) o.fail("ranks", "expected >= 0");
  c.documented = o.get_or("documented", c.documented);
  c.tolerance = o.get_or("tolerance", c.tolerance);
  c.groups = groups(o);
  check_fields(o, c);
  return c;
}

ClaimFigure parse_figure(const JsonObject& o) {
  return {o.get<std::string>("name"), o.get<double>("value"), o.get_or<std::string>("unit", "")};
}

Claim parse_claim(const JsonObject& o) {
  Claim c;
  c.id = o.get<std::string>("id");
  c.document = o.get<std::string>("document");
  c.title = o.get_or<std::string>("title", "");
  c.statement = o.get<std::string>("statement");
  if (o.has("figures")) c.figures = o.objects("figures", parse_figure);
  c.checks = o.objects("checks", parse_check);
  if (c.checks.empty()) o.fail("checks", "expected at least one check");
  return c;
}

}  // namespace

Reference parse_reference(const boost::json::value& doc, std::string_view source) {
  const JsonReader r{std::string(source)};
  if (!doc.is_object()) r.fail("(document)", "expected an object");
  const JsonObject root = r.root(doc);
  const std::string schema = root.get<std::string>("schema");
  if (schema != kReferenceSchema) {
    root.fail("schema",
              std::string("expected \"") + kReferenceSchema + "\", got \"" + schema + "\"");
  }
  Reference ref;
  ref.source = std::string(source);
  ref.setup_matches = root.get_or("setup_matches", ref.setup_matches);
  ref.claims = root.objects("claims", parse_claim);
  std::set<std::string> ids;
  for (size_t i = 0; i < ref.claims.size(); ++i) {
    if (!ids.insert(ref.claims[i].id).second) {
      r.fail(JsonReader::index("claims", i) + ".id", "duplicate id \"" + ref.claims[i].id + "\"");
    }
  }
  return ref;
}

Reference load_reference_file(const std::string& path) {
  json::error_code ec;
  const json::value doc =
      json::parse(read_input_file(path, "reference file", kMaxSmallInputBytes), ec);
  if (ec) {
    throw UsageError(path + ": malformed JSON (" + ec.message() +
                     "); truncated or not a pipebench reference file");
  }
  return parse_reference(doc, path);
}

std::string_view builtin_reference_text() { return kBuiltinReferenceJson; }

Reference builtin_reference() {
  const json::value doc = json::parse(builtin_reference_text());
  return parse_reference(doc, "built-in reports/reference/documents.json");
}

}  // namespace ppb::reports
