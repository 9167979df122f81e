// The data flow of each unit kind (unit_flow.hpp) is the model's contract:
// its boundary and kept elements are expand_units()'s bytes, its held
// gradient is what a split backward keeps from I to W, and each unit's input
// is the boundary of the unit before it, residual included.
#include "ppb/exec/unit_flow.hpp"

#include <gtest/gtest.h>

#include <iterator>
#include <vector>

#include "ppb/pipeline/model.hpp"

namespace ppb {
namespace {

TEST(UnitFlow, IsTheModelsLayoutOnEveryUnit) {
  for (const char* name : {"gpt:layers=2,hidden=64,heads=4,seq=16,vocab=96,mbs=2", "gpt-tiny"}) {
    SCOPED_TRACE(name);
    const ModelSpec spec = parse_model_spec(name);
    ASSERT_EQ(spec.bytes_per_element, 4);
    const std::vector<Unit> units = expand_units(spec);
    for (size_t i = 0; i < units.size(); ++i) {
      const Unit& u = units[i];
      SCOPED_TRACE(u.name);
      const UnitFlow flow = unit_flow(spec, u.kind);
      EXPECT_EQ(4 * flow.boundary(), u.boundary_bytes);
      EXPECT_EQ(4 * flow.kept(), u.activation_bytes);
      // Attention frees everything at I; the rest keep their activations
      // and the gradient they hold.
      const int64_t split = u.kind == UnitKind::kAttention ? 0 : u.activation_bytes;
      EXPECT_EQ(split + 4 * flow.held_gradient, u.split_kept_bytes);
      if (i > 0) {
        EXPECT_EQ(flow.input(), unit_flow(spec, units[i - 1].kind).boundary());
      }
    }
  }
}

TEST(UnitFlow, TheResidualBeginsAtEachLayerNormAndEndsAtEachAdd) {
  const ModelSpec spec = parse_model_spec("gpt-tiny");
  const int64_t th = spec.tokens() * spec.hidden;
  const UnitKind layer[] = {UnitKind::kLayerNorm1, UnitKind::kQkv,        UnitKind::kAttention,
                            UnitKind::kAttnOut,    UnitKind::kLayerNorm2, UnitKind::kFc1Gelu,
                            UnitKind::kFc2};
  const Residual role[] = {Residual::kBegin, Residual::kCarry, Residual::kCarry, Residual::kAdd,
                           Residual::kBegin, Residual::kCarry, Residual::kAdd};
  for (size_t k = 0; k < std::size(layer); ++k) {
    const UnitFlow flow = unit_flow(spec, layer[k]);
    EXPECT_EQ(flow.residual, role[k]) << unit_kind_name(layer[k]);
    EXPECT_EQ(flow.resid, th) << unit_kind_name(layer[k]);
    EXPECT_TRUE(flow.keeps_input) << unit_kind_name(layer[k]);
  }
  for (const UnitKind k : {UnitKind::kEmbedding, UnitKind::kFinalNorm, UnitKind::kHead}) {
    EXPECT_EQ(unit_flow(spec, k).residual, Residual::kNone) << unit_kind_name(k);
    EXPECT_EQ(unit_flow(spec, k).resid, 0) << unit_kind_name(k);
  }
  EXPECT_FALSE(unit_flow(spec, UnitKind::kEmbedding).keeps_input);  // token ids, not an input
  EXPECT_EQ(unit_flow(spec, UnitKind::kEmbedding).kept_extra, spec.tokens());
}

// Fused attention keeps its qkv input, then its output (T*h) and the fp32
// statistics (b*a*s) after it, instead of the b*a*s*s probabilities; the
// boundaries and every other unit are as naive.
TEST(UnitFlow, FusedAttentionKeepsItsOutputAndTheStatistics) {
  const ModelSpec spec = parse_model_spec("gpt-tiny");
  const int64_t th = spec.tokens() * spec.hidden;
  const int64_t bas = int64_t{spec.micro_batch_size} * spec.heads * spec.seq;
  const UnitFlow naive = unit_flow(spec, UnitKind::kAttention);
  const UnitFlow fused = unit_flow(spec, UnitKind::kAttention, Attention::kFused);
  EXPECT_EQ(naive.kept_extra, bas * spec.seq);
  EXPECT_EQ(naive.kept_f32, 0);
  EXPECT_EQ(fused.kept_extra, th);
  EXPECT_EQ(fused.kept_f32, bas);
  EXPECT_EQ(fused.kept(), 3 * th + th);
  EXPECT_EQ(fused.boundary(), naive.boundary());
  EXPECT_EQ(fused.input(), naive.input());
  EXPECT_EQ(fused.extra_offset(), 3 * th);
  for (const Unit& u : expand_units(spec)) {
    if (u.kind == UnitKind::kAttention) continue;
    const UnitFlow f = unit_flow(spec, u.kind, Attention::kFused);
    EXPECT_EQ(f.kept(), unit_flow(spec, u.kind).kept()) << u.name;
    EXPECT_EQ(f.kept_f32, 0) << u.name;
  }
}

}  // namespace
}  // namespace ppb
