// The run command's pure parts: metrics from measured timelines, the sweep's
// order and file names, option validation, the progress line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "ppb/exec/cuda_device.hpp"
#include "ppb/pipeline/result.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/simulator.hpp"
#include "ppb/profiling/check.hpp"
#include "run/environment.hpp"
#include "run/metrics.hpp"
#include "run/noise.hpp"
#include "run/progress.hpp"
#include "run/rank_record.hpp"
#include "run/rerun.hpp"
#include "run/run_options.hpp"
#include "run/sweep.hpp"

namespace ppb::run {
namespace {

/// A "measured" step made from a simulation: every action as simulated.
StepMeasure step_from_sim(const SimResult& sim) {
  StepMeasure step;
  for (const SimStage& s : sim.stages) {
    StageStep st;
    for (const SimEvent& e : s.events) {
      st.actions.push_back({e.action, e.start, e.end, 0.0});
      st.end = std::max(st.end, e.end);
    }
    step.push_back(st);
  }
  return step;
}

Schedule make(const std::string& name, int p, int m, int v = 1) {
  ScheduleParams params;
  params.stages = p;
  params.microbatches = m;
  params.chunks = v;
  return generate_schedule(name, params);
}

TEST(RunMetrics, GpipeFromSimulatedTimelineHasTheClosedFormBubble) {
  const Schedule s = make("gpipe", 4, 8);
  const SimResult sim = simulate(s, uniform_costs(4, 1, 1.0, 2.0, 0.0, 0.0));
  const std::vector<StepMeasure> steps(3, step_from_sim(sim));
  const StepFigures f = step_figures(steps, /*samples_per_step=*/16);
  EXPECT_DOUBLE_EQ(f.step_time_seconds.median, 33.0);  // (M + P - 1) * (TF + TB)
  EXPECT_DOUBLE_EQ(f.samples_per_second, 16.0 / 33.0);
  EXPECT_NEAR(f.bubble_ratio.measured, 3.0 / 11.0, 1e-12);    // (P-1)/(M+P-1)
  EXPECT_NEAR(f.bubble_overhead.measured, 3.0 / 8.0, 1e-12);  // (P-1)/M
  ASSERT_EQ(f.timeline.size(), 4u);
  EXPECT_EQ(f.timeline[0].size(), 16u);
  EXPECT_DOUBLE_EQ(closed_form_bubble_ratio("gpipe", 4, 8, 0), 3.0 / 11.0);
  EXPECT_TRUE(std::isnan(closed_form_bubble_ratio("zb-h1", 4, 8, 0)));
}

TEST(RunMetrics, TheoryFromMeasuredTimesReproducesTheMeasurement) {
  // Unequal stages: the theory must use the measured per-stage times, not a
  // uniform model.
  const Schedule s = make("1f1b", 3, 6);
  StageCosts costs = uniform_costs(3, 1, 1.0, 2.0, 0.0, 0.0);
  costs.chunks[1].fwd = 1.5;
  costs.chunks[1].bwd_input = 3.5;
  costs.chunks[2].bwd_input = 2.5;
  const SimResult sim = simulate(s, costs);
  const std::vector<StepMeasure> steps(2, step_from_sim(sim));
  const StageCosts measured =
      measured_costs(s, steps, uniform_costs(3, 1, 0, 0, 0, 0), LinkModel{});
  EXPECT_DOUBLE_EQ(measured.chunks[1].fwd, 1.5);
  EXPECT_DOUBLE_EQ(measured.chunks[1].bwd_input, 3.5);
  EXPECT_DOUBLE_EQ(measured.chunks[1].bwd_weight, 0.0);
  const TheoryOutcome t = theory_figures(s, measured);
  EXPECT_DOUBLE_EQ(t.figures.step_time_seconds, sim.step_time);
  const StepFigures f = step_figures(steps, 6);
  EXPECT_NEAR(f.bubble_ratio.measured, t.bubble_ratio, 1e-12);
  EXPECT_NEAR(f.bubble_overhead.measured, t.bubble_overhead, 1e-12);
  EXPECT_EQ(t.figures.peak_inflight_per_stage, (std::vector<int>{3, 2, 1}));  // min(P-s, M)
}

TEST(RunMetrics, SplitBackwardTimesGoToInputAndWeight) {
  const Schedule s = make("zb-h1", 2, 4);
  const SimResult sim = simulate(s, uniform_costs(2, 1, 1.0, 1.0, 0.5, 0.0));
  const std::vector<StepMeasure> steps(1, step_from_sim(sim));
  LinkModel link;
  link.comm_time = 0.25;
  const StageCosts measured = measured_costs(s, steps, uniform_costs(2, 1, 0, 0, 0, 0), link);
  EXPECT_DOUBLE_EQ(measured.chunks[0].bwd_input, 1.0);
  EXPECT_DOUBLE_EQ(measured.chunks[0].bwd_weight, 0.5);
  EXPECT_DOUBLE_EQ(measured.link.comm_time, 0.25);
  const auto means = mean_action_seconds(2, steps);
  EXPECT_DOUBLE_EQ(means[1].fwd, 1.0);
  EXPECT_DOUBLE_EQ(means[1].bwd_weight, 0.5);
}

TEST(RunMetrics, StepTimeIsTheLatestStageAndMedianPicksTheMiddleStep) {
  std::vector<StepMeasure> steps;
  for (double t : {3.0, 1.0, 2.0}) {
    StepMeasure step(2);
    step[0].actions.push_back({F(0), 0.0, t / 2, 0.0});
    step[0].end = t / 2;
    step[1].actions.push_back({F(0), t / 2, t, 0.0});
    step[1].end = t;
    steps.push_back(step);
  }
  const StepFigures f = step_figures(steps, 4);
  EXPECT_DOUBLE_EQ(f.step_time_seconds.median, 2.0);
  EXPECT_DOUBLE_EQ(f.step_time_seconds.min, 1.0);
  EXPECT_DOUBLE_EQ(f.step_time_seconds.max, 3.0);
  EXPECT_EQ(f.median_step, 2u);
  EXPECT_DOUBLE_EQ(f.samples_per_second, 2.0);
  EXPECT_DOUBLE_EQ(f.bubble_ratio.per_stage[0], 0.5);
  EXPECT_DOUBLE_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
}

// environment.mpi: one line, no tab (MPICH writes "Version:\t4.1.2"), no
// package details.
TEST(RunEnvironment, TheMpiLibraryIsNamedOnOneLineWithoutTabs) {
  EXPECT_EQ(mpi_library_name("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4\n"),
            "Open MPI v4.1.4");
  EXPECT_EQ(mpi_library_name("MPICH Version:\t4.1.2\nMPICH Release date:\tThu Jun  8 2023"),
            "MPICH Version: 4.1.2");
  EXPECT_EQ(mpi_library_name("MVAPICH2 Version      :\t2.3.7\n"), "MVAPICH2 Version : 2.3.7");
  EXPECT_EQ(mpi_library_name(std::string_view("Intel MPI 2021 \0\0", 17)), "Intel MPI 2021");
}

TEST(RunMetrics, TransferTimeComesFromMessagesTheReceiverWaitedFor) {
  StepMeasure step(2);
  step[0].comms.push_back({true, false, false, 0, 0, 1, 1.0, 1.1});
  step[1].comms.push_back({false, false, false, 0, 0, 1, 0.0, 1.3});
  step[1].actions.push_back({F(0), 1.3, 2.0, 1.3});
  step[0].comms.push_back({true, false, false, 1, 0, 1, 2.0, 2.1});
  step[1].comms.push_back({false, false, false, 1, 0, 1, 0.0, 2.9});
  step[1].actions.push_back({F(1), 3.0, 4.0, 0.0});  // did not wait: not counted
  const LinkModel one_size = measured_link({step}, Placement(2, 1));
  EXPECT_NEAR(one_size.comm_time, 0.3, 1e-12);
  EXPECT_EQ(one_size.bandwidth, 0.0);
}

// A message posted while the receiver still computed moves once the
// receiver is free to take it: its transfer time runs from then (the
// arrival less the consumer's wait), not from the post, nor from the
// consumer's start less its wait (the host's hand-over comes between).
TEST(RunMetrics, TransferTimeStartsWhenTheReceiverWentIdle) {
  StepMeasure step(2);
  // mb 0: posted at 1.0, the receiver idle since 0; arrived at 1.1, its
  // consumer started at 1.15.
  step[0].comms.push_back({true, false, false, 0, 0, 1, 1.0, 1.0, 4096});
  step[1].comms.push_back({false, false, false, 0, 0, 1, 0.0, 1.1, 4096});
  step[1].actions.push_back({F(0), 1.15, 5.5, 1.1});
  // mb 1: posted at 2.0 while the receiver computed until 5.5; arrived 0.1
  // after that (5.6), its consumer waited 0.1 and started at 5.65.
  step[0].comms.push_back({true, false, false, 1, 0, 1, 2.0, 2.0, 4096});
  step[1].comms.push_back({false, false, false, 1, 0, 1, 0.0, 5.6, 4096});
  step[1].actions.push_back({F(1), 5.65, 6.0, 0.1});
  const MeasuredLinks links = measured_links({step}, Placement(2, 1), {});
  EXPECT_NEAR(links.host.comm_time, 0.1, 1e-12);  // not the median of 0.1 and 3.6
  ASSERT_EQ(links.figures.size(), 1u);
  EXPECT_EQ(links.figures[0].messages, 2);
}

TEST(RunMetrics, TransferTimesOfTwoSizesFitLatencyAndBandwidth) {
  // 1 KB in 0.1 + 0.001 s, 5 KB in 0.1 + 0.005 s: latency 0.1, 1 MB/s.
  StepMeasure step(2);
  const double sizes[] = {1000, 5000, 1000, 5000};
  for (int mb = 0; mb < 4; ++mb) {
    const double t0 = 10.0 * mb;
    const double took = 0.1 + sizes[mb] / 1e6;
    step[0].comms.push_back(
        {true, false, false, mb, 0, 1, t0, t0, static_cast<int64_t>(sizes[mb])});
    step[1].comms.push_back(
        {false, false, false, mb, 0, 1, 0.0, t0 + took, static_cast<int64_t>(sizes[mb])});
    step[1].actions.push_back({F(mb), t0 + took, t0 + took + 1, 1.0});
  }
  const LinkModel link = measured_link({step}, Placement(2, 1));
  EXPECT_NEAR(link.comm_time, 0.1, 1e-9);
  EXPECT_NEAR(link.bandwidth, 1e6, 1e-3);
}

TEST(RunMetrics, LinksBetweenHostsAreFittedApartAndQueueingIsNotTransferTime) {
  // Stages 0 and 1 on host 0, stage 2 on host 1. 0 -> 1: 1000 bytes in
  // 1 ms. 1 -> 2 (the network): 0.01 s + bytes / 1 MB/s, every message
  // posted at once, so each waits for the one before it on the link.
  StepMeasure step(3);
  const int64_t sizes[] = {1000, 5000, 3000, 5000};
  double link_free = 0;
  for (int mb = 0; mb < 4; ++mb) {
    const double t0 = 10.0 * mb;
    step[0].comms.push_back({true, false, false, mb, 0, 1, t0, t0, 1000});
    step[1].comms.push_back({false, false, false, mb, 0, 1, 0.0, t0 + 0.001, 1000});
    step[1].actions.push_back({F(mb), t0 + 0.001, t0 + 0.002, 0.5});
    const auto b = sizes[mb];
    const double arrived =
        std::max(0.002, link_free) + 0.01 + static_cast<double>(b) / 1e6;  // FIFO
    link_free = arrived;
    step[1].comms.push_back({true, false, false, mb, 1, 2, 0.002, 0.002, b});
    step[2].comms.push_back({false, false, false, mb, 1, 2, 0.0, arrived, b});
    step[2].actions.push_back({F(mb), arrived, arrived + 0.001, 0.5});
  }
  const MeasuredLinks links = measured_links({step}, Placement(3, 1), {0, 0, 1});
  EXPECT_NEAR(links.network.comm_time, 0.01, 1e-9);
  EXPECT_NEAR(links.network.bandwidth, 1e6, 1e-3);
  EXPECT_NEAR(links.host.comm_time, 0.001, 1e-12);
  EXPECT_EQ(links.host.bandwidth, 0.0);  // one size: no bandwidth
  ASSERT_EQ(links.figures.size(), 2u);
  EXPECT_EQ(links.figures[0].path, "host");
  EXPECT_EQ(links.figures[0].messages, 4);
  EXPECT_TRUE(std::isnan(links.figures[0].bandwidth_bytes_per_second));
  EXPECT_EQ(links.figures[1].path, "network");
  EXPECT_EQ(links.figures[1].sizes, (std::vector<int64_t>{1000, 3000, 5000}));
  EXPECT_NEAR(links.figures[1].bandwidth_bytes_per_second, 1e6, 1e-3);
  // On one host every transfer is the host's: the network link stays unset.
  const MeasuredLinks one = measured_links({step}, Placement(3, 1), {});
  ASSERT_EQ(one.figures.size(), 1u);
  EXPECT_EQ(one.figures[0].messages, 8);
}

// Messages of one size give a latency (their median) and no bandwidth,
// whatever their count: 65536 x 6 / 6 leaves a variance of rounding, which
// with times that happen to rise along the messages once read as a slope.
TEST(RunMetrics, OneMessageSizeFitsNoBandwidthWhateverTheCount) {
  for (int n = 2; n <= 12; ++n) {
    StepMeasure step(2);
    for (int mb = 0; mb < n; ++mb) {
      const double t0 = 10.0 * mb;
      const double took = 1e-4 * (1 + mb);  // later messages slower
      step[0].comms.push_back({true, false, false, mb, 0, 1, t0, t0, 65536});
      step[1].comms.push_back({false, false, false, mb, 0, 1, 0.0, t0 + took, 65536});
      step[1].actions.push_back({F(mb), t0 + took, t0 + took + 0.001, 0.5});
    }
    const MeasuredLinks links = measured_links({step}, Placement(2, 1), {});
    ASSERT_EQ(links.figures.size(), 1u);
    EXPECT_TRUE(std::isnan(links.figures[0].bandwidth_bytes_per_second)) << n << " messages";
    EXPECT_EQ(links.host.bandwidth, 0.0) << n << " messages";
    EXPECT_NEAR(links.host.comm_time, 1e-4 * (1 + n) / 2, 1e-12) << n << " messages";
  }
}

TEST(RunSweep, OrderAndDistinctFileNames) {
  SweepParams p;
  p.stages = 4;
  const auto combos = enumerate_sweep({"1f1b", "interleaved-1f1b", "async-1f1b"},
                                      {"layer", "manual:0-9,10-58"}, {4, 8}, p);
  ASSERT_EQ(combos.size(), 12u);
  EXPECT_EQ(combos[1].schedule, "1f1b");
  EXPECT_EQ(combos[1].microbatches, 8);
  EXPECT_EQ(combos[2].partition, "manual:0-9,10-58");
  EXPECT_EQ(combos[4].chunks, 2);
  EXPECT_EQ(combos[0].chunks, 1);
  EXPECT_EQ(combos[8].inflight, 1);
  std::set<std::string> names;
  for (const auto& c : combos) names.insert(result_file_name(c));
  EXPECT_EQ(names.size(), combos.size());
  EXPECT_EQ(result_file_name(combos[2]), "1f1b__manual_0-9_10-58__P4_M4.json");
  EXPECT_EQ(result_file_name(combos[4]), "interleaved-1f1b__layer__P4_M4_V2.json");
  EXPECT_EQ(combination_label(combos[0]), "1f1b x layer M=4");
}

TEST(RunNoise, EveryStepsBubbleBusyAndSpread) {
  // Two stages; stage 0 computes 1 s, stage 1 computes t - 1 s of a t-second step.
  std::vector<StepMeasure> steps;
  for (double t : {4.0, 2.0, 3.0}) {
    StepMeasure step(2);
    step[0].actions.push_back({F(0), 0.0, 1.0, 0.0});
    step[0].end = 1.0;
    step[1].actions.push_back({F(0), 1.0, t, 0.0});
    step[1].end = t;
    steps.push_back(step);
  }
  const std::vector<double> bubbles = bubble_ratio_per_step(steps);
  ASSERT_EQ(bubbles.size(), 3u);
  // Step t: stage 0 idles t - 1, stage 1 idles 1 -> mean t / 2 / t = 0.5.
  for (double b : bubbles) EXPECT_DOUBLE_EQ(b, 0.5);
  const auto busy = busy_seconds_per_stage(steps);
  ASSERT_EQ(busy.size(), 2u);
  EXPECT_EQ(busy[0], (std::vector<double>{1.0, 1.0, 1.0}));
  EXPECT_EQ(busy[1], (std::vector<double>{3.0, 1.0, 2.0}));
  const SpreadFigures s = spread_figures({4.0, 2.0, 3.0}, 12, bubbles);
  EXPECT_EQ(s.step_time_seconds.n, 3);
  EXPECT_DOUBLE_EQ(s.step_time_seconds.median, 3.0);
  EXPECT_DOUBLE_EQ(s.step_time_seconds.mad, 1.0);
  EXPECT_DOUBLE_EQ(s.step_time_seconds.q1, 2.5);
  EXPECT_DOUBLE_EQ(s.step_time_seconds.q3, 3.5);
  EXPECT_DOUBLE_EQ(s.samples_per_second.median, 4.0);  // 12 / 3
  EXPECT_DOUBLE_EQ(s.samples_per_second.min, 3.0);     // 12 / 4
  EXPECT_DOUBLE_EQ(s.samples_per_second.max, 6.0);     // 12 / 2
  EXPECT_DOUBLE_EQ(s.bubble_ratio.mad, 0.0);
}

// --rerun measures a result again as it was measured: a bf16 result in
// bf16 (the dtype is part of the work), and results of two dtypes are two
// jobs; likewise the padding and the attention that ran.
// What validate_run_options(o, world) refuses o with, "no error" when it
// accepts it.
std::string refusal(const RunOptions& o, int world) {
  try {
    (void)validate_run_options(o, world);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(RunOptions, ARerunKeepsTheRecordedDtype) {
  auto recorded = [](const std::string& dtype, const std::string& schedule) {
    Result r;
    r.status = ResultStatus::kOk;
    r.config.schedule = schedule;
    r.config.partition = "layer";
    r.config.stages = 2;
    r.config.microbatches = 4;
    r.config.model = "gpt-tiny";
    r.config.backend = "cuda";
    r.config.transport = "mpi";
    r.config.iters = 5;
    r.config.warmup = 1;
    r.config.dtype = dtype;
    r.environment.ranks = 2;
    return r;
  };
  RunOptions given;
  given.given = {"--rerun"};
  const std::vector<RerunJob> jobs =
      plan_reruns({{"a.json", recorded("bf16", "1f1b")}, {"b.json", recorded("fp32", "gpipe")}},
                  given, 2, nullptr);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].options.dtype, "bf16");
  EXPECT_EQ(jobs[1].options.dtype, "fp32");

  // Two paddings of the vocabulary are two works, so two jobs, each with
  // the padding it recorded (a file written before padding ran unpadded).
  Result padded = recorded("bf16", "1f1b");
  padded.config.vocab_padding = VocabPadding{.divisor = 128, .vocab = 512, .padded = 512};
  const std::vector<RerunJob> by_padding =
      plan_reruns({{"a.json", padded}, {"b.json", recorded("bf16", "gpipe")}}, given, 2, nullptr);
  ASSERT_EQ(by_padding.size(), 2u);
  EXPECT_EQ(by_padding[0].options.vocab_divisor, 128);
  EXPECT_EQ(by_padding[1].options.vocab_divisor, 1);

  // A result that ran naive is measured naive again, with the reason it
  // recorded (a refusal only cuDNN's trial build finds would otherwise read
  // "--attention naive"); two reasons are two jobs.
  Result refused = recorded("bf16", "1f1b");
  refused.config.attention = "naive";
  refused.config.attention_reason = "cuDNN 9.19.0 cannot build its bf16 flash attention";
  Result asked = recorded("bf16", "gpipe");
  asked.config.attention = "naive";
  asked.config.attention_reason = "--attention naive";
  const std::vector<RerunJob> by_attention =
      plan_reruns({{"a.json", refused}, {"b.json", asked}}, given, 2, nullptr);
  ASSERT_EQ(by_attention.size(), 2u);
  EXPECT_EQ(by_attention[0].options.attention, "naive");
  EXPECT_EQ(by_attention[0].options.recorded_attention_reason,
            "cuDNN 9.19.0 cannot build its bf16 flash attention");
  EXPECT_EQ(by_attention[1].options.attention, "naive");
  EXPECT_EQ(by_attention[1].options.recorded_attention_reason, "--attention naive");
  // Two files of one combination (two folders, another date and --check)
  // are two measurements, not one re-run: loaded both, the pair is named.
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "ppb_rerun_pair_XXXXXX").string();
  const fs::path root = ::mkdtemp(tmpl.data());
  Result first = read_result_file(PPB_H200_RESULT);  // a measured 2-rank 1f1b x layer, M=4
  first.environment.date = "2026-12-01T00:00:00Z";
  Result second = first;
  second.environment.date = "2026-12-02T00:00:00Z";
  second.config.check = true;
  fs::create_directories(root / "a");
  fs::create_directories(root / "b");
  write_result_file((root / "a" / "1f1b__layer__P2_M4.json").string(), first);
  write_result_file((root / "b" / "1f1b__layer__P2_M4.json").string(), second);
  const auto pair = load_rerun_results({(root / "a").string(), (root / "b").string()});
  EXPECT_EQ(pair.size(), 2u);
  try {
    (void)plan_reruns(pair, given, 2, nullptr);
    ADD_FAILURE() << "two measurements of one combination were re-run as one";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(" would both be written as 1f1b__layer__P2_M4.json"),
              std::string::npos)
        << e.what();
  }
  // One folder holding a combination and its confirmation re-run (a
  // night's sweep and its rerun/) is read as report reads it: the newest.
  fs::create_directories(root / "night" / "rerun");
  write_result_file((root / "night" / "1f1b__layer__P2_M4.json").string(), first);
  write_result_file((root / "night" / "rerun" / "1f1b__layer__P2_M4.json").string(), second);
  const auto night = load_rerun_results({(root / "night").string()});
  ASSERT_EQ(night.size(), 1u);
  EXPECT_EQ(fs::path(night[0].first).parent_path().filename(), "rerun");
  EXPECT_EQ(plan_reruns(night, given, 2, nullptr).size(), 1u);
  fs::remove_all(root);

