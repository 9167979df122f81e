// Generators: registry, parameter errors, the full P x M sweep, peak
// in-flight figures, structure of each schedule, and makespans on unit costs.
#include "ppb/pipeline/schedule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "ppb/pipeline/validator.hpp"
#include "schedule_test_util.hpp"

namespace ppb {
namespace {

using testing::evaluate;
using testing::list_text;

ScheduleParams params(int stages, int microbatches, int chunks = 1) {
  ScheduleParams p;
  p.stages = stages;
  p.microbatches = microbatches;
  p.chunks = chunks;
  return p;
}

std::string usage_error(std::string_view name, const ScheduleParams& p) {
  try {
    generate_schedule(name, p);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ScheduleRegistry, ListsEveryScheduleOfDesignOnce) {
  std::vector<std::string> names;
  for (const ScheduleInfo& s : schedule_list()) {
    names.push_back(s.name);
    EXPECT_FALSE(s.help.empty()) << s.name;
    EXPECT_EQ(s.help.find('\n'), std::string::npos) << s.name;
    EXPECT_EQ(s.splits_backward, s.name.rfind("zb-", 0) == 0 || s.name == "dualpipe-v") << s.name;
    EXPECT_EQ(s.fixed_chunks, s.name == "zb-v" || s.name == "dualpipe-v" ? 2 : 0) << s.name;
    EXPECT_EQ(s.uses_times, s.name == "zb-1p" || s.name == "zb-2p") << s.name;
    EXPECT_EQ(s.uses_chunks, s.name == "interleaved-1f1b") << s.name;
    EXPECT_EQ(s.no_flush, s.name == "pipedream") << s.name;
    EXPECT_EQ(s.uses_inflight, s.name == "async-1f1b" || s.name == "adaptive" || s.name == "hybrid")
        << s.name;
    EXPECT_EQ(s.uses_sync_warmup, s.name == "hybrid") << s.name;
    EXPECT_EQ(s.weight_stashing, s.name == "pipedream") << s.name;
    EXPECT_EQ(s.optimizer_per_backward, s.name == "pipedream") << s.name;
    EXPECT_EQ(s.memory_guarded, s.name == "adaptive") << s.name;
    EXPECT_EQ(s.closed_form_bubble, s.name == "gpipe" || s.name == "1f1b" || s.name == "async-1f1b")
        << s.name;
    EXPECT_EQ(&schedule_info(s.name), &s) << s.name;
  }
  const std::vector<std::string> expected = {
      "sync-1f1b",        "async-1f1b", "1f1b",  "gpipe", "pipedream", "hybrid", "adaptive",
      "interleaved-1f1b", "zb-h1",      "zb-h2", "zb-1p", "zb-2p",     "zb-v",   "dualpipe-v"};
  EXPECT_EQ(names, expected);
}

TEST(ScheduleRegistry, InfoOfUnknownNameListsValidNames) {
  try {
    (void)schedule_info("1f2b");
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("valid schedules: sync-1f1b"), std::string::npos);
  }
}

TEST(ScheduleRegistry, UnknownNameListsValidNames) {
  const std::string e = usage_error("1f2b", params(4, 8));
  EXPECT_NE(e.find("unknown schedule '1f2b'"), std::string::npos) << e;
  for (const ScheduleInfo& s : schedule_list())
    EXPECT_NE(e.find(s.name), std::string::npos) << s.name;
}

TEST(ScheduleParamsCheck, InvalidCombinationsNameTheFlag) {
  struct Case {
    std::string name;
    ScheduleParams p;
    std::string flag;
  };
  ScheduleParams base = params(4, 8);
  auto with = [&](auto edit) {
    ScheduleParams p = base;
    edit(p);
    return p;
  };
  const std::vector<Case> cases = {
      {"1f1b", with([](ScheduleParams& p) { p.stages = 0; }), "--stages"},
      {"gpipe", with([](ScheduleParams& p) { p.microbatches = 0; }), "--microbatches"},
      {"gpipe", with([](ScheduleParams& p) { p.chunks = 2; }), "--chunks"},
      {"zb-h1", with([](ScheduleParams& p) { p.chunks = 3; }), "--chunks"},
      {"interleaved-1f1b", with([](ScheduleParams& p) { p.chunks = 0; }), "--chunks"},
      {"async-1f1b", with([](ScheduleParams& p) { p.inflight = -1; }), "--inflight"},
      {"adaptive", with([](ScheduleParams& p) { p.inflight = -3; }), "--inflight"},
      {"hybrid", with([](ScheduleParams& p) { p.sync_warmup = 9; }), "--sync-warmup"},
      {"hybrid", with([](ScheduleParams& p) { p.sync_warmup = -1; }), "--sync-warmup"},
      {"1f1b", with([](ScheduleParams& p) { p.batches = 2; }), "--batches"},
      {"pipedream", with([](ScheduleParams& p) { p.batches = 0; }), "--batches"},
      {"interleaved-1f1b", with([](ScheduleParams& p) {
         p.microbatches = 6;
         p.chunks = 2;
       }),
       "--microbatches"},
      {"1f1b", with([](ScheduleParams& p) {
         p.stages = 4096;
         p.microbatches = 1 << 20;
       }),
       "--stages 4096 x --microbatches 1048576"},
  };
  for (const Case& c : cases) {
    const std::string e = usage_error(c.name, c.p);
    EXPECT_EQ(e.rfind(c.flag + ":", 0), 0u) << c.name << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_NE(usage_error("interleaved-1f1b", with([](ScheduleParams& p) { p.microbatches = 6; }))
                .find("multiple"),
            std::string::npos);
}

// Every schedule x P 1..16 x M 1..64 either generates a schedule that passes
// the validator, or is rejected with a UsageError; only interleaved-1f1b with
// M not a multiple of P (and dualpipe-v with M < 2P) is rejected, and
// schedule_problem gives the rejection's message, or nullopt, first.
TEST(ScheduleSweep, EveryCombinationValidatesOrIsRejected) {
  int generated = 0;
  int rejected = 0;
  for (const ScheduleInfo& info : schedule_list()) {
    for (int P = 1; P <= 16; ++P) {
      for (int M = 1; M <= 64; ++M) {
        std::vector<ScheduleParams> variants;
        if (info.uses_chunks) {
          variants = {params(P, M, 1), params(P, M, 2)};
        } else if (info.uses_inflight) {
          for (int n : std::set<int>{0, 1, 2, P - 1, P + 3}) {
            ScheduleParams p = params(P, M);
            p.inflight = std::max(n, 0);
            p.sync_warmup = info.name == "hybrid" ? (n + M) % (M + 1) : 1;
            variants.push_back(p);
          }
        } else if (info.name == "pipedream") {
          variants = {params(P, M)};
          variants.push_back(params(P, M));
          variants.back().batches = 3;
        } else {
          variants = {params(P, M)};
        }
        for (const ScheduleParams& p : variants) {
          const bool expect_ok =
              !(info.uses_chunks && M % P != 0) && !(info.name == "dualpipe-v" && M < 2 * P);
          try {
            const Schedule s = generate_schedule(info.name, p);
            ++generated;
            ASSERT_TRUE(expect_ok) << info.name << " P=" << P << " M=" << M;
            ASSERT_FALSE(schedule_problem(info.name, p).has_value()) << info.name;
            ASSERT_TRUE(validate_schedule(s).ok) << info.name << " P=" << P << " M=" << M;
            ASSERT_EQ(s.name, info.name);
            ASSERT_EQ(s.stages, P);
            ASSERT_EQ(s.microbatches, M);
            // Every stage: one F and one backward (B, or I+W) per micro-batch and chunk.
            const int V = std::max(p.chunks, info.fixed_chunks);
            ASSERT_EQ(s.chunks, V) << info.name;
            int64_t count[5] = {};
            for (const auto& list : s.actions) {
              for (const Action& a : list) ++count[static_cast<int>(a.kind)];
            }
            const int64_t pairs = int64_t{P} * V * M * p.batches;
            ASSERT_EQ(count[static_cast<int>(ActionKind::kForward)], pairs) << info.name;
            ASSERT_EQ(count[static_cast<int>(ActionKind::kBackward)] +
                          count[static_cast<int>(ActionKind::kBackwardInput)],
                      pairs)
                << info.name;
            ASSERT_EQ(count[static_cast<int>(ActionKind::kBackwardInput)],
                      count[static_cast<int>(ActionKind::kBackwardWeight)])
                << info.name;
            if (!info.splits_backward) {
              ASSERT_EQ(count[static_cast<int>(ActionKind::kBackwardWeight)], 0) << info.name;
            }
          } catch (const UsageError& e) {
            ++rejected;
            ASSERT_FALSE(expect_ok) << info.name << " P=" << P << " M=" << M << ": " << e.what();
            // What a search asks instead of catching: the same reason.
            ASSERT_EQ(schedule_problem(info.name, p).value_or(""), e.what()) << info.name;
          }
        }
      }
    }
  }
  EXPECT_GT(generated, 10000);
  EXPECT_GT(rejected, 0);
}

TEST(PeakInflight, StandardFigures) {
  for (int P = 1; P <= 16; ++P) {
    for (int M = 1; M <= 40; ++M) {
      const auto one = peak_inflight(generate_schedule("1f1b", params(P, M)));
      const auto gp = peak_inflight(generate_schedule("gpipe", params(P, M)));
      const auto sync = peak_inflight(generate_schedule("sync-1f1b", params(P, M)));
      const auto zb1 = peak_inflight_until_input_grad(generate_schedule("zb-h1", params(P, M)));
      const auto zb2 = peak_inflight(generate_schedule("zb-h2", params(P, M)));
      for (int s = 0; s < P; ++s) {
        const auto u = static_cast<size_t>(s);
        ASSERT_EQ(one[u], std::min(P - s, M)) << "1f1b P=" << P << " M=" << M << " s=" << s;
        ASSERT_EQ(gp[u], M);
        ASSERT_EQ(sync[u], 1);
        ASSERT_EQ(zb1[u], std::min(P - s, M)) << "zb-h1 P=" << P << " M=" << M << " s=" << s;
        ASSERT_LE(zb2[u], 2 * P - 1);
      }
      ASSERT_EQ(zb2[0], std::min(2 * P - 1, M)) << "zb-h2 P=" << P << " M=" << M;
      for (int n = 1; n <= P + 3; ++n) {
        ScheduleParams p = params(P, M);
        p.inflight = n;
        const auto async = peak_inflight(generate_schedule("async-1f1b", p));
        ASSERT_EQ(async[0], std::min(n, M)) << "async P=" << P << " M=" << M << " N=" << n;
        for (int s = 0; s < P; ++s) ASSERT_LE(async[static_cast<size_t>(s)], std::min(n, M));
      }
    }
  }
}

TEST(PeakInflight, ZbH1HoldsWeightGradientsLonger) {
  // zb-h1 postpones W, so counted until W stage s holds up to P (1F1B: P-s);
  // counted until I it keeps 1F1B's figure (checked above).
  const auto until_w = peak_inflight(generate_schedule("zb-h1", params(4, 8)));
  EXPECT_EQ(until_w, (std::vector<int>{4, 4, 4, 4}));
}

TEST(Async1f1b, InflightPEquals1f1bAndAdaptiveEqualsAsync) {
  for (int P = 1; P <= 9; ++P) {
    for (int M = 1; M <= 20; ++M) {
      ScheduleParams p = params(P, M);
      const Schedule ref = generate_schedule("1f1b", p);
      EXPECT_EQ(generate_schedule("async-1f1b", p).actions, ref.actions);  // N = 0 means P
      p.inflight = P;
      EXPECT_EQ(generate_schedule("async-1f1b", p).actions, ref.actions);
      for (int n = 1; n <= P + 2; ++n) {
        p.inflight = n;
        EXPECT_EQ(generate_schedule("adaptive", p).actions,
                  generate_schedule("async-1f1b", p).actions);
      }
    }
  }
}

TEST(Async1f1b, WarmupFormulaOfDocument000) {
  // min(M-1, max(min(N, P-s), N-s) - 1)
  EXPECT_EQ(async_warmup_forwards(4, 8, 4, 0), 3);
  EXPECT_EQ(async_warmup_forwards(4, 8, 4, 3), 0);
  EXPECT_EQ(async_warmup_forwards(4, 8, 2, 0), 1);
  EXPECT_EQ(async_warmup_forwards(4, 8, 2, 3), 0);
  EXPECT_EQ(async_warmup_forwards(4, 8, 6, 0), 5);
  EXPECT_EQ(async_warmup_forwards(4, 8, 6, 3), 2);
  EXPECT_EQ(async_warmup_forwards(4, 3, 6, 0), 2);  // capped at M-1
  ScheduleParams p = params(4, 6);
  p.inflight = 2;
  const Schedule s = generate_schedule("async-1f1b", p);
  EXPECT_EQ(list_text(s.actions[0]), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(list_text(s.actions[3]), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
}

TEST(Sync1f1b, BarrierAfterEveryWaveAndBubbleOfDocument) {
  const Schedule s = generate_schedule("sync-1f1b", params(3, 2));
  for (const auto& list : s.actions) EXPECT_EQ(list_text(list), "F0 | B0 | F1 | B1 |");
  // Unit costs (F=1, B=2): each micro-batch takes P*(F+B); bubble ratio (P-1)/P.
  for (int P = 1; P <= 8; ++P) {
    for (int M = 1; M <= 8; ++M) {
      const auto t = evaluate(generate_schedule("sync-1f1b", params(P, M)));
      ASSERT_EQ(t.makespan, 3L * P * M);
      for (long busy : t.busy) ASSERT_EQ(busy * P, t.makespan);  // busy / step = 1/P
    }
  }
}

TEST(Hybrid, SyncWarmupThenAsync) {
  ScheduleParams p = params(3, 5);
  p.sync_warmup = 2;
  p.inflight = 2;
  const Schedule s = generate_schedule("hybrid", p);
  EXPECT_EQ(list_text(s.actions[0]), "F0 | B0 | F1 | B1 | F2 F3 B2 F4 B3 B4");
  EXPECT_EQ(list_text(s.actions[2]), "F0 | B0 | F1 | B1 | F2 B2 F3 B3 F4 B4");
  p.sync_warmup = 5;
  EXPECT_EQ(generate_schedule("hybrid", p).actions, generate_schedule("sync-1f1b", p).actions);
  p.sync_warmup = 0;
  EXPECT_EQ(generate_schedule("hybrid", p).actions, generate_schedule("async-1f1b", p).actions);
}

TEST(Gpipe, AllForwardsThenAllBackwardsInOrder) {
  const Schedule s = generate_schedule("gpipe", params(2, 3));
  for (const auto& list : s.actions) EXPECT_EQ(list_text(list), "F0 F1 F2 B0 B1 B2");
}

TEST(Pipedream, BatchesBackToBackFollowDocument003) {
  // P = M = 4, two batches: stage 0 is exactly document 003's loop
  //   forward(0..M-1); for i: backward(i), forward(M+i); for i: backward(M+i).
  ScheduleParams p = params(4, 4);
  p.batches = 2;
  const Schedule s = generate_schedule("pipedream", p);
  EXPECT_EQ(s.batches, 2);
  EXPECT_EQ(list_text(s.actions[0]), "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(list_text(s.actions[3]), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
  EXPECT_EQ(peak_inflight(s), (std::vector<int>{4, 3, 2, 1}));
  // One batch is PipeDream-Flush's order.
  p.batches = 1;
  EXPECT_EQ(generate_schedule("pipedream", p).actions, generate_schedule("1f1b", p).actions);
  // No flush: two batches take less than twice one batch (P=4, M=4, unit costs).
  p.batches = 2;
  const long two = evaluate(generate_schedule("pipedream", p)).makespan;
  p.batches = 1;
  const long one = evaluate(generate_schedule("pipedream", p)).makespan;
  EXPECT_EQ(one, 21);
  EXPECT_EQ(two, 33);
}

// Bubble of GPipe and 1F1B with equal stages, unit costs: step = (M+P-1)(F+B).
TEST(Makespan, GpipeAnd1f1bMatchTheBubbleFormula) {
  for (int P = 1; P <= 16; ++P) {
    for (int M = 1; M <= 64; M += (M < 16 ? 1 : 7)) {
      for (const char* name : {"gpipe", "1f1b"}) {
        const auto t = evaluate(generate_schedule(name, params(P, M)));
        ASSERT_EQ(t.makespan, 3L * (M + P - 1)) << name << " P=" << P << " M=" << M;
      }
    }
  }
}

TEST(Makespan, ZeroBubbleFiguresOfThePaper) {
  // TF = TB = TW = 1, P = 4, M = 8, no communication.
  const testing::UnitCosts unit{1, 2, 1, 1};
  EXPECT_EQ(evaluate(generate_schedule("1f1b", params(4, 8)), unit).makespan, 33);
  const auto h1 = evaluate(generate_schedule("zb-h1", params(4, 8)), unit);
  EXPECT_EQ(h1.makespan, 27);
  // zb-h1: idle per stage (P-1)(TF+TB-TW) = 3 over the step.
  for (long busy : h1.busy) EXPECT_EQ(h1.makespan - busy, 3);
  const auto h2 = evaluate(generate_schedule("zb-h2", params(4, 8)), unit);
  // zb-h2: (P-1)(TF+TB-2TW) = 0 idle between a stage's first and last action;
  // each stage is busy 24 units without a gap. The step still spans P-1 more
  // (the last stage cannot start before the forward reaches it): 27.
  for (int s = 0; s < 4; ++s) {
    const auto u = static_cast<size_t>(s);
    EXPECT_EQ(h2.last_end[u] - h2.first_start[u], 24) << "stage " << s;
    EXPECT_EQ(h2.busy[u], 24);
  }
  EXPECT_EQ(h2.makespan, 27);
}

TEST(Makespan, ZeroBubbleIdleFormulasHoldForOtherSizes) {
  const testing::UnitCosts unit{1, 2, 1, 1};
  for (int P = 2; P <= 8; ++P) {
    for (int M = 2 * P; M <= 4 * P; M += P) {
      const auto h1 = evaluate(generate_schedule("zb-h1", params(P, M)), unit);
      EXPECT_EQ(h1.makespan, 3L * M + (P - 1)) << "P=" << P << " M=" << M;
      for (long busy : h1.busy) EXPECT_EQ(h1.makespan - busy, P - 1);
      const auto h2 = evaluate(generate_schedule("zb-h2", params(P, M)), unit);
      for (int s = 0; s < P; ++s) {
        const auto u = static_cast<size_t>(s);
        EXPECT_EQ(h2.last_end[u] - h2.first_start[u], 3L * M)
            << "P=" << P << " M=" << M << " s=" << s;
      }
    }
  }
}

TEST(Makespan, ZeroBubbleIdleFormulasWithUnequalCosts) {
  // zb-h1: every stage idles (P-1)(TF+TB-TW) over the step; zb-h2: stage 0
  // idles (P-1)(TF+TB-2TW) between its first and last action.
  struct Costs {
    long tf, tb, tw;
  };
  for (const Costs c :
       {Costs{1, 1, 1}, Costs{2, 2, 1}, Costs{3, 2, 1}, Costs{2, 3, 2}, Costs{1, 2, 1}}) {
    const testing::UnitCosts unit{c.tf, c.tb + c.tw, c.tb, c.tw};
    for (int P : {2, 4, 6}) {
      const int M = 2 * P;
      const long busy = M * (c.tf + c.tb + c.tw);
      const auto h1 = evaluate(generate_schedule("zb-h1", params(P, M)), unit);
      for (long b : h1.busy) EXPECT_EQ(b, busy);
      for (long b : h1.busy)
        EXPECT_EQ(h1.makespan - b, (P - 1) * (c.tf + c.tb - c.tw)) << "P=" << P << " TF=" << c.tf;
      const auto h2 = evaluate(generate_schedule("zb-h2", params(P, M)), unit);
      EXPECT_EQ(h2.last_end[0] - h2.first_start[0] - busy, (P - 1) * (c.tf + c.tb - 2 * c.tw))
          << "P=" << P << " TF=" << c.tf << " TB=" << c.tb << " TW=" << c.tw;
    }
  }
}

TEST(Makespan, InterleavedOverheadIsPMinus1OverVM) {
  // Chunk costs F=1, B=2 (a V-th of the stage's work each): busy 3VM, and
  // Megatron's interleaving gives idle 3(P-1), so idle/busy = (P-1)/(VM).
  for (int P = 1; P <= 8; ++P) {
    for (int V = 1; V <= 4; ++V) {
      for (int M = P; M <= 4 * P; M += P) {
        const auto t = evaluate(generate_schedule("interleaved-1f1b", params(P, M, V)));
        ASSERT_EQ(t.makespan, 3L * V * M + 3L * (P - 1)) << "P=" << P << " V=" << V << " M=" << M;
      }
    }
  }
}

}  // namespace
}  // namespace ppb
