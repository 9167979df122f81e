// Model spec parsing, unit expansion and the unit cost formulas of model.hpp,
// checked against numbers computed by hand for gpt-tiny.
#include "ppb/pipeline/model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "ppb/pipeline/device.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

// Expects parse_model_spec(text) to throw a UsageError whose message contains `needle`.
void expect_usage_error(const std::string& text, const std::string& needle) {
  try {
    parse_model_spec(text);
    ADD_FAILURE() << "no error for '" << text << "'";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message '" << e.what() << "' lacks '" << needle << "'";
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "message must be one line";
  }
}

TEST(ModelSpec, PresetsHaveTheDocumentedShapes) {
  const ModelSpec tiny = parse_model_spec("gpt-tiny");
  EXPECT_EQ(tiny.name, "gpt-tiny");
  EXPECT_EQ(tiny.layers, 8);
  EXPECT_EQ(tiny.hidden, 128);
  EXPECT_EQ(tiny.heads, 4);
  EXPECT_EQ(tiny.seq, 64);
  EXPECT_EQ(tiny.vocab, 512);
  EXPECT_EQ(tiny.ffn_mult, 4);
  EXPECT_EQ(tiny.micro_batch_size, 2);

  const ModelSpec seven = parse_model_spec("gpt-7b");
  EXPECT_EQ(seven.layers, 32);
  EXPECT_EQ(seven.hidden, 4096);
  EXPECT_EQ(seven.heads, 32);
  EXPECT_EQ(seven.seq, 2048);

  const ModelSpec xl = parse_model_spec("gpt-1.3b");
  EXPECT_EQ(xl.layers, 24);
  EXPECT_EQ(xl.hidden, 2048);
  EXPECT_EQ(xl.heads, 16);
  EXPECT_EQ(xl.seq, 2048);

  EXPECT_EQ(model_preset_names(),
            (std::vector<std::string>{"gpt-tiny", "gpt-small", "gpt-1.3b", "gpt-7b"}));
}

TEST(ModelSpec, ParameterCounts) {
  // gpt-small counted as GPT-2 counts it (head tied to the token embedding):
  // 124,439,808, the published 124M.
  const ModelSpec small = parse_model_spec("gpt-small");
  EXPECT_EQ(parameter_count(small), 124'439'808);
  EXPECT_NEAR(static_cast<double>(parameter_count(small)), 124e6, 0.02 * 124e6);
  // The units hold an untied head: 768 x 50257 more.
  EXPECT_EQ(stored_parameter_count(small), 124'439'808 + int64_t{768} * 50257);

  const ModelSpec xl = parse_model_spec("gpt-1.3b");
  EXPECT_NEAR(static_cast<double>(parameter_count(xl)), 1.3e9, 0.02 * 1.3e9);
  const ModelSpec seven = parse_model_spec("gpt-7b");
  // GPT-3 6.7B shape: 6.66e9 with the tied head.
  EXPECT_NEAR(static_cast<double>(parameter_count(seven)), 6.7e9, 0.02 * 6.7e9);

  // The stored count is what the units' bytes add up to, for every preset.
  for (const std::string& name : model_preset_names()) {
    const ModelSpec spec = parse_model_spec(name);
    int64_t bytes = 0;
    for (const Unit& u : expand_units(spec)) bytes += u.param_bytes;
    EXPECT_EQ(bytes, stored_parameter_count(spec) * spec.bytes_per_element) << name;
  }
}