  // This node's own obstacle comes first: the cpu backend says its own.
  RunOptions cpu = by_attention[0].options;
  cpu.backend = "cpu";
  cpu.dtype = "fp32";
  cpu.schedules = "1f1b";
  cpu.partitions = "layer";
  EXPECT_EQ(validate_run_options(cpu, 2).attention.reason,
            "the cpu backend has no fused attention (cuda only)");
}

// A schedule parameter no schedule of the sweep takes would be dropped
// (the result would say V = 1 where --chunks 2 was asked for): refused,
// naming who takes it. Given for one schedule of a mixed sweep, or at the
// value the others run anyway, it is fine.
TEST(RunOptions, AScheduleParameterNoScheduleOfTheSweepTakesIsRefused) {
  RunOptions o;
  o.schedules = "gpipe,1f1b";
  o.partitions = "layer";
  auto message = [](const RunOptions& bad) { return refusal(bad, 2); };
  o.chunks = 3;  // not given: the default's value, whatever it is, says nothing
  EXPECT_EQ(message(o), "no error");
  o.given = {"--chunks"};
  EXPECT_EQ(message(o),
            "--chunks 3: no schedule of the sweep (gpipe, 1f1b) takes it (interleaved-1f1b "
            "does); leave it out or add such a schedule");
  o.chunks = 2;  // zb-v and dualpipe-v always have 2
  EXPECT_EQ(message(o),
            "--chunks 2: no schedule of the sweep (gpipe, 1f1b) takes it (interleaved-1f1b, "
            "zb-v, dualpipe-v do); leave it out or add such a schedule");
  o.chunks = 1;
  EXPECT_EQ(message(o), "no error");
  o.chunks = 3;
  o.schedules = "gpipe,interleaved-1f1b";
  EXPECT_EQ(message(o), "no error");
  o.schedules = "gpipe";
  o.given = {"--batches"};
  o.batches = 4;
  EXPECT_EQ(message(o),
            "--batches 4: no schedule of the sweep (gpipe) takes it (pipedream does); leave it "
            "out or add such a schedule");
  o.given = {"--inflight"};
  o.inflight = 3;
  EXPECT_NE(message(o).find("--inflight 3: no schedule of the sweep (gpipe) takes it (async-1f1b"),
            std::string::npos)
      << message(o);
  o.inflight = 0;
  EXPECT_EQ(message(o), "no error");
  o.given = {"--sync-warmup"};
  EXPECT_EQ(message(o),
            "--sync-warmup 1: no schedule of the sweep (gpipe) takes it (hybrid does); leave it "
            "out or add such a schedule");
  o.schedules = "hybrid";
  EXPECT_EQ(message(o), "no error");
}

