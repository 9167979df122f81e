// The Zero Bubble schedules (zb-1p, zb-2p, zb-v) and DualPipeV on the
// simulator: the paper's bubble rates recomputed from its profiled pass
// times, the memory limits the generators promise, and the overlapped
// forward/backward unit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ppb/pipeline/message_plan.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/simulator.hpp"

namespace ppb {
namespace {

Schedule gen(const std::string& name, int P, int M, double tf = 1, double tb = 1, double tw = 1,
             double tc = 0, double wgrad_share = 1) {
  ScheduleParams p;
  p.stages = P;
  p.microbatches = M;
  p.tf = tf;
  p.tb = tb;
  p.tw = tw;
  p.tc = tc;
  p.wgrad_share = wgrad_share;
  return generate_schedule(name, p);
}

// One row of the Zero Bubble paper (Qi et al., ICLR 2024): the model's
// hidden size and heads (Table 3), Table 6's profiled times and Table 5's
// bubble rates.
struct PaperRow {
  const char* model;
  int h, a, p, m;
  double tf, tb, tw, tc;
  double one_f_one_b, zb_h1, zb_h2, zb_1p, zb_2p;
};

constexpr PaperRow kPaper[] = {
    {"1.5B", 2304, 24, 8, 24, 18.522, 18.086, 9.337, 0.601, 0.2431, 0.1585, 0.1083, 0.1585, 0.0433},
    {"1.5B", 2304, 24, 8, 32, 18.513, 18.086, 9.331, 0.626, 0.1985, 0.1242, 0.0837, 0.1242, 0.0039},
    {"1.5B", 2304, 24, 8, 64, 18.546, 18.097, 9.321, 0.762, 0.1240, 0.0674, 0.0444, 0.0674, 0.0026},
    {"6.2B", 4096, 32, 8, 24, 29.718, 29.444, 19.927, 0.527, 0.2347, 0.1323, 0.0698, 0.1323,
     0.0029},
    {"6.2B", 4096, 32, 8, 32, 29.802, 29.428, 19.530, 0.577, 0.1898, 0.1045, 0.0559, 0.1045,
     0.0022},
    {"6.2B", 4096, 32, 8, 64, 29.935, 29.621, 19.388, 0.535, 0.1091, 0.0554, 0.0294, 0.0554,
     0.0010},
    {"14.6B", 5120, 40, 16, 48, 11.347, 11.248, 8.132, 0.377, 0.2552, 0.1397, 0.0672, 0.1397,
     0.0066},
    {"14.6B", 5120, 40, 16, 64, 11.307, 11.254, 8.101, 0.379, 0.2082, 0.1088, 0.0516, 0.1088,
     0.0054},
    {"14.6B", 5120, 40, 16, 128, 11.325, 11.308, 8.109, 0.378, 0.1251, 0.0576, 0.0266, 0.0576,
     0.0028},
    {"28.3B", 6144, 48, 32, 96, 10.419, 10.207, 7.715, 0.408, 0.2646, 0.1421, 0.0641, 0.1421,
     0.0038},
    {"28.3B", 6144, 48, 32, 128, 10.408, 10.204, 7.703, 0.408, 0.2168, 0.1106, 0.0490, 0.1106,
     0.0029},
    {"28.3B", 6144, 48, 32, 256, 10.402, 10.248, 7.698, 0.460, 0.1352, 0.0594, 0.0257, 0.0594,
     0.0018},
};

// The paper's memory model (sequence 1024): a micro-batch holds 34h + 5as
// per token after F, of which W still needs 32h after B.
double paper_wgrad_share(const PaperRow& r) { return 32.0 * r.h / (34.0 * r.h + 5.0 * r.a * 1024); }

// The paper's bubble rate: (cost - m(TF+TB+TW)) / cost, cost = the longest
// stage span (first start to last end), as the simulator's stage_span. The
// times are per stage (a chunk's pass takes a V-th of them).
double bubble_rate(const Schedule& s, double tf, double tb, double tw, double tc) {
  const SimResult sim = simulate(s, uniform_costs(s.stages, s.chunks, tf, tb, tw, tc),
                                 SimOptions{.record_events = false});
  return (sim.stage_span - s.microbatches * (tf + tb + tw)) / sim.stage_span;
}

double paper_bubble_rate(const std::string& name, const PaperRow& r) {
  const Schedule s = gen(name, r.p, r.m, r.tf, r.tb, r.tw, r.tc, paper_wgrad_share(r));
  return bubble_rate(s, r.tf, r.tb, r.tw, r.tc);
}

TEST(ZeroBubblePaper, AutomaticSchedulesMatchTheBubbleRatesOfTable5) {
  for (const PaperRow& r : kPaper) {
    const std::string row =
        std::string(r.model) + " p=" + std::to_string(r.p) + " m=" + std::to_string(r.m);
    EXPECT_NEAR(paper_bubble_rate("zb-1p", r), r.zb_1p, 0.015) << row;
    EXPECT_NEAR(paper_bubble_rate("zb-2p", r), r.zb_2p, 0.015) << row;
  }
}

TEST(ZeroBubblePaper, Zb2pInPipebenchsMemoryModelKeepsItsLimitAndZbH2sRate) {
  // The default --wgrad-share 1 is pipebench's memory model: a micro-batch
  // holds its activations from F to W, I frees nothing (docs/metrics.md).
  // Under 2P such micro-batches zb-2p holds the limit on every stage and
  // finds no better order than ZB-H2's, which is built for that limit; the
  // paper's share lets it keep more micro-batches between F and W than the
  // model allows, which is where its lower Table 5 rate comes from.
  for (const PaperRow& r : kPaper) {
    const std::string row =
        std::string(r.model) + " p=" + std::to_string(r.p) + " m=" + std::to_string(r.m);
    const Schedule ours = gen("zb-2p", r.p, r.m, r.tf, r.tb, r.tw, r.tc);
    const Schedule papers = gen("zb-2p", r.p, r.m, r.tf, r.tb, r.tw, r.tc, paper_wgrad_share(r));
    const std::vector<int> ours_peak = peak_inflight(ours);
    const std::vector<int> papers_peak = peak_inflight(papers);
    EXPECT_LE(*std::max_element(ours_peak.begin(), ours_peak.end()), 2 * r.p) << row;
    EXPECT_GT(*std::max_element(papers_peak.begin(), papers_peak.end()), 2 * r.p) << row;
    const double h2 = bubble_rate(gen("zb-h2", r.p, r.m), r.tf, r.tb, r.tw, r.tc);
    EXPECT_NEAR(bubble_rate(ours, r.tf, r.tb, r.tw, r.tc), h2, 0.015) << row;
    EXPECT_GT(bubble_rate(ours, r.tf, r.tb, r.tw, r.tc), r.zb_2p) << row;
  }
}

TEST(ZeroBubblePaper, ZbVOnTheSameRowsBeatsZb1pAtTheSameMemory) {
  // Table 5 has no ZB-V column; the arXiv version's claim for ZB-V (§6) is
  // a lower bubble than ZB-1p's at 1F1B's memory. Counted as the paper
  // counts, with the same profiled times (per stage; each chunk half).
  for (const PaperRow& r : kPaper) {
    // Measured here: 0.0728 (1.5B, m=24) down to 0.0183 (6.2B, m=64).
    EXPECT_LT(paper_bubble_rate("zb-v", r), r.zb_1p) << r.model << " p=" << r.p << " m=" << r.m;
  }
}

TEST(ZeroBubblePaper, HandcraftedSchedulesMatchTheBubbleRatesOfTable5) {
  for (const PaperRow& r : kPaper) {
    const std::string row =
        std::string(r.model) + " p=" + std::to_string(r.p) + " m=" + std::to_string(r.m);
    EXPECT_NEAR(paper_bubble_rate("1f1b", r), r.one_f_one_b, 0.015) << row;
    EXPECT_NEAR(paper_bubble_rate("zb-h1", r), r.zb_h1, 0.015) << row;
    EXPECT_NEAR(paper_bubble_rate("zb-h2", r), r.zb_h2, 0.015) << row;
  }
}

TEST(ZeroBubbleAuto, KeepsTheActivationLimitOnEveryStage) {
  // zb-1p holds at most P micro-batches (1F1B's peak), zb-2p 2P, counted
  // from F to W as the memory model counts them, whatever the times.
  struct Times {
    double tf, tb, tw, tc;
  };
  for (const Times t :
       {Times{1, 1, 1, 0}, Times{18.5, 18.1, 9.3, 0.6}, Times{1, 2, 0.5, 0.3}, Times{3, 1, 1, 2}}) {
    for (int P = 1; P <= 8; ++P) {
      for (int M = 1; M <= 40; M += 3) {
        for (const int factor : {1, 2}) {
          const std::string name = factor == 1 ? "zb-1p" : "zb-2p";
          const Schedule s = gen(name, P, M, t.tf, t.tb, t.tw, t.tc);
          const std::vector<int> peak = peak_inflight(s);
          for (int st = 0; st < P; ++st) {
            ASSERT_LE(peak[static_cast<size_t>(st)], factor * P)
                << name << " P=" << P << " M=" << M << " s=" << st << " TF=" << t.tf;
          }
        }
      }
    }
  }
}

TEST(ZeroBubbleAuto, UsesTheTimesItIsGiven) {
  // With W much cheaper than F and I the heuristic delays W differently:
  // the orders differ, and each is the better one on its own times.
  const Schedule even = gen("zb-2p", 4, 12, 1, 1, 1, 0);
  const Schedule cheap_w = gen("zb-2p", 4, 12, 2, 2, 0.25, 0.5);
  EXPECT_NE(even.actions, cheap_w.actions);
  auto span = [](const Schedule& s, double tf, double tb, double tw, double tc) {
    return simulate(s, uniform_costs(4, 1, tf, tb, tw, tc)).stage_span;
  };
  EXPECT_LE(span(cheap_w, 2, 2, 0.25, 0.5), span(even, 2, 2, 0.25, 0.5));
  // Equal times, memory 2P: the paper's zero bubble, every stage busy for
  // its whole span.
  const SimResult r = simulate(even, uniform_costs(4, 1, 1, 1, 1, 0));
  EXPECT_DOUBLE_EQ(r.stage_span, 36.0);
}

// ZB-V's published figures are those of the Zero Bubble repository's table
// "Comparision of Schedules", assuming TF = TB = TW (README.md of
// sail-sg/zero-bubble-pipeline-parallelism, also in the authors' Hugging
// Face space): bubble rate 0, activation memory 1x 1F1B's, pipeline
// communication volume 2x 1F1B's. The arXiv version's table of ZB-V rates
// from profiled times is not published in a form these tests could read
// (docs/metrics.md says where it was looked for), so the three are held
// exactly, with 1F1B's row of the same table beside them.

TEST(ZbV, HasTheZeroBubbleRateOfTheZeroBubbleTable) {
  for (int P = 1; P <= 8; ++P) {
    for (int M = 2 * P; M <= 2 * P + 16; M += 4) {
      const Schedule s = gen("zb-v", P, M);
      ASSERT_EQ(s.chunks, 2);
      ASSERT_EQ(s.placement, v_shape_placement(P));
      // Each chunk's pass takes half a stage's: no stage idles between its
      // first and last action.
      EXPECT_NEAR(bubble_rate(s, 1, 1, 1, 0), 0.0, 1e-12) << "P=" << P << " M=" << M;
      // The same table's 1F1B row, (p-1)/(m+p-1) counted the same way.
      EXPECT_NEAR(bubble_rate(gen("1f1b", P, M), 1, 1, 1, 0), (P - 1.0) / (M + P - 1.0), 1e-12)
          << "P=" << P << " M=" << M;
    }
  }
}

TEST(ZbV, HoldsOneF1bsPeakActivationsOnEveryStage) {
  for (int P = 1; P <= 8; ++P) {
    for (int M = 1; M <= 24; ++M) {
      const std::vector<int> v = peak_inflight(gen("zb-v", P, M));
      const std::vector<int> one = peak_inflight(gen("1f1b", P, M));
      // 1F1B's peak is its first stage's: min(P, M) micro-batches.
      ASSERT_EQ(*std::max_element(one.begin(), one.end()), std::min(P, M));
      for (int st = 0; st < P; ++st) {
        // A chunk holds half a stage's layers: 2P chunk halves = P micro-batches.
        const int peak = v[static_cast<size_t>(st)];
        ASSERT_LE(peak, 2 * P) << "P=" << P << " M=" << M << " s=" << st;
        // Balanced: with a full pipeline every stage reaches it, where 1F1B's
        // stage s holds only P - s.
        if (M >= 2 * P) {
          ASSERT_EQ(peak, 2 * P) << "P=" << P << " M=" << M << " s=" << st;
        }
      }
    }
  }
}

TEST(ZbV, SendsTwiceOneF1bsMessagesBetweenStages) {
  for (int P = 2; P <= 8; ++P) {
    for (const int M : {P, 2 * P, 3 * P + 1}) {
      auto count = [](const MessagePlan& plan, bool local) {
        return std::count_if(plan.messages.begin(), plan.messages.end(),
                             [&](const PlannedMessage& m) { return m.local() == local; });
      };
      const MessagePlan v = build_message_plan(gen("zb-v", P, M));
      const MessagePlan one = build_message_plan(gen("1f1b", P, M));
      // 1F1B: an activation and a gradient per micro-batch on each of the
      // P-1 boundaries. ZB-V: 2P-1 boundaries, of which the V's bottom
      // (virtual stages P-1 and P, both on stage P-1) is a local hand-over.
      EXPECT_EQ(count(one, false), 2 * (P - 1) * M);
      EXPECT_EQ(count(one, true), 0);
      EXPECT_EQ(count(v, false), 2 * count(one, false)) << "P=" << P << " M=" << M;
      EXPECT_EQ(count(v, true), 2 * M) << "P=" << P << " M=" << M;
    }
  }
}

TEST(DualPipeV, CountsEachOverlappedPairAsOneUnit) {
  for (int P = 1; P <= 6; ++P) {
    for (int M = 2 * P; M <= 2 * P + 12; ++M) {
      const Schedule s = gen("dualpipe-v", P, M);
      const SimResult r = simulate(s, uniform_costs(P, 2, 1, 1, 1, 0.1));
      for (int st = 0; st < P; ++st) {
        const auto& list = s.actions[static_cast<size_t>(st)];
        const auto pairs =
            std::count_if(list.begin(), list.end(), [](const Action& a) { return a.overlap; });
        // Step 4: two pairs per round, one fewer on the last stage; step 5: one per round.
        const int expected = 2 * (M - 2 * P + st + 1) - (st == P - 1 ? 1 : 0) + (P - st - 1);
        ASSERT_EQ(pairs, expected) << "P=" << P << " M=" << M << " s=" << st;
        ASSERT_EQ(r.stages[static_cast<size_t>(st)].overlapped, expected);
      }
    }
  }
}

TEST(OverlappedPair, StartsWhenBothInputsAreThereAndRunsBackToBack) {
  // Stage 0 pairs F1 with B0: F1's input is there at once, B0's gradient
  // arrives at 4 (s1: F0 1..2, B0 2..4), so the unit runs F1 4..5, B0 5..7.
  Schedule s;
  s.name = "pair";
  s.stages = 2;
  s.microbatches = 2;
  s.actions = {{F(0), F(1), B(0), B(1)}, {F(0), B(0), F(1), B(1)}};
  s.actions[0][1].overlap = true;
  const SimResult r = simulate(s, uniform_costs(2, 1, 1, 1, 1, 0));
  const auto& ev = r.stages[0].events;
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_DOUBLE_EQ(ev[1].start, 4.0);
  EXPECT_DOUBLE_EQ(ev[2].start, 5.0);
  EXPECT_DOUBLE_EQ(ev[2].end, 7.0);
  EXPECT_EQ(r.stages[0].overlapped, 1);
  // Without the pair F1 runs at 1.
  s.actions[0][1].overlap = false;
  EXPECT_DOUBLE_EQ(simulate(s, uniform_costs(2, 1, 1, 1, 1, 0)).stages[0].events[1].start, 1.0);
}

}  // namespace
}  // namespace ppb
