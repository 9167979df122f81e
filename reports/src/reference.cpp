#include "ppb/reports/reference.hpp"

#include <boost/json.hpp>
#include <cmath>
#include <set>

#include "ppb/profiling/check.hpp"
#include "ppb/profiling/input_file.hpp"

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

class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw UsageError(std::string(source_) + ": field '" + path + "': " + what);
  }
  const json::object& object(const json::value& v, const std::string& path) const {
    if (!v.is_object()) fail(path, "expected an object");
    return v.get_object();
  }
  const json::array& array(const json::value& v, const std::string& path) const {
    if (!v.is_array()) fail(path, "expected an array");
    return v.get_array();
  }
  const json::value& require(const json::object& o, const std::string& path,
                             std::string_view key) const {
    const json::value* v = o.if_contains(key);
    if (v == nullptr) fail(path + "." + std::string(key), "missing");
    return *v;
  }
  std::string string(const json::value& v, const std::string& path) const {
    if (!v.is_string()) fail(path, "expected a string");
    return std::string(v.get_string());
  }
  double number(const json::value& v, const std::string& path) const {
    if (v.is_double()) return v.get_double();
    if (v.is_int64()) return static_cast<double>(v.get_int64());
    if (v.is_uint64()) return static_cast<double>(v.get_uint64());
    fail(path, "expected a number");
  }
  std::string opt_string(const json::object& o, const std::string& path,
                         std::string_view key) const {
    const json::value* v = o.if_contains(key);
    return v == nullptr ? std::string() : string(*v, path + "." + std::string(key));
  }
  // A schedule list: "1f1b" or ["async-1f1b", "1f1b"].
  std::vector<std::string> names(const json::object& o, const std::string& path,
                                 std::string_view key) const {
    const json::value* v = o.if_contains(key);
    if (v == nullptr) return {};
    const std::string p = path + "." + std::string(key);
    if (v->is_string()) return {std::string(v->get_string())};
    std::vector<std::string> out;
    size_t i = 0;
    for (const json::value& x : array(*v, p))
      out.push_back(string(x, p + "[" + std::to_string(i++) + "]"));
    return out;
  }

 private:
  std::string_view source_;
};

CheckKind parse_kind(const Reader& r, const std::string& s, const std::string& path) {
  for (CheckKind k : {CheckKind::kRatio, CheckKind::kAbsolute, CheckKind::kOrder,
                      CheckKind::kInflight, CheckKind::kActivationFormula,
                      CheckKind::kBubbleFormula, CheckKind::kGuard, CheckKind::kQualitative}) {
    if (s == check_kind_name(k)) return k;
  }
  r.fail(path, "unknown check kind \"" + s +
                   "\"; expected ratio, absolute, order, inflight, activation_formula, "
                   "bubble_formula, guard or qualitative");
}

ClaimCheck parse_check(const Reader& r, const json::value& v, const std::string& path) {
  const json::object& o = r.object(v, path);
  ClaimCheck c;
  c.kind = parse_kind(r, r.string(r.require(o, path, "kind"), path + ".kind"), path + ".kind");
  c.description = r.opt_string(o, path, "description");
  c.metric = r.opt_string(o, path, "metric");
  c.numerator = r.names(o, path, "numerator");
  c.denominator = r.names(o, path, "denominator");
  c.schedules = r.names(o, path, "schedules");
  c.against = r.names(o, path, "against");
  c.vary = r.opt_string(o, path, "vary");
  c.direction = r.opt_string(o, path, "direction");
  c.formula = r.opt_string(o, path, "formula");
  c.relation = r.opt_string(o, path, "relation");
  c.unit = r.opt_string(o, path, "unit");
  c.why = r.opt_string(o, path, "why");
  if (const json::value* x = o.if_contains("value")) {
    c.value = x->is_string()
                  ? std::string(x->get_string())
                  : std::to_string(static_cast<long long>(r.number(*x, path + ".value")));
  }
  if (const json::value* x = o.if_contains("stage"))
    c.stage = static_cast<int>(r.number(*x, path + ".stage"));
  if (const json::value* x = o.if_contains("documented"))
    c.documented = r.number(*x, path + ".documented");
  if (const json::value* x = o.if_contains("tolerance"))
    c.tolerance = r.number(*x, path + ".tolerance");
  if (const json::value* x = o.if_contains("groups")) {
    size_t i = 0;
    for (const json::value& g : r.array(*x, path + ".groups")) {
      const std::string gp = path + ".groups[" + std::to_string(i++) + "]";
      if (g.is_string()) {
        c.groups.push_back({std::string(g.get_string())});
        continue;
      }
      std::vector<std::string> alts;
      size_t j = 0;
      for (const json::value& n : r.array(g, gp))
        alts.push_back(r.string(n, gp + "[" + std::to_string(j++) + "]"));
      c.groups.push_back(std::move(alts));
    }
  }

  auto need = [&](bool ok, const char* field, const std::string& what) {
    if (!ok) r.fail(path + "." + field, what);
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
  if (c.tolerance < 0 && c.kind != CheckKind::kOrder) r.fail(path + ".tolerance", "expected >= 0");
  return c;
}

}  // namespace