// A micro-batch count that no schedule of the sweep runs on P stages
// would measure nothing of it: refused before anything runs. One that only
// some schedules refuse leaves those combinations invalid.
TEST(RunOptions, AMicroBatchCountNoScheduleOfTheSweepRunsIsRefused) {
  RunOptions o;
  o.schedules = "interleaved-1f1b,dualpipe-v";
  o.partitions = "layer";
  o.microbatches = "8,6";
  auto message = [](const RunOptions& bad) { return refusal(bad, 4); };
  // M=6 on 4 stages: no multiple of P for interleaving, under 2P for dualpipe-v.
  EXPECT_EQ(message(o),
            "--microbatches 6: no schedule of the sweep runs it on 4 stages (interleaved-1f1b "
            "runs micro-batches in groups of P (Megatron-LM), so M must be a multiple of "
            "--stages 4; got 6)");
  o.schedules = "interleaved-1f1b,dualpipe-v,gpipe";
  EXPECT_EQ(message(o), "no error");
  o.schedules = "dualpipe-v";
  o.microbatches = "8";
  EXPECT_EQ(message(o), "no error");
  o.microbatches = "7";
  EXPECT_EQ(message(o),
            "--microbatches 7: no schedule of the sweep runs it on 4 stages (dualpipe-v needs at "
            "least 2 x stages = 8 micro-batches, got 7)");
}

