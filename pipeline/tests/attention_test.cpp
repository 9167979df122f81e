// The attention choice (ppb/pipeline/attention.hpp): the flag's parsing and
// errors, the selection rule (fused only for the cuda backend, bf16, a head
// dimension cuDNN takes and cuDNN usable; else naive with the first
// obstacle as the reason), and what this machine's probe says.
#include "ppb/pipeline/attention.hpp"

#include <gtest/gtest.h>

#include <string>

#include "ppb/exec/cuda_device.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

// The message of the UsageError `f` throws ("" when it throws none).
template <class F>
std::string usage_error(F f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

ModelSpec spec_of(const std::string& text) {
  ModelSpec spec = parse_model_spec(text);
  spec.bytes_per_element = 2;
  return spec;
}

TEST(AttentionFlag, ParsesItsThreeValuesAndNamesTheFlagOtherwise) {
  EXPECT_EQ(parse_attention_request("auto"), AttentionRequest::kAuto);
  EXPECT_EQ(parse_attention_request("fused"), AttentionRequest::kFused);
  EXPECT_EQ(parse_attention_request("naive"), AttentionRequest::kNaive);
  EXPECT_EQ(usage_error([] { (void)parse_attention_request("flash"); }),
            "--attention: expected auto, fused or naive, got 'flash'");
  EXPECT_EQ(usage_error([] { (void)parse_attention_request(""); }),
            "--attention: expected auto, fused or naive, got ''");
}

TEST(AttentionRule, HeadDimensionsCudnnTakesForBf16AndTheFlashKernelsForFp32) {
  for (int d : {8, 16, 64, 96, 128}) EXPECT_TRUE(fused_attention_head_dim(2, d)) << d;
  for (int d : {0, 4, 12, 60, 136, 256}) EXPECT_FALSE(fused_attention_head_dim(2, d)) << d;
  for (int d : {1, 4, 12, 60, 64, 80, 128}) EXPECT_TRUE(fused_attention_head_dim(4, d)) << d;
  for (int d : {0, 129, 136, 256}) EXPECT_FALSE(fused_attention_head_dim(4, d)) << d;
}

TEST(AttentionRule, TheFirstObstacleInOrderBackendHeadDimSequenceDevice) {
  const ModelSpec small = spec_of("gpt-small");  // d = 768 / 12 = 64
  EXPECT_EQ(fused_attention_obstacle("cuda", 2, small, ""), "");
  EXPECT_EQ(fused_attention_obstacle("cuda", 4, small, ""), "");  // the fp32 flash kernels
  EXPECT_EQ(fused_attention_obstacle("cpu", 2, small, "x"),
            "the cpu backend has no fused attention (cuda only)");
  EXPECT_EQ(fused_attention_obstacle("cpu", 4, small, "x"),
            "the cpu backend has no fused attention (cuda only)");
  const ModelSpec odd = spec_of("gpt:layers=1,hidden=96,heads=2,seq=16,vocab=64,mbs=1");  // d 48
  EXPECT_EQ(fused_attention_obstacle("cuda", 2, odd, ""), "");
  const ModelSpec wide = spec_of("gpt:layers=1,hidden=512,heads=2,seq=16,vocab=64,mbs=1");
  EXPECT_EQ(fused_attention_obstacle("cuda", 2, wide, "x"),
            "head dimension 256: cuDNN's flash attention takes a multiple of 8 up to 128");
  EXPECT_EQ(fused_attention_obstacle("cuda", 4, wide, "x"),
            "head dimension 256: the fp32 flash attention takes at most 128");
  const ModelSpec twelve = spec_of("gpt:layers=1,hidden=24,heads=2,seq=16,vocab=64,mbs=1");
  EXPECT_EQ(fused_attention_obstacle("cuda", 2, twelve, ""),
            "head dimension 12: cuDNN's flash attention takes a multiple of 8 up to 128");
  EXPECT_EQ(fused_attention_obstacle("cuda", 4, twelve, ""), "");
  // cuDNN's backward refuses a sequence of one; the fp32 kernels take it.
  const ModelSpec one = spec_of("gpt:layers=1,hidden=64,heads=2,seq=1,vocab=64,mbs=2");
  EXPECT_EQ(fused_attention_obstacle("cuda", 2, one, "x"),
            "sequence length 1: cuDNN's flash attention backward takes 2 or more");
  EXPECT_EQ(fused_attention_obstacle("cuda", 4, one, ""), "");
  EXPECT_EQ(fused_attention_obstacle("cuda", 2, small, "the CUDA emulator has no cuDNN"),
            "the CUDA emulator has no cuDNN");
}

TEST(AttentionRule, AutoFallsBackWithTheReasonFusedIsRefusedNaiveAlwaysRuns) {
  AttentionChoice c = choose_attention(AttentionRequest::kAuto, "");
  EXPECT_EQ(c.attention, Attention::kFused);
  EXPECT_EQ(c.reason, "");
  c = choose_attention(AttentionRequest::kAuto, "the CUDA emulator has no cuDNN");
  EXPECT_EQ(c.attention, Attention::kNaive);
  EXPECT_EQ(c.reason, "the CUDA emulator has no cuDNN");
  c = choose_attention(AttentionRequest::kFused, "");
  EXPECT_EQ(c.attention, Attention::kFused);
  c = choose_attention(AttentionRequest::kNaive, "");
  EXPECT_EQ(c.attention, Attention::kNaive);
  EXPECT_EQ(c.reason, "--attention naive");
  c = choose_attention(AttentionRequest::kNaive, "the CUDA emulator has no cuDNN");
  EXPECT_EQ(c.attention, Attention::kNaive);
  EXPECT_EQ(c.reason, "the CUDA emulator has no cuDNN");  // as auto's: a re-run records the same
  EXPECT_EQ(usage_error([] {
              (void)choose_attention(AttentionRequest::kFused, "the CUDA emulator has no cuDNN");
            }),
            "--attention fused: the CUDA emulator has no cuDNN");
  EXPECT_STREQ(attention_name(Attention::kNaive), "naive");
  EXPECT_STREQ(attention_name(Attention::kFused), "fused");
}

// The probes never crash and answer in at most one line: without a usable
// GPU (CI) they always say why the fused kernels cannot run (no device, no
// CUDA build, no cuDNN in this build); with one, "" where they run (bf16:
// libcudnn loads; fp32: compute capability 8.0 or later with the shared
// memory the flash kernels take), else why not.
TEST(AttentionProbe, SaysWhyTheFusedKernelsCannotRunInOneLine) {
  const std::string why = cuda::cudnn_unavailable_reason();
  if (!cuda::unusable_reason().empty()) {
    EXPECT_FALSE(why.empty());
    EXPECT_EQ(cuda::fused_attention_unavailable_reason(4, 64), cuda::unusable_reason());
  }
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  EXPECT_EQ(cuda::fused_attention_unavailable_reason(2, 64), why);
  EXPECT_EQ(cuda::fused_attention_unavailable_reason(4, 64).find('\n'), std::string::npos);
  // cuDNN's trial build of a shape says the same where cuDNN cannot run;
  // where it can, gpt-small's shape builds. fp32's flash kernels build
  // nothing (a CUDA build answers "" without a device).
  ModelSpec spec = spec_of("gpt-small");
  spec.bytes_per_element = 2;
  EXPECT_EQ(cuda::fused_attention_refusal(spec), why);
  spec.bytes_per_element = 4;
  const std::string fp32 = cuda::fused_attention_refusal(spec);
  EXPECT_TRUE(fp32.empty() || fp32 == cuda::unusable_reason()) << fp32;
}

}  // namespace
}  // namespace ppb
