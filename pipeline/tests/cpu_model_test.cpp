// CpuChunk: splitting invariance, split backward, exact memory accounting,
// weight stashing, SGD, synthetic data and the --check reference.
#include "ppb/exec/cpu_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "chunk_walk.hpp"
#include "cpu/init.hpp"
#include "ppb/exec/cpu_reference.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/profiling/memory.hpp"
#include "vocab_padding.hpp"

extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace ppb {
namespace {

void single_thread_blas() {
  if (openblas_set_num_threads != nullptr) openblas_set_num_threads(1);
}

// 2 layers -> 17 units: 0 embedding, 1..7 layer 0 (ln1 qkv attention
// attn_out ln2 fc1_gelu fc2), 8..14 layer 1, 15 final_norm, 16 head.
ModelSpec small() {
  return parse_model_spec("gpt:layers=2,hidden=32,heads=4,seq=16,vocab=64,ffn=4,mbs=2");
}

std::byte* bytes(std::vector<float>& v) {
  return v.empty() ? nullptr : reinterpret_cast<std::byte*>(v.data());
}
const std::byte* cbytes(const std::vector<float>& v) {
  return v.empty() ? nullptr : reinterpret_cast<const std::byte*>(v.data());
}

// Chunks over [cuts[k], cuts[k+1]) chained as pipeline stages in one process.
struct Chained {
  Chained(const ModelSpec& spec, const std::vector<Unit>& units, std::vector<int> cuts,
          CpuModelOptions options) {
    cuts.insert(cuts.begin(), 0);
    cuts.push_back(static_cast<int>(units.size()));
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      chunks.push_back(
          std::make_unique<CpuChunk>(spec, units, UnitRange{cuts[k], cuts[k + 1]}, mem, options));
    }
  }

  // GPipe order: all forwards, then all backwards. Chunks with odd index use
  // the split backward (I then W), the others the full one.
  std::vector<double> run(int microbatches) {
    const size_t n = chunks.size();
    std::vector<std::vector<std::vector<float>>> acts(static_cast<size_t>(microbatches));
    for (int mb = 0; mb < microbatches; ++mb) {
      auto& a = acts[static_cast<size_t>(mb)];
      a.resize(n + 1);
      for (size_t k = 0; k < n; ++k) {
        a[k + 1].resize(static_cast<size_t>(chunks[k]->output_bytes() / 4));
        chunks[k]->forward(mb, cbytes(a[k]), bytes(a[k + 1]));
      }
    }
    std::vector<double> losses;
    for (int mb = 0; mb < microbatches; ++mb) {
      std::vector<float> grad_out;
      for (size_t k = n; k-- > 0;) {
        std::vector<float> grad_in(static_cast<size_t>(chunks[k]->input_bytes() / 4));
        if (k % 2 == 1) {
          chunks[k]->backward_input(mb, cbytes(grad_out), bytes(grad_in));
          chunks[k]->backward_weight(mb);
        } else {
          chunks[k]->backward(mb, cbytes(grad_out), bytes(grad_in));
        }
        grad_out = std::move(grad_in);
      }
      losses.push_back(chunks.back()->loss(mb));
    }
    return losses;
  }

  std::vector<std::vector<float>> grads() const {
    std::vector<std::vector<float>> out;
    for (const auto& c : chunks) {
      for (std::span<const float> g : c->grad_views()) out.emplace_back(g.begin(), g.end());
    }
    return out;
  }

  MemoryTracker mem;
  std::vector<std::unique_ptr<CpuChunk>> chunks;
};

TEST(CpuModel, SplittingGivesTheSameLossAndGradientsAsTheWholeModel) {
  single_thread_blas();
  const ModelSpec spec = small();
  const std::vector<Unit> units = expand_units(spec);
  constexpr int kMicrobatches = 3;
  CpuModelOptions options;
  options.loss_scale = 1.0f / kMicrobatches;
  const ReferenceStep ref = reference_step(spec, kMicrobatches, options);

  std::vector<int> every_unit(units.size() - 1);
  std::iota(every_unit.begin(), every_unit.end(), 1);  // every boundary kind is crossed
  const std::vector<std::vector<int>> cut_sets = {
      {}, {1}, {16}, {5}, {3, 7, 12}, {2, 4, 6, 9, 11, 13, 15}, every_unit};
  for (const std::vector<int>& cuts : cut_sets) {
    std::string name;
    for (int c : cuts) name += std::to_string(c) + " ";
    SCOPED_TRACE("cuts: " + name);
    Chained pipe(spec, units, cuts, options);
    const std::vector<double> losses = pipe.run(kMicrobatches);
    double mean = 0;
    for (double l : losses) mean += l / kMicrobatches;
    EXPECT_NEAR(mean, ref.loss, 1e-5 * std::abs(ref.loss));
    const auto grads = pipe.grads();
    ASSERT_EQ(grads.size(), ref.grads.size());
    for (size_t u = 0; u < grads.size(); ++u) {
      EXPECT_LE(max_relative_error(grads[u], ref.grads[u]), 1e-5) << units[u].name;
    }
  }
}

// The vocabulary padded (60 -> 64 at divisor 32): the head and embedding
// hold the padded rows, the loss and the true rows' gradients are the
// unpadded model's, and the padding gets no gradient; the head's chunk runs
// the split backward (I then W), the embedding's the full one.
TEST(CpuModel, PaddedVocabGivesTheUnpaddedLossAndNoGradientToThePadding) {
  single_thread_blas();
  const ModelSpec plain = parse_model_spec("gpt:layers=1,hidden=32,heads=4,seq=16,vocab=60,mbs=2");
  ModelSpec padded = plain;
  padded.vocab_divisor = 32;
  ASSERT_EQ(padded.padded_vocab(), 64);
  constexpr int kMicrobatches = 2;
  CpuModelOptions options;
  options.loss_scale = 1.0f / kMicrobatches;
  const ReferenceStep ref = reference_step(plain, kMicrobatches, options);
  const std::vector<Unit> units = expand_units(padded);
  Chained pipe(padded, units, {4}, options);
  const std::vector<double> losses = pipe.run(kMicrobatches);
  double mean = 0;
  for (double l : losses) mean += l / kMicrobatches;
  EXPECT_NEAR(mean, ref.loss, 1e-6 * std::abs(ref.loss));
  const std::vector<std::vector<float>> grads = pipe.grads();
  EXPECT_EQ(grads.front().size(), size_t{64 + 16} * 32);  // wte [64, 32], wpe [16, 32]
  EXPECT_EQ(grads.back().size(), size_t{32} * 64);        // head [32, 64]
  const test::Unpadded unpadded = test::drop_vocab_padding(padded, grads, 0);
  EXPECT_EQ(unpadded.padding_max_abs, 0.0f);
  ASSERT_EQ(unpadded.grads.size(), ref.grads.size());
  for (size_t u = 0; u < ref.grads.size(); ++u) {
    ASSERT_EQ(unpadded.grads[u].size(), ref.grads[u].size()) << units[u].name;
    EXPECT_LE(max_relative_error(unpadded.grads[u], ref.grads[u]), 1e-6) << units[u].name;
  }
  // The padded head's weights are the unpadded head's, padding zero.
  std::vector<float> head(size_t{32} * 64);
  std::vector<float> plain_head(size_t{32} * 60);
  cpu::init_unit_params(padded, UnitKind::kHead, 7, static_cast<int>(units.size()) - 1, head);
  cpu::init_unit_params(plain, UnitKind::kHead, 7, static_cast<int>(units.size()) - 1, plain_head);
  for (int r = 0; r < 32; ++r) {
    for (int c = 0; c < 64; ++c) {
      const float want = c < 60 ? plain_head[static_cast<size_t>((r * 60) + c)] : 0.0f;
      EXPECT_EQ(head[static_cast<size_t>((r * 64) + c)], want) << r << "," << c;
    }
  }
}

// The preset the executor's tests and ci/suite run: 4 stages cut inside
// layers, two micro-batches, against the one-process reference.
TEST(CpuModel, GptTinyInFourChunksMatchesTheReference) {
  single_thread_blas();
  const ModelSpec spec = parse_model_spec("gpt-tiny");
  const std::vector<Unit> units = expand_units(spec);
  ASSERT_EQ(units.size(), 59u);
  CpuModelOptions options;
  options.loss_scale = 0.5f;
  const ReferenceStep ref = reference_step(spec, 2, options);
  EXPECT_NEAR(ref.loss, std::log(512.0), 0.1);
  Chained pipe(spec, units, {10, 27, 45}, options);
  const std::vector<double> losses = pipe.run(2);
  EXPECT_NEAR((losses[0] + losses[1]) / 2, ref.loss, 1e-5 * ref.loss);
  const auto grads = pipe.grads();
  for (size_t u = 0; u < grads.size(); ++u) {
    EXPECT_LE(max_relative_error(grads[u], ref.grads[u]), 1e-5) << units[u].name;
  }
}

TEST(CpuModel, ParametersDependOnlyOnSeedAndUnitNotOnThePartition) {
  const ModelSpec spec = small();
  const std::vector<Unit> units = expand_units(spec);
  MemoryTracker mem;
  CpuChunk whole(spec, units, {0, 17}, mem);
  CpuChunk part(spec, units, {5, 12}, mem);
  CpuModelOptions other_seed;
  other_seed.seed = 99;
  CpuChunk reseeded(spec, units, {5, 12}, mem, other_seed);
  const auto w = whole.param_views();
  const auto p = part.param_views();
  const auto r = reseeded.param_views();
  for (size_t i = 0; i < p.size(); ++i) {
    ASSERT_EQ(p[i].size(), w[5 + i].size());
    EXPECT_TRUE(std::equal(p[i].begin(), p[i].end(), w[5 + i].begin())) << units[5 + i].name;
    if (!p[i].empty() && units[5 + i].kind == UnitKind::kQkv) {
      EXPECT_NE(p[i][0], r[i][0]);  // the seed matters
    }
  }
}

TEST(CpuModel, InitialisationFollowsGpt2) {
  const ModelSpec spec = small();
  const std::vector<Unit> units = expand_units(spec);
  MemoryTracker mem;
  CpuChunk model(spec, units, {0, 17}, mem);
  const auto p = model.param_views();
  const size_t h = 32;
  // ln1: gamma 1, beta 0
  for (size_t i = 0; i < h; ++i) {
    EXPECT_EQ(p[1][i], 1.0f);
    EXPECT_EQ(p[1][h + i], 0.0f);
  }
  // qkv weight ~ N(0, 0.02), bias 0
  double sum = 0;
  double sq = 0;
  const size_t n = 3 * h * h;
  for (size_t i = 0; i < n; ++i) {
    sum += p[2][i];
    sq += static_cast<double>(p[2][i]) * p[2][i];
  }
  const double mean = sum / static_cast<double>(n);
  const double sd = std::sqrt(sq / static_cast<double>(n) - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(sd, 0.02, 0.001);
  for (size_t i = n; i < n + 3 * h; ++i) EXPECT_EQ(p[2][i], 0.0f);
  EXPECT_TRUE(p[3].empty());  // attention has no parameters
}

TEST(CpuModel, SplitBackwardIsBitIdenticalToTheFullBackward) {
  single_thread_blas();
  const ModelSpec spec = small();
  const std::vector<Unit> units = expand_units(spec);
  MemoryTracker mem;
  CpuModelOptions options;
  options.loss_scale = 0.5f;
  CpuChunk front(spec, units, {0, 6}, mem, options);
  CpuChunk full(spec, units, {6, 17}, mem, options);
  CpuChunk split(spec, units, {6, 17}, mem, options);
  std::vector<float> act(static_cast<size_t>(front.output_bytes() / 4));
  std::vector<float> gin_full(act.size());
  std::vector<float> gin_split(act.size());
  for (int mb = 0; mb < 2; ++mb) {
    front.forward(mb, nullptr, bytes(act));
    full.forward(mb, cbytes(act), nullptr);
    split.forward(mb, cbytes(act), nullptr);
    full.backward(mb, nullptr, bytes(gin_full));
    split.backward_input(mb, nullptr, bytes(gin_split));
    EXPECT_EQ(gin_full, gin_split);
    split.backward_weight(mb);
    front.backward(mb, cbytes(gin_full), nullptr);
  }
  const auto a = full.grad_views();
  const auto b = split.grad_views();
  for (size_t u = 0; u < a.size(); ++u) {
    EXPECT_TRUE(std::equal(a[u].begin(), a[u].end(), b[u].begin())) << units[6 + u].name;
  }
  double norm = 0;
  for (float g : a[1]) norm += std::abs(g);
  EXPECT_GT(norm, 0.0);  // gradients are really there
}

int64_t sum_activation_bytes(const std::vector<Unit>& units, int begin, int end) {
  int64_t s = 0;
  for (int i = begin; i < end; ++i) s += units[static_cast<size_t>(i)].activation_bytes;
  return s;
}

TEST(CpuModel, TracksExactlyTheContractBytes) {
  single_thread_blas();
  const ModelSpec spec = small();
  const std::vector<Unit> units = expand_units(spec);
  const int64_t t = spec.tokens();
  const int64_t h = spec.hidden;
  for (const UnitRange r :
       {UnitRange{0, 17}, UnitRange{2, 10}, UnitRange{3, 4}, UnitRange{9, 17}}) {
    SCOPED_TRACE("units " + std::to_string(r.begin) + ".." + std::to_string(r.end));
    MemoryTracker mem;
    CpuChunk chunk(spec, units, r, mem);
    int64_t params = 0;
    for (int i = r.begin; i < r.end; ++i) params += units[static_cast<size_t>(i)].param_bytes;
    EXPECT_EQ(mem.current(MemCategory::kParameters), params);
    EXPECT_EQ(mem.current(MemCategory::kGradients), params);
    EXPECT_EQ(mem.current(MemCategory::kActivations), 0);

    const int64_t per_mb = sum_activation_bytes(units, r.begin, r.end);
    std::vector<float> in(static_cast<size_t>(chunk.input_bytes() / 4), 0.1f);
    std::vector<float> out(static_cast<size_t>(chunk.output_bytes() / 4));
    std::vector<float> gin(in.size());
    std::vector<float> gout(out.size(), 0.01f);
    chunk.forward(0, cbytes(in), bytes(out));
    EXPECT_EQ(mem.current(MemCategory::kActivations), per_mb);
    EXPECT_EQ(mem.current(MemCategory::kWorkspace), 0);
    chunk.forward(1, cbytes(in), bytes(out));
    EXPECT_EQ(mem.current(MemCategory::kActivations), 2 * per_mb);
    chunk.backward(0, cbytes(gout), bytes(gin));
    EXPECT_EQ(mem.current(MemCategory::kActivations), per_mb);
    EXPECT_EQ(mem.current(MemCategory::kWorkspace), 0);

    // Split form: between I and W the units with weights hold their output
    // gradient (fc1_gelu and head in place), attention frees its bytes.
    chunk.backward_input(1, cbytes(gout), bytes(gin));
    int64_t between = 0;
    for (int i = r.begin; i < r.end; ++i) {
      const Unit& u = units[static_cast<size_t>(i)];
      switch (u.kind) {
        case UnitKind::kEmbedding:
        case UnitKind::kLayerNorm1:
        case UnitKind::kLayerNorm2:
        case UnitKind::kFinalNorm:
        case UnitKind::kAttnOut:
        case UnitKind::kFc2:
          between += u.activation_bytes + t * h * 4;
          break;
        case UnitKind::kQkv:
          between += u.activation_bytes + 3 * t * h * 4;
          break;
        case UnitKind::kAttention:
          break;
        case UnitKind::kFc1Gelu:
        case UnitKind::kHead:
          between += u.activation_bytes;
          break;
      }
    }
    EXPECT_EQ(mem.current(MemCategory::kActivations), between);
    EXPECT_EQ(mem.current(MemCategory::kWorkspace), 0);
    chunk.backward_weight(1);
    EXPECT_EQ(mem.current(MemCategory::kActivations), 0);
    EXPECT_EQ(mem.current(MemCategory::kWorkspace), 0);
    EXPECT_EQ(mem.current(MemCategory::kWeightStash), 0);
    EXPECT_GT(mem.peak(MemCategory::kWorkspace), 0);  // temporaries were counted
  }
}

// Each pass peaks at what the memory model's chunk walk says (device.cpp's
// add_workspace), to the byte: F at activation_bytes + forward_workspace
// above what the chunk held before (each unit's input written in place
// into its kept activations: no boundary inside the chunk is workspace),
// B at backward_workspace, I at peak_during_input + input_workspace over
// what the chunk held without the micro-batch, W at weight_workspace.
TEST(CpuModel, EachPassPeaksAtTheModelsChunkWalk) {
  single_thread_blas();
  const ModelSpec spec = small();
  const std::vector<Unit> units = expand_units(spec);
  const std::vector<UnitTime> times = unit_times(units, device_preset("cpu", 4));
  for (const UnitRange r :
       {UnitRange{0, 17}, UnitRange{2, 10}, UnitRange{3, 5}, UnitRange{15, 17}}) {
    SCOPED_TRACE("units " + std::to_string(r.begin) + ".." + std::to_string(r.end));
    const ChunkCost c = test::chunk_cost(units, times, r);
    MemoryTracker mem;
    CpuChunk chunk(spec, units, r, mem);
    std::vector<float> in(static_cast<size_t>(chunk.input_bytes() / 4), 0.1f);
    std::vector<float> out(static_cast<size_t>(chunk.output_bytes() / 4));
    std::vector<float> gin(in.size());
    std::vector<float> gout(out.size(), 0.01f);
    EXPECT_EQ(test::pass_peak(mem, [&] { chunk.forward(0, cbytes(in), bytes(out)); }),
              c.activation_bytes + c.forward_workspace_bytes);
    EXPECT_EQ(test::pass_peak(mem, [&] { chunk.backward(0, cbytes(gout), bytes(gin)); }),
              c.backward_workspace_bytes);
    chunk.forward(1, cbytes(in), bytes(out));
    EXPECT_EQ(test::pass_peak(mem, [&] { chunk.backward_input(1, cbytes(gout), bytes(gin)); }),
              c.peak_during_input() + c.input_workspace_bytes - c.activation_bytes);
    EXPECT_EQ(test::pass_peak(mem, [&] { chunk.backward_weight(1); }), c.weight_workspace_bytes);
  }
}

TEST(CpuModel, InputAndOutputBytesAreTheNeighbouringBoundaries) {
  const ModelSpec spec = small();
  const std::vector<Unit> units = expand_units(spec);
  MemoryTracker mem;
  const int64_t th4 = spec.tokens() * spec.hidden * 4;
  CpuChunk first(spec, units, {0, 3}, mem);
  EXPECT_EQ(first.input_bytes(), 0);
  EXPECT_EQ(first.output_bytes(), 4 * th4);  // after qkv: qkv + residual
  CpuChunk mid(spec, units, {3, 7}, mem);
  EXPECT_EQ(mid.input_bytes(), 4 * th4);
  EXPECT_EQ(mid.output_bytes(), th4 * 4 + th4);  // after fc1_gelu: gelu[T,4h] + residual
  CpuChunk last(spec, units, {16, 17}, mem);
  EXPECT_EQ(last.input_bytes(), th4);
  EXPECT_EQ(last.output_bytes(), 0);
}

TEST(CpuModel, WeightStashingBackwardUsesTheForwardsWeights) {
  single_thread_blas();
  const ModelSpec spec = small();
  const std::vector<Unit> units = expand_units(spec);
  const UnitRange all{0, 17};
  int64_t param_bytes = 0;
  for (const Unit& u : units) param_bytes += u.param_bytes;
  constexpr float kLr = 0.5f;

  // Run the same sequence with and without stashing.
  auto run = [&](bool stashing, MemoryTracker& mem, std::vector<std::vector<float>>& grads_mb0,
                 std::vector<std::vector<float>>& params_v1) {
    CpuModelOptions options;
    options.weight_stashing = stashing;
    CpuChunk model(spec, units, all, mem, options);
    model.forward(7, nullptr, nullptr);
    model.backward(7, nullptr, nullptr);  // some gradient for the step
    model.forward(0, nullptr, nullptr);
    model.forward(1, nullptr, nullptr);  // two micro-batches on version 0
    EXPECT_EQ(model.weight_version_of(0), 0);
    EXPECT_EQ(mem.current(MemCategory::kWeightStash), 0);
    model.sgd_step(kLr);
    EXPECT_EQ(model.weight_version(), 1);
    // one copy for version 0, however many micro-batches use it
    EXPECT_EQ(mem.current(MemCategory::kWeightStash), stashing ? param_bytes : 0);
    for (auto p : model.param_views()) params_v1.emplace_back(p.begin(), p.end());
    model.forward(2, nullptr, nullptr);
    EXPECT_EQ(model.weight_version_of(2), 1);
    model.backward(0, nullptr, nullptr);
    for (auto g : model.grad_views()) grads_mb0.emplace_back(g.begin(), g.end());
    EXPECT_EQ(mem.current(MemCategory::kWeightStash), stashing ? param_bytes : 0);
    model.backward_input(1, nullptr, nullptr);
    model.backward_weight(1);  // version 0's last user: the stash goes
    EXPECT_EQ(mem.current(MemCategory::kWeightStash), 0);
    model.backward(2, nullptr, nullptr);
  };
  MemoryTracker mem_on;
  MemoryTracker mem_off;
  std::vector<std::vector<float>> stashed_grads, plain_grads, params_on, params_off;
  run(true, mem_on, stashed_grads, params_on);
  run(false, mem_off, plain_grads, params_off);
  EXPECT_EQ(mem_on.peak(MemCategory::kWeightStash), param_bytes);
  EXPECT_EQ(params_on, params_off);  // the update itself is the same

  // A fresh model with the version-0 weights: forward + backward of mb 0.
  MemoryTracker mem;
  CpuChunk fresh(spec, units, all, mem);
  fresh.forward(0, nullptr, nullptr);
  fresh.backward(0, nullptr, nullptr);
  const auto expected = fresh.grad_views();
  bool plain_differs = false;
  for (size_t u = 0; u < expected.size(); ++u) {
    EXPECT_TRUE(std::equal(expected[u].begin(), expected[u].end(), stashed_grads[u].begin()))
        << units[u].name;
    if (!std::equal(expected[u].begin(), expected[u].end(), plain_grads[u].begin())) {
      plain_differs = true;
    }
  }
  // Without stashing, mb 0's backward used the new weights: the check above
  // would have caught a missing stash.
  EXPECT_TRUE(plain_differs);
}

TEST(CpuModel, SgdStepUpdatesParametersAndTrainingLowersTheLoss) {
  single_thread_blas();
  const ModelSpec spec = small();
  const std::vector<Unit> units = expand_units(spec);
  MemoryTracker mem;
  CpuModelOptions options;
  options.loss_scale = 0.5f;
  CpuChunk model(spec, units, {0, 17}, mem, options);
  double first = 0;
  double last = 0;
  for (int step = 0; step < 8; ++step) {
    double loss = 0;
    for (int mb = 0; mb < 2; ++mb) {
      model.forward(mb, nullptr, nullptr);
      model.backward(mb, nullptr, nullptr);
      loss += model.loss(mb) / 2;
    }
    if (step == 0) {
      first = loss;
      // p' = p - lr * g exactly, and the gradients are zeroed
      std::vector<float> before(model.param_views()[2].begin(), model.param_views()[2].end());
      std::vector<float> g(model.grad_views()[2].begin(), model.grad_views()[2].end());
      model.sgd_step(0.5f);
      for (size_t i = 0; i < before.size(); i += 97) {
        EXPECT_EQ(model.param_views()[2][i], before[i] - 0.5f * g[i]);
      }
      const auto grads_after = model.grad_views();
      for (float x : grads_after[2]) ASSERT_EQ(x, 0.0f);
      continue;
    }
    last = loss;
    model.sgd_step(0.5f);
  }
  // An untrained model predicts about uniformly: loss ~ ln(vocab).
  EXPECT_NEAR(first, std::log(64.0), 0.1);
  EXPECT_LT(last, first - 0.05);
}

TEST(CpuModel, SyntheticDataIsDeterministicAndShifted) {
  const ModelSpec spec = small();
  const size_t t = static_cast<size_t>(spec.tokens());
  std::vector<int32_t> tok(t), lab(t), tok2(t), lab2(t), other(t), other_lab(t);
  synthetic_tokens(spec, 1234, 5, tok, lab);
  synthetic_tokens(spec, 1234, 5, tok2, lab2);
  synthetic_tokens(spec, 1234, 6, other, other_lab);
  EXPECT_EQ(tok, tok2);
  EXPECT_EQ(lab, lab2);
  EXPECT_NE(tok, other);
  std::set<int32_t> distinct;
  for (size_t i = 0; i < t; ++i) {
    EXPECT_GE(tok[i], 0);
    EXPECT_LT(tok[i], spec.vocab);
    distinct.insert(tok[i]);
    if ((i + 1) % static_cast<size_t>(spec.seq) != 0) {
      EXPECT_EQ(lab[i], tok[i + 1]);
    }
  }
  EXPECT_GT(distinct.size(), 10u);
}

TEST(CpuReference, LossIsTheMeanAndGradientsAreThoseOfTheMeanLoss) {
  single_thread_blas();
  const ModelSpec spec = small();
  const std::vector<Unit> units = expand_units(spec);
  const ReferenceStep ref = reference_step(spec, 2, CpuModelOptions{});
  ASSERT_EQ(ref.grads.size(), units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    EXPECT_EQ(static_cast<int64_t>(ref.grads[u].size()) * 4, units[u].param_bytes);
  }
  // By hand: two single micro-batch references average to the two-micro-batch one.
  MemoryTracker mem;
  CpuChunk m(spec, units, {0, 17}, mem);
  m.forward(0, nullptr, nullptr);
  m.forward(1, nullptr, nullptr);
  EXPECT_NEAR(ref.loss, (m.loss(0) + m.loss(1)) / 2, 1e-12);
  m.backward(0, nullptr, nullptr);
  m.backward(1, nullptr, nullptr);  // loss_scale 1: sum of the two
  const auto g = m.grad_views();
  for (size_t u = 0; u < units.size(); ++u) {
    std::vector<float> half(g[u].begin(), g[u].end());
    for (float& x : half) x *= 0.5f;
    EXPECT_LE(max_relative_error(half, ref.grads[u]), 1e-6) << units[u].name;
  }
}

// reference_steps(): the first step is reference_step(); the second is the
// same micro-batches from the weights CpuChunk::sgd_step() leaves, bit for
// bit; with replicas the first is reference_step_replicas().
TEST(CpuReference, TheSecondStepStartsFromTheFirstStepsSgd) {
  const ModelSpec spec = small();
  const std::vector<Unit> units = expand_units(spec);
  const float lr = 0.05f;
  const std::vector<ReferenceStep> steps = reference_steps(spec, 2, 1, CpuModelOptions{}, 2, lr);
  ASSERT_EQ(steps.size(), 2u);
  const ReferenceStep first = reference_step(spec, 2, CpuModelOptions{});
  EXPECT_EQ(steps[0].grads, first.grads);
  EXPECT_EQ(steps[0].loss, first.loss);
  CpuModelOptions half;
  half.loss_scale = 0.5f;
  MemoryTracker mem;
  CpuChunk m(spec, units, {0, 17}, mem, half);
  for (int step = 0; step < 2; ++step) {
    double loss = 0;
    for (int mb = 0; mb < 2; ++mb) {
      m.forward(mb, nullptr, nullptr);
      m.backward(mb, nullptr, nullptr);
      loss += m.loss(mb);
    }
    EXPECT_EQ(loss / 2, steps[static_cast<size_t>(step)].loss) << "step " << step;
    const auto g = m.grad_views();
    for (size_t u = 0; u < units.size(); ++u) {
      EXPECT_TRUE(std::ranges::equal(g[u], steps[static_cast<size_t>(step)].grads[u]))
          << "step " << step << " " << units[u].name;
    }
    m.sgd_step(lr);
  }
  EXPECT_NE(steps[1].loss, steps[0].loss);  // the step moved the weights
  const std::vector<ReferenceStep> replicas = reference_steps(spec, 1, 2, CpuModelOptions{}, 2, lr);
  const ReferenceStep dp = reference_step_replicas(spec, 1, 2, CpuModelOptions{});
  EXPECT_EQ(replicas[0].grads, dp.grads);
  EXPECT_EQ(replicas[0].loss, dp.loss);
  EXPECT_NE(replicas[1].loss, dp.loss);
}

TEST(CpuReference, MaxRelativeErrorIsMaxDiffOverMaxReference) {
  const std::vector<float> a = {1.0f, 2.0f, -3.0f};
  const std::vector<float> b = {1.0f, 2.5f, -4.0f};
  EXPECT_DOUBLE_EQ(max_relative_error(a, b), 1.0 / 4.0);
  EXPECT_DOUBLE_EQ(max_relative_error(b, b), 0.0);
  EXPECT_DOUBLE_EQ(max_relative_error(std::span<const float>{}, std::span<const float>{}), 0.0);
}

}  // namespace
}  // namespace ppb