TEST(RunOptions, CudaGraphsIsOnOrOffAndOnlyForADeviceBackend) {
  RunOptions o;
  o.schedules = "1f1b";
  o.partitions = "layer";
  o.backend = "cuda";
  EXPECT_TRUE(validate_run_options(o, 2).cuda_graphs);  // the default
  o.cuda_graphs = "off";
  o.given = {"--cuda-graphs"};
  EXPECT_FALSE(validate_run_options(o, 2).cuda_graphs);
  auto message = [](const RunOptions& bad) { return refusal(bad, 2); };
  RunOptions typo = o;
  typo.cuda_graphs = "yes";
  EXPECT_EQ(message(typo), "--cuda-graphs: expected on or off, got 'yes'");
  RunOptions cpu = o;
  cpu.backend = "cpu";
  cpu.cuda_graphs = "on";
  EXPECT_EQ(message(cpu),
            "--cuda-graphs: only a device backend (--backend cuda) launches CUDA graphs (got "
            "--backend cpu)");
  cpu.given.clear();  // the default with another backend: nothing to refuse
  EXPECT_EQ(message(cpu), "no error");
}

TEST(RunOptions, PlantAndMinTime) {
  RunOptions o;
  o.schedules = "1f1b";
  o.partitions = "layer";
  o.backend = "timed";
  o.plant = "1:1.10";
  RunPlan plan = validate_run_options(o, 2);
  EXPECT_EQ(plan.plant_stage, 1);
  EXPECT_DOUBLE_EQ(plan.plant_factor, 1.1);
  EXPECT_EQ(plan.plant_label, "stage 1 x1.10");
  o.plant = "0:0.9";  // a planted improvement: timed only
  EXPECT_DOUBLE_EQ(validate_run_options(o, 2).plant_factor, 0.9);
  RunOptions none = o;
  none.plant.clear();
  EXPECT_EQ(validate_run_options(none, 2).plant_stage, -1);
  RunOptions cpu = o;
  cpu.backend = "cpu";
  EXPECT_EQ(refusal(cpu, 2), "--plant: the cpu backend can only add work (factor >= 1), got 0.9");
  RunOptions cuda = o;  // a kernel after each action: it can only add work too
  cuda.backend = "cuda";
  EXPECT_EQ(refusal(cuda, 2), "--plant: the cuda backend can only add work (factor >= 1), got 0.9");
  cuda.plant = "1:1.10";
  EXPECT_DOUBLE_EQ(validate_run_options(cuda, 2).plant_factor, 1.1);
  RunOptions bad = o;
  bad.plant = "2:1.1";
  EXPECT_EQ(refusal(bad, 2), "--plant: stage 2 is not one of the 2 stages (0..1)");
  bad.plant = "1";
  EXPECT_EQ(refusal(bad, 2), "--plant: expected STAGE:FACTOR (e.g. 1:1.1), got '1'");
  bad.plant = "1:fast";
  EXPECT_EQ(refusal(bad, 2), "--plant: expected STAGE:FACTOR (e.g. 1:1.1), got '1:fast'");
  bad.plant = "1:-2";
  EXPECT_EQ(refusal(bad, 2), "--plant: expected a factor in (0, 100], got -2");
  bad.plant = "1:1e30";  // a step of hours, not a regression to catch
  EXPECT_EQ(refusal(bad, 2), "--plant: expected a factor in (0, 100], got 1e30");
  // P x V and M x batches stay far from int's end (typed, or read by --rerun).
  RunOptions many = o;
  many.chunks = 2147483647;
  EXPECT_EQ(refusal(many, 2), "--chunks: expected 1..4096, got 2147483647");
  many = o;
  many.batches = 4097;
  EXPECT_EQ(refusal(many, 2), "--batches: expected 1..4096, got 4097");
  // A time scale of hours per step is refused before the sweep (timed only).
  RunOptions slow = o;
  slow.plant = "";
  slow.time_scale = 1e30;
  EXPECT_EQ(refusal(slow, 2).rfind("--time-scale 1e+30: the mean stage's forward and backward of "
                                   "one micro-batch would sleep ",
                                   0),
            0u)
      << refusal(slow, 2);
  slow.time_scale = 1;  // gpt-tiny's modelled F + B: far below a minute
  EXPECT_EQ(refusal(slow, 2), "no error");
  RunOptions t = o;
  t.min_time = -1;
  EXPECT_EQ(refusal(t, 2).rfind("--min-time: expected 0..86400 seconds, got -1", 0), 0u);
  t.min_time = 86401;
  EXPECT_EQ(refusal(t, 2).rfind("--min-time: expected 0..86400 seconds, got 86401", 0), 0u);
  t = o;
  t.iters = 20;
  t.max_iters = 10;
  EXPECT_EQ(refusal(t, 2), "--max-iters: expected --iters (20)..100000 steps, got 10");
  // The step counts are bounded (typed, or read from a result by --rerun).
  t.max_iters = kMaxSteps + 1;
  EXPECT_EQ(refusal(t, 2), "--max-iters: expected --iters (20)..100000 steps, got 100001");
  t = o;
  t.iters = 2147483647;
  EXPECT_EQ(refusal(t, 2), "--iters: expected 1..100000 steps, got 2147483647");
  t = o;
  t.warmup = kMaxSteps + 1;
  EXPECT_EQ(refusal(t, 2), "--warmup: expected 0..100000 steps, got 100001");
}

