// The message plan: messages, link order, flow ids and receive buffers
// under in-order matching, against hand-worked schedules; the validator's
// in-order check on the same schedules.
#include "ppb/pipeline/message_plan.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/schedule_io.hpp"
#include "ppb/pipeline/validator.hpp"

namespace ppb {
namespace {

Schedule from_text(const std::string& text) { return schedule_from_text(text, "test"); }

TEST(MessagePlan, ListsEveryMessageWithProducerConsumerAndLinkOrder) {
  // P = 2, stage 1 consumes mb 1's activation first.
  const Schedule s = from_text("s0: F0 F1 B0 B1\ns1: F1 F0 B0 B1\n");
  const std::vector<int64_t> bytes = {100, 0};
  const MessagePlan plan = build_message_plan(s, bytes);
  ASSERT_EQ(plan.messages.size(), 4u);  // 2 activations, 2 gradients
  ASSERT_EQ(plan.links.size(), 2u);     // s0->s1, s1->s0 (sorted)
  EXPECT_EQ(link_name(plan.links[0]), "s0->s1");
  EXPECT_EQ(link_name(plan.links[1]), "s1->s0");
  EXPECT_EQ(plan.link_of(0, 1), 0);
  EXPECT_EQ(plan.link_of(1, 0), 1);
  // Link s0->s1 carries act mb0 (F0 at 0 -> F0 at 1), act mb1 (F1 at 1 -> F1 at 0).
  const PlannedLink& fwd = plan.links[0];
  ASSERT_EQ(fwd.messages.size(), 2u);
  const PlannedMessage& a0 = plan.messages[static_cast<size_t>(fwd.messages[0])];
  const PlannedMessage& a1 = plan.messages[static_cast<size_t>(fwd.messages[1])];
  EXPECT_EQ(a0.microbatch, 0);
  EXPECT_EQ(a0.producer, 0);
  EXPECT_EQ(a0.consumer, 1);
  EXPECT_EQ(a0.seq, 0);
  EXPECT_EQ(a1.microbatch, 1);
  EXPECT_EQ(a1.consumer, 0);
  EXPECT_EQ(a1.seq, 1);
  EXPECT_EQ(a0.bytes, 100);
  EXPECT_EQ(a0.kind, MessageKind::kActivation);
  // F1 needs seq 1 while seq 0 waits for the later F0: 2 buffers at index 0.
  EXPECT_EQ(fwd.buffers, 2);
  EXPECT_EQ(fwd.buffers_at, 0);
  // Gradients come back in the order they are consumed: 1 buffer.
  EXPECT_EQ(plan.links[1].buffers, 1);
  const PlannedMessage& g0 = plan.messages[static_cast<size_t>(plan.links[1].messages[0])];
  EXPECT_EQ(g0.kind, MessageKind::kGradient);
  EXPECT_EQ(g0.bytes, 100);  // the gradient back to v0 has v0's output size
  EXPECT_EQ(g0.from_virtual, 1);
  EXPECT_EQ(g0.to_virtual, 0);
  // Each action's sent/received entry points at its message.
  EXPECT_EQ(plan.sent[0][0], fwd.messages[0]);
  EXPECT_EQ(plan.received[1][0], fwd.messages[1]);
  EXPECT_EQ(plan.received[0][0], -1);
  EXPECT_EQ(plan.max_buffers(), 2);
  // The occupancy walk, action by action: stage 1's F1 holds 2 buffers (mb 0
  // waits), its F0 then 1; stage 0's B0 and B1 take their gradients one by one.
  EXPECT_EQ(plan.held[1], (std::vector<int32_t>{2, 1, 0, 0}));
  EXPECT_EQ(plan.held[0], (std::vector<int32_t>{0, 0, 1, 1}));
  EXPECT_EQ(plan.links_into(1), std::vector<int32_t>{0});
  EXPECT_EQ(plan.links_out_of(1), std::vector<int32_t>{1});
}

TEST(MessagePlan, FlowIdsAreUniqueAndFollowTheFormula) {
  ScheduleParams p;
  p.stages = 4;
  p.microbatches = 8;
  p.chunks = 2;
  const Schedule s = generate_schedule("interleaved-1f1b", p);
  const MessagePlan plan = build_message_plan(s);
  // 2 x (VP - 1) messages per micro-batch.
  EXPECT_EQ(plan.messages.size(), 8u * 2u * 7u);
  std::set<int64_t> ids;
  for (const PlannedMessage& m : plan.messages) {
    EXPECT_EQ(m.flow_id, message_flow_id(m.microbatch, m.from_virtual, m.kind, 8));
    EXPECT_EQ(m.to_stage, m.to_virtual % 4);
    EXPECT_FALSE(m.local());
    EXPECT_EQ(m.bytes, -1);
    ids.insert(m.flow_id);
  }
  EXPECT_EQ(ids.size(), plan.messages.size());
  EXPECT_EQ(message_flow_id(3, 1, MessageKind::kGradient, 4), 27);
  // Links run between ring neighbours only: s -> s+1 and s -> s-1.
  EXPECT_EQ(plan.links.size(), 8u);
  // Within a link, seq is the producer's list order.
  for (const PlannedLink& l : plan.links) {
    for (size_t j = 1; j < l.messages.size(); ++j) {
      const PlannedMessage& prev = plan.messages[static_cast<size_t>(l.messages[j - 1])];
      const PlannedMessage& m = plan.messages[static_cast<size_t>(l.messages[j])];
      EXPECT_LT(prev.producer, m.producer);
      EXPECT_EQ(m.seq, static_cast<int32_t>(j));
    }
  }
}

TEST(MessagePlan, OneStageHandsOverLocally) {
  const Schedule s = from_text("s0: F0.0 F0.1 B0.1 B0.0\n");
  const MessagePlan plan = build_message_plan(s);
  ASSERT_EQ(plan.messages.size(), 2u);
  EXPECT_TRUE(plan.messages[0].local());
  EXPECT_TRUE(plan.links.empty());
  EXPECT_EQ(plan.max_buffers(), 0);
}

TEST(Placement, LoopingVShapedAndGivenMapsBothWays) {
  const Placement loop(3, 2);
  EXPECT_TRUE(loop.looping());
  EXPECT_EQ(loop.virtual_stage(1, 1), 4);
  EXPECT_EQ(loop.stage_of(4), 1);
  EXPECT_EQ(loop.chunk_of(4), 1);
  const Placement v(3, 2, v_shape_placement(3));
  EXPECT_EQ(v.map(), (std::vector<int32_t>{0, 1, 2, 2, 1, 0}));
  EXPECT_FALSE(v.looping());
  EXPECT_EQ(v.virtual_stages_of(0), (std::vector<int>{0, 5}));
  EXPECT_EQ(v.virtual_stages_of(2), (std::vector<int>{2, 3}));
  for (int vs = 0; vs < 6; ++vs) EXPECT_EQ(v.virtual_stage(v.stage_of(vs), v.chunk_of(vs)), vs);
  // Any map: chunk c of a stage is its c-th virtual stage in model order.
  const std::vector<int32_t> map = {1, 0, 0, 1};
  const Placement given(2, 2, map);
  EXPECT_EQ(given.virtual_stages_of(0), (std::vector<int>{1, 2}));
  EXPECT_EQ(given.virtual_stages_of(1), (std::vector<int>{0, 3}));
  EXPECT_EQ(placement_error(std::vector<int32_t>{0, 0, 1, 1, 1, 0}, 3, 2),
            "stage 0 holds 3 virtual stages, expected 2 (one per chunk)");
  EXPECT_EQ(placement_error(std::vector<int32_t>{0, 3}, 2, 1),
            "virtual stage 1 is placed on stage 3, outside 0..1");
  EXPECT_EQ(placement_error(std::vector<int32_t>{0}, 2, 1),
            "expected 2 entries (stages x chunks = 2 x 1), got 1");
}

TEST(MessagePlan, VPlacementHandsOverLocallyAtTheTurnAndLinksOnlyNeighbours) {
  ScheduleParams p;
  p.stages = 4;
  p.microbatches = 8;
  for (const char* name : {"zb-v", "dualpipe-v"}) {
    const Schedule s = generate_schedule(name, p);
    ASSERT_EQ(s.placement, v_shape_placement(4)) << name;
    const MessagePlan plan = build_message_plan(s);
    // Per micro-batch 7 activations and 7 gradients; the turn (v3 -> v4 and
    // back) stays on stage 3.
    ASSERT_EQ(plan.messages.size(), 8u * 14u) << name;
    int local = 0;
    for (const PlannedMessage& m : plan.messages) {
      const bool turn =
          (m.from_virtual == 3 && m.to_virtual == 4) || (m.from_virtual == 4 && m.to_virtual == 3);
      EXPECT_EQ(m.local(), turn) << name;
      if (m.local()) {
        ++local;
        EXPECT_EQ(m.from_stage, 3);
        EXPECT_EQ(m.to_stage, 3);
      }
      EXPECT_EQ(m.to_stage, plan.placement.stage_of(m.to_virtual));
      EXPECT_EQ(m.to_chunk, plan.placement.chunk_of(m.to_virtual));
      EXPECT_EQ(std::abs(m.from_stage - m.to_stage) <= 1, true);
    }
    EXPECT_EQ(local, 16) << name;
    // Stage 0 receives the last chunk's input from stage 1 (v6 -> v7).
    EXPECT_GE(plan.link_of(1, 0), 0);
    EXPECT_EQ(plan.link_of(3, 0), -1);  // no wrap-around link as looping has
  }
}

TEST(MessagePlan, GeneratedFlushSchedulesNeedOneBufferPerLinkExceptInterleaved) {
  for (const char* name : {"gpipe", "1f1b", "sync-1f1b", "zb-h1", "zb-h2"}) {
    ScheduleParams p;
    p.stages = 4;
    p.microbatches = 8;
    EXPECT_EQ(build_message_plan(generate_schedule(name, p)).max_buffers(), 1) << name;
  }
}

TEST(MessagePlan, IncompleteScheduleIsAUsageError) {
  Schedule s = from_text("s0: F0 B0\ns1: F0 B0\n");
  s.actions[1] = {B(0)};
  EXPECT_THROW(build_message_plan(s), UsageError);
}

TEST(ValidatorInOrder, RejectsTooFewBuffersNamingTheLinkAndTheBuffersItNeeds) {
  const Schedule s = from_text("s0: F0 F1 B0 B1\ns1: F1 F0 B0 B1\n");
  EXPECT_TRUE(validate_schedule(s).ok);  // matching by tag: fine
  EXPECT_TRUE(validate_schedule(s, {.link_buffers = 2}).ok);
  const ValidationResult r = validate_schedule(s, {.link_buffers = 1});
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.error,
            "deadlock: stage 1 stuck at F1: under in-order matching link s0->s1 needs 2 receive "
            "buffers, 1 allowed (F1 consumes message 1 of the link while 1 earlier message "
            "waits for a later action)");
  // The stuck grid: stage 1 at its first action, stage 0 at B0 (waiting for it).
  EXPECT_NE(r.grid.find(">s1      *F1  F0"), std::string::npos) << r.grid;
  EXPECT_NE(r.grid.find(">s0"), std::string::npos) << r.grid;
  EXPECT_NE(r.grid.find("*B0"), std::string::npos) << r.grid;
}

TEST(ValidatorInOrder, EveryGeneratedScheduleRunsWithTheBuffersItsPlanNeeds) {
  for (const ScheduleInfo& info : schedule_list()) {
    const std::string& name = info.name;
    ScheduleParams p;
    p.stages = 4;
    p.microbatches = 8;
    p.chunks = info.uses_chunks ? 2 : 1;
    const Schedule s = generate_schedule(name, p);
    const int need = build_message_plan(s).max_buffers();
    EXPECT_TRUE(validate_schedule(s, {.link_buffers = need}).ok) << name;
    if (need > 1) {
      EXPECT_FALSE(validate_schedule(s, {.link_buffers = need - 1}).ok) << name;
    }
  }
}

}  // namespace
}  // namespace ppb