TEST(ModelSpec, CustomSpecOverridesAndDefaults) {
  const ModelSpec s =
      parse_model_spec("gpt:layers=12,hidden=768,heads=12,seq=512,vocab=32000,ffn=4,mbs=4");
  EXPECT_EQ(s.layers, 12);
  EXPECT_EQ(s.hidden, 768);
  EXPECT_EQ(s.heads, 12);
  EXPECT_EQ(s.seq, 512);
  EXPECT_EQ(s.vocab, 32000);
  EXPECT_EQ(s.ffn_mult, 4);
  EXPECT_EQ(s.micro_batch_size, 4);
  EXPECT_EQ(s.name, "gpt:layers=12,hidden=768,heads=12,seq=512,vocab=32000,ffn=4,mbs=4");

  const ModelSpec partial = parse_model_spec("gpt:layers=2,mbs=1");
  EXPECT_EQ(partial.layers, 2);
  EXPECT_EQ(partial.micro_batch_size, 1);
  EXPECT_EQ(partial.hidden, 768);  // gpt-small's
  EXPECT_EQ(partial.vocab, 50257);
}

TEST(ModelSpec, ParseErrorsNameTheKey) {
  expect_usage_error("gpt:layers=12,hidden=768,heads=10",
                     "--model: key 'heads': hidden 768 is not divisible by 10");
  expect_usage_error("gpt:layers=12,depth=3", "unknown key 'depth'");
  expect_usage_error("gpt:layers=x", "key 'layers': expected an integer, got 'x'");
  expect_usage_error("gpt:layers=1.5", "key 'layers': expected an integer, got '1.5'");
  expect_usage_error("gpt:layers=", "key 'layers': expected an integer, got ''");
  expect_usage_error("gpt:seq=0", "key 'seq': expected 1..");
  expect_usage_error("gpt:mbs=-2", "key 'mbs': expected 1..");
  expect_usage_error("gpt:vocab=99999999999", "key 'vocab'");
  expect_usage_error("gpt:layers=2,layers=3", "key 'layers' given twice");
  expect_usage_error("gpt:layers", "item 'layers': expected key=value");
  expect_usage_error("gpt:layers=2,,hidden=64", "empty item");
  expect_usage_error("gpt:", "expected key=value pairs");
  expect_usage_error("gpt-huge",
                     "unknown model 'gpt-huge' (presets: gpt-tiny, gpt-small, gpt-1.3b, gpt-7b");
  expect_usage_error("gpt:seq=16777216,heads=1024,hidden=1024", "too large");
}

TEST(Units, CountNamesAndOrder) {
  for (const int layers : {1, 3, 8}) {
    ModelSpec spec = parse_model_spec("gpt:layers=" + std::to_string(layers) +
                                      ",hidden=64,heads=4,seq=16,vocab=100");
    const auto units = expand_units(spec);
    ASSERT_EQ(units.size(), static_cast<size_t>(3 + 7 * layers));
    EXPECT_EQ(units.front().name, "embedding");
    EXPECT_EQ(units[units.size() - 2].name, "final_norm");
    EXPECT_EQ(units.back().name, "head");
    for (int l = 0; l < layers; ++l) {
      const UnitRange r = layer_unit_range(l);
      EXPECT_EQ(r.size(), 7);
      EXPECT_EQ(units[static_cast<size_t>(r.begin)].kind, UnitKind::kLayerNorm1);
      EXPECT_EQ(units[static_cast<size_t>(r.end - 1)].kind, UnitKind::kFc2);
      for (int i = r.begin; i < r.end; ++i) EXPECT_EQ(units[static_cast<size_t>(i)].layer, l);
    }
  }
  const auto units = expand_units(parse_model_spec("gpt-tiny"));
  EXPECT_EQ(units[1].name, "l0.ln1");
  EXPECT_EQ(units[2].name, "l0.qkv");
  EXPECT_EQ(units[3].name, "l0.attention");
  EXPECT_EQ(units[4].name, "l0.attn_out");
  EXPECT_EQ(units[5].name, "l0.ln2");
  EXPECT_EQ(units[6].name, "l0.fc1_gelu");
  EXPECT_EQ(units[7].name, "l0.fc2");
  EXPECT_EQ(units[56].name, "l7.fc2");
}