TEST(RunOptions, ValidationNamesTheFlag) {
  RunOptions o;
  o.schedules = "1f1b,gpipe";
  o.partitions = "layer";
  o.microbatches = "4,8";
  const RunPlan plan = validate_run_options(o, 4);
  EXPECT_EQ(plan.schedules, (std::vector<std::string>{"1f1b", "gpipe"}));
  EXPECT_EQ(plan.microbatches, (std::vector<int>{4, 8}));
  EXPECT_EQ(plan.inflight, 4);
  RunOptions s4 = o;
  s4.stages = 4;
  EXPECT_NE(refusal(s4, 3).find("--stages 4: the 3 MPI ranks are not a multiple of 4 stages"),
            std::string::npos);
  RunOptions bad_schedule = o;
  bad_schedule.schedules = "1f1b,nope";
  EXPECT_NE(refusal(bad_schedule, 2).find("--schedule: unknown schedule 'nope'"),
            std::string::npos);
  RunOptions bad_m = o;
  bad_m.microbatches = "4,x";
  EXPECT_NE(refusal(bad_m, 2).find("--microbatches"), std::string::npos);
  RunOptions layers = o;
  layers.model = "gpt:layers=2,hidden=32,heads=2,seq=8,vocab=64,mbs=1";
  EXPECT_NE(refusal(layers, 3).find("--partition layer cannot place 3 stages"), std::string::npos);
  // A manual cut places P x V virtual stages: four ranges on 2 ranks are
  // right for interleaved-1f1b with --chunks 2 and wrong for 1f1b alone.
  RunOptions manual = o;
  manual.model = "gpt:layers=2,hidden=32,heads=2,seq=8,vocab=64,mbs=1";
  manual.partitions = "manual:0-4,5-8,9-12,13-16";
  manual.schedules = "interleaved-1f1b";
  EXPECT_EQ(validate_run_options(manual, 2).partitions,
            (std::vector<std::string>{"manual:0-4,5-8,9-12,13-16"}));
  manual.schedules = "1f1b,interleaved-1f1b";  // the sweep records 1f1b's as invalid
  EXPECT_NO_THROW((void)validate_run_options(manual, 2));
  manual.schedules = "1f1b";
  EXPECT_NE(refusal(manual, 2).find("--partition manual:0-4,5-8,9-12,13-16 cannot place 2 "
                                    "stages: --partition manual:0-4,5-8,9-12,13-16: 4 ranges "
                                    "given but 2 parts are needed"),
            std::string::npos)
      << refusal(manual, 2);
  manual.schedules = "interleaved-1f1b";
  manual.chunks = 3;
  EXPECT_NE(refusal(manual, 2).find("cannot place 2 stages x 3 chunks: "), std::string::npos)
      << refusal(manual, 2);
  RunOptions backend = o;
  backend.backend = "gpu";
  EXPECT_NE(refusal(backend, 2).find("--backend: unknown backend 'gpu'"), std::string::npos);
  RunOptions budget = o;
  budget.memory_budget = "12 parsecs";
  EXPECT_NE(refusal(budget, 2).find("--memory-budget"), std::string::npos);
  RunOptions all = o;
  all.partitions = "all";
  EXPECT_EQ(validate_run_options(all, 2).partitions.size(), 3u);
}

TEST(RunProgress, LineReadsLikeTheIssue) {
  ProgressRow row;
  row.index = 6;
  row.total = 36;
  row.label = "1f1b x balanced M=8";
  row.result.config.schedule = "1f1b";
  ResultMetrics m;
  m.samples_per_second = 812.44;
  m.bubble_ratio.measured = 0.271;
  m.bubble_ratio.theoretical = 0.273;
  m.peak_memory_bytes.per_stage = {100 << 20, 143 << 20};
  CheckFigures ck;
  ck.passed = true;
  m.check = ck;
  row.result.metrics = m;
  EXPECT_EQ(progress_line(row),
            "[7/36] 1f1b x balanced M=8  812.4 samples/s  bubble 0.27 (theory 0.27)  peak 143 MiB  "
            "check ok");
  row.result.status = ResultStatus::kInvalid;
  row.result.error = "--chunks: nope";
  EXPECT_EQ(progress_line(row), "[7/36] 1f1b x balanced M=8  invalid: --chunks: nope");
  const std::string table = summary_table({row});
  EXPECT_NE(table.find("invalid"), std::string::npos);
}

// A cuda result says under its progress line which fast paths ran and why
// each fallback fell back; a cpu result has no such line.
TEST(RunProgress, DeviceResultsSayWhichFastPathsRan) {
  ProgressRow row;
  row.total = 2;
  row.label = "1f1b x layer M=4";
  row.result.config.backend = "cuda";
  row.result.config.attention = "naive";
  row.result.config.attention_reason = "fp32: cuDNN has no fused flash attention for fp32";
  ResultMetrics m;
  m.samples_per_second = 100;
  m.peak_memory_bytes.per_stage = {1 << 20};
  m.cuda_graphs = CudaGraphFigures{.captured = 2,
                                   .replayed = 10,
                                   .rebuilt = 0,
                                   .eager = 48,
                                   .eager_reason = "--cuda-graphs off"};
  m.gemm_epilogues = GemmEpilogueFigures{
      .fused = 96,
      .refused = 8,
      .first_refusal =
          "rank 1: bias + GeLU GEMM 2 x 12 x 3 fp32: cublasLtMatmulAlgoGetHeuristic: "
          "CUBLAS_STATUS_NOT_SUPPORTED"};
  row.result.metrics = m;
  const std::string line = progress_line(row);
  ASSERT_NE(line.find('\n'), std::string::npos) << line;
  EXPECT_EQ(
      line.substr(line.find('\n')),
      "\n    fast paths: attention FELL BACK: naive (fp32: cuDNN has no fused flash attention "
      "for fp32); CUDA graphs FELL BACK: 2 captured, 10 replayed, 48 eager (--cuda-graphs "
      "off); GEMM epilogues FELL BACK: 96 fused, 8 refused (rank 1: bias + GeLU GEMM 2 x 12 "
      "x 3 fp32: cublasLtMatmulAlgoGetHeuristic: CUBLAS_STATUS_NOT_SUPPORTED)");
  row.result.config.attention = "fused";
  row.result.config.attention_reason = "";
  row.result.metrics->cuda_graphs =
      CudaGraphFigures{.captured = 2, .replayed = 58, .rebuilt = 0, .eager = 0, .eager_reason = ""};
  row.result.metrics->gemm_epilogues =
      GemmEpilogueFigures{.fused = 104, .refused = 0, .first_refusal = ""};
  EXPECT_EQ(progress_line(row).substr(progress_line(row).find('\n')),
            "\n    fast paths: attention: fused; CUDA graphs: 2 captured, 58 replayed; GEMM "
            "epilogues: 104 fused");
  row.result.config.backend = "cpu";
  EXPECT_EQ(progress_line(row).find('\n'), std::string::npos);
}

// The summary's check column: the reference error, the optimizer
// update's where the result has it, and the steps checked when two were.
TEST(RunProgress, SummaryShowsTheUpdatesError) {
  ProgressRow row;
  row.label = "1f1b x layer M=4";
  row.result.config.schedule = "1f1b";
  ResultMetrics m;
  m.peak_memory_bytes.per_stage = {1 << 20};
  CheckFigures ck;
  ck.max_rel_error = 3.7e-7;
  ck.update_rel_error = 1.0;
  m.check = ck;
  row.result.metrics = m;
  EXPECT_NE(summary_table({row}).find("FAILED (3.7e-07, update 1.0e+00)"), std::string::npos);
  ck.passed = true;
  ck.max_rel_error = 2e-6;
  ck.update_rel_error.reset();  // a file written before it
  row.result.metrics->check = ck;
  EXPECT_NE(summary_table({row}).find("ok (2.0e-06)"), std::string::npos);
  // The first warm-up step checked too.
  ck.update_rel_error = 0.0;
  ck.steps = 2;
  row.result.metrics->check = ck;
  EXPECT_NE(summary_table({row}).find("ok (2.0e-06, update 0.0e+00, 2 steps)"), std::string::npos);
  ck.steps = 1;
  row.result.metrics->check = ck;
  EXPECT_NE(summary_table({row}).find("ok (2.0e-06, update 0.0e+00)"), std::string::npos);
}

