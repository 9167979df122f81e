#include "ppb/reports/fast_paths.hpp"

#include "ppb/pipeline/backend_traits.hpp"
#include "ppb/pipeline/model.hpp"

namespace ppb::reports {
namespace {

std::string with_reason(const std::string& text, const std::string& reason) {
  return reason.empty() ? text : text + " (" + reason + ")";
}

FastPath attention_path(const ResultConfig& c) {
  if (attention_ran(c) == attention_name(Attention::kFused)) {
    return {FastPathKind::kAttention, FastPathOutcome::kRan, "fused"};
  }
  // Files written before the reason ran naive without saying why.
  const std::string why = c.attention.empty() ? "reason not recorded" : c.attention_reason;
  return {FastPathKind::kAttention, FastPathOutcome::kFellBack, with_reason(attention_ran(c), why)};
}

FastPath graphs_path(const std::optional<CudaGraphFigures>& g) {
  if (!g) return {FastPathKind::kCudaGraphs, FastPathOutcome::kNotRecorded, "not recorded"};
  std::string text;
  auto add = [&](int64_t n, const char* what) {
    if (n > 0) text += (text.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  };
  add(g->captured, "captured");
  add(g->replayed, "replayed");
  add(g->rebuilt, "rebuilt");
  add(g->eager, "eager");
  if (text.empty()) text = "none ran";
  // Eager work without a reason is the first step's, which sizes the static
  // buffers the graphs need: no fallback.
  if (g->eager == 0 || g->eager_reason.empty()) {
    return {FastPathKind::kCudaGraphs, FastPathOutcome::kRan, text};
  }
  return {FastPathKind::kCudaGraphs, FastPathOutcome::kFellBack,
          with_reason(text, g->eager_reason)};
}

FastPath epilogues_path(const std::optional<GemmEpilogueFigures>& e) {
  if (!e) return {FastPathKind::kGemmEpilogues, FastPathOutcome::kNotRecorded, "not recorded"};
  const std::string fused = std::to_string(e->fused) + " fused";
  if (e->refused == 0) return {FastPathKind::kGemmEpilogues, FastPathOutcome::kRan, fused};
  return {FastPathKind::kGemmEpilogues, FastPathOutcome::kFellBack,
          with_reason(fused + ", " + std::to_string(e->refused) + " refused", e->first_refusal)};
}

}  // namespace

const char* fast_path_name(FastPathKind kind) {
  switch (kind) {
    case FastPathKind::kAttention:
      return "attention";
    case FastPathKind::kCudaGraphs:
      return "CUDA graphs";
    case FastPathKind::kGemmEpilogues:
      return "GEMM epilogues";
  }
  return "?";
}

std::vector<FastPath> fast_paths(const Result& result) {
  const BackendTraits* traits = find_backend_traits(result.config.backend);
  if (traits == nullptr || !traits->device || result.status != ResultStatus::kOk ||
      !result.metrics) {
    return {};
  }
  return {attention_path(result.config), graphs_path(result.metrics->cuda_graphs),
          epilogues_path(result.metrics->gemm_epilogues)};
}

std::string fast_paths_line(const Result& result) {
  std::string line;
  for (const FastPath& p : fast_paths(result)) {
    line += std::string(line.empty() ? "" : "; ") + fast_path_name(p.kind) +
            (p.outcome == FastPathOutcome::kFellBack ? " FELL BACK: " : ": ") + p.text;
  }
  return line;
}

}  // namespace ppb::reports