// gpt-tiny: T = 2*64 = 128 tokens, h = 128, a = 4, f = 512, V = 512, e = 4.
// Every figure below was multiplied out by hand from the table in model.hpp.
TEST(Units, GptTinyFormulasByHand) {
  const auto u = expand_units(parse_model_spec("gpt-tiny"));
  const Unit& emb = u[0];
  EXPECT_EQ(emb.activation_bytes, 512);     // 4 * 128 token ids
  EXPECT_EQ(emb.boundary_bytes, 65'536);    // 128*128*4
  EXPECT_EQ(emb.param_bytes, 294'912);      // (512*128 + 64*128) * 4
  EXPECT_DOUBLE_EQ(emb.fwd_flops, 16'384);  // T*h
  EXPECT_DOUBLE_EQ(emb.bwd_input_flops, 0);
  EXPECT_DOUBLE_EQ(emb.bwd_weight_flops, 32'768);  // 2*T*h

  const Unit& ln1 = u[1];
  EXPECT_EQ(ln1.activation_bytes, 66'560);         // (16384 + 256) * 4
  EXPECT_EQ(ln1.boundary_bytes, 131'072);          // 2*T*h*4
  EXPECT_EQ(ln1.param_bytes, 1'024);               // 2*128*4
  EXPECT_DOUBLE_EQ(ln1.fwd_flops, 131'072);        // 8*T*h
  EXPECT_DOUBLE_EQ(ln1.bwd_input_flops, 163'840);  // 10*T*h
  EXPECT_DOUBLE_EQ(ln1.bwd_weight_flops, 49'152);  // 3*T*h

  const Unit& qkv = u[2];
  EXPECT_EQ(qkv.activation_bytes, 65'536);
  EXPECT_EQ(qkv.boundary_bytes, 262'144);                // 4*T*h*4
  EXPECT_EQ(qkv.param_bytes, 198'144);                   // (3*16384 + 384) * 4
  EXPECT_DOUBLE_EQ(qkv.fwd_flops, 12'582'912 + 49'152);  // 2*128*128*384 + T*3h
  EXPECT_DOUBLE_EQ(qkv.bwd_input_flops, 12'582'912);
  EXPECT_DOUBLE_EQ(qkv.bwd_weight_flops, 12'582'912 + 49'152);

  const Unit& attn = u[3];
  // (3*16384 + 2*4*64*64) * 4 = (49152 + 32768) * 4
  EXPECT_EQ(attn.activation_bytes, 327'680);
  EXPECT_EQ(attn.boundary_bytes, 131'072);
  EXPECT_EQ(attn.param_bytes, 0);
  // GEMMs 4*b*s*s*h = 4*2*4096*128 = 4,194,304; softmax 5 * 32768 scores.
  EXPECT_DOUBLE_EQ(attn.fwd_flops, 4'194'304 + 163'840);
  EXPECT_DOUBLE_EQ(attn.bwd_input_flops, 8'388'608 + 131'072);
  EXPECT_DOUBLE_EQ(attn.bwd_weight_flops, 0);

  const Unit& out = u[4];
  EXPECT_EQ(out.activation_bytes, 65'536);
  EXPECT_EQ(out.boundary_bytes, 65'536);
  EXPECT_EQ(out.param_bytes, 66'048);  // (16384 + 128) * 4
  EXPECT_DOUBLE_EQ(out.fwd_flops, 4'194'304 + 32'768);
  EXPECT_DOUBLE_EQ(out.bwd_input_flops, 4'194'304);
  EXPECT_DOUBLE_EQ(out.bwd_weight_flops, 4'194'304 + 16'384);

  EXPECT_EQ(u[5].activation_bytes, 66'560);
  EXPECT_EQ(u[5].boundary_bytes, 131'072);

  const Unit& fc1 = u[6];
  EXPECT_EQ(fc1.activation_bytes, 327'680);  // (16384 + 65536) * 4
  EXPECT_EQ(fc1.boundary_bytes, 327'680);    // (65536 + 16384) * 4
  EXPECT_EQ(fc1.param_bytes, 264'192);       // (65536 + 512) * 4
  // 2*128*128*512 = 16,777,216; bias T*f = 65,536; GeLU 8*T*f = 524,288.
  EXPECT_DOUBLE_EQ(fc1.fwd_flops, 16'777'216 + 65'536 + 524'288);
  EXPECT_DOUBLE_EQ(fc1.bwd_input_flops, 16'777'216 + 786'432);  // + 12*T*f
  EXPECT_DOUBLE_EQ(fc1.bwd_weight_flops, 16'777'216 + 65'536);

  const Unit& fc2 = u[7];
  EXPECT_EQ(fc2.activation_bytes, 262'144);  // T*f*4
  EXPECT_EQ(fc2.boundary_bytes, 65'536);
  EXPECT_EQ(fc2.param_bytes, 262'656);  // (65536 + 128) * 4
  EXPECT_DOUBLE_EQ(fc2.fwd_flops, 16'777'216 + 32'768);
  EXPECT_DOUBLE_EQ(fc2.bwd_input_flops, 16'777'216);
  EXPECT_DOUBLE_EQ(fc2.bwd_weight_flops, 16'777'216 + 16'384);

  const Unit& fn = u[57];
  EXPECT_EQ(fn.kind, UnitKind::kFinalNorm);
  EXPECT_EQ(fn.activation_bytes, 66'560);
  EXPECT_EQ(fn.boundary_bytes, 65'536);
  EXPECT_EQ(fn.param_bytes, 1'024);

  const Unit& head = u[58];
  EXPECT_EQ(head.kind, UnitKind::kHead);
  EXPECT_EQ(head.activation_bytes, 327'680);  // (16384 + 65536) * 4
  EXPECT_EQ(head.boundary_bytes, 0);
  EXPECT_EQ(head.param_bytes, 262'144);                          // 128*512*4
  EXPECT_DOUBLE_EQ(head.fwd_flops, 16'777'216 + 327'680);        // + 5*T*V
  EXPECT_DOUBLE_EQ(head.bwd_input_flops, 16'777'216 + 131'072);  // + 2*T*V
  EXPECT_DOUBLE_EQ(head.bwd_weight_flops, 16'777'216);

  // The non-GEMM parts: bias, residual, LayerNorm, GeLU, softmax, loss.
  EXPECT_DOUBLE_EQ(emb.fwd_elementwise_flops, emb.fwd_flops);
  EXPECT_DOUBLE_EQ(ln1.bwd_input_elementwise_flops, ln1.bwd_input_flops);
  EXPECT_DOUBLE_EQ(qkv.fwd_elementwise_flops, 49'152);
  EXPECT_DOUBLE_EQ(qkv.bwd_input_elementwise_flops, 0);
  EXPECT_DOUBLE_EQ(attn.fwd_elementwise_flops, 163'840);
  EXPECT_DOUBLE_EQ(attn.bwd_input_elementwise_flops, 131'072);
  EXPECT_DOUBLE_EQ(out.fwd_elementwise_flops, 32'768);
  EXPECT_DOUBLE_EQ(fc1.fwd_elementwise_flops, 65'536 + 524'288);
  EXPECT_DOUBLE_EQ(fc1.bwd_input_elementwise_flops, 786'432);
  EXPECT_DOUBLE_EQ(fc1.bwd_weight_elementwise_flops, 65'536);
  EXPECT_DOUBLE_EQ(fc2.bwd_weight_elementwise_flops, 16'384);
  EXPECT_DOUBLE_EQ(head.fwd_elementwise_flops, 327'680);
  EXPECT_DOUBLE_EQ(head.bwd_input_elementwise_flops, 131'072);
  EXPECT_DOUBLE_EQ(head.bwd_weight_elementwise_flops, 0);
  for (const Unit& x : u) {
    EXPECT_LE(x.fwd_elementwise_flops, x.fwd_flops) << x.name;
    EXPECT_LE(x.bwd_input_elementwise_flops, x.bwd_input_flops) << x.name;
    EXPECT_LE(x.bwd_weight_elementwise_flops, x.bwd_weight_flops) << x.name;
  }

  // Layers are identical.
  for (int l = 1; l < 8; ++l) {
    for (int k = 0; k < 7; ++k) {
      const Unit& a = u[static_cast<size_t>(1 + k)];
      const Unit& b = u[static_cast<size_t>(1 + 7 * l + k)];
      EXPECT_EQ(a.activation_bytes, b.activation_bytes);
      EXPECT_DOUBLE_EQ(a.fwd_flops, b.fwd_flops);
    }
  }
}

TEST(ModelSpec, PaddedVocabRoundsUpToTheDivisor) {
  EXPECT_EQ(padded_vocab_size(50257, 128), 50304);  // Megatron-LM's GPT-2 vocabulary
  EXPECT_EQ(padded_vocab_size(50257, 8), 50264);
  EXPECT_EQ(padded_vocab_size(512, 128), 512);  // already divisible: unchanged
  EXPECT_EQ(padded_vocab_size(50304, 128), 50304);
  EXPECT_EQ(padded_vocab_size(50257, 1), 50257);  // 1: padding off
  EXPECT_EQ(padded_vocab_size(1, kMaxVocabDivisor), kMaxVocabDivisor);
  // A spec as parsed is unpadded; the divisor pads it.
  ModelSpec small = parse_model_spec("gpt-small");
  EXPECT_EQ(small.vocab_divisor, 1);
  EXPECT_EQ(small.padded_vocab(), 50257);
  small.vocab_divisor = kDefaultVocabDivisor;
  EXPECT_EQ(small.padded_vocab(), 50304);
  EXPECT_EQ(small.vocab, 50257);
}

TEST(Units, PaddedHeadAndEmbeddingCountThePaddedVocab) {
  ModelSpec spec = parse_model_spec("gpt-small");
  const std::vector<Unit> plain = expand_units(spec);
  spec.vocab_divisor = 128;
  const std::vector<Unit> padded = expand_units(spec);
  const double t = 4096, h = 768, v = 50304, e = 4;
  const Unit& head = padded.back();
  EXPECT_DOUBLE_EQ(head.fwd_flops, 2 * t * h * v + 5 * t * v);
  EXPECT_DOUBLE_EQ(head.bwd_input_flops, 2 * t * v * h + 2 * t * v);
  EXPECT_DOUBLE_EQ(head.bwd_weight_flops, 2 * t * h * v);
  EXPECT_EQ(head.param_bytes, static_cast<int64_t>(h * v * e));
  EXPECT_EQ(head.activation_bytes, static_cast<int64_t>((t * h + t * v) * e));
  EXPECT_EQ(padded.front().param_bytes, static_cast<int64_t>((v * h + 1024 * h) * e));
  // 47 padded rows in the embedding and 47 padded columns in the head.
  EXPECT_EQ(padded.front().param_bytes - plain.front().param_bytes, 47 * 768 * 4);
  EXPECT_EQ(head.param_bytes - plain.back().param_bytes, 47 * 768 * 4);
  EXPECT_EQ(stored_parameter_count(spec), 124'439'808 + int64_t{768} * 47 + int64_t{768} * 50304);
  EXPECT_EQ(parameter_count(spec), 124'475'904);
  // Only the head and the embedding change.
  for (size_t i = 1; i + 1 < padded.size(); ++i) {
    EXPECT_DOUBLE_EQ(padded[i].fwd_flops, plain[i].fwd_flops) << padded[i].name;
    EXPECT_EQ(padded[i].param_bytes, plain[i].param_bytes) << padded[i].name;
  }
}

// The fused attention (cuda kernels) keeps qkv, its output and the fp32
// softmax statistics instead of the probabilities: exactly 4*T*h*e +
// 4*b*a*s bytes; its backward scratch is the estimate of cuDNN's workspace
// (bf16) or the flash kernels' row terms (fp32); nothing outside the
// attention changes, and the chunks' activation bytes the memory model sums
// drop by the scores.
TEST(Units, FusedAttentionKeepsStatisticsNotProbabilities) {
  ModelSpec spec = parse_model_spec("gpt-small");  // T = 4096, h 768, a 12, s 1024, b 4
  spec.bytes_per_element = 2;
  const std::vector<Unit> naive = expand_units(spec, Kernels::kCuda);
  const std::vector<Unit> fused = expand_units(spec, Kernels::kCuda, Attention::kFused);
  ASSERT_EQ(naive.size(), fused.size());
  const int64_t t = 4096;
  const int64_t h = 768;
  const int64_t bas = int64_t{4} * 12 * 1024;
  int attention_units = 0;
  for (size_t i = 0; i < naive.size(); ++i) {
    const Unit& n = naive[i];
    const Unit& f = fused[i];
    EXPECT_EQ(f.boundary_bytes, n.boundary_bytes) << f.name;
    EXPECT_EQ(f.split_kept_bytes == 0, n.split_kept_bytes == 0) << f.name;
    if (f.kind != UnitKind::kAttention) {
      EXPECT_EQ(f.fwd_flops, n.fwd_flops) << f.name;
      EXPECT_EQ(f.bwd_input_flops, n.bwd_input_flops) << f.name;
      EXPECT_EQ(f.activation_bytes, n.activation_bytes) << f.name;
      EXPECT_EQ(f.backward_scratch_bytes, n.backward_scratch_bytes) << f.name;
      continue;
    }
    ++attention_units;
    EXPECT_EQ(n.activation_bytes, (3 * t * h + bas * 1024) * 2);
    EXPECT_EQ(f.activation_bytes, 4 * t * h * 2 + 4 * bas);  // 25.36 MB, not 826 MB
    EXPECT_EQ(n.backward_scratch_bytes, int64_t{12} * 1024 * 1024 * 2);
    EXPECT_EQ(f.backward_scratch_bytes, 4 * t * h + 4 * bas);
  }
  EXPECT_EQ(attention_units, 12);
  const std::vector<UnitTime> times = unit_times(fused, device_preset("h100", 2));
  const std::vector<UnitRange> whole{{0, static_cast<int>(fused.size())}};
  const LinkModel link = device_preset("h100", 2).link();
  const int64_t drop = 12 * (naive[3].activation_bytes - fused[3].activation_bytes);
  EXPECT_EQ(model_costs(naive, times, whole, 1, 1, link).chunks[0].activation_bytes -
                model_costs(fused, times, whole, 1, 1, link).chunks[0].activation_bytes,
            drop);
  EXPECT_DEATH((void)expand_units(spec, Kernels::kCpu, Attention::kFused), "cuda kernel");

  // fp32 (the flash kernels): the same kept bytes at 4 bytes an element;
  // the backward's scratch only the row terms, one float per row and head.
  spec.bytes_per_element = 4;
  for (const Unit& u : expand_units(spec, Kernels::kCuda, Attention::kFused)) {
    if (u.kind != UnitKind::kAttention) continue;
    EXPECT_EQ(u.activation_bytes, 4 * t * h * 4 + 4 * bas);
    EXPECT_EQ(u.backward_scratch_bytes, 4 * bas);
  }
}

// The fused attention's FLOPs are what its kernels compute. gpt-small (b 4,
// a 12, s 1024, d 64): a product over the whole square is 2*b*a*s*s*d =
// 6.44e9 FLOPs and there are b*a*s*s = 50.3e6 scores. cuDNN (bf16) computes
// the causal triangle, 1025/2048 of the scores, 2 products forward and 5
// backward (the scores recomputed); the fp32 flash kernels the 136 of 256
// 64 x 64 tiles on or below the diagonal, 2 forward and 7 backward; the
// naive kernels the whole square, 2 and 4.
TEST(Units, FusedAttentionCountsWhatItsKernelsCompute) {
  ModelSpec spec = parse_model_spec("gpt-small");
  const double product = 2.0 * 4 * 12 * 1024 * 1024 * 64;
  const double scores = 4.0 * 12 * 1024 * 1024;
  auto attention = [&spec](Attention form) {
    for (const Unit& u : expand_units(spec, Kernels::kCuda, form))
      if (u.kind == UnitKind::kAttention) return u;
    ADD_FAILURE() << "no attention unit";
    return Unit{};
  };
  auto expect_counts = [&](Attention form, double share, int fwd, int bwd, int fwd_el, int bwd_el) {
    const Unit u = attention(form);
    EXPECT_DOUBLE_EQ(u.fwd_flops - u.fwd_elementwise_flops, fwd * product * share);
    EXPECT_DOUBLE_EQ(u.fwd_elementwise_flops, fwd_el * scores * share);
    EXPECT_DOUBLE_EQ(u.bwd_input_flops - u.bwd_input_elementwise_flops, bwd * product * share);
    EXPECT_DOUBLE_EQ(u.bwd_input_elementwise_flops, bwd_el * scores * share);
    EXPECT_EQ(u.bwd_weight_flops, 0);
  };
  spec.bytes_per_element = 2;
  expect_counts(Attention::kNaive, 1.0, 2, 4, 5, 4);
  expect_counts(Attention::kFused, 1025.0 / 2048, 2, 5, 5, 5);
  spec.bytes_per_element = 4;
  expect_counts(Attention::kNaive, 1.0, 2, 4, 5, 4);
  expect_counts(Attention::kFused, 136.0 / 256, 2, 7, 5, 10);

  // The flash kernels run d = 80 as 128 and a last partial tile whole:
  // s = 100 is two 64-row blocks, 3 tiles of 4096 scores over 10000.
  spec = parse_model_spec("gpt:hidden=960,heads=12,seq=100");
  spec.bytes_per_element = 4;
  const AttentionWork w = attention_work(spec, Attention::kFused);
  EXPECT_EQ(w.head_dim, 128);
  EXPECT_DOUBLE_EQ(w.share, 3.0 * 4096 / 10000);
  const Unit u = attention(Attention::kFused);
  EXPECT_DOUBLE_EQ(u.fwd_flops - u.fwd_elementwise_flops,
                   2 * 2.0 * spec.micro_batch_size * 12 * 3 * 4096 * 128);
  EXPECT_EQ(attention_work(spec, Attention::kNaive).head_dim, 80);
  spec.bytes_per_element = 2;
  EXPECT_EQ(attention_work(spec, Attention::kFused).head_dim, 80);

  // The roofline prices the fused forward below the naive one on an H100.
  const DeviceSpec h100 = device_preset("h100", 2);
  spec = parse_model_spec("gpt-small");
  spec.bytes_per_element = 2;
  const Unit fused = attention(Attention::kFused);
  const Unit naive = attention(Attention::kNaive);
  EXPECT_LT(unit_times({fused}, h100)[0].fwd, 0.6 * unit_times({naive}, h100)[0].fwd);
}

TEST(Units, GptSmallForwardFlopsMatchTheStandardEstimate) {
  // The well-known estimate: forward ~ 2 * params * tokens + attention
  // 4 * b * s^2 * h per layer. Our counts add bias and elementwise work only.
  const ModelSpec s = parse_model_spec("gpt-small");
  double fwd = 0;
  for (const Unit& u : expand_units(s)) fwd += u.fwd_flops;
  const double t = static_cast<double>(s.tokens());
  const double gemm_params =
      static_cast<double>(stored_parameter_count(s)) -
      static_cast<double>(s.vocab + s.seq) * s.hidden;  // embedding is no GEMM
  const double estimate =
      2 * gemm_params * t + s.layers * 4.0 * s.micro_batch_size * s.seq * s.seq * s.hidden;
  EXPECT_NEAR(fwd / estimate, 1.0, 0.03);
  EXPECT_GT(fwd, estimate);
}

}  // namespace
}  // namespace ppb