TEST(RankRecord, PackAndUnpackKeepEveryField) {
  RankRecord r;
  RankStep st;
  st.origin = 12345.678;
  st.peak_bytes = int64_t{3} << 40;
  st.peak_activation_bytes = 77;
  st.device_peak_bytes = int64_t{5} << 30;
  st.probe_seconds = 0.0042;
  st.step.end = 0.25;
  st.step.actions = {{F(3, 1), 0.01, 0.02, 0.001}, {Sync(), 0.02, 0.03, 0}};
  CommTiming c;
  c.send = true;
  c.gradient = true;
  c.microbatch = 3;
  c.from_virtual = 5;
  c.to_virtual = 4;
  c.start = 0.02;
  c.end = 0.021;
  c.bytes = 1 << 20;
  st.step.comms = {c};
  st.step.has_device = true;
  st.step.device_busy = {
      .compute = 0.5, .communication = 0.25, .overlap = 0.125, .optimizer = 0.0625, .busy = 0.7};
  device::DeviceOp op;
  op.kind = device::OpKind::kMemcpy;
  op.op_class = device::OpClass::kCommunication;
  op.start = 0.011;
  op.end = 0.012;
  op.stream = 13;
  op.device = 1;
  op.correlation = 4242;
  op.action = 0;
  op.name = "Memcpy DtoH (Device -> Pinned)";
  op.bytes = 4096;
  st.step.device = {op, op};
  st.collectors["cputime"].step = {{"cpu_seconds", 0.2}, {"involuntary_switches", 4}};
  st.collectors["cputime"].action = {{"cpu_seconds", {0.009, std::nan("")}}};
  r.steps = {st, st};
  r.steps[1].origin = 1;
  r.memory = {.peak_total = 10,
              .peak_activations = 5,
              .at_peak = {1, 2, 3, 4, 5, 6, 7},
              .peak_rss = 99,
              .device_peak = 1234};

  const RankRecord back = unpack(pack(r));
  ASSERT_EQ(back.steps.size(), 2u);
  const RankStep& b = back.steps[0];
  EXPECT_EQ(b.origin, st.origin);
  EXPECT_EQ(b.peak_bytes, st.peak_bytes);
  EXPECT_EQ(b.peak_activation_bytes, 77);
  EXPECT_EQ(b.device_peak_bytes, int64_t{5} << 30);
  EXPECT_EQ(b.probe_seconds, 0.0042);
  EXPECT_TRUE(std::isnan(RankStep{}.probe_seconds));  // no probe: NaN
  EXPECT_EQ(b.step.end, 0.25);
  ASSERT_EQ(b.step.actions.size(), 2u);
  EXPECT_EQ(b.step.actions[0].action, F(3, 1));
  EXPECT_EQ(b.step.actions[1].action.kind, ActionKind::kSync);
  EXPECT_EQ(b.step.actions[0].wait, 0.001);
  ASSERT_EQ(b.step.comms.size(), 1u);
  const CommTiming& bc = b.step.comms[0];
  EXPECT_TRUE(bc.send && bc.gradient && !bc.local);
  EXPECT_EQ(bc.microbatch, 3);
  EXPECT_EQ(bc.from_virtual, 5);
  EXPECT_EQ(bc.to_virtual, 4);
  EXPECT_EQ(bc.end, 0.021);
  EXPECT_EQ(bc.bytes, 1 << 20);
  EXPECT_EQ(b.collectors.at("cputime").step, st.collectors.at("cputime").step);
  const std::vector<double>& a = b.collectors.at("cputime").action.at("cpu_seconds");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0], 0.009);
  EXPECT_TRUE(std::isnan(a[1]));
  EXPECT_EQ(back.steps[1].origin, 1);
  EXPECT_EQ(back.memory.at_peak, r.memory.at_peak);
  EXPECT_EQ(back.memory.peak_rss, 99);
  EXPECT_EQ(back.memory.device_peak, 1234);
  EXPECT_TRUE(b.step.has_device);
  EXPECT_EQ(b.step.device_busy, st.step.device_busy);
  EXPECT_EQ(b.step.device, st.step.device);
}

// device_per_stage is every stage's device peak, or absent (a host backend,
// or a record without one: a partial list would misalign with the stages).
TEST(RunMetrics, DevicePeaksBecomeDevicePerStageOnlyWhenEveryStageHasOne) {
  StageMemory a;
  a.peak_total = 100;
  a.device_peak = 5000;
  StageMemory b = a;
  b.device_peak = 7000;
  EXPECT_EQ(peak_memory({a, b}).device_per_stage, (std::vector<int64_t>{5000, 7000}));
  EXPECT_EQ(peak_memory({a, b}).per_stage, (std::vector<int64_t>{100, 100}));
  StageMemory host;
  EXPECT_EQ(host.device_peak, -1);
  EXPECT_TRUE(peak_memory({host, host}).device_per_stage.empty());
  EXPECT_TRUE(peak_memory({a, host}).device_per_stage.empty());
}

// --dtype: bf16 only with a backend whose registry entry stores it, and it
// halves the model's element bytes (messages, activations).
TEST(RunOptions, DtypeFollowsTheBackendsRegistryEntry) {
  RunOptions o;
  o.schedules = "1f1b";
  o.partitions = "layer";
  EXPECT_EQ(validate_run_options(o, 2).model.bytes_per_element, 4);
  o.backend = "cuda";
  o.dtype = "bf16";
  const RunPlan plan = validate_run_options(o, 2);
  EXPECT_EQ(plan.model.bytes_per_element, 2);
  EXPECT_EQ(plan.units[1].boundary_bytes, 2 * plan.model.tokens() * plan.model.hidden * 2);
  o.backend = "cpu";
  try {
    (void)validate_run_options(o, 2);
    FAIL() << "bf16 on the cpu backend";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--dtype bf16: --backend cpu computes in fp32 only (bf16: --backend cuda)");
  }
  o.dtype = "fp16";
  EXPECT_THROW((void)validate_run_options(o, 2), UsageError);
}

// --attention: chosen before the units are expanded (they follow it), naive
// with the first reason where fused cannot run, refused where asked for.
TEST(RunOptions, AttentionIsChosenBeforeTheUnitsWithItsReason) {
  const auto kept = [](const std::vector<Unit>& units) {
    std::vector<int64_t> bytes;
    for (const Unit& u : units) bytes.push_back(u.activation_bytes);
    return bytes;
  };
  RunOptions o;
  o.schedules = "1f1b";
  o.partitions = "layer";
  RunPlan plan = validate_run_options(o, 2);  // cpu, auto
  EXPECT_EQ(plan.attention.attention, Attention::kNaive);
  EXPECT_EQ(plan.attention.reason, "the cpu backend has no fused attention (cuda only)");
  o.backend = "cuda";
  o.dtype = "bf16";
  o.attention = "naive";
  plan = validate_run_options(o, 2);
  EXPECT_EQ(plan.attention.reason, cuda::cudnn_unavailable_reason().empty()
                                       ? "--attention naive"
                                       : cuda::cudnn_unavailable_reason());
  EXPECT_EQ(kept(plan.units), kept(expand_units(plan.model, Kernels::kCuda, Attention::kNaive)));
  o.attention = "auto";
  plan = validate_run_options(o, 2);
  if (cuda::cudnn_unavailable_reason().empty()) {
    EXPECT_EQ(plan.attention.attention, Attention::kFused);
  } else {  // CI: no GPU, or the emulator
    EXPECT_EQ(plan.attention.attention, Attention::kNaive);
    EXPECT_EQ(plan.attention.reason, cuda::cudnn_unavailable_reason());
  }
  EXPECT_EQ(kept(plan.units),
            kept(expand_units(plan.model, Kernels::kCuda, plan.attention.attention)));
  // fp32 runs the flash kernels where the device does (not here: no GPU,
  // or the emulator's fused is there), and takes no head dimension over 128.
  o.dtype = "fp32";
  o.attention = "auto";
  plan = validate_run_options(o, 2);
  const std::string missing = cuda::fused_attention_unavailable_reason(4, 32);
  EXPECT_EQ(plan.attention.attention, missing.empty() ? Attention::kFused : Attention::kNaive);
  EXPECT_EQ(plan.attention.reason, missing);
  o.model = "gpt:layers=2,hidden=512,heads=2,seq=16,vocab=64,mbs=1";
  o.attention = "fused";
  try {
    (void)validate_run_options(o, 2);
    FAIL() << "fused attention for head dimension 256";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--attention fused: head dimension 256: the fp32 flash attention takes at most 128");
  }
}

