// The nccl transport's communicator layout (nccl_links.hpp), without a GPU:
// which link directions get a communicator, the rounds that create them
// without a deadlock, and that every link of every schedule's message plan
// has its communicator.
#include "ppb/exec/nccl_links.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ppb/pipeline/message_plan.hpp"
#include "ppb/pipeline/schedule.hpp"

namespace ppb {
namespace {

std::vector<std::pair<int, int>> pairs(const std::vector<NcclLink>& links) {
  std::vector<std::pair<int, int>> out;
  for (const NcclLink& l : links) out.emplace_back(l.from, l.to);
  return out;
}

TEST(NcclLinks, SmallPipelines) {
  EXPECT_TRUE(nccl_links(1).empty());
  EXPECT_EQ(pairs(nccl_links(2)), (std::vector<std::pair<int, int>>{{0, 1}, {1, 0}}));
  EXPECT_EQ(pairs(nccl_links(4)),
            (std::vector<std::pair<int, int>>{
                {0, 1}, {1, 0}, {1, 2}, {2, 1}, {2, 3}, {3, 2}, {3, 0}, {0, 3}}));
  // The header's examples.
  EXPECT_EQ(nccl_creation_rounds(nccl_links(4), 4),
            (std::vector<std::vector<int>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(nccl_creation_rounds(nccl_links(3), 3).size(), 6u);
  EXPECT_EQ(nccl_creation_rounds(nccl_links(2), 2), (std::vector<std::vector<int>>{{0}, {1}}));
  EXPECT_TRUE(nccl_creation_rounds(nccl_links(1), 1).empty());
}

TEST(NcclLinks, EveryRingDirectionOnceAndRoundsNeverShareARank) {
  for (int P = 2; P <= 16; ++P) {
    const std::vector<NcclLink> links = nccl_links(P);
    std::set<std::pair<int, int>> want;
    for (int s = 0; s < P; ++s) {
      want.insert({s, (s + 1) % P});
      want.insert({(s + 1) % P, s});
    }
    const std::vector<std::pair<int, int>> got = pairs(links);
    const std::set<std::pair<int, int>> got_set(got.begin(), got.end());
    EXPECT_EQ(got_set, want) << "P=" << P;
    EXPECT_EQ(got.size(), want.size()) << "P=" << P << ": a link twice";

    const std::vector<std::vector<int>> rounds = nccl_creation_rounds(links, P);
    std::vector<int> seen(links.size(), 0);
    for (const std::vector<int>& round : rounds) {
      std::set<int> members;
      for (const int li : round) {
        ++seen[static_cast<size_t>(li)];
        const NcclLink& l = links[static_cast<size_t>(li)];
        EXPECT_TRUE(members.insert(l.from).second) << "P=" << P << ": rank " << l.from << " twice";
        EXPECT_TRUE(members.insert(l.to).second) << "P=" << P << ": rank " << l.to << " twice";
      }
    }
    for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << "P=" << P << " link " << i;
    // A rank is in 4 links (2 for P = 2), so first fit needs at most 7 rounds;
    // an even ring needs only 4.
    EXPECT_LE(rounds.size(), P == 3 ? 6u : 7u) << "P=" << P;
    if (P % 2 == 0 && P > 2) {
      EXPECT_EQ(rounds.size(), 4u) << "P=" << P;
    }
  }
}

TEST(NcclLinks, EveryPlannedLinkHasItsCommunicator) {
  int checked = 0;
  for (const ScheduleInfo& info : schedule_list()) {
    for (const int P : {2, 3, 4, 8}) {
      ScheduleParams p;
      p.stages = P;
      p.microbatches = 2 * P;
      p.chunks = info.uses_chunks ? 2 : 1;
      const MessagePlan plan = build_message_plan(generate_schedule(info.name, p));
      const std::vector<NcclLink> links = nccl_links(P);
      for (const PlannedLink& l : plan.links) {
        EXPECT_GE(nccl_link_index(links, l.from_stage, l.to_stage), 0)
            << info.name << " P=" << P << ": " << link_name(l);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace ppb
