// Which attention the cuda backend runs (`run --attention auto|fused|naive`):
// a fused flash attention where it can run, the naive kernels (scores,
// softmax, context; the probabilities kept) otherwise. The fused form is
// cuDNN's flash attention for bf16 and pipebench's own fp32 flash kernels
// (3xTF32 on the tensor cores) for fp32; both keep the output and the fp32
// softmax statistics instead of the probabilities. The choice is made once
// per run, before the units are expanded, because it changes what the
// attention unit keeps (expand_units' Attention) and so the memory model;
// the result file records it with the reason naive ran. A plan or a
// simulation of a device that is not here (`plan`, `simulate --model`)
// makes the same choice through modelled_attention().
//
// Example:
//   const std::string obstacle = fused_attention_obstacle(
//       "cuda", 2, spec, ppb::cuda::fused_attention_unavailable_reason(2, 64));
//   AttentionChoice c = choose_attention(parse_attention_request("auto"), obstacle);
//   // c.attention == Attention::kFused where obstacle is "", else kNaive
//   // with c.reason == obstacle.
#pragma once

#include <string>
#include <string_view>

#include "ppb/pipeline/model.hpp"

namespace ppb {

/// --attention as given: auto (fused where it can run, else naive), or one
/// of the two forms outright.
enum class AttentionRequest : uint8_t {
  kAuto,
  kFused,
  kNaive,
};

/// Parses --attention's value. Throws UsageError naming the flag on any
/// other text than "auto", "fused" or "naive".
AttentionRequest parse_attention_request(std::string_view text);

/// The attention a run computes, and where it is naive, why (one line; ""
/// for fused).
struct AttentionChoice {
  Attention attention = Attention::kNaive;
  std::string reason;
};

/// Head dimensions the fused attention takes for this storage: cuDNN's
/// (bf16, bytes_per_element 2) a multiple of 8 up to 128 on every GPU it
/// runs on (compute capability 8.0 and later); the fp32 flash kernels' any
/// from 1 to 128.
bool fused_attention_head_dim(int bytes_per_element, int head_dim);

/// Why the fused attention cannot run for this backend, storage and model
/// ("" when it can): only the cuda backend has it, only for head dimensions
/// fused_attention_head_dim() takes, only where the device runs its kernels
/// (`device_missing`: why it does not here,
/// cuda::fused_attention_unavailable_reason(); "" when it does). The first
/// obstacle of those, in that order.
std::string fused_attention_obstacle(std::string_view backend, int bytes_per_element,
                                     const ModelSpec& spec, std::string_view device_missing);

/// How a run, a plan or a simulation words it: "fused attention", or
/// "naive attention (<reason>)".
std::string attention_words(const AttentionChoice& choice);

/// The rule: kNaive runs naive (the reason: `obstacle`, or "--attention
/// naive" where fused could have run); kAuto runs fused where
/// `obstacle` is "", else naive with the obstacle as the reason; kFused runs
/// fused, and throws UsageError ("--attention fused: <obstacle>") where it
/// cannot.
AttentionChoice choose_attention(AttentionRequest request, std::string_view obstacle);

/// The attention a run with these kernels would compute, for a device that
/// is described rather than probed (`plan`, `simulate --model`): the cuda
/// kernels (a GPU device) are taken to run the fused kernels (cuDNN, as a
/// GPU cluster's software stack has it, and compute capability 8.0 or
/// later); otherwise the same rule and reasons as a run's, the cpu kernels
/// with the cpu backend's obstacle. Throws UsageError for
/// kFused where it cannot run.
AttentionChoice modelled_attention(AttentionRequest request, Kernels kernels,
                                   const ModelSpec& spec);

}  // namespace ppb
