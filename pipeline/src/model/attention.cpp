#include "ppb/pipeline/attention.hpp"

#include <string>

#include "ppb/profiling/check.hpp"

namespace ppb {

AttentionRequest parse_attention_request(std::string_view text) {
  if (text == "auto") return AttentionRequest::kAuto;
  if (text == "fused") return AttentionRequest::kFused;
  if (text == "naive") return AttentionRequest::kNaive;
  throw UsageError("--attention: expected auto, fused or naive, got '" + std::string(text) + "'");
}

bool fused_attention_head_dim(int bytes_per_element, int head_dim) {
  if (bytes_per_element == 2) return head_dim > 0 && head_dim % 8 == 0 && head_dim <= 128;
  return head_dim > 0 && head_dim <= 128;
}

std::string fused_attention_obstacle(std::string_view backend, int bytes_per_element,
                                     const ModelSpec& spec, std::string_view device_missing) {
  if (backend != "cuda") {
    return "the " + std::string(backend) + " backend has no fused attention (cuda only)";
  }
  const int d = spec.hidden / spec.heads;
  if (!fused_attention_head_dim(bytes_per_element, d)) {
    return "head dimension " + std::to_string(d) +
           (bytes_per_element == 2 ? ": cuDNN's flash attention takes a multiple of 8 up to 128"
                                   : ": the fp32 flash attention takes at most 128");
  }
  if (bytes_per_element == 2 && spec.seq < 2) {
    return "sequence length 1: cuDNN's flash attention backward takes 2 or more";
  }
  if (!device_missing.empty()) return std::string(device_missing);
  return "";
}

std::string attention_words(const AttentionChoice& choice) {
  std::string words = std::string(attention_name(choice.attention)) + " attention";
  if (!choice.reason.empty()) words += " (" + choice.reason + ")";
  return words;
}

AttentionChoice choose_attention(AttentionRequest request, std::string_view obstacle) {
  switch (request) {
    case AttentionRequest::kNaive:
      // The obstacle where there is one: the same reason as auto's, so a
      // re-run that asks for the form that ran records the same result.
      return {Attention::kNaive, obstacle.empty() ? "--attention naive" : std::string(obstacle)};
    case AttentionRequest::kAuto:
      if (obstacle.empty()) return {Attention::kFused, ""};
      return {Attention::kNaive, std::string(obstacle)};
    case AttentionRequest::kFused:
      if (!obstacle.empty()) throw UsageError("--attention fused: " + std::string(obstacle));
      return {Attention::kFused, ""};
  }
  return {};
}

AttentionChoice modelled_attention(AttentionRequest request, Kernels kernels,
                                   const ModelSpec& spec) {
  const char* backend = kernels == Kernels::kCuda ? "cuda" : "cpu";
  return choose_attention(request,
                          fused_attention_obstacle(backend, spec.bytes_per_element, spec, ""));
}

}  // namespace ppb