TEST(RankRecord, DeviceOperationsJoinTheStepWithTheirBusyFigures) {
  StepRecord rec;
  rec.origin = 5;
  rec.actions = {{F(0, 0), 0.0, 0.004, 0, 0}, {B(0, 0), 0.004, 0.010, 0, 0}};
  rec.actions_end = 0.010;
  rec.end = 0.012;
  CollectorStepFigures figures;
  device::DeviceStep& d = figures["cupti"].device.emplace();
  // compute [0.001, 0.004] and [0.005, 0.009]; optimizer [0.0105, 0.0115];
  // an op after the rank's end (0.012) is clipped away.
  const auto op = [](device::OpClass c, double start, double end, int action) {
    device::DeviceOp o;
    o.op_class = c;
    o.start = start;
    o.end = end;
    o.action = action;
    return o;
  };
  d.ops = {op(device::OpClass::kCompute, 0.001, 0.004, 0),
           op(device::OpClass::kCompute, 0.005, 0.009, 1),
           op(device::OpClass::kOptimizer, 0.0105, 0.0115, -1),
           op(device::OpClass::kCompute, 0.013, 0.014, -1)};
  const RankStep r = rank_step(rec, std::move(figures));
  EXPECT_TRUE(r.step.has_device);
  EXPECT_EQ(r.step.device.size(), 4u);
  EXPECT_FALSE(r.collectors.at("cupti").device.has_value());  // moved, not copied
  EXPECT_NEAR(r.step.device_busy.compute, 0.007, 1e-15);
  EXPECT_NEAR(r.step.device_busy.optimizer, 0.001, 1e-15);
  EXPECT_NEAR(r.step.device_busy.busy, 0.008, 1e-15);
}

TEST(RunMetrics, DeviceFiguresUseTheStepTimeOfAllStages) {
  StepMeasure step(2);
  step[0].end = 0.010;
  step[1].end = 0.008;  // the step time is stage 0's 10 ms
  step[0].has_device = true;
  step[0].device_busy = {.compute = 0.006, .communication = 0.002, .overlap = 0.001, .busy = 0.007};
  step[1].has_device = true;
  step[1].device_busy = {.compute = 0.004, .communication = 0.0, .overlap = 0.0, .busy = 0.005};
  const std::optional<DeviceFigures> d = device_figures(step, "cupti");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->profiler, "cupti");
  ASSERT_EQ(d->bubble_ratio_per_stage.size(), 2u);
  EXPECT_NEAR(d->bubble_ratio_per_stage[0], 0.4, 1e-12);  // (10 - 6) / 10
  EXPECT_NEAR(d->bubble_ratio_per_stage[1], 0.6, 1e-12);  // (10 - 4) / 10
  EXPECT_NEAR(d->bubble_ratio, 0.5, 1e-12);
  EXPECT_EQ(d->communication_seconds_per_stage, (std::vector<double>{0.002, 0.0}));
  EXPECT_EQ(d->overlap_seconds_per_stage, (std::vector<double>{0.001, 0.0}));
  EXPECT_EQ(d->busy_seconds_per_stage, (std::vector<double>{0.007, 0.005}));
  step[0].has_device = false;
  step[1].has_device = false;
  EXPECT_FALSE(device_figures(step, "cupti").has_value());
}

TEST(RankRecord, TruncatedOrOverlongBytesAreRejected) {
  RankRecord r;
  r.steps.resize(1);
  r.steps[0].step.actions = {{F(0, 0), 0, 1, 0}};
  std::vector<char> bytes = pack(r);
  std::vector<char> shorter(bytes.begin(), bytes.end() - 1);
  EXPECT_THROW((void)unpack(shorter), UsageError);
  bytes.push_back(0);
  EXPECT_THROW((void)unpack(bytes), UsageError);
}

// --- data parallelism ----------------------------------------------------------

/// One stage of a data-parallel step: an F over [0, end) and one all-reduce.
StageStep reducing_stage(double end, int64_t bytes, double start, double finish) {
  StageStep st;
  st.actions.push_back({Action{ActionKind::kForward, 0, 0}, 0.0, end, 0.0});
  st.actions_end = end;
  st.allreduces.push_back({0, bytes, start, finish});
  st.end = std::max(end, finish);
  return st;
}

TEST(DataParallelMetrics, FoldAndSplitReplicas) {
  EXPECT_EQ(fold_replicas({1, 2, 3, 6}, 2), (std::vector<double>{2, 4}));
  StepMeasure wide(6);
  wide[4].end = 7;
  const std::vector<StepMeasure> pipes = split_replicas(wide, 2);
  ASSERT_EQ(pipes.size(), 3U);
  EXPECT_EQ(pipes[2][0].end, 7);
}

// Ring model y = 2(D-1) x latency + 2(D-1)/D x bytes / bandwidth with D = 2,
// latency 1 ms, 1 MB/s: 1000 bytes take 3 ms, 3000 bytes 5 ms. The fit
// recovers both from the two stages' all-reduces (replica-major ranks).
TEST(DataParallelMetrics, FitsTheRingModelToTheMeasuredAllReduces) {
  StepMeasure step;
  for (int replica = 0; replica < 2; ++replica) {
    step.push_back(reducing_stage(0.010, 1000, 0.010, 0.013));
    step.push_back(reducing_stage(0.020, 3000, 0.020, 0.025));
  }
  const AllReduceModel m = measured_allreduce(step, 2, 2, false);
  EXPECT_EQ(m.replicas, 2);
  EXPECT_NEAR(m.latency, 1e-3, 1e-9);
  EXPECT_NEAR(m.bandwidth, 1e6, 1e-3);
  EXPECT_NEAR(m.time(3000), 0.005, 1e-12);
  // A collective ends when its last replica's does, from its last post.
  step[2].allreduces[0].start = 0.011;
  step[2].allreduces[0].end = 0.014;
  EXPECT_LT(measured_allreduce(step, 2, 2, false).time(1000), 0.0035);
  EXPECT_EQ(measured_allreduce(step, 2, 1, false).bandwidth, 0.0);  // one replica: nothing
}

