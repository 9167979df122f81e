// The simulator on hand-written schedules: times worked out by hand,
// communication overlap, link FIFO order, barriers, deadlock errors, the
// text timeline and the trace file. (Formula tests over the generators are
// in sim_formula_test.cpp.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "ppb/pipeline/costs.hpp"
#include "ppb/pipeline/data_parallel.hpp"
#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/pipeline/partition.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/simulator.hpp"
#include "ppb/pipeline/timeline_text.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

Schedule make(std::string name, int P, int M, std::vector<std::vector<Action>> lists, int V = 1) {
  Schedule s;
  s.name = std::move(name);
  s.stages = P;
  s.microbatches = M;
  s.chunks = V;
  s.actions = std::move(lists);
  return s;
}

// GPipe written out by hand: all forwards, then all backwards.
Schedule hand_gpipe(int P, int M) {
  std::vector<std::vector<Action>> lists(static_cast<size_t>(P));
  for (auto& l : lists) {
    for (int m = 0; m < M; ++m) l.push_back(F(m));
    for (int m = 0; m < M; ++m) l.push_back(B(m));
  }
  return make("gpipe", P, M, std::move(lists));
}

// PipeDream-Flush 1F1B written out by hand: P-s-1 warm-up forwards, then
// alternate F and B, then the remaining backwards.
Schedule hand_1f1b(int P, int M) {
  std::vector<std::vector<Action>> lists(static_cast<size_t>(P));
  for (int s = 0; s < P; ++s) {
    auto& l = lists[static_cast<size_t>(s)];
    const int warm = std::min(P - s - 1, M);
    int f = 0;
    int b = 0;
    for (; f < warm; ++f) l.push_back(F(f));
    while (f < M) {
      l.push_back(F(f++));
      l.push_back(B(b++));
    }
    while (b < M) l.push_back(B(b++));
  }
  return make("1f1b", P, M, std::move(lists));
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("ppb_sim_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(Simulator, OneF1BTwoStagesByHand) {
  // TF=1, TB=2: stage 1 runs F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7] F2 [7,8] B2 [8,10];
  // stage 0 runs F0 [0,1] F1 [1,2] B0 [4,6] F2 [6,7] B1 [7,9] B2 [10,12].
  const Schedule s = hand_1f1b(2, 3);
  const SimResult r = simulate(s, uniform_costs(2, 1, 1.0, 2.0, 0.0, 0.0));
  EXPECT_DOUBLE_EQ(r.step_time, 12.0);
  const std::vector<std::pair<double, double>> s0 = {{0, 1}, {1, 2}, {4, 6},
                                                     {6, 7}, {7, 9}, {10, 12}};
  const std::vector<std::pair<double, double>> s1 = {{1, 2}, {2, 4}, {4, 5},
                                                     {5, 7}, {7, 8}, {8, 10}};
  ASSERT_EQ(r.stages[0].events.size(), 6u);
  ASSERT_EQ(r.stages[1].events.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(r.stages[0].events[i].action, s.actions[0][i]);
    EXPECT_DOUBLE_EQ(r.stages[0].events[i].start, s0[i].first) << i;
    EXPECT_DOUBLE_EQ(r.stages[0].events[i].end, s0[i].second) << i;
    EXPECT_DOUBLE_EQ(r.stages[1].events[i].start, s1[i].first) << i;
    EXPECT_DOUBLE_EQ(r.stages[1].events[i].end, s1[i].second) << i;
  }
  EXPECT_DOUBLE_EQ(r.stages[0].busy, 9.0);
  EXPECT_DOUBLE_EQ(r.stages[0].idle, 3.0);
  EXPECT_DOUBLE_EQ(r.bubble_ratio, 0.25);          // (P-1)/(M+P-1)
  EXPECT_DOUBLE_EQ(r.bubble_overhead, 1.0 / 3.0);  // (P-1)/M
  EXPECT_EQ(r.stages[0].peak_inflight, 2);
  EXPECT_EQ(r.stages[1].peak_inflight, 1);
  ASSERT_EQ(r.batch_end.size(), 1u);
  EXPECT_DOUBLE_EQ(r.batch_end[0], 12.0);
  // 3 activations 0->1 and 3 gradients 1->0, zero-time (TC = 0).
  EXPECT_EQ(r.transfers.size(), 6u);
}

TEST(Simulator, HandSchedulesMatchTheFormulas) {
  for (int P = 1; P <= 6; ++P) {
    for (int M = 1; M <= 9; ++M) {
      for (const Schedule& s : {hand_gpipe(P, M), hand_1f1b(P, M)}) {
        const SimResult r = simulate(s, uniform_costs(P, 1, 1.0, 2.0, 0.0, 0.0));
        EXPECT_DOUBLE_EQ(r.step_time, 3.0 * (M + P - 1)) << s.name << " P=" << P << " M=" << M;
        EXPECT_NEAR(r.bubble_ratio, (P - 1.0) / (M + P - 1.0), 1e-12);
        EXPECT_NEAR(r.bubble_overhead, (P - 1.0) / M, 1e-12);
      }
    }
  }
}

// A fixed cost per action (a launch cost) lengthens every F and every full
// B once: F 1 + 0.5, B 2 + 0.5, so the formulas above at TF + TB = 4.
TEST(Simulator, ACostPerActionIsAddedToEveryAction) {
  for (int P = 1; P <= 4; ++P) {
    for (int M = 1; M <= 5; ++M) {
      for (const Schedule& s : {hand_gpipe(P, M), hand_1f1b(P, M)}) {
        StageCosts costs = uniform_costs(P, 1, 1.0, 2.0, 0.0, 0.0);
        costs.action_seconds = 0.5;
        const SimResult r = simulate(s, costs);
        EXPECT_DOUBLE_EQ(r.step_time, 4.0 * (M + P - 1)) << s.name << " P=" << P << " M=" << M;
        EXPECT_DOUBLE_EQ(r.stages[0].busy, 4.0 * M);
      }
    }
  }
  StageCosts bad = uniform_costs(2, 1, 1.0, 2.0, 0.0, 0.0);
  bad.action_seconds = -1;
  EXPECT_THROW((void)simulate(hand_gpipe(2, 2), bad), UsageError);
}

TEST(Simulator, CommunicationOverlapsComputeTwoStageGPipe) {
  // TF=1, TB=2, TC=0.5, P=2, M=2. Stage 0: F0 [0,1], F1 [1,2] (its sends
  // [1,1.5], [2,2.5] do not delay F1: no blocking send). Stage 1: F0
  // [1.5,2.5], F1 [2.5,3.5], B0 [3.5,5.5], B1 [5.5,7.5]. Gradients arrive at
  // 6 and 8, so stage 0 runs B0 [6,8], B1 [8,10]. Makespan
  // (M+P-1)(TF+TB) + 2(P-1)TC = 10.
  const Schedule s = hand_gpipe(2, 2);
  const SimResult r = simulate(s, uniform_costs(2, 1, 1.0, 2.0, 0.0, 0.5));
  EXPECT_DOUBLE_EQ(r.step_time, 10.0);
  EXPECT_DOUBLE_EQ(r.stages[0].events[1].start, 1.0);  // F1 not held by F0's send
  EXPECT_DOUBLE_EQ(r.stages[1].events[0].start, 1.5);
  EXPECT_DOUBLE_EQ(r.stages[1].events[3].end, 7.5);
  EXPECT_DOUBLE_EQ(r.stages[0].events[2].start, 6.0);
  EXPECT_DOUBLE_EQ(r.stages[0].events[3].start, 8.0);
  EXPECT_DOUBLE_EQ(r.stages[0].busy, 6.0);
  EXPECT_DOUBLE_EQ(r.stages[0].idle, 4.0);
  EXPECT_DOUBLE_EQ(r.bubble_overhead, 8.0 / 12.0);
}

TEST(Simulator, LinkIsFifoAndFullDuplex) {
  // TF=1, TC=3: forwards finish at 1, 2, 3 but share link 0->1 one after
  // another: [1,4], [4,7], [7,10]. Gradients use link 1->0, which is free.
  const Schedule s = hand_gpipe(2, 3);
  const SimResult r = simulate(s, uniform_costs(2, 1, 1.0, 1.0, 0.0, 3.0));
  std::vector<SimTransfer> act;
  std::vector<SimTransfer> grad;
  for (const SimTransfer& t : r.transfers) (t.gradient ? grad : act).push_back(t);
  ASSERT_EQ(act.size(), 3u);
  ASSERT_EQ(grad.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const auto u = static_cast<size_t>(i);
    EXPECT_EQ(act[u].from_stage, 0);
    EXPECT_EQ(act[u].to_stage, 1);
    EXPECT_EQ(act[u].microbatch, i);
    EXPECT_DOUBLE_EQ(act[u].start, 1.0 + 3.0 * i);
    EXPECT_DOUBLE_EQ(act[u].end, 4.0 + 3.0 * i);
    EXPECT_DOUBLE_EQ(r.stages[1].events[u].start, 4.0 + 3.0 * i);
  }
  // Stage 1: F2 [10,11], B0 [11,12], B1 [12,13], B2 [13,14]; gradients
  // queue on 1->0: [12,15], [15,18], [18,21]; stage 0 backwards start there.
  EXPECT_DOUBLE_EQ(grad[0].start, 12.0);
  EXPECT_DOUBLE_EQ(grad[1].start, 15.0);
  EXPECT_DOUBLE_EQ(grad[2].start, 18.0);
  EXPECT_DOUBLE_EQ(r.stages[0].events[3].start, 15.0);
  EXPECT_DOUBLE_EQ(r.stages[0].events[5].start, 21.0);
  EXPECT_DOUBLE_EQ(r.step_time, 22.0);
}

TEST(Simulator, TwoStagesWithChunksShareOneLinkPerDirection) {
  // P=2, V=2, TF=TB=1 per chunk, TC=3. Stage 0 sends both activations
  // (v0 -> v1) and gradients (v2 -> v1) to stage 1: one link, FIFO. Its
  // gradient of B(0,1) leaves at 18 ([18,21]); the activation of F(1,0),
  // done at 19, waits behind it: [21,24]. Worked out step by step, the
  // schedule ends at 46.
  const Schedule s =
      make("shared", 2, 2,
           {{F(0, 0), F(0, 1), B(0, 1), F(1, 0), B(0, 0), F(1, 1), B(1, 1), B(1, 0)},
            {F(0, 0), F(0, 1), B(0, 1), B(0, 0), F(1, 0), F(1, 1), B(1, 1), B(1, 0)}},
           2);
  const SimResult r = simulate(s, uniform_costs(2, 2, 2.0, 2.0, 0.0, 3.0));
  const SimTransfer* act = nullptr;
  const SimTransfer* grad = nullptr;
  for (const SimTransfer& t : r.transfers) {
    if (!t.gradient && t.microbatch == 1 && t.chunk == 0 && t.from_stage == 0) act = &t;
    if (t.gradient && t.microbatch == 0 && t.chunk == 1) grad = &t;
  }
  ASSERT_NE(act, nullptr);
  ASSERT_NE(grad, nullptr);
  EXPECT_EQ(grad->from_stage, 0);
  EXPECT_EQ(grad->to_stage, 1);
  EXPECT_DOUBLE_EQ(grad->start, 18.0);
  EXPECT_DOUBLE_EQ(act->start, 21.0);
  EXPECT_DOUBLE_EQ(act->end, 24.0);
  EXPECT_DOUBLE_EQ(r.step_time, 46.0);
}

TEST(Simulator, BandwidthLatencyAndGradientBytes) {
  // Three stages; F of stage s sends (s+1)*1000 bytes; a gradient sent back
  // from s to s-1 has the size of s-1's output.
  StageCosts c = uniform_costs(3, 1, 1.0, 1.0, 0.0, 0.0);
  c.link.latency = 0.25;
  c.link.bandwidth = 1000.0;
  for (int s = 0; s < 3; ++s) c.chunks[static_cast<size_t>(s)].send_bytes = int64_t{s + 1} * 1000;
  const SimResult r = simulate(hand_gpipe(3, 1), c);
  ASSERT_EQ(r.transfers.size(), 4u);
  std::map<std::pair<int, int>, double> took;
  for (const SimTransfer& t : r.transfers) took[{t.from_stage, t.to_stage}] = t.end - t.start;
  EXPECT_DOUBLE_EQ((took[{0, 1}]), 1.25);
  EXPECT_DOUBLE_EQ((took[{1, 2}]), 2.25);
  EXPECT_DOUBLE_EQ((took[{2, 1}]), 2.25);
  EXPECT_DOUBLE_EQ((took[{1, 0}]), 1.25);
  // 3 F + 3 B + transfers 1.25 + 2.25 + 2.25 + 1.25.
  EXPECT_DOUBLE_EQ(r.step_time, 6.0 + 7.0);
}

TEST(Simulator, TransfersBetweenHostsTakeTheNetworkLink) {
  // Stages 0 and 1 on host 0, stage 2 on host 1: 1 <-> 2 crosses the
  // network (0.5 + bytes / 500), 0 <-> 1 stays on the host's link (0.25 +
  // bytes / 1000). Without hosts every transfer takes the host's link.
  StageCosts c = uniform_costs(3, 1, 1.0, 1.0, 0.0, 0.0);
  c.link.latency = 0.25;
  c.link.bandwidth = 1000.0;
  c.network_link.latency = 0.5;
  c.network_link.bandwidth = 500.0;
  for (int s = 0; s < 3; ++s) c.chunks[static_cast<size_t>(s)].send_bytes = 1000;
  const double one_host = simulate(hand_gpipe(3, 1), c).step_time;
  c.host_of_stage = {0, 0, 1};
  const SimResult r = simulate(hand_gpipe(3, 1), c);
  std::map<std::pair<int, int>, double> took;
  for (const SimTransfer& t : r.transfers) took[{t.from_stage, t.to_stage}] = t.end - t.start;
  EXPECT_DOUBLE_EQ((took[{0, 1}]), 1.25);
  EXPECT_DOUBLE_EQ((took[{1, 2}]), 2.5);
  EXPECT_DOUBLE_EQ((took[{2, 1}]), 2.5);
  EXPECT_DOUBLE_EQ((took[{1, 0}]), 1.25);
  EXPECT_DOUBLE_EQ(one_host, 6.0 + 4 * 1.25);
  EXPECT_DOUBLE_EQ(r.step_time, 6.0 + 1.25 + 2.5 + 2.5 + 1.25);
}

TEST(Simulator, SplitBackwardAndActivationBytes) {
  // One stage, I and W separate: activation held until W.
  StageCosts c = uniform_costs(1, 1, 1.0, 2.0, 3.0, 0.0);
  c.has_bytes = true;
  c.chunks[0].activation_bytes = 100;
  const Schedule s = make("split", 1, 3, {{F(0), F(1), I(0), F(2), W(0), I(1), I(2), W(2), W(1)}});
  const SimResult r = simulate(s, c);
  EXPECT_DOUBLE_EQ(r.step_time, 3 * 1.0 + 3 * 2.0 + 3 * 3.0);
  EXPECT_EQ(r.stages[0].peak_inflight, 3);
  EXPECT_EQ(r.stages[0].peak_activation_bytes, 300);
  EXPECT_DOUBLE_EQ(r.bubble_ratio, 0.0);
  // Without has_bytes the bytes are not reported.
  c.has_bytes = false;
  EXPECT_EQ(simulate(s, c).stages[0].peak_activation_bytes, 0);
}

TEST(Simulator, PeakActivationBytesFollowInflight) {
  for (int P = 1; P <= 5; ++P) {
    for (int M = 1; M <= 7; ++M) {
      StageCosts c = uniform_costs(P, 1, 1.0, 1.0, 0.0, 0.0);
      c.has_bytes = true;
      for (auto& ch : c.chunks) ch.activation_bytes = 4096;
      for (const Schedule& s : {hand_gpipe(P, M), hand_1f1b(P, M)}) {
        const SimResult r = simulate(s, c);
        for (int st = 0; st < P; ++st) {
          const SimStage& x = r.stages[static_cast<size_t>(st)];
          const int expect = s.name == "gpipe" ? M : std::min(P - st, M);
          EXPECT_EQ(x.peak_inflight, expect) << s.name << " P=" << P << " M=" << M << " s=" << st;
          EXPECT_EQ(x.peak_activation_bytes, int64_t{4096} * expect);
        }
      }
    }
  }
}

TEST(Simulator, SyncIsABarrierWithLatency) {
  // P=2, M=1, SYNC after the forward wave and after the backward wave.
  StageCosts c = uniform_costs(2, 1, 1.0, 2.0, 0.0, 0.0);
  c.link.latency = 0.5;
  const Schedule s =
      make("sync", 2, 1, {{F(0), Sync(), B(0), Sync()}, {F(0), Sync(), B(0), Sync()}});
  const SimResult r = simulate(s, c);
  // Stage 1 F0 [1,2] (latency 0.5 on the activation too: arrives at 1.5,
  // so [1.5,2.5]); both leave SYNC 0 at 2.5 + 0.5 = 3. Stage 1 B0 [3,5];
  // gradient arrives at 5.5; stage 0 B0 [5.5,7.5]; SYNC 1 releases at 8.
  EXPECT_DOUBLE_EQ(r.stages[0].events[1].start, 1.0);
  EXPECT_DOUBLE_EQ(r.stages[0].events[1].end, 3.0);
  EXPECT_DOUBLE_EQ(r.stages[1].events[1].end, 3.0);
  EXPECT_DOUBLE_EQ(r.stages[0].events[2].start, 5.5);
  EXPECT_DOUBLE_EQ(r.step_time, 8.0);
  EXPECT_DOUBLE_EQ(r.stages[0].busy, 3.0);
}

TEST(Simulator, InterleavedOnOneStageNeedsNoTransfer) {
  // P=1, V=2: the virtual stages 0 and 1 live on the same stage.
  const Schedule s = make("one", 1, 1, {{F(0, 0), F(0, 1), B(0, 1), B(0, 0)}}, 2);
  const SimResult r = simulate(s, uniform_costs(1, 2, 1.0, 1.0, 0.0, 5.0));
  EXPECT_TRUE(r.transfers.empty());
  EXPECT_DOUBLE_EQ(r.step_time, 2.0);
}

TEST(Simulator, PipedreamBatchEnds) {
  // Two batches of M=2 on one stage: batch_end per batch, makespan overall.
  Schedule s = make("pd", 1, 2, {{F(0), B(0), F(1), B(1), F(2), B(2), F(3), B(3)}});
  s.batches = 2;
  const SimResult r = simulate(s, uniform_costs(1, 1, 1.0, 1.0, 0.0, 0.0));
  ASSERT_EQ(r.batch_end.size(), 2u);
  EXPECT_DOUBLE_EQ(r.batch_end[0], 4.0);
  EXPECT_DOUBLE_EQ(r.batch_end[1], 8.0);
  EXPECT_DOUBLE_EQ(r.step_time, 8.0);
  EXPECT_DOUBLE_EQ(r.time_per_batch(), 4.0);
}

TEST(Simulator, RecordEventsOffGivesTheSameFigures) {
  const Schedule s = hand_1f1b(4, 8);
  const StageCosts c = uniform_costs(4, 1, 1.0, 2.0, 0.5, 0.25);
  const SimResult a = simulate(s, c);
  const SimResult b = simulate(s, c, SimOptions{.record_events = false});
  EXPECT_DOUBLE_EQ(a.step_time, b.step_time);
  EXPECT_DOUBLE_EQ(a.bubble_ratio, b.bubble_ratio);
  EXPECT_TRUE(b.transfers.empty());
  EXPECT_TRUE(b.stages[0].events.empty());
}

TEST(Simulator, DeadlockNamesTheStuckStages) {
  // Stage 0 waits for B0's gradient before sending F1; stage 1 waits for F1
  // before running B0.
  const Schedule s = make("bad", 2, 2, {{F(0), B(0), F(1), B(1)}, {F(1), B(1), F(0), B(0)}});
  try {
    simulate(s, uniform_costs(2, 1, 1, 1, 0, 0));
    FAIL() << "no exception";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("simulate: not progressing at"), std::string::npos) << m;
    EXPECT_NE(m.find("stage 0 step 1 B0"), std::string::npos) << m;
    EXPECT_NE(m.find("stage 1 step 0 F1"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << "one line";
  }
}

TEST(Simulator, UnmatchedSyncAndLocalOrderDeadlock) {
  EXPECT_THROW(simulate(make("s", 2, 1, {{F(0), Sync(), B(0)}, {F(0), B(0)}}),
                        uniform_costs(2, 1, 1, 1, 0, 0)),
               UsageError);
  // B before its own F on the last stage: never runnable.
  try {
    simulate(make("o", 1, 1, {{B(0), F(0)}}), uniform_costs(1, 1, 1, 1, 0, 0));
    FAIL() << "no exception";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("its own F0"), std::string::npos) << e.what();
  }
}

TEST(Simulator, BadInputIsAUsageError) {
  const StageCosts c = uniform_costs(2, 1, 1, 1, 0, 0);
  EXPECT_THROW(simulate(make("x", 2, 1, {{F(0), B(0)}, {F(5), B(5)}}), c), UsageError);
  EXPECT_THROW(simulate(make("x", 2, 1, {{F(0, 1), B(0, 1)}, {F(0), B(0)}}), c), UsageError);
  EXPECT_THROW(simulate(make("x", 2, 1, {{F(0), B(0)}}), c), UsageError);
  EXPECT_THROW(simulate(hand_gpipe(3, 1), c), UsageError);
  StageCosts neg = c;
  neg.chunks[1].fwd = -1;
  EXPECT_THROW(simulate(hand_gpipe(2, 1), neg), UsageError);
}

TEST(UniformCosts, PerStageTimesSplitOverChunksAndBadFlagsAreNamed) {
  const StageCosts c = uniform_costs(3, 4, 1.0, 2.0, 4.0, 0.5);
  ASSERT_EQ(c.chunks.size(), 12u);
  EXPECT_DOUBLE_EQ(c.at(Placement(3, 4), 2, 3).fwd, 0.25);
  EXPECT_DOUBLE_EQ(c.at(Placement(3, 4), 2, 3).bwd_input, 0.5);
  EXPECT_DOUBLE_EQ(c.at(Placement(3, 4), 0, 0).bwd_weight, 1.0);
  EXPECT_DOUBLE_EQ(c.link.transfer_time(1 << 20), 0.5);
  EXPECT_FALSE(c.has_bytes);
  try {
    uniform_costs(2, 1, 1.0, -2.0, 0.0, 0.0);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--bwd: expected a time >= 0", 0), 0u) << e.what();
  }
  EXPECT_THROW(uniform_costs(2, 1, 1.0, 1.0, 0.0, std::nan("")), UsageError);
  EXPECT_THROW(uniform_costs(0, 1, 1.0, 1.0, 0.0, 0.0), UsageError);
}

// The timed backend's default scale is the model's: the mean stage's F + B
// sleeps 12 ms, whatever the partition and the chunks per stage, so a chunk
// that holds half a stage's units sleeps half as long as the stage.
TEST(DefaultTimeScale, TheMeanStageSleeps12msWhateverTheCut) {
  EXPECT_DOUBLE_EQ(default_time_scale(uniform_costs(2, 1, 0.5, 3.0, 0.0, 0.0)), 12e-3 / 3.5);
  EXPECT_DOUBLE_EQ(default_time_scale(uniform_costs(2, 2, 0.5, 3.0, 0.0, 0.0)), 12e-3 / 3.5);
  EXPECT_DOUBLE_EQ(default_time_scale(uniform_costs(1, 1, 0, 0, 0, 0)), 1.0);
  const std::vector<Unit> units = expand_units(parse_model_spec("gpt-tiny"));
  const std::vector<UnitTime> times = unit_times(units, device_preset("cpu", 4));
  double total = 0;
  for (const UnitTime& t : times) total += t.fwd + t.bwd_input + t.bwd_weight;
  for (const char* partition : {"layer", "operator", "balanced"}) {
    for (const int chunks : {1, 2}) {
      const StageCosts c =
          model_costs(units, times, make_partition(partition, units, times, 2 * chunks), 2, chunks,
                      LinkModel{});
      EXPECT_NEAR(default_time_scale(c), 12e-3 / (total / 2), 1e-12 * 12e-3 / (total / 2))
          << partition << " V=" << chunks;
    }
  }
}

TEST(Timeline, GoldenOneF1BTwoStagesThreeMicrobatches) {
  const Schedule s = hand_1f1b(2, 3);
  const SimResult r = simulate(s, uniform_costs(2, 1, 1.0, 2.0, 0.0, 0.0));
  const std::string expect =
      "1f1b: P=2 M=3 V=1  step time 12  bubble ratio 0.2500  overhead 0.3333\n"
      "s0 |F0F1....B0  F2B1  ..B2  |\n"
      "s1 |..F0B0  F1B1  F2B2  ....|\n"
      "    |         |         |\n"
      "    0         5         10\n";
  EXPECT_EQ(render_timeline(s, r, 24), expect);
}

TEST(Timeline, ChunksAndNarrowBlocks) {
  const Schedule s = make("v2", 1, 1, {{F(0, 0), F(0, 1), B(0, 1), B(0, 0)}}, 2);
  const SimResult r = simulate(s, uniform_costs(1, 2, 1.0, 1.0, 0.0, 0.0));
  const std::string t = render_timeline(s, r, 40);
  EXPECT_NE(t.find("s0 |F0c0      F0c1      B0c1      B0c0      |"), std::string::npos) << t;
  EXPECT_THROW(render_timeline(s, r, 5), UsageError);
  // Too narrow for the chunk: the micro-batch stays ("F0", not "F0c").
  const std::string narrow = render_timeline(s, r, 12);
  EXPECT_NE(narrow.find("s0 |F0 F0 B0 B0 |"), std::string::npos) << narrow;
  // Blocks narrower than their label keep their kind letter.
  const Schedule g = hand_gpipe(2, 8);
  const std::string n = render_timeline(g, simulate(g, uniform_costs(2, 1, 1, 1, 0, 0)), 18);
  EXPECT_NE(n.find("s0 |FFFFFFFF..BBBBBBBB|"), std::string::npos) << n;
}

TEST(SimTrace, ValidJsonWithFlowsAndMicroseconds) {
  const Schedule s = hand_1f1b(3, 4);
  const SimResult r = simulate(s, uniform_costs(3, 1, 1.0, 2.0, 0.0, 0.5));
  const std::string path = temp_path("trace.json");
  write_sim_trace(s, r, path);
  const std::string text = read_file(path);
  boost::json::value doc = boost::json::parse(text);
  const auto& events = doc.at("traceEvents").as_array();
  std::map<uint64_t, int> starts;
  std::map<uint64_t, int> ends;
  std::set<int64_t> pids;
  int x = 0;
  bool found_f = false;
  for (const auto& ev : events) {
    const auto& e = ev.as_object();
    const std::string ph(e.at("ph").as_string());
    pids.insert(e.at("pid").as_int64());
    if (ph == "X") {
      ++x;
      const std::string name(e.at("name").as_string());
      if (name == "F s1 mb2") {
        // Stage 1's F2 in microseconds (1 cost unit = 1 s = 1e6 us).
        found_f = true;
        const SimEvent* fe = nullptr;
        for (const SimEvent& se : r.stages[1].events) {
          if (se.action == F(2)) fe = &se;
        }
        ASSERT_NE(fe, nullptr);
        EXPECT_NEAR(e.at("ts").to_number<double>(), fe->start * 1e6, 1e-3);
        EXPECT_NEAR(e.at("dur").to_number<double>(), 1e6, 1e-3);
        EXPECT_EQ(std::string(e.at("cat").as_string()), "forward");
        EXPECT_EQ(e.at("args").at("mb").as_int64(), 2);
      }
    } else if (ph == "s") {
      ++starts[e.at("id").to_number<uint64_t>()];
    } else if (ph == "f") {
      ++ends[e.at("id").to_number<uint64_t>()];
      EXPECT_EQ(std::string(e.at("bp").as_string()), "e");
    }
  }
  EXPECT_TRUE(found_f);
  // 3 stages x 8 actions + 2 events per transfer (send + recv).
  EXPECT_EQ(x, 24 + 2 * static_cast<int>(r.transfers.size()));
  EXPECT_EQ(pids, (std::set<int64_t>{0, 1, 2}));
  EXPECT_EQ(starts.size(), r.transfers.size());
  EXPECT_EQ(starts, ends);  // every id once as s and once as f
  for (const auto& [id, n] : starts) EXPECT_EQ(n, 1) << id;
  // Per-stage writers carry their rank for Holistic Trace Analysis.
  const auto writers = sim_trace_writers(s, r);
  ASSERT_EQ(writers.size(), 3u);
  EXPECT_NE(writers[2]->to_json().find("\"distributedInfo\": {\"rank\": 2, \"world_size\": 3}"),
            std::string::npos);
  std::remove(path.c_str());
}

TEST(SimTrace, SlicesOnATrackNeverOverlap) {
  // Interleaved P=3, V=2 by hand is long; two-way traffic is enough: in
  // 1F1B every middle stage sends activations forward and gradients back
  // at overlapping times, each on its own link, so on its own track.
  const Schedule s = hand_1f1b(4, 8);
  const SimResult r = simulate(s, uniform_costs(4, 1, 1.0, 1.0, 0.0, 1.7));
  const boost::json::value doc = boost::json::parse(sim_trace_writers(s, r)[1]->to_json());
  std::map<int64_t, std::vector<std::pair<double, double>>> tracks;
  std::map<int64_t, std::string> names;
  for (const auto& ev : doc.at("traceEvents").as_array()) {
    const std::string ph(ev.at("ph").as_string());
    if (ph == "X") {
      const double ts = ev.at("ts").to_number<double>();
      tracks[ev.at("tid").as_int64()].push_back({ts, ts + ev.at("dur").to_number<double>()});
    } else if (ph == "M" && ev.at("name").as_string() == "thread_name") {
      names[ev.at("tid").as_int64()] = std::string(ev.at("args").at("name").as_string());
    }
  }
  EXPECT_EQ(names, (std::map<int64_t, std::string>{{1, "compute"},
                                                   {2, "send to s2"},
                                                   {3, "recv from s2"},
                                                   {4, "send to s0"},
                                                   {5, "recv from s0"}}));
  EXPECT_EQ(tracks.size(), 5u);
  // The two send tracks do overlap in time: one shared track would not nest.
  bool overlap = false;
  for (const auto& a : tracks[2]) {
    for (const auto& b : tracks[4]) overlap = overlap || (a.first < b.second && b.first < a.second);
  }
  EXPECT_TRUE(overlap);
  for (auto& [tid, slices] : tracks) {
    std::sort(slices.begin(), slices.end());
    for (size_t i = 1; i < slices.size(); ++i) {
      EXPECT_GE(slices[i].first, slices[i - 1].second - 1e-6) << names[tid] << " slice " << i;
    }
  }
}

TEST(SimTrace, NamesAndCategoriesFollowTheNvtxConvention) {
  const Schedule s = make("zb", 2, 1,
                          {{F(0, 0), F(0, 1), I(0, 1), W(0, 1), I(0, 0), W(0, 0)},
                           {F(0, 0), F(0, 1), I(0, 1), W(0, 1), I(0, 0), W(0, 0)}},
                          2);
  const SimResult r = simulate(s, uniform_costs(2, 2, 1, 1, 1, 0.5));
  const std::string j = sim_trace_writers(s, r)[1]->to_json();
  EXPECT_NE(j.find("\"name\":\"F s1 mb0 c1\",\"cat\":\"forward\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"name\":\"I s1 mb0 c0\",\"cat\":\"backward\""), std::string::npos);
  EXPECT_NE(j.find("\"name\":\"W s1 mb0 c0\",\"cat\":\"wgrad\""), std::string::npos);
  EXPECT_NE(j.find("\"name\":\"send act s1->s0 mb0\",\"cat\":\"send\""), std::string::npos);
  EXPECT_NE(j.find("\"name\":\"recv act s0->s1 mb0\",\"cat\":\"recv\""), std::string::npos);
  EXPECT_NE(j.find("\"name\":\"send grad s1->s0 mb0\",\"cat\":\"send\""), std::string::npos);
  EXPECT_NE(j.find("\"name\":\"thread_name\",\"args\":{\"name\":\"compute\"}"), std::string::npos);
}

TEST(SimTrace, UnwritablePathIsAUsageErrorAndLeavesNoFile) {
  const Schedule s = hand_gpipe(2, 1);
  const SimResult r = simulate(s, uniform_costs(2, 1, 1, 1, 0, 0));
  EXPECT_THROW(write_sim_trace(s, r, "/nonexistent-dir/x/trace.json"), UsageError);
  const SimResult none =
      simulate(s, uniform_costs(2, 1, 1, 1, 0, 0), SimOptions{.record_events = false});
  EXPECT_THROW(write_sim_trace(s, none, temp_path("none.json")), UsageError);
  EXPECT_FALSE(std::filesystem::exists(temp_path("none.json")));
}

// --- data parallelism -------------------------------------------------------

Schedule generated(const std::string& name, int p, int m, int v = 1, int batches = 1) {
  ScheduleParams params;
  params.stages = p;
  params.microbatches = m;
  params.chunks = v;
  params.batches = batches;
  return generate_schedule(name, params);
}

TEST(DataParallel, RingAllReduceTime) {
  AllReduceModel m{.replicas = 4, .latency = 0.25, .bandwidth = 100, .per_backward = false};
  // 2(D-1) = 6 steps of latency, 2(D-1)/D = 1.5 x bytes / bandwidth.
  EXPECT_DOUBLE_EQ(m.time(400), 6 * 0.25 + 1.5 * 400 / 100.0);
  m.replicas = 1;
  EXPECT_DOUBLE_EQ(m.time(400), 0.0);
  AllReduceModel two{
      .replicas = 2, .latency = 0, .bandwidth = 0, .per_backward = false};  // infinite bandwidth
  EXPECT_DOUBLE_EQ(two.time(1 << 20), 0.0);
}

TEST(DataParallel, AllReducePointsAreEachChunksLastBackwardOfTheBatch) {
  const Schedule s = generated("1f1b", 2, 4);
  const std::vector<char> p = allreduce_points(s, 0, false);
  ASSERT_EQ(p.size(), s.actions[0].size());
  EXPECT_EQ(std::count(p.begin(), p.end(), 1), 1);
  EXPECT_EQ(p.back(), 1);  // 1F1B's stage ends with its last B
  // Interleaved: one all-reduce per chunk, the later chunk's first.
  const Schedule v = generated("interleaved-1f1b", 2, 4, 2);
  const std::vector<char> q = allreduce_points(v, 0, false);
  std::vector<int> chunks;
  for (size_t k = 0; k < q.size(); ++k) {
    if (q[k] != 0) chunks.push_back(v.actions[0][k].chunk);
  }
  EXPECT_EQ(chunks, (std::vector<int>{1, 0}));
  // Pipedream's per-backward updates: after every backward.
  const Schedule pd = generated("pipedream", 2, 4, 1, 2);
  const std::vector<char> r = allreduce_points(pd, 1, true);
  int backwards = 0;
  for (const Action& a : pd.actions[1]) backwards += a.kind == ActionKind::kBackward ? 1 : 0;
  EXPECT_EQ(std::count(r.begin(), r.end(), 1), backwards);
}

TEST(DataParallel, RankGridAndDataMicrobatches) {
  const RankGrid megatron{2, 4, RankOrder::kDpPp};
  EXPECT_EQ(megatron.rank(1, 0), 4);
  EXPECT_EQ(megatron.stage_of(5), 1);
  EXPECT_EQ(megatron.replica_of(5), 1);
  const RankGrid other{2, 4, RankOrder::kPpDp};
  EXPECT_EQ(other.rank(1, 0), 1);
  EXPECT_EQ(other.stage_of(5), 1);
  EXPECT_EQ(other.replica_of(5), 2);
  std::set<int> ranks;
  for (int s = 0; s < 2; ++s) {
    for (int d = 0; d < 4; ++d) {
      for (const RankGrid& g : {megatron, other}) {
        EXPECT_EQ(g.stage_of(g.rank(s, d)), s);
        EXPECT_EQ(g.replica_of(g.rank(s, d)), d);
      }
      ranks.insert(megatron.rank(s, d));
    }
  }
  EXPECT_EQ(ranks.size(), 8U);
  // Replica d takes d*M .. d*M+M-1 of each batch's D x M micro-batches.
  EXPECT_EQ(data_microbatch(3, 4, 1, 4), 7);
  EXPECT_EQ(data_microbatch(5, 4, 2, 4), 4 * 4 + 2 * 4 + 1);  // batch 1, mb 1
  EXPECT_EQ(data_microbatch(3, 4, 0, 1), 3);
  EXPECT_EQ(rank_order_name(parse_rank_order("pp-dp", "--rank-order")), std::string("pp-dp"));
  EXPECT_THROW((void)parse_rank_order("tp-dp", "--rank-order"), UsageError);
}

// 1F1B, P = 2, M = 4, F 1 and B 2: the pipeline ends at (M+P-1)(F+B) = 15,
// stage 1's last B at 13. Each stage then all-reduces 400 bytes across 4
// replicas in 6 x 0.25 + 1.5 x 400 / 100 = 7.5: stage 0 until 22.5.
TEST(DataParallel, SimulatorAddsTheAllReduceAfterEachStagesLastBackward) {
  const Schedule s = generated("1f1b", 2, 4);
  StageCosts costs = uniform_costs(2, 1, 1, 2, 0, 0);
  for (ChunkCost& c : costs.chunks) c.param_bytes = 400;
  const SimResult plain = simulate(s, costs);
  costs.allreduce =
      AllReduceModel{.replicas = 4, .latency = 0.25, .bandwidth = 100, .per_backward = false};
  const SimResult r = simulate(s, costs);
  EXPECT_DOUBLE_EQ(plain.step_time, 15);
  EXPECT_DOUBLE_EQ(r.pipeline_time, 15);
  EXPECT_DOUBLE_EQ(r.step_time, 22.5);
  ASSERT_EQ(r.stages.size(), 2U);
  EXPECT_DOUBLE_EQ(r.stages[0].allreduce, 7.5);
  EXPECT_DOUBLE_EQ(r.stages[1].allreduce_end, 13 + 7.5);
  ASSERT_EQ(r.stages[1].allreduces.size(), 1U);
  EXPECT_DOUBLE_EQ(r.stages[1].allreduces[0].start, 13);
  // Busy 12 per stage: with the all-reduce (22.5 - 12) / 22.5, without 3 / 15.
  EXPECT_DOUBLE_EQ(r.bubble_ratio, (22.5 - 12) / 22.5);
  EXPECT_DOUBLE_EQ(r.bubble_ratio_pipeline, 0.2);
  EXPECT_DOUBLE_EQ(plain.bubble_ratio_pipeline, plain.bubble_ratio);
  // Per-backward updates wait for every all-reduce: each of stage 0's 4
  // backwards is followed by 7.5 of waiting.
  costs.allreduce.per_backward = true;
  const SimResult blocking = simulate(s, costs);
  EXPECT_DOUBLE_EQ(blocking.stages[0].allreduce, 4 * 7.5);
  EXPECT_GE(blocking.step_time, 15 + 4 * 7.5);
}

// A bf16 chunk (2-byte elements) trains in mixed precision: its gradients
// are fp32, so its all-reduce moves twice its 400 parameter bytes, 800, in
// 6 x 0.25 + 1.5 x 800 / 100 = 13.5, as the memory model counts them.
TEST(DataParallel, ABf16ChunksAllReduceMovesItsFp32Gradients) {
  const Schedule s = generated("1f1b", 2, 4);
  StageCosts costs = uniform_costs(2, 1, 1, 2, 0, 0);
  for (ChunkCost& c : costs.chunks) c.param_bytes = 400;
  costs.allreduce = AllReduceModel{
      .replicas = 4, .latency = 0.25, .bandwidth = 100, .per_backward = false, .element_bytes = 2};
  const SimResult r = simulate(s, costs);
  ASSERT_EQ(r.stages[1].allreduces.size(), 1U);
  EXPECT_EQ(r.stages[1].allreduces[0].bytes, 800);
  EXPECT_DOUBLE_EQ(r.stages[0].allreduce, 13.5);
  EXPECT_DOUBLE_EQ(r.step_time, 15 + 13.5);
}

}  // namespace
}  // namespace ppb
