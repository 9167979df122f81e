// The documents' claims as data: each claim of the two source documents with its figures and how
// the report checks it. The built-in file is reports/reference/documents.json, compiled into the
// library; `--reference FILE` replaces it with a user file of the same format:
//
//   {"schema":"pipebench.reference/1","setup_matches":false,
//    "claims":[{"id":"S3","document":"000_...txt","title":"async vs sync throughput",
//      "statement":"...","figures":[{"name":"sync 1F1B","value":120,"unit":"samples/s"}],
//      "checks":[{"kind":"ratio","metric":"samples_per_second",
//                 "numerator":["async-1f1b","1f1b"],"denominator":["sync-1f1b"],
//                 "documented":1.54,"tolerance":0.25,"description":"async/sync samples/s"}]}]}
//
// Check kinds (the fields each reads; schedule lists are alternatives, the
// first one present in a setup is used):
//  * ratio      metric, numerator[], denominator[], documented, tolerance (relative):
//               metric(numerator)/metric(denominator) in the same setup.
//  * absolute   metric, schedules[], documented, tolerance (relative), unit: the
//               documents' own figure; checked only when the setup matches
//               (--reference-setup or "setup_matches": true), else shown as
//               not measurable here.
//  * order      metric, vary ("schedule" | "partition" | "microbatches"),
//               groups[][] (for schedule/partition; ascending values of M for
//               microbatches), direction ("increasing" | "decreasing"),
//               tolerance (a relative margin each step must clear, default 0;
//               negative tolerates a small reversal: -0.001 reads "not above").
//  * inflight   schedules[], stage (-1 = every stage), relation ("eq" | "ge" |
//               "le"), value ("1", "N", "M", "P", "min(P-s,M)", "min(N,M)" or an
//               integer): micro-batches in flight at the activation peak.
//  * activation_formula  schedules[], formula ("doc_sync" = M x P,
//               "doc_async" = M x (P+N-1), both on the activations summed over
//               stages; per stage: "gpipe" = M x a_s, "1f1b" = min(P-s,M) x a_s,
//               "sync" = a_s), tolerance (relative).
//  * bubble_formula  schedules[], metric ("bubble_ratio" | "bubble_overhead"),
//               formula ("(P-1)/M" | "(P-1)/(M+P-1)" | "(P-1)/P"), tolerance (absolute).
//  * guard      schedules[] (the guarded one), against[] (the unguarded one).
//  * qualitative  why: not a measurable figure; the verdict says why.
// Any check may carry "ranks": N, which limits it to results measured on N
// ranks (stages x data-parallel replicas: a claim about a 32-GPU cluster is
// checked on 32-rank runs only).
// Metrics: samples_per_second, step_time, bubble_ratio, bubble_overhead,
// utilisation (1 - bubble_ratio), peak_memory (max over stages),
// activations_sum, activations_max, stage_imbalance (max/mean busy time of the
// timeline's stages).
#pragma once

#include <boost/json/value.hpp>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace ppb::reports {

/// The schema string of reference files.
inline constexpr const char* kReferenceSchema = "pipebench.reference/1";

enum class CheckKind : uint8_t {
  kRatio,
  kAbsolute,
  kOrder,
  kInflight,
  kActivationFormula,
  kBubbleFormula,
  kGuard,
  kQualitative,
};

/// "ratio", "absolute", "order", "inflight", "activation_formula",
/// "bubble_formula", "guard", "qualitative".
const char* check_kind_name(CheckKind kind);

/// A figure as the document states it.
struct ClaimFigure {
  std::string name;
  double value = 0;
  std::string unit;
};

/// How one aspect of a claim is checked; which fields matter depends on kind.
struct ClaimCheck {
  CheckKind kind = CheckKind::kQualitative;
  std::string description;
  std::string metric;
  std::vector<std::string> numerator;
  std::vector<std::string> denominator;
  std::vector<std::string> schedules;
  std::vector<std::string> against;
  std::vector<std::vector<std::string>> groups;
  std::string vary;
  std::string direction;
  std::string formula;
  std::string relation;
  std::string value;
  int stage = -1;
  int ranks = 0;  ///< only results on this many ranks (stages x data_parallel); 0 = any
  double documented = std::numeric_limits<double>::quiet_NaN();
  double tolerance = 0;
  std::string unit;
  std::string why;
};

struct Claim {
  std::string id;         ///< "S3"
  std::string document;   ///< source document file name
  std::string title;      ///< a few words
  std::string statement;  ///< the claim in one or two sentences
  std::vector<ClaimFigure> figures;
  std::vector<ClaimCheck> checks;
};

struct Reference {
  std::string source;          ///< file path, or "built-in documents.json"
  bool setup_matches = false;  ///< absolute figures are checked
  std::vector<Claim> claims;
};

/// Parses a reference document. Throws UsageError "<source>: field
/// 'claims[3].checks[0].kind': ..." for a missing field, a wrong type, an
/// unknown kind or metric, or another schema.
Reference parse_reference(const boost::json::value& doc, std::string_view source);

/// Reads a reference file (UsageError naming the file when it cannot be
/// read or parsed).
Reference load_reference_file(const std::string& path);

/// The built-in reference (reports/reference/documents.json).
Reference builtin_reference();

/// The text of reports/reference/documents.json, as compiled in.
std::string_view builtin_reference_text();

}  // namespace ppb::reports