// Stage 0 computes until 10 ms and reduces 5..15 ms (5 ms of it overlapped),
// stage 1 computes until 8 ms and reduces 8..12 ms: the step ends at 15 ms,
// the pipeline at 10 ms.
TEST(DataParallelMetrics, AllReduceFiguresOverlapAndBubbles) {
  StepMeasure step;
  for (int replica = 0; replica < 2; ++replica) {
    step.push_back(reducing_stage(0.010, 800, 0.005, 0.015));
    step.push_back(reducing_stage(0.008, 400, 0.008, 0.012));
  }
  const AllReduceFigures f = allreduce_figures(step, 2);
  ASSERT_EQ(f.seconds_per_stage.size(), 2U);
  EXPECT_NEAR(f.seconds_per_stage[0], 0.010, 1e-12);
  EXPECT_NEAR(f.overlap_seconds_per_stage[0], 0.005, 1e-12);
  EXPECT_NEAR(f.overlap_seconds_per_stage[1], 0.0, 1e-12);
  EXPECT_EQ(f.bytes_per_stage, (std::vector<int64_t>{800, 400}));
  EXPECT_NEAR(f.seconds, 0.007, 1e-12);
  EXPECT_NEAR(f.exposed_seconds, 0.005, 1e-12);
  // Without the all-reduce: over the 10 ms pipeline, (10-10)/10 and (10-8)/10.
  EXPECT_NEAR(f.bubble_ratio_pipeline.measured, 0.1, 1e-12);
  // With it (step_figures): over 15 ms, (15-10)/15 and (15-8)/15.
  const StepFigures fig = step_figures({step}, 1);
  EXPECT_NEAR(fig.bubble_ratio.measured, (5.0 / 15 + 7.0 / 15) / 2, 1e-12);
}

TEST(DataParallelMetrics, StagesMustDivideTheRanks) {
  RunOptions o;
  o.stages = 2;
  o.schedules = "1f1b";
  o.partitions = "layer";
  EXPECT_EQ(validate_run_options(o, 4).data_parallel, 2);
  EXPECT_EQ(validate_run_options(o, 4).stages, 2);
  try {
    (void)validate_run_options(o, 3);
    ADD_FAILURE() << "3 ranks accepted for 2 stages";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--stages 2: the 3 MPI ranks are not a multiple of 2"),
              std::string::npos)
        << e.what();
  }
  o.rank_order = "dp-tp";
  EXPECT_THROW((void)validate_run_options(o, 4), UsageError);
}

// --- from the gathered rank records -----------------------------------------

/// A rank whose one step started at `origin` (its steady clock) and ran one
/// forward from `start` to `end` (seconds from that origin).
RankRecord one_step_rank(double origin, double start, double end) {
  RankRecord r;
  RankStep& s = r.steps.emplace_back();
  s.origin = origin;
  s.step.actions.push_back({Action{ActionKind::kForward, 0, 0}, start, end, 0.0});
  s.step.comms.push_back({.start = start, .end = end});
  s.step.end = end;
  s.step.actions_end = end;
  return r;
}

TEST(RankRecordMetrics, OneHostShiftsEachRankByItsLateStartAcrossHostsNot) {
  // Rank 1 left the barrier 0.5 s after rank 0: on one clock its times move by 0.5.
  const std::vector<RankRecord> ranks{one_step_rank(10.0, 0.0, 1.0), one_step_rank(10.5, 0.0, 1.0)};
  const std::vector<StepMeasure> one = align_steps(ranks, true);
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(one[0].size(), 2u);
  EXPECT_DOUBLE_EQ(one[0][0].end, 1.0);
  EXPECT_DOUBLE_EQ(one[0][1].end, 1.5);
  EXPECT_DOUBLE_EQ(one[0][1].actions_end, 1.5);
  EXPECT_DOUBLE_EQ(one[0][1].actions[0].start, 0.5);
  EXPECT_DOUBLE_EQ(one[0][1].comms[0].end, 1.5);
  const std::vector<StepMeasure> two = align_steps(ranks, false);
  EXPECT_DOUBLE_EQ(two[0][1].end, 1.0);
  EXPECT_DOUBLE_EQ(two[0][1].actions[0].start, 0.0);
}

TEST(RankRecordMetrics, KindSecondsAreMeansPerMicrobatchOverReplicas) {
  // Two stages x two replicas (replica-major), 2 micro-batches: stage 0's
  // replicas spent 4 and 8 s forward in their embedding, so one micro-batch
  // of the 4 took 3 s.
  const auto rank = [](double fwd, double bwd) {
    RankRecord r;
    RankStep& s = r.steps.emplace_back();
    s.kind_seconds.assign(kUnitKinds, UnitTime{});
    s.kind_seconds[0] = UnitTime{fwd, bwd, 0.0};
    return r;
  };
  const std::vector<RankRecord> ranks{rank(4, 2), rank(0, 0), rank(8, 6), rank(0, 0)};
  const auto out = kind_seconds_per_stage(ranks, 2, 0, 2);
  ASSERT_EQ(out.size(), 2u);
  const std::string kind = unit_kind_name(static_cast<UnitKind>(0));
  ASSERT_EQ(out[0].count(kind), 1u);
  EXPECT_DOUBLE_EQ(out[0].at(kind).fwd, 3.0);
  EXPECT_DOUBLE_EQ(out[0].at(kind).bwd_input, 2.0);
  EXPECT_TRUE(out[1].empty());  // a kind that did not run is left out
  // A rank without unit times: none at all.
  std::vector<RankRecord> untimed = ranks;
  untimed[3].steps[0].kind_seconds.clear();
  EXPECT_TRUE(kind_seconds_per_stage(untimed, 2, 0, 2).empty());
}

TEST(RankRecordMetrics, CollectorFiguresOfTheMedianStepPerRank) {
  std::vector<RankRecord> ranks(2);
  for (RankRecord& r : ranks) r.steps.resize(2);
  ranks[1].steps[1].collectors["perf"].step["cycles"] = 7.0;
  ranks[0].steps[0].collectors["perf"].step["cycles"] = 99.0;  // not the median step
  const auto out = collector_results(ranks, 1);
  ASSERT_EQ(out.count("perf"), 1u);
  const std::vector<double>& cycles = out.at("perf").step.at("cycles");
  ASSERT_EQ(cycles.size(), 2u);
  EXPECT_TRUE(std::isnan(cycles[0]));
  EXPECT_DOUBLE_EQ(cycles[1], 7.0);
}

TEST(RankRecordMetrics, SpeedProbesAndMemoryPeaks) {
  std::vector<RankRecord> ranks(4);  // 2 stages x 2 replicas
  for (RankRecord& r : ranks) r.steps.resize(2);
  EXPECT_TRUE(speed_probe_per_stage(ranks).empty());  // every probe NaN: none
  ranks[2].steps[1].probe_seconds = 0.25;
  const auto probes = speed_probe_per_stage(ranks);
  ASSERT_EQ(probes.size(), 4u);
  EXPECT_DOUBLE_EQ(probes[2][1], 0.25);

  ranks[0].steps[0].peak_bytes = 100;
  ranks[0].steps[1].peak_bytes = 300;
  ranks[0].steps[1].peak_activation_bytes = 20;
  ranks[0].steps[0].peak_activation_bytes = 50;
  ranks[0].steps[0].device_peak_bytes = 9;
  const StageMemory peaks = step_memory_peaks(ranks[0].steps);
  EXPECT_EQ(peaks.peak_total, 300);
  EXPECT_EQ(peaks.peak_activations, 50);
  EXPECT_EQ(peaks.device_peak, 9);

  // Per stage the replica with the highest peak: stage 0 replica 1 (rank 2).
  ranks[0].memory.peak_total = 10;
  ranks[2].memory.peak_total = 30;
  ranks[1].memory.peak_total = 40;
  ranks[3].memory.peak_total = 40;  // a tie keeps replica 0's
  ranks[3].memory.peak_rss = 1;
  const std::vector<StageMemory> mems = stage_memories(ranks, 2);
  ASSERT_EQ(mems.size(), 2u);
  EXPECT_EQ(mems[0].peak_total, 30);
  EXPECT_EQ(mems[1].peak_total, 40);
  EXPECT_EQ(mems[1].peak_rss, 0);
}

TEST(RankRecordMetrics, HostOfStageOnlyAcrossHosts) {
  ResultEnvironment env;
  env.hosts = {"a"};
  env.rank_hosts = {"a", "a"};
  EXPECT_TRUE(host_of_stage(env, 2).empty());
  env.hosts = {"a", "b"};
  env.rank_hosts = {"a", "b", "b"};
  EXPECT_EQ(host_of_stage(env, 3), (std::vector<int>{0, 1, 1}));
}

}  // namespace
}  // namespace ppb::run