Reference parse_reference(const boost::json::value& doc, std::string_view source) {
  const Reader r(source);
  const json::object& root = r.object(doc, "(document)");
  const std::string schema = r.string(r.require(root, "", "schema"), "schema");
  if (schema != kReferenceSchema) {
    r.fail("schema", std::string("expected \"") + kReferenceSchema + "\", got \"" + schema + "\"");
  }
  Reference ref;
  ref.source = std::string(source);
  if (const json::value* v = root.if_contains("setup_matches")) {
    if (!v->is_bool()) r.fail("setup_matches", "expected true or false");
    ref.setup_matches = v->get_bool();
  }
  std::set<std::string> ids;
  size_t i = 0;
  for (const json::value& cv : r.array(r.require(root, "", "claims"), "claims")) {
    const std::string p = "claims[" + std::to_string(i++) + "]";
    const json::object& o = r.object(cv, p);
    Claim c;
    c.id = r.string(r.require(o, p, "id"), p + ".id");
    if (!ids.insert(c.id).second) r.fail(p + ".id", "duplicate id \"" + c.id + "\"");
    c.document = r.string(r.require(o, p, "document"), p + ".document");
    c.title = r.opt_string(o, p, "title");
    c.statement = r.string(r.require(o, p, "statement"), p + ".statement");
    if (const json::value* fv = o.if_contains("figures")) {
      size_t j = 0;
      for (const json::value& f : r.array(*fv, p + ".figures")) {
        const std::string fp = p + ".figures[" + std::to_string(j++) + "]";
        const json::object& fo = r.object(f, fp);
        ClaimFigure fig;
        fig.name = r.string(r.require(fo, fp, "name"), fp + ".name");
        fig.value = r.number(r.require(fo, fp, "value"), fp + ".value");
        fig.unit = r.opt_string(fo, fp, "unit");
        c.figures.push_back(std::move(fig));
      }
    }
    size_t j = 0;
    for (const json::value& ch : r.array(r.require(o, p, "checks"), p + ".checks")) {
      c.checks.push_back(parse_check(r, ch, p + ".checks[" + std::to_string(j++) + "]"));
    }
    if (c.checks.empty()) r.fail(p + ".checks", "expected at least one check");
    ref.claims.push_back(std::move(c));
  }
  return ref;
}

Reference load_reference_file(const std::string& path) {
  json::error_code ec;
  const json::value doc =
      json::parse(read_input_file(path, "reference file", kMaxSmallInputBytes), ec);
  if (ec) throw UsageError(path + ": malformed JSON (" + ec.message() + ")");
  return parse_reference(doc, path);
}

std::string_view builtin_reference_text() { return kBuiltinReferenceJson; }

Reference builtin_reference() {
  const json::value doc = json::parse(builtin_reference_text());
  return parse_reference(doc, "built-in reports/reference/documents.json");
}

}  // namespace ppb::reports
