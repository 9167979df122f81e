// The nightly gate (regression.cpp) on fixture sweeps made with the tool
// itself (fixtures.hpp): the two-result comparison, the gate over a history
// of nights, and the confirmation of tonight's timing moves by re-runs.
#include "ppb/reports/regression.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "fixtures.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/reports/format.hpp"
#include "ppb/reports/history.hpp"
#include "ppb/reports/report.hpp"
#include "ppb/reports/report_model.hpp"
#include "ppb/reports/stats.hpp"
#include "ppb/reports/writers.hpp"

namespace ppb::reports {
namespace {

using testing::FixtureSpec;
using testing::fresh_dir;
using testing::kMiB;
using testing::night;
using testing::read;
using testing::two;
using testing::usage_error;
using testing::write_fixture;
using testing::write_sweep;

TEST(ReportRegression, BaselineTenPercentFasterFailsFivePercentDoesNot) {
  const std::string base = write_sweep(fresh_dir("base"), two(1.0, 1.0));
  FixtureSpec only_in_base;
  only_in_base.schedule = "pipedream";
  only_in_base.steps = 10;
  write_fixture(base, only_in_base);
  const std::string cur = write_sweep(fresh_dir("cur"), two(1.10, 1.05));
  FixtureSpec only_now;
  only_now.schedule = "sync-1f1b";
  only_now.steps = 10;
  write_fixture(cur, only_now);

  const std::string out_dir = fresh_dir("out");
  ReportOptions o;
  o.inputs = {cur};
  o.baselines = {base};
  o.junit = out_dir + "/junit.xml";
  o.markdown = out_dir + "/r.md";
  std::ostringstream out;
  EXPECT_EQ(run_report(o, out), 1);
  EXPECT_NE(out.str().find("REGRESSION 1f1b x balanced P=4 M=8: samples/s"), std::string::npos)
      << out.str();
  EXPECT_EQ(out.str().find("REGRESSION gpipe"), std::string::npos) << out.str();

  ModelOptions mo;
  mo.gate.threshold = 0.07;
  const ReportModel m = build_report_model(load_results({cur}, false), builtin_reference(),
                                           load_results({base}, false), mo);
  ASSERT_TRUE(m.regression.has_value());
  std::map<std::string, RegressionStatus> status;
  for (const RegressionRow& r : m.regression->rows) status[r.label] = r.status;
  EXPECT_EQ(status.at("1f1b x balanced P=4 M=8"), RegressionStatus::kRegressed);
  EXPECT_EQ(status.at("gpipe x balanced P=4 M=8"), RegressionStatus::kPass);
  EXPECT_EQ(status.at("sync-1f1b x balanced P=4 M=8"), RegressionStatus::kNew);
  EXPECT_EQ(status.at("pipedream x balanced P=4 M=8"), RegressionStatus::kMissing);
  for (const RegressionRow& r : m.regression->rows) {
    if (r.label == "1f1b x balanced P=4 M=8") {
      EXPECT_NEAR(r.samples_change, 1 / 1.10 - 1, 1e-9);
    }
    if (r.label == "gpipe x balanced P=4 M=8") {
      EXPECT_NEAR(r.samples_change, 1 / 1.05 - 1, 1e-9);
    }
  }

  // Only the 5% case: no regression, exit 0; a tighter threshold catches it.
  const std::string cur5 = write_sweep(fresh_dir("cur5"), two(1.05, 1.0));
  o.inputs = {cur5};
  EXPECT_EQ(run_report(o, out), 0);
  o.threshold = 0.04;
  EXPECT_EQ(run_report(o, out), 1);
}

TEST(ReportRegression, MemoryGrowthIsARegressionAndOtherMachinesAreNotMatched) {
  const std::string base = write_sweep(fresh_dir("base"), two(1.0, 1.0));
  std::vector<FixtureSpec> grown = two(1.0, 1.0);
  grown[0].extra_memory = 2 * kMiB;  // 1f1b stage 0: 16.75 -> 18.75 MiB, +11.9%
  grown[1].extra_memory = kMiB;      // gpipe stage 0: 20.75 -> 21.75 MiB, +4.8%
  const std::string cur = write_sweep(fresh_dir("cur"), grown);
  ModelOptions mo;
  ReportModel m = build_report_model(load_results({cur}, false), builtin_reference(),
                                     load_results({base}, false), mo);
  ASSERT_EQ(m.regression->rows.size(), 2u);
  EXPECT_EQ(m.regression->rows[0].status, RegressionStatus::kRegressed);
  ASSERT_EQ(m.regression->rows[0].reasons.size(), 1u);
  EXPECT_EQ(m.regression->rows[0].reasons[0].rfind("peak memory 16.8 MiB -> 18.8 MiB (+11.9%", 0),
            0u)
      << m.regression->rows[0].reasons[0];
  EXPECT_EQ(m.regression->rows[1].status, RegressionStatus::kPass);

  // The same combinations measured on another machine: nothing matches, nothing fails.
  std::vector<FixtureSpec> elsewhere = two(2.0, 2.0);
  for (FixtureSpec& f : elsewhere) f.host = "node2";
  const std::string other = write_sweep(fresh_dir("other"), elsewhere);
  m = build_report_model(load_results({other}, false), builtin_reference(),
                         load_results({base}, false), mo);
  EXPECT_EQ(m.regressions(), 0);
  int fresh = 0, missing = 0;
  for (const RegressionRow& r : m.regression->rows) {
    fresh += r.status == RegressionStatus::kNew ? 1 : 0;
    missing += r.status == RegressionStatus::kMissing ? 1 : 0;
  }
  EXPECT_EQ(fresh, 2);
  EXPECT_EQ(missing, 2);
}

// ------------------------------------------------------------------ gate --

const RegressionRow& row_of(const RegressionSummary& s, const std::string& prefix) {
  for (const RegressionRow& r : s.rows) {
    if (r.label.rfind(prefix, 0) == 0) return r;
  }
  throw std::runtime_error("no row " + prefix);
}

RegressionSummary gate(const std::string& tonight_dir, const std::vector<std::string>& history,
                       GateOptions o = {}) {
  static std::vector<std::unique_ptr<LoadedResults>> keep;  // rows point into them
  static std::vector<std::unique_ptr<std::vector<Night>>> nights;
  keep.push_back(std::make_unique<LoadedResults>(load_results({tonight_dir}, false)));
  nights.push_back(std::make_unique<std::vector<Night>>(load_nights(history, false)));
  return run_gate(keep.back()->results, "tonight", *nights.back(), o);
}

TEST(ReportGate, UnchangedNightsAreNoChange) {
  const std::string root = fresh_dir("nights");
  for (int d = 1; d <= 4; ++d) night(root, "n" + std::to_string(d), d, two(1.0, 1.0));
  const std::string cur = night(fresh_dir("cur"), "t", 5, two(1.0, 1.0));
  const RegressionSummary s = gate(cur, {root});
  ASSERT_EQ(s.nights, (std::vector<std::string>{"n1", "n2", "n3", "n4"}));
  EXPECT_EQ(s.count(RegressionStatus::kPass), 2) << row_of(s, "1f1b").notes.size();
  const RegressionRow& r = row_of(s, "1f1b");
  ASSERT_EQ(r.trend.size(), 5u);
  EXPECT_EQ(r.trend.back().night, "tonight");
  // samples/s, bubble, memory, then one compute figure per stage (P = 4).
  ASSERT_EQ(r.metrics.size(), 3u + 4u);
  EXPECT_NEAR(r.metrics[0].change, 0, 1e-12);
  // 10 vs 40 steps, +/-1% apart: a shift of a few percent is detectable.
  EXPECT_GT(r.detectable, 0.0);
  EXPECT_LE(r.detectable, 0.07);
  EXPECT_EQ(r.arrived_index, -1);
}

TEST(ReportGate, StepThatArrivedThreeNightsAgoIsReportedOnceWithItsNight) {
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, two(1.0, 1.0));
  night(root, "n2", 2, two(1.0, 1.0));
  night(root, "n3", 3, two(1.12, 1.0));
  night(root, "n4", 4, two(1.12, 1.0));
  const std::string cur = night(fresh_dir("cur"), "t", 5, two(1.12, 1.0));
  const RegressionSummary s = gate(cur, {root});
  EXPECT_EQ(s.regressions(), 1);
  const RegressionRow& r = row_of(s, "1f1b");
  EXPECT_EQ(r.status, RegressionStatus::kRegressed);
  EXPECT_EQ(r.arrived, "n3");
  EXPECT_EQ(r.arrived_index, 2);
  EXPECT_NEAR(r.samples_change, 1 / 1.12 - 1, 1e-9);  // against n1, n2 only
  // samples/s, and the bubble the fixture's slower steps leave idle.
  ASSERT_EQ(r.reasons.size(), 2u);
  EXPECT_EQ(r.reasons[0].rfind("samples/s ", 0), 0u) << r.reasons[0];
  EXPECT_EQ(r.reasons[1].rfind("bubble ratio ", 0), 0u) << r.reasons[1];
  for (const std::string& why : r.reasons)
    EXPECT_NE(why.find(", since n3"), std::string::npos) << why;
  EXPECT_EQ(row_of(s, "gpipe").status, RegressionStatus::kPass);
  // The step tonight itself: arrived tonight.
  const std::string root2 = fresh_dir("nights2");
  night(root2, "n1", 1, two(1.0, 1.0));
  night(root2, "n2", 2, two(1.0, 1.0));
  EXPECT_EQ(row_of(gate(cur, {root2}), "1f1b").arrived, "tonight");
}

TEST(ReportGate, ImprovementIsNotARegression) {
  const std::string base = night(fresh_dir("n"), "n1", 1, two(1.0, 1.0));
  const std::string cur = night(fresh_dir("cur"), "t", 2, two(0.85, 1.0));
  const RegressionSummary s = gate(cur, {base});
  EXPECT_EQ(s.regressions(), 0);
  EXPECT_EQ(row_of(s, "1f1b").status, RegressionStatus::kImproved);
  EXPECT_EQ(row_of(s, "1f1b").notes.at(0).rfind("improvement: samples/s", 0), 0u);
}

TEST(ReportGate, TooNoisyOrTooFewStepsIsUndecidable) {
  std::vector<FixtureSpec> noisy = two(1.0, 1.0);
  for (FixtureSpec& f : noisy) f.noise = 0.25;
  std::vector<FixtureSpec> slower = noisy;
  slower[0].slowdown = 1.08;  // beyond 7%, but inside the steps' +/-25%
  const std::string base = night(fresh_dir("n"), "n1", 1, noisy);
  const RegressionSummary s = gate(night(fresh_dir("cur"), "t", 2, slower), {base});
  EXPECT_EQ(s.regressions(), 0);
  const RegressionRow& r = row_of(s, "1f1b");
  EXPECT_EQ(r.status, RegressionStatus::kUndecidable);
  EXPECT_GT(r.detectable, 0.07);
  EXPECT_EQ(r.notes.at(0).rfind("undecidable: samples/s", 0), 0u) << r.notes.at(0);
  EXPECT_EQ(r.undecided(), Undecided::kTooNoisy);
  EXPECT_EQ(row_of(s, "gpipe").undecided(), Undecided::kTooNoisy);
  EXPECT_EQ(s.undecidable_causes(), "2 too noisy to tell at the threshold");
  // Three steps a side: no p-value can get below 0.1, nothing is detectable.
  std::vector<FixtureSpec> few = two(1.0, 1.0);
  for (FixtureSpec& f : few) f.steps = 3;
  const std::string fbase = night(fresh_dir("n"), "n1", 1, few);
  const RegressionSummary t = gate(night(fresh_dir("cur"), "t", 2, few), {fbase});
  EXPECT_EQ(t.count(RegressionStatus::kUndecidable), 2);
  EXPECT_TRUE(std::isinf(row_of(t, "1f1b").detectable));
}

TEST(ReportGate, OneSlowStageIsCaughtInItsComputeTime) {
  // Stage 1 10% slower; the step time grows less than the threshold.
  std::vector<FixtureSpec> cur = two(1.03, 1.0);
  cur[0].slow_stage = 1;
  cur[0].stage_factor = 1.10;
  cur[0].plant = "stage 1 x1.10";
  const std::string base = night(fresh_dir("n"), "n1", 1, two(1.0, 1.0));
  const RegressionSummary s = gate(night(fresh_dir("cur"), "t", 2, cur), {base});
  EXPECT_EQ(s.regressions(), 1);
  const RegressionRow& r = row_of(s, "1f1b");
  EXPECT_EQ(r.label, "1f1b x balanced P=4 M=8 [planted stage 1 x1.10]");
  EXPECT_EQ(r.planted, "stage 1 x1.10");
  ASSERT_EQ(r.reasons.size(), 1u);
  EXPECT_EQ(r.reasons[0].rfind("stage 1 compute ", 0), 0u) << r.reasons[0];
  EXPECT_NE(r.reasons[0].find("(+10.0%"), std::string::npos) << r.reasons[0];
}

TEST(ReportGate, MemoryGrowthIsExactAndNamesItsNight) {
  const std::string root = fresh_dir("nights");
  std::vector<FixtureSpec> grown = two(1.0, 1.0);
  grown[0].extra_memory = 2 * kMiB;             // 16.75 -> 18.75 MiB on 1f1b
  grown[1].extra_memory = int64_t{512} * 1024;  // +2.4% on gpipe: below the threshold
  night(root, "n1", 1, two(1.0, 1.0));
  night(root, "n2", 2, grown);
  const RegressionSummary s = gate(night(fresh_dir("cur"), "t", 3, grown), {root});
  const RegressionRow& r = row_of(s, "1f1b");
  EXPECT_EQ(r.status, RegressionStatus::kRegressed);
  EXPECT_EQ(r.arrived, "n2");
  EXPECT_NEAR(r.memory_change, 2.0 / 16.75, 1e-12);
  EXPECT_EQ(row_of(s, "gpipe").status, RegressionStatus::kPass);
}

// GPU runs: the device's own figures, the machine's GPU count and the
// software stack beside the driver.
std::vector<FixtureSpec> on_gpus(std::vector<FixtureSpec> specs, int gpus,
                                 const std::string& driver = "550.54") {
  for (FixtureSpec& f : specs) {
    f.gpus = gpus;
    f.driver = driver;
  }
  return specs;
}

TEST(ReportGate, TheMachineKeyCountsTheGpusTheRunUsed) {
  ResultEnvironment env;
  env.hosts = {"vm"};
  env.cpu = "Xeon";
  env.gpus = {"NVIDIA H200", "NVIDIA H200"};
  env.ranks_per_gpu = 2;  // two ranks took turns on one device
  EXPECT_EQ(machine_key(env), "vm | Xeon | 1x NVIDIA H200");
  env.ranks_per_gpu = 1;
  EXPECT_EQ(machine_key(env), "vm | Xeon | 2x NVIDIA H200");
  env.gpus = {"NVIDIA H200", "NVIDIA H200", "NVIDIA H100"};
  EXPECT_EQ(machine_key(env), "vm | Xeon | 1x NVIDIA H100,2x NVIDIA H200");
  env.gpus.clear();
  env.ranks_per_gpu = 0;
  EXPECT_EQ(machine_key(env), "vm | Xeon | -");
  env.driver = "560.35";  // versions are compared, not keyed
  env.nccl = "2.28.3";
  EXPECT_EQ(machine_key(env), "vm | Xeon | -");

  // The same sweep on one shared H200 and on four: never compared.
  const std::string base = night(fresh_dir("n"), "n1", 1, on_gpus(two(1.0, 1.0), 1));
  const RegressionSummary s =
      gate(night(fresh_dir("cur"), "t", 2, on_gpus(two(1.5, 1.0), 4)), {base});
  EXPECT_EQ(s.regressions(), 0);
  EXPECT_EQ(s.count(RegressionStatus::kNew), 2);
  EXPECT_EQ(s.count(RegressionStatus::kMissing), 2);
  const RegressionSummary same =
      gate(night(fresh_dir("cur"), "t", 2, on_gpus(two(1.5, 1.0), 1)), {base});
  EXPECT_EQ(same.regressions(), 1);
}

TEST(ReportGate, AChangedDriverIsNamedOnEveryFigureItMovedAndNoOther) {
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, on_gpus(two(1.0, 1.0), 1));
  night(root, "n2", 2, on_gpus(two(1.0, 1.0), 1));
  // Tonight a new driver: 1f1b 12% slower, gpipe unchanged.
  const RegressionSummary s =
      gate(night(fresh_dir("cur"), "t", 3, on_gpus(two(1.12, 1.0), 1, "560.35")), {root});
  const RegressionRow& r = row_of(s, "1f1b");
  ASSERT_EQ(r.status, RegressionStatus::kRegressed);
  const std::vector<SoftwareChange> driver = {{"driver", "550.54", "560.35"}};
  int named = 0;
  for (const MetricVerdict& v : r.metrics) {
    const bool moved =
        v.status == RegressionStatus::kRegressed || v.status == RegressionStatus::kImproved;
    EXPECT_EQ(v.software, moved ? driver : std::vector<SoftwareChange>{}) << v.name;
    const bool says =
        verdict_text(v).find("driver 550.54 -> 560.35 on that night") != std::string::npos;
    EXPECT_EQ(says, moved) << verdict_text(v);
    named += moved ? 1 : 0;
  }
  EXPECT_GE(named, 2);  // samples/s and the bubble its slower steps leave
  ASSERT_FALSE(r.reasons.empty());
  EXPECT_NE(r.reasons[0].find("; driver 550.54 -> 560.35 on that night"), std::string::npos)
      << r.reasons[0];
  for (const MetricVerdict& v : row_of(s, "gpipe").metrics) EXPECT_TRUE(v.software.empty());

  // A move that arrived on an earlier night names that night's change, not
  // tonight's: the driver changed on n3 with the step, nothing since.
  const std::string root2 = fresh_dir("nights2");
  night(root2, "n1", 1, on_gpus(two(1.0, 1.0), 1));
  night(root2, "n2", 2, on_gpus(two(1.0, 1.0), 1));
  night(root2, "n3", 3, on_gpus(two(1.12, 1.0), 1, "560.35"));
  night(root2, "n4", 4, on_gpus(two(1.12, 1.0), 1, "560.35"));
  const RegressionSummary s2 =
      gate(night(fresh_dir("cur"), "t", 5, on_gpus(two(1.12, 1.0), 1, "560.35")), {root2});
  const RegressionRow& later = row_of(s2, "1f1b");
  ASSERT_EQ(later.arrived, "n3");
  EXPECT_EQ(later.metrics[0].software, driver);
  EXPECT_TRUE(software_changes(ResultEnvironment{}, ResultEnvironment{}).empty());
  // A driver known by its version one night and by its CUDA version only
  // the other (NVML not there) is no change; two CUDA versions are.
  ResultEnvironment nvml;
  nvml.driver = "580.95.05";
  ResultEnvironment cuda_only;
  cuda_only.driver = "CUDA 13.0";
  EXPECT_TRUE(software_changes(nvml, cuda_only).empty());
  EXPECT_TRUE(software_changes(cuda_only, nvml).empty());
  ResultEnvironment newer = cuda_only;
  newer.driver = "CUDA 13.1";
  EXPECT_EQ(software_changes(cuda_only, newer),
            (std::vector<SoftwareChange>{{"driver", "CUDA 13.0", "CUDA 13.1"}}));
}

// A cuda run (a device backend) whose fast paths all ran: fused attention,
// CUDA graphs replayed, every GEMM epilogue fused.
std::vector<FixtureSpec> on_cuda(std::vector<FixtureSpec> specs) {
  specs = on_gpus(std::move(specs), 1);
  for (FixtureSpec& f : specs) {
    f.backend = "cuda";
    f.attention = "fused";
    f.cuda_graphs = CudaGraphFigures{
        .captured = 4, .replayed = 116, .rebuilt = 0, .eager = 0, .eager_reason = ""};
    f.gemm_epilogues = GemmEpilogueFigures{.fused = 96, .refused = 0, .first_refusal = ""};
  }
  return specs;
}

// The same run with other counts (more steps) and the same outcomes.
std::vector<FixtureSpec> longer(std::vector<FixtureSpec> specs) {
  for (FixtureSpec& f : specs) {
    f.cuda_graphs->replayed = 236;
    f.gemm_epilogues->fused = 192;
  }
  return specs;
}

constexpr const char* kNoCudnn = "cannot load libcudnn.so.9: No such file or directory";
constexpr const char* kRefusal = "rank 1: bias GEMM 2 x 12 x 3 bf16: refused";

// The run without cuDNN: the attention fell back to naive, and cuBLASLt
// refused some epilogues; its CUDA graphs replayed as before.
std::vector<FixtureSpec> without_cudnn(std::vector<FixtureSpec> specs) {
  specs = longer(std::move(specs));
  for (FixtureSpec& f : specs) {
    f.attention = "naive";
    f.attention_reason = kNoCudnn;
    f.gemm_epilogues = GemmEpilogueFigures{.fused = 90, .refused = 6, .first_refusal = kRefusal};
  }
  return specs;
}

bool has_moved(const MetricVerdict& v) {
  return v.status == RegressionStatus::kRegressed || v.status == RegressionStatus::kImproved;
}

TEST(ReportGate, AFastPathThatFellBackIsNamedOnEveryFigureItMovedAndNoOther) {
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, on_cuda(two(1.0, 1.0)));
  night(root, "n2", 2, on_cuda(two(1.0, 1.0)));
  // Tonight cuDNN could not be loaded: 1f1b 12% slower, gpipe unchanged.
  const std::string cur = night(fresh_dir("cur"), "t", 3, without_cudnn(on_cuda(two(1.12, 1.0))));
  const RegressionSummary s = gate(cur, {root});
  const RegressionRow& r = row_of(s, "1f1b");
  ASSERT_EQ(r.status, RegressionStatus::kRegressed);
  const std::string attention =
      std::string("fast path changed: attention fused -> naive (") + kNoCudnn + ") on that night";
  const std::string epilogues =
      std::string("fast path changed: GEMM epilogues 96 fused -> 90 fused, 6 refused (") +
      kRefusal + ") on that night";
  const std::vector<FastPathChange> changes = {
      {FastPathKind::kAttention, "fused", std::string("naive (") + kNoCudnn + ")"},
      {FastPathKind::kGemmEpilogues, "96 fused",
       std::string("90 fused, 6 refused (") + kRefusal + ")"}};
  int named = 0;
  for (const MetricVerdict& v : r.metrics) {
    EXPECT_EQ(v.fast_paths, has_moved(v) ? changes : std::vector<FastPathChange>{}) << v.name;
    EXPECT_TRUE(v.software.empty()) << v.name;  // the same driver
    const std::string text = verdict_text(v);
    EXPECT_EQ(text.find("; " + attention + "; " + epilogues) != std::string::npos, has_moved(v))
        << text;
    named += has_moved(v) ? 1 : 0;
  }
  EXPECT_GE(named, 2);  // samples/s and the bubble its slower steps leave
  ASSERT_FALSE(r.reasons.empty());
  EXPECT_EQ(r.reasons[0].rfind("samples/s ", 0), 0u) << r.reasons[0];
  EXPECT_NE(r.reasons[0].find(attention), std::string::npos) << r.reasons[0];
  // gpipe fell back too, but none of its figures moved: nothing to explain.
  for (const MetricVerdict& v : row_of(s, "gpipe").metrics) EXPECT_TRUE(v.fast_paths.empty());

  // The text lines, Markdown, HTML and JUnit say it where they give the reason.
  const std::string out_dir = fresh_dir("out");
  ReportOptions o;
  o.inputs = {cur};
  o.baselines = {root};
  o.junit = out_dir + "/junit.xml";
  o.markdown = out_dir + "/r.md";
  o.html = out_dir + "/r.html";
  std::ostringstream out;
  EXPECT_EQ(run_report(o, out), 1);
  EXPECT_NE(out.str().find("REGRESSION 1f1b x balanced P=4 M=8: samples/s"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find(attention), std::string::npos) << out.str();
  const std::string arrow = "fast path changed: attention fused -> naive (cannot load";
  const std::string escaped = "fast path changed: attention fused -&gt; naive (cannot load";
  EXPECT_NE(read(o.markdown).find(arrow), std::string::npos) << read(o.markdown);
  EXPECT_NE(read(o.html).find(escaped), std::string::npos) << read(o.html);
  EXPECT_NE(read(o.junit).find(escaped), std::string::npos) << read(o.junit);

  // A move that arrived on an earlier night names that night's change:
  // attention fell back on n3 with the step, nothing changed since.
  const std::string root2 = fresh_dir("nights2");
  night(root2, "n1", 1, on_cuda(two(1.0, 1.0)));
  night(root2, "n2", 2, on_cuda(two(1.0, 1.0)));
  night(root2, "n3", 3, without_cudnn(on_cuda(two(1.12, 1.0))));
  night(root2, "n4", 4, without_cudnn(on_cuda(two(1.12, 1.0))));
  const RegressionSummary s2 =
      gate(night(fresh_dir("cur"), "t", 5, without_cudnn(on_cuda(two(1.12, 1.0)))), {root2});
  const RegressionRow& later = row_of(s2, "1f1b");
  ASSERT_EQ(later.arrived, "n3");
  EXPECT_EQ(later.metrics[0].fast_paths, changes);
  EXPECT_TRUE(fast_path_changes(Result{}, Result{}).empty());
}

TEST(ReportGate, FastPathsWithTheSameOutcomesAreNoChange) {
  // Tonight's step is 12% slower, every fast path ran as before (their
  // counts grew with the steps): the regression names none.
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, on_cuda(two(1.0, 1.0)));
  night(root, "n2", 2, on_cuda(two(1.0, 1.0)));
  const RegressionSummary s =
      gate(night(fresh_dir("cur"), "t", 3, longer(on_cuda(two(1.12, 1.0)))), {root});
  const RegressionRow& r = row_of(s, "1f1b");
  ASSERT_EQ(r.status, RegressionStatus::kRegressed);
  for (const MetricVerdict& v : r.metrics) EXPECT_TRUE(v.fast_paths.empty()) << v.name;
  for (const std::string& why : r.reasons) EXPECT_EQ(why.find("fast path"), std::string::npos);

  // Both nights fell back, for the same cause or not: still no change.
  const std::string fell = fresh_dir("fell");
  night(fell, "n1", 1, without_cudnn(on_cuda(two(1.0, 1.0))));
  night(fell, "n2", 2, without_cudnn(on_cuda(two(1.0, 1.0))));
  std::vector<FixtureSpec> fp32 = without_cudnn(on_cuda(two(1.12, 1.0)));
  for (FixtureSpec& f : fp32) f.attention_reason = "fp32: cuDNN has no fused flash attention";
  const RegressionSummary s2 = gate(night(fresh_dir("cur"), "t", 3, fp32), {fell});
  const RegressionRow& again = row_of(s2, "1f1b");
  ASSERT_EQ(again.status, RegressionStatus::kRegressed);
  for (const MetricVerdict& v : again.metrics) EXPECT_TRUE(v.fast_paths.empty()) << v.name;
}

TEST(ReportGate, ANightThatDidNotRecordItsFastPathsNamesNoChange) {
  // Cuda nights written before the fields (the attention they ran naive,
  // graphs and epilogues not recorded), tonight slower with its fast paths
  // recorded, the attention naive and some epilogues refused.
  std::vector<FixtureSpec> old = on_cuda(two(1.0, 1.0));
  for (FixtureSpec& f : old) {
    f.attention = "";
    f.cuda_graphs.reset();
    f.gemm_epilogues.reset();
  }
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, old);
  night(root, "n2", 2, old);
  const RegressionSummary s =
      gate(night(fresh_dir("cur"), "t", 3, without_cudnn(on_cuda(two(1.12, 1.0)))), {root});
  const RegressionRow& r = row_of(s, "1f1b");
  ASSERT_EQ(r.status, RegressionStatus::kRegressed);
  for (const MetricVerdict& v : r.metrics) EXPECT_TRUE(v.fast_paths.empty()) << v.name;
  for (const std::string& why : r.reasons) EXPECT_EQ(why.find("fast path"), std::string::npos);
}

// Two nights of `usual`, then `tonight`, gated.
RegressionSummary after_two_nights(const std::vector<FixtureSpec>& usual,
                                   const std::vector<FixtureSpec>& tonight) {
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, usual);
  night(root, "n2", 2, usual);
  return gate(night(fresh_dir("cur"), "t", 3, tonight), {root});
}

// CUPTI's kernel times name the kernel that made a stage slower.
TEST(ReportGate, ASlowerStageNamesTheKernelFamilyThatGrew) {
  std::vector<FixtureSpec> usual = on_gpus(two(1.0, 1.0), 1);
  for (FixtureSpec& f : usual) {
    f.device_bubble = 0.3;
    f.layernorm_seconds = 1e-3;
  }
  std::vector<FixtureSpec> tonight = usual;
  tonight[0].slowdown = 1.03;
  tonight[0].slow_stage = 1;
  tonight[0].stage_factor = 1.10;  // stage 1's busy time, and its LayerNorm kernels
  const RegressionSummary s = after_two_nights(usual, tonight);
  const RegressionRow& r = row_of(s, "1f1b");
  ASSERT_EQ(r.status, RegressionStatus::kRegressed);
  ASSERT_EQ(r.reasons.size(), 1u) << r.reasons.front();
  EXPECT_EQ(r.reasons[0].rfind("stage 1 compute ", 0), 0u) << r.reasons[0];
  EXPECT_NE(r.reasons[0].find("; kernels: layernorm on stage 1 1.00 ms -> 1.10 ms (+10.0%)"),
            std::string::npos)
      << r.reasons[0];
  for (const MetricVerdict& v : r.metrics) {
    if (v.name != "stage 1 compute") {
      EXPECT_TRUE(v.kernels.empty()) << v.name;
      continue;
    }
    ASSERT_EQ(v.kernels.size(), 1u);  // the GEMMs held
    EXPECT_EQ(v.kernels[0].family, "layernorm");
    EXPECT_EQ(v.kernels[0].stage, 1);
    EXPECT_NEAR(v.kernels[0].reference, 1e-3, 1e-15);
    EXPECT_NEAR(v.kernels[0].current, 1.1e-3, 1e-15);
  }
  for (const MetricVerdict& v : row_of(s, "gpipe").metrics) EXPECT_TRUE(v.kernels.empty());
}

TEST(ReportGate, TheDeviceBubbleAndTheDevicePeakAreGated) {
  std::vector<FixtureSpec> usual = on_gpus(two(1.0, 1.0), 1);
  for (FixtureSpec& f : usual) {
    f.device_bubble = 0.30;
    f.device_memory = int64_t{1} << 30;
  }
  std::vector<FixtureSpec> tonight = usual;
  tonight[0].device_bubble = 0.40;                        // +10 points, 1f1b
  tonight[0].device_memory = (int64_t{1} << 30) * 6 / 5;  // +20%, 1f1b
  const RegressionSummary s = after_two_nights(usual, tonight);
  const RegressionRow& r = row_of(s, "1f1b");
  EXPECT_EQ(r.status, RegressionStatus::kRegressed);
  ASSERT_EQ(r.reasons.size(), 2u) << r.reasons.front();
  EXPECT_EQ(r.reasons[0].rfind("device bubble ratio 0.300 -> 0.400 (+0.100", 0), 0u)
      << r.reasons[0];
  EXPECT_EQ(r.reasons[1].rfind("peak device memory 1.00 GiB -> 1.20 GiB (+20.0%", 0), 0u)
      << r.reasons[1];
  const RegressionRow& g = row_of(s, "gpipe");
  EXPECT_EQ(g.status, RegressionStatus::kPass);
  // samples/s, bubble, memory, 4 stages' compute, device bubble, device peak.
  ASSERT_EQ(g.metrics.size(), 3u + 4u + 2u);
  EXPECT_EQ(g.metrics[7].name, "device bubble ratio");
  EXPECT_EQ(g.metrics[8].name, "peak device memory");
  // Nights without the per-step device samples leave the figure out.
  std::vector<FixtureSpec> bare = on_gpus(two(1.0, 1.0), 1);
  const std::string old = night(fresh_dir("old"), "n1", 1, bare);
  const RegressionSummary without = gate(night(fresh_dir("cur"), "t", 2, tonight), {old});
  EXPECT_EQ(row_of(without, "gpipe").metrics.size(), 3u + 4u);
}

// A night of real H200 results (tests/data/h200) against itself, tonight
// on a new driver with one combination's device peak 10% higher: the one
// figure that moved is a regression naming the driver, nothing else does.
TEST(ReportGate, RecordedH200NightsNameTheDriverOnlyWhereAFigureMoved) {
  const std::string root = fresh_dir("h200");
  const std::string tonight = fresh_dir("h200_tonight");
  std::filesystem::create_directories(root + "/n1");
  std::string machine;
  for (const std::string& path : result_candidates(PPB_REPORTS_H200_DATA)) {
    Result r = read_result_file(path);
    const std::string name = std::filesystem::path(path).filename().string();
    r.environment.date = "2026-12-04T18:00:00Z";
    write_result_file(root + "/n1/" + name, r);
    machine = machine_key(r.environment);
    r.environment.date = "2026-12-05T18:00:00Z";
    r.environment.driver = "590.10";
    if (name == "sweep-P2_1f1b__layer__P2_M4.json") {
      for (int64_t& b : r.metrics->peak_memory_bytes.device_per_stage) b = b * 11 / 10;
    }
    write_result_file(tonight + "/" + name, r);
  }
  EXPECT_EQ(machine, "vm | Intel(R) Xeon(R) Processor | 1x NVIDIA H200");  // 2 ranks, one GPU
  const RegressionSummary s = gate(tonight, {root});
  ASSERT_EQ(s.rows.size(), 5u);
  EXPECT_EQ(s.regressions(), 1);
  for (const RegressionRow& r : s.rows) {
    for (const MetricVerdict& v : r.metrics) {
      const bool moved =
          v.status == RegressionStatus::kRegressed || v.status == RegressionStatus::kImproved;
      EXPECT_EQ(moved, r.label == "1f1b x layer P=2 M=4" && r.work.starts_with("gpt-tiny") &&
                           v.name == "peak device memory")
          << r.label << ": " << verdict_text(v);
      EXPECT_EQ(v.software.empty(), !moved) << r.label << ": " << verdict_text(v);
    }
  }
  const auto tiny = std::find_if(s.rows.begin(), s.rows.end(), [](const RegressionRow& r) {
    return r.label == "1f1b x layer P=2 M=4" && r.work.starts_with("gpt-tiny");
  });
  ASSERT_NE(tiny, s.rows.end());
  const RegressionRow& r = *tiny;
  ASSERT_EQ(r.reasons.size(), 1u);
  EXPECT_EQ(r.reasons[0].rfind("peak device memory ", 0), 0u) << r.reasons[0];
  EXPECT_NE(r.reasons[0].find("(+10.0%"), std::string::npos) << r.reasons[0];
  EXPECT_NE(r.reasons[0].find("; driver 580.159.04 -> 590.10 on that night"), std::string::npos)
      << r.reasons[0];
}

TEST(ReportGate, OversubscribedRunsAreKeptOut) {
  std::vector<FixtureSpec> crowded = two(1.5, 1.0);
  for (FixtureSpec& f : crowded) f.oversubscribed = true;
  const std::string base = night(fresh_dir("n"), "n1", 1, two(1.0, 1.0));
  const std::string cur = night(fresh_dir("cur"), "t", 2, crowded);
  const RegressionSummary s = gate(cur, {base});
  EXPECT_EQ(s.count(RegressionStatus::kExcluded), 2);
  EXPECT_EQ(s.regressions(), 0);
  EXPECT_NE(row_of(s, "1f1b").notes.at(0).find("4 ranks on 2 cores"), std::string::npos);
  GateOptions all;
  all.include_oversubscribed = true;
  EXPECT_EQ(gate(cur, {base}, all).regressions(), 1);
}

// two(slow, slow), each fixture changed by `set`.
template <class Set>
std::vector<FixtureSpec> both(double slow, Set set) {
  std::vector<FixtureSpec> s = two(slow, slow);
  for (FixtureSpec& f : s) set(f);
  return s;
}

// Ranks taking turns on one GPU measure another thing than one rank per
// GPU: tonight's two ranks per GPU are gated against the night of the same
// sharing (n1, unchanged: no change) and never against the night of one
// rank per GPU between (n2, 40% slower: neither an improvement nor
// "another time scale"); n2's combinations are missing tonight.
TEST(ReportGate, RanksSharingAGpuAreGatedOnlyAgainstNightsOfTheSameSharing) {
  const auto sharing = [](int ranks_per_gpu, double slow) {
    return both(slow, [ranks_per_gpu](FixtureSpec& f) { f.ranks_per_gpu = ranks_per_gpu; });
  };
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, sharing(2, 1.0));
  night(root, "n2", 2, sharing(1, 1.4));
  const std::string cur = night(fresh_dir("cur"), "t", 3, sharing(2, 1.0));
  const RegressionSummary s = gate(cur, {root});
  EXPECT_EQ(s.count(RegressionStatus::kPass), 2);
  EXPECT_EQ(s.count(RegressionStatus::kImproved), 0);
  EXPECT_EQ(s.count(RegressionStatus::kExcluded), 0);
  EXPECT_EQ(s.count(RegressionStatus::kMissing), 2);
  EXPECT_EQ(s.regressions(), 0);
}

// The timed backend's default scale once made a two-chunk schedule's
// chunks sleep a whole stage's time at twice the one-chunk scale; its fix
// changed every combination's scale. Rows at another scale than their
// history are excluded, saying both scales, never gated (gpipe here runs
// twice as fast) nor listed as missing; the next night gates them against
// the nights at the new scale only.
TEST(ReportGate, ACombinationAtAnotherTimeScaleIsExcludedNotGatedNorMissing) {
  const auto scaled = [](double one_chunk, double two_chunk, double slow_two) {
    std::vector<FixtureSpec> s = two(1.0, slow_two);
    s[0].time_scale = one_chunk;
    s[1].time_scale = two_chunk;
    return s;
  };
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, scaled(0.7717, 1.5545, 1.0));
  night(root, "n2", 2, scaled(0.7717, 1.5545, 1.0));
  const std::string cur = night(fresh_dir("cur"), "t", 3, scaled(0.9609, 0.9609, 0.5));
  const RegressionSummary s = gate(cur, {root});
  EXPECT_EQ(s.count(RegressionStatus::kExcluded), 2);
  EXPECT_EQ(s.count(RegressionStatus::kMissing), 0);
  EXPECT_EQ(s.count(RegressionStatus::kNew), 0);
  EXPECT_EQ(s.regressions(), 0);
  const RegressionRow& g = row_of(s, "gpipe");
  ASSERT_EQ(g.notes.size(), 1u);
  EXPECT_EQ(g.notes[0],
            "excluded: earlier nights ran it at time scale 1.5545, tonight at 0.9609 (wall "
            "seconds per modelled second): its timings are not comparable");
  EXPECT_TRUE(g.metrics.empty());
  // A night at the new scale: gated against it, not against n1 and n2.
  night(root, "n3", 3, scaled(0.9609, 0.9609, 0.5));
  const RegressionSummary next =
      gate(night(fresh_dir("cur"), "t", 4, scaled(0.9609, 0.9609, 0.5)), {root});
  EXPECT_EQ(row_of(next, "gpipe").status, RegressionStatus::kPass);
  EXPECT_EQ(row_of(next, "1f1b").status, RegressionStatus::kPass);
  EXPECT_EQ(next.count(RegressionStatus::kExcluded), 0);
}

// A padded head computes more logits: tonight's padded runs are excluded,
// saying both heads, never gated against the unpadded nights (1f1b here
// runs 30% slower) nor listed as missing or new; a padded night after is
// gated against the padded nights only.
TEST(ReportGate, ACombinationWithAnotherVocabPaddingIsExcludedNotGatedNorMissing) {
  const auto padded = [](int vocab, double slow) {
    return both(slow, [vocab](FixtureSpec& f) { f.padded_vocab = vocab; });
  };
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, padded(0, 1.0));
  night(root, "n2", 2, padded(0, 1.0));
  const std::string cur = night(fresh_dir("cur"), "t", 3, padded(640, 1.3));
  const RegressionSummary s = gate(cur, {root});
  EXPECT_EQ(s.count(RegressionStatus::kExcluded), 2);
  EXPECT_EQ(s.count(RegressionStatus::kMissing), 0);
  EXPECT_EQ(s.count(RegressionStatus::kNew), 0);
  EXPECT_EQ(s.regressions(), 0);
  const RegressionRow& r = row_of(s, "1f1b");
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0],
            "excluded: earlier nights ran it with the head's vocabulary unpadded, tonight padded "
            "to 640 (--make-vocab-size-divisible-by 640): its timings are not comparable");
  night(root, "n3", 3, padded(640, 1.3));
  const RegressionSummary next = gate(night(fresh_dir("cur"), "t", 4, padded(640, 1.3)), {root});
  EXPECT_EQ(row_of(next, "1f1b").status, RegressionStatus::kPass);
  EXPECT_EQ(next.count(RegressionStatus::kExcluded), 0);
}

TEST(ReportGate, TimingsOfABusyHostAreNotJudged) {
  std::vector<FixtureSpec> busy = two(1.5, 1.0);
  for (FixtureSpec& f : busy) f.foreign_cpu = 0.45;
  busy[1].extra_memory = 4 * kMiB;  // memory is still compared
  const std::string base = night(fresh_dir("n"), "n1", 1, two(1.0, 1.0));
  const RegressionSummary s = gate(night(fresh_dir("cur"), "t", 2, busy), {base});
  const RegressionRow& slow = row_of(s, "1f1b");
  EXPECT_EQ(slow.status, RegressionStatus::kUndecidable);
  EXPECT_EQ(slow.notes.at(0),
            "undecidable: samples/s not judged: the host was busy: other processes used 45% of "
            "its CPU during tonight's timed steps (limit 20%)");
  EXPECT_EQ(slow.undecided(), Undecided::kHostBusy);
  EXPECT_EQ(s.undecidable_causes(), "1 the host was busy");
  EXPECT_EQ(row_of(s, "gpipe").status, RegressionStatus::kRegressed);
  ASSERT_EQ(row_of(s, "gpipe").reasons.size(), 1u);
  EXPECT_EQ(row_of(s, "gpipe").reasons[0].rfind("peak memory ", 0), 0u);
  // A busy earlier night is left out of the reference: its slow figures do
  // not hide tonight's regression.
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, two(1.0, 1.0));
  std::vector<FixtureSpec> slow_busy = two(1.3, 1.3);
  for (FixtureSpec& f : slow_busy) f.foreign_cpu = 0.6;
  night(root, "n2", 2, slow_busy);
  const RegressionSummary t = gate(night(fresh_dir("cur"), "t", 3, two(1.12, 1.0)), {root});
  EXPECT_EQ(row_of(t, "1f1b").status, RegressionStatus::kRegressed);
  EXPECT_NEAR(row_of(t, "1f1b").samples_change, 1 / 1.12 - 1, 1e-9);
  EXPECT_EQ(row_of(t, "gpipe").status, RegressionStatus::kPass);
}

std::vector<FixtureSpec> probed(std::vector<FixtureSpec> specs, double factor_1f1b = 1.0) {
  for (FixtureSpec& f : specs) {
    f.probe = 4e-3;
    f.probe_stage = 0;
    if (f.schedule == "1f1b") f.probe_factor = factor_1f1b;
  }
  return specs;
}

TEST(ReportGate, TimingsOfAMachineThatRanAtAnotherSpeedAreNotJudged) {
  // Tonight 1f1b is 30% slower, and so was the machine itself on stage 0
  // (its speed probe): not judged. gpipe's probe is the usual one and its
  // planted-like slowdown stands.
  const std::string base = night(fresh_dir("n"), "n1", 1, probed(two(1.0, 1.0)));
  const RegressionSummary s =
      gate(night(fresh_dir("cur"), "t", 2, probed(two(1.3, 1.3), 1.3)), {base});
  const RegressionRow& slow = row_of(s, "1f1b");
  EXPECT_EQ(slow.status, RegressionStatus::kUndecidable);
  EXPECT_EQ(slow.notes.at(0),
            "undecidable: samples/s not judged: the machine itself ran 30.0% slower on stage 0 "
            "than on the earlier nights (speed probe 5.20 ms, usually 4.00 ms; limit 5%): its "
            "timings are not comparable");
  EXPECT_EQ(slow.undecided(), Undecided::kMachineSpeed);
  EXPECT_EQ(s.undecidable_causes(), "1 the machine itself ran at another speed");
  EXPECT_EQ(row_of(s, "gpipe").status, RegressionStatus::kRegressed);
  EXPECT_EQ(row_of(s, "gpipe").undecided(), Undecided::kNo);
  // Within the limit the probe changes nothing: 4% is machine noise.
  EXPECT_EQ(
      row_of(gate(night(fresh_dir("cur"), "t", 2, probed(two(1.3, 1.0), 1.04)), {base}), "1f1b")
          .status,
      RegressionStatus::kRegressed);
  // A faster machine is as incomparable as a slower one.
  const RegressionSummary f =
      gate(night(fresh_dir("cur"), "t", 2, probed(two(0.8, 1.0), 0.8)), {base});
  EXPECT_EQ(row_of(f, "1f1b").status, RegressionStatus::kUndecidable);
  EXPECT_NE(row_of(f, "1f1b").notes.at(0).find("ran 20.0% faster on stage 0"), std::string::npos);
  GateOptions loose;
  loose.max_speed_drift = 0.5;
  EXPECT_EQ(gate(night(fresh_dir("cur"), "t", 2, probed(two(1.3, 1.0), 1.3)), {base}, loose)
                .regressions(),
            1);
}

TEST(ReportGate, AnEarlierNightOfASlowMachineIsLeftOutOfTheReference) {
  // n2 ran on a slow machine (probe +30%) and measured 1f1b 30% slower; the
  // usual speed is the median of the nights' probes, so n2 is left out and
  // tonight's 12% slowdown is a regression against n1 and n3.
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, probed(two(1.0, 1.0)));
  night(root, "n2", 2, probed(two(1.3, 1.0), 1.3));
  night(root, "n3", 3, probed(two(1.0, 1.0)));
  const RegressionSummary s = gate(night(fresh_dir("cur"), "t", 4, probed(two(1.12, 1.0))), {root});
  EXPECT_EQ(row_of(s, "1f1b").status, RegressionStatus::kRegressed);
  EXPECT_NEAR(row_of(s, "1f1b").samples_change, 1 / 1.12 - 1, 1e-9);
  EXPECT_EQ(row_of(s, "gpipe").status, RegressionStatus::kPass);
  // Results without a probe (older files, the timed backend) are judged as before.
  const std::string plain = fresh_dir("plain");
  night(plain, "n1", 1, two(1.0, 1.0));
  EXPECT_EQ(gate(night(fresh_dir("cur"), "t", 2, two(1.3, 1.0)), {plain}).regressions(), 1);
}

// Eight combinations whose launches land up to 3% off, night to
// night while each launch's steps agree to 1% (a shared machine's
// launch-to-launch noise); combination 0's own nights happen to agree.
std::vector<FixtureSpec> launches(int day, double slow0, double slow1 = 1.0) {
  static const double kShift[5][8] = {
      {0, 0.04, -0.05, 0.02, -0.03, 0.06, -0.01, 0.03},
      {0, -0.03, 0.05, -0.06, 0.01, -0.02, 0.04, -0.04},
      {0, 0.05, -0.02, 0.03, 0.06, -0.05, -0.03, 0.01},
      {0, -0.06, 0.01, -0.01, -0.04, 0.03, 0.06, -0.02},
      {0, 0.02, 0.03, 0.05, -0.05, 0.01, -0.06, 0.04},
  };
  std::vector<FixtureSpec> out;
  for (int k = 0; k < 8; ++k) {
    FixtureSpec f;
    f.schedule = k % 2 == 0 ? "1f1b" : "gpipe";
    f.microbatches = 4 * (1 + k / 2);
    f.steps = 10;
    f.slowdown = (1 + kShift[day - 1][k] / 2) * (k == 0 ? slow0 : k == 1 ? slow1 : 1.0);
    out.push_back(f);
  }
  return out;
}

TEST(ReportGate, TheSweepsLaunchNoiseIsAFloorUnderEveryBand) {
  const std::string root = fresh_dir("nights");
  for (int d = 1; d <= 4; ++d) night(root, "n" + std::to_string(d), d, launches(d, 1.0));
  // Tonight combination 0 lands 10% slow: beyond the threshold, significant
  // over its steps and beyond its own (zero) band, but within what launches
  // of this sweep do by themselves. Combination 1 is 40% slower: beyond any
  // launch noise.
  const std::string cur = night(fresh_dir("cur"), "t", 5, launches(5, 1.10, 1.40));
  const RegressionSummary s = gate(cur, {root});
  // One floor per figure family of the (machine, backend): samples/s,
  // bubble ratio, stage compute.
  ASSERT_EQ(s.floors.size(), 3u);
  const NoiseFloor* f = nullptr;
  for (const NoiseFloor& x : s.floors) {
    if (x.figure == "samples/s") f = &x;
  }
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->backend, "timed");
  EXPECT_EQ(f->residuals, 8u * 3u);  // between every combination's four reference nights
  EXPECT_EQ(f->nights, 4);
  EXPECT_EQ(f->figures, 8u * (2u + 4u));  // samples/s, bubble, four stages, per combination
  // Combination 1's 40% is beyond any launch noise, and so is one more
  // figure: false-discovery control admits them at alpha x 2 / 48.
  EXPECT_EQ(f->beyond, 2u) << noise_floor_text(*f);
  EXPECT_NEAR(f->z, normal_upper_quantile(0.01 * 2 / 48), 1e-12);
  EXPECT_GT(f->sigma, 0.02);  // the +/-3% shifts, robustly
  EXPECT_LT(f->sigma, 0.05);
  EXPECT_NEAR(f->floor, std::expm1(f->z * f->sigma * std::sqrt(1.25)), 1e-12);
  EXPECT_EQ(noise_floor_for(*f, 4), f->floor);
  EXPECT_GT(f->floor, 0.10);
  const std::string line = noise_floor_text(*f);
  EXPECT_EQ(line.rfind("timed samples/s: one launch of an unchanged build lands sigma ", 0), 0u)
      << line;

  const RegressionRow& quiet = row_of(s, "1f1b x balanced P=4 M=4");
  EXPECT_NE(quiet.status, RegressionStatus::kRegressed) << quiet.reasons.at(0);
  EXPECT_EQ(quiet.metrics[0].band, 0.0);
  EXPECT_EQ(quiet.metrics[0].floor, f->floor);
  EXPECT_EQ(quiet.metrics[0].detectable, f->floor);
  EXPECT_NE(quiet.notes.at(0).find("sweep noise floor"), std::string::npos) << quiet.notes.at(0);
  const RegressionRow& slow = row_of(s, "gpipe x balanced P=4 M=4");
  EXPECT_EQ(slow.status, RegressionStatus::kRegressed);
  EXPECT_EQ(slow.reasons.at(0).rfind("samples/s ", 0), 0u) << slow.reasons.at(0);
  EXPECT_EQ(s.regressions(), 1);

  // Without the floor combination 0's own history is all there is, and the
  // launch shift passes for a regression.
  GateOptions off;
  off.noise_floor = false;
  const RegressionSummary o = gate(cur, {root}, off);
  EXPECT_TRUE(o.floors.empty());
  EXPECT_EQ(row_of(o, "1f1b x balanced P=4 M=4").status, RegressionStatus::kRegressed);
  EXPECT_EQ(o.regressions(), 2);

  // Tonight never widens its own floor: the same history gives the same
  // sigma whatever tonight measured, and tonight's moves can only lower z
  // (more of them beyond the noise), never raise it.
  const RegressionSummary calm = gate(night(fresh_dir("cur"), "t", 5, launches(5, 1.0)), {root});
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(calm.floors[i].sigma, s.floors[i].sigma);
    EXPECT_GE(calm.floors[i].floor, s.floors[i].floor);
    EXPECT_LE(calm.floors[i].beyond, 1u);
  }
  // One reference night gives no night-to-night differences: the floor
  // comes from tonight's launch against that night, over every combination
  // of the sweep, median-centred (robust: combination 1's 40% is one of 8).
  // Combination 0's 10% is again within it; combination 1's 40% is not.
  // (The fixture's launch shifts move the step, not the stages' compute.)
  const RegressionSummary one =
      gate(night(fresh_dir("cur-one"), "t", 5, launches(5, 1.10, 1.40)), {root + "/n1"});
  ASSERT_EQ(one.floors.size(), 3u);
  const NoiseFloor* g = nullptr;
  for (const NoiseFloor& x : one.floors) {
    EXPECT_TRUE(x.from_tonight) << noise_floor_text(x);
    EXPECT_EQ(x.nights, 1);
    if (x.figure != "samples/s") continue;
    g = &x;
    EXPECT_EQ(x.residuals, 8u);
    EXPECT_NE(noise_floor_text(x).find("(8 differences of tonight's launch against the last "
                                       "night's, the history holding too few); floor "),
              std::string::npos)
        << noise_floor_text(x);
  }
  ASSERT_NE(g, nullptr);
  EXPECT_GT(g->sigma, 0.01);
  EXPECT_LT(g->sigma, 0.06);
  EXPECT_NEAR(g->floor, std::expm1(g->z * g->sigma * std::sqrt(2.0)), 1e-12);
  EXPECT_NE(row_of(one, "1f1b x balanced P=4 M=4").status, RegressionStatus::kRegressed);
  EXPECT_EQ(row_of(one, "gpipe x balanced P=4 M=4").status, RegressionStatus::kRegressed);
  EXPECT_EQ(one.regressions(), 1);
  // Fewer than 8 figures of a family give no floor: the band alone.
  const RegressionSummary few = gate(night(fresh_dir("cur-few"), "t", 2, two(1.0, 1.0)),
                                     {night(fresh_dir("n-few"), "n1", 1, two(1.0, 1.0))});
  for (const NoiseFloor& x : few.floors) {
    if (x.figure == "stage compute") continue;  // 2 combinations x 4 stages
    EXPECT_EQ(x.floor, 0.0);
    EXPECT_FALSE(x.from_tonight);
    EXPECT_NE(noise_floor_text(x).find("no floor (0 night-to-night differences"),
              std::string::npos);
  }
}

const NoiseFloor& floor_of(const RegressionSummary& s, const std::string& figure) {
  for (const NoiseFloor& f : s.floors) {
    if (f.figure == figure) return f;
  }
  throw std::runtime_error("no floor of " + figure);
}

TEST(ReportGate, AChangeReachingEveryCombinationMeetsALowerFloor) {
  const std::string root = fresh_dir("nights");
  for (int d = 1; d <= 4; ++d) night(root, "n" + std::to_string(d), d, launches(d, 1.0));
  const double bonferroni = normal_upper_quantile(0.01 / 48);  // 8 combinations x 6 figures
  // One combination 15% slower: a single figure beyond the noise, judged
  // against Bonferroni's floor, which the sweep's launch noise puts above
  // 15%: undecidable, as one launch of it could land there by chance.
  const RegressionSummary one = gate(night(fresh_dir("cur"), "t", 5, launches(5, 1.15)), {root});
  const NoiseFloor& f1 = floor_of(one, "samples/s");
  EXPECT_LE(f1.beyond, 1u);
  EXPECT_NEAR(f1.z, bonferroni, 1e-12);
  EXPECT_GT(f1.floor, 0.15);
  EXPECT_EQ(row_of(one, "1f1b x balanced P=4 M=4").status, RegressionStatus::kUndecidable);
  EXPECT_EQ(one.regressions(), 0);
  EXPECT_NE(noise_floor_text(f1).find("(z " + format_fixed(bonferroni, 2) +
                                      ": alpha over 48 "
                                      "figures)"),
            std::string::npos)
      << noise_floor_text(f1);
  // Every combination 15% slower (a slower library): eight figures beyond
  // the noise at once. Benjamini-Hochberg admits them at a lower z, the
  // same sigma gives a lower floor, and each is a regression.
  std::vector<FixtureSpec> slower = launches(5, 1.0);
  for (FixtureSpec& f : slower) f.slowdown *= 1.15;
  const RegressionSummary all = gate(night(fresh_dir("cur"), "t", 5, slower), {root});
  const NoiseFloor& f8 = floor_of(all, "samples/s");
  EXPECT_EQ(f8.sigma, f1.sigma);
  EXPECT_GE(f8.beyond, 8u);
  EXPECT_NEAR(f8.z, normal_upper_quantile(0.01 * static_cast<double>(f8.beyond) / 48), 1e-12);
  EXPECT_LT(f8.floor, 0.12);
  for (const RegressionRow& r : all.rows) {
    EXPECT_EQ(r.status, RegressionStatus::kRegressed) << r.label;
    EXPECT_EQ(r.metrics.at(0).floor, f8.floor) << r.label;
  }
  EXPECT_NE(noise_floor_text(f8).find(" beyond the noise (Benjamini-Hochberg))"), std::string::npos)
      << noise_floor_text(f8);
}

TEST(ReportGate, AnUnreadableFileInAFolderOfNightsIsNamedInEveryMode) {
  const std::string root = fresh_dir("nights_bad");
  night(root, "n1", 1, two(1.0, 1.0));
  night(root, "n2", 2, two(1.0, 1.0));
  night(root, "n3", 3, two(1.0, 1.0));
  const std::string bad = root + "/n3/truncated.json";
  std::ofstream(bad) << R"({"schema": "pipebench.result/1", "config": {)";
  // Without --skip-bad: refused, naming the file (the night is not dropped).
  ReportOptions o;
  o.inputs = {night(fresh_dir("tonight_bad"), "t", 5, two(1.0, 1.0))};
  o.baselines = {root};
  EXPECT_EQ(usage_error(o).rfind("--baseline: " + bad + ": malformed JSON", 0), 0u)
      << usage_error(o);
  // With it: the three nights are gated and the file is listed among the
  // unreadable ones.
  o.skip_bad = true;
  std::ostringstream out;
  EXPECT_EQ(run_report(o, out), 0);
  EXPECT_NE(out.str().find("3 earlier night(s)"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("- " + bad + ": malformed JSON"), std::string::npos) << out.str();
  // A night gated against itself is refused, however the folder is spelt.
  o.baselines = {o.inputs.front() + "/./"};
  EXPECT_EQ(usage_error(o), "--baseline " + o.baselines[0] +
                                ": the same folder as tonight's results " + o.inputs[0] +
                                " (a night gated against itself; give earlier nights)");
}

TEST(ReportGate, SeveralBaselinesAreNightsInDateOrder) {
  const std::string a = night(fresh_dir("a"), "older", 1, two(1.0, 1.0));
  const std::string b = night(fresh_dir("b"), "newer", 2, two(1.0, 1.0));
  const std::vector<Night> n = load_nights({b, a}, false);
  ASSERT_EQ(n.size(), 2u);
  EXPECT_EQ(n[0].name, "older");
  EXPECT_EQ(n[1].name, "newer");
  // A folder holding one night's two sweeps (no combination repeated) is one night.
  const std::string one = fresh_dir("one");
  write_sweep(one + "/cpu", {two(1.0, 1.0)[0]});
  write_sweep(one + "/timed", {two(1.0, 1.0)[1]});
  EXPECT_EQ(load_nights({one}, false).size(), 1u);
  GateOptions w;
  w.window = 1;
  EXPECT_EQ(gate(b, {a, b}, w).nights, (std::vector<std::string>{"newer"}));
}

// `--baseline results` beside tonight's results/suite-<now>/: tonight's own
// folder is no earlier night, or a window of one gates it against itself;
// a night given twice (another spelling, a link) counts once; a baseline
// that holds tonight without being a folder of nights is refused.
TEST(ReportGate, TonightInsideAFolderOfNightsIsNoEarlierNight) {
  const std::string root = fresh_dir("nights_and_tonight");
  night(root, "n1", 1, two(1.0, 1.0));
  night(root, "n2", 2, two(1.0, 1.0));
  const std::string tonight = night(root, "tonight", 5, two(1.3, 1.0));  // 1f1b 30% slower
  ReportOptions o;
  o.inputs = {tonight};
  o.baselines = {root};
  o.window = 1;
  std::ostringstream out;
  EXPECT_EQ(run_report(o, out), 1) << out.str();
  EXPECT_NE(out.str().find("Against 1 earlier night(s): 1 regression(s)"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("(n2 .. n2)"), std::string::npos) << out.str();
  const std::vector<Night> nights =
      load_nights({root, root + "/./n1/", root + "/n2"}, false, {tonight});
  ASSERT_EQ(nights.size(), 2u);
  EXPECT_EQ(nights[0].name, "n1");
  EXPECT_EQ(nights[1].name, "n2");
  // A folder that holds tonight's results alone (the first night of
  // `--baseline results`) has no earlier night yet.
  const std::string one = fresh_dir("only_tonight");
  o.inputs = {night(one, "t", 5, two(1.0, 1.0))};
  EXPECT_TRUE(load_nights({one}, false, o.inputs).empty());
  // The report says so where the gate would stand, and exits 0.
  o.baselines = {one};
  std::ostringstream first;
  EXPECT_EQ(run_report(o, first), 0) << first.str();
  const std::string said = "no earlier night in " + one +
                           " (tonight is the first): nothing to compare yet; tonight's results "
                           "are the next night's baseline";
  EXPECT_NE(first.str().find("## Regression gate\n\n" + said), std::string::npos) << first.str();
  o.junit = one + "/report.junit.xml";
  std::ostringstream terse;
  EXPECT_EQ(run_report(o, terse), 0);
  EXPECT_NE(terse.str().find("\ngate: " + said + "\n"), std::string::npos) << terse.str();
  o.junit.clear();
  // One that holds tonight's sweep and another that is no night of its
  // own (no combination repeated: tonight's other sweep) is refused.
  FixtureSpec other;
  other.schedule = "zb-h1";
  night(one, "other_sweep", 5, {other});
  o.baselines = {one};
  EXPECT_NE(usage_error(o).find("is, holds or lies inside tonight's results"), std::string::npos)
      << usage_error(o);
}

// `ci/suite --regate results/suite-X --baseline results`: an old night
// gated again against the folder of every night is held against the
// nights before it, as on the night it ran; those after it are left out
// and named, in every output, and the window counts back from it.
TEST(ReportGate, NightsThatBeganAfterTonightAreLeftOutAndNamed) {
  const std::string root = fresh_dir("regate_nights");
  night(root, "n1", 1, two(1.0, 1.0));
  const std::string n2 = night(root, "n2", 2, two(1.3, 1.0));  // 1f1b 30% slower
  night(root, "n3", 3, two(1.3, 1.0));
  night(root, "n4", 4, two(1.3, 1.0));
  // An earlier re-gate's re-runs of n2, measured after n4: n2 still began
  // on day 2 (its first measurements, which they replace, say when).
  night(n2, "rerun-20261206T100000Z", 6, two(1.3, 1.0));
  ReportOptions o;
  o.inputs = {n2};
  o.baselines = {root};
  o.window = 1;
  std::ostringstream out;
  // Against n1 alone (a window of one counts back from n2, not from n4).
  EXPECT_EQ(run_report(o, out), 1) << out.str();
  EXPECT_NE(out.str().find("Against 1 earlier night(s): 1 regression(s)"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("(n1 .. n1)"), std::string::npos) << out.str();
  const std::string said = "left out 2 night(s) of --baseline that began after tonight did (at ";
  EXPECT_NE(out.str().find("Gate: " + said), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("): n3, n4; the gate compares tonight with earlier nights only.\n"),
            std::string::npos)
      << out.str();
  o.junit = fresh_dir("regate_out") + "/report.junit.xml";
  o.html = fresh_dir("regate_html") + "/report.html";
  std::ostringstream terse;
  EXPECT_EQ(run_report(o, terse), 1) << terse.str();
  EXPECT_NE(terse.str().find("\ngate: " + said), std::string::npos) << terse.str();
  EXPECT_NE(read(o.html).find("<p class=\"note\">Gate: left out 2 night(s) of --baseline that "
                              "began after tonight did (at "),
            std::string::npos);
  o.junit.clear();
  o.html.clear();
  // The first night gated again: nothing before it, and the report says why.
  o.inputs = {root + "/n1"};
  std::ostringstream first;
  EXPECT_EQ(run_report(o, first), 0) << first.str();
  EXPECT_NE(first.str().find("no earlier night in " + root +
                             ": every night there began after tonight did; nothing to compare"),
            std::string::npos)
      << first.str();
  EXPECT_NE(first.str().find("left out 3 night(s)"), std::string::npos) << first.str();
  // The rule itself: a night that began after tonight began is later; one
  // that began before it (or has no date) is kept, whatever its re-runs'
  // dates; nothing is left out without tonight's date.
  std::vector<Night> nights(3);
  nights[0].name = "early";
  nights[0].first_date = "2026-12-01T02:00:00Z";
  nights[0].date = "2026-12-09T02:00:00Z";  // re-run later
  nights[1].name = "undated";
  nights[2].name = "late";
  nights[2].first_date = "2026-12-02T02:10:01Z";
  std::vector<Night> kept = nights;
  EXPECT_TRUE(leave_out_later(kept, "").empty());
  EXPECT_EQ(kept.size(), 3u);
  EXPECT_EQ(leave_out_later(kept, "2026-12-02T02:10:00Z"), (std::vector<std::string>{"late"}));
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].name, "early");
  EXPECT_EQ(kept[1].name, "undated");
  kept = nights;
  EXPECT_TRUE(leave_out_later(kept, "2026-12-02T02:10:01Z").empty());
}

// The walk over a result folder: a run's traces are never read (a trace
// may be far larger than any result), a night kept as a link to its folder
// is a night (a link back up is not walked twice), and a *.json that is
// no regular file is named rather than passed over.
TEST(ReportGate, AResultFolderIsWalkedWholeButNotIntoItsTraces) {
  namespace fs = std::filesystem;
  const std::string root = fresh_dir("walk");
  night(root, "n1", 1, two(1.0, 1.0));
  const std::string elsewhere = night(fresh_dir("walk_elsewhere"), "n2", 2, two(1.0, 1.0));
  fs::create_directory_symlink(elsewhere, root + "/n2");
  fs::create_directory_symlink("..", root + "/n1/up");
  std::ofstream(root + "/n1/1f1b__layer__P4_M8.trace.json") << "not even JSON";
  fs::create_directories(root + "/n1/1f1b__layer__P4_M8.trace");
  std::ofstream(root + "/n1/1f1b__layer__P4_M8.trace/rank0.json") << "[";
  const std::vector<std::string> files = result_candidates(root);
  EXPECT_EQ(files.size(), 4u);  // two results of each night, each once
  for (const std::string& f : files) EXPECT_EQ(f.find(".trace"), std::string::npos) << f;
  EXPECT_EQ(load_nights({root}, false).size(), 2u);
  ASSERT_EQ(::mkfifo((root + "/n1/fifo.json").c_str(), 0600), 0);
  try {
    (void)result_candidates(root);
    ADD_FAILURE() << "a FIFO named like a result was passed over";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), root + "/n1/fifo.json: not a regular file (a result is one)");
  }
  // With --skip-bad it is listed among the unreadable files instead.
  std::vector<BadFile> bad;
  EXPECT_EQ(result_candidates(root, &bad).size(), 4u);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].message, root + "/n1/fifo.json: not a regular file (a result is one)");
  // So is a *.json link that leads nowhere.
  fs::create_symlink("gone.json", root + "/n1/zz.json");
  bad.clear();
  EXPECT_EQ(result_candidates(root, &bad).size(), 4u);
  ASSERT_EQ(bad.size(), 2u);
  EXPECT_TRUE(std::any_of(bad.begin(), bad.end(), [&root](const BadFile& b) {
    return b.message == root + "/n1/zz.json: cannot read: No such file or directory";
  }));
  EXPECT_THROW(result_candidates(root), UsageError);
  fs::remove(root + "/n1/zz.json");
  // A link to a folder that holds the walk's own (../..) is not entered:
  // the walk never leaves for its parent's other results.
  const std::string top = fresh_dir("walk_up");
  night(top, "outside", 3, two(1.0, 1.0));
  night(top + "/base", "n1", 1, two(1.0, 1.0));
  fs::create_directory_symlink("../..", top + "/base/n1/above");
  EXPECT_EQ(result_candidates(top + "/base").size(), 2u);
}

// ----------------------------------------------------------- confirmation --

// The gate of tonight's folder with the re-runs in `rerun_dir` ("" = none given).
RegressionSummary confirmed_gate(const std::string& tonight_dir,
                                 const std::vector<std::string>& history,
                                 const std::string& rerun_dir, const GateOptions& o = {}) {
  static std::vector<std::unique_ptr<LoadedResults>> keep;  // rows point into them
  static std::vector<std::unique_ptr<std::vector<Night>>> nights;
  keep.push_back(std::make_unique<LoadedResults>(load_results({tonight_dir}, false)));
  nights.push_back(std::make_unique<std::vector<Night>>(load_nights(history, false)));
  const std::vector<ResultEntry>* reruns = nullptr;
  if (!rerun_dir.empty()) {
    keep.push_back(std::make_unique<LoadedResults>(load_results({rerun_dir}, false)));
    reruns = &keep.back()->results;
  }
  return run_gate(keep[keep.size() - (reruns ? 2 : 1)]->results, "tonight", *nights.back(), o,
                  reruns);
}

// Two quiet nights, tonight 1f1b 12% slower (`tonight`), and a re-run of
// tonight's sweep with 1f1b at `rerun` (day 3, later the same night).
struct Confirmed {
  RegressionSummary before;  // without re-runs
  RegressionSummary after;   // with them
};
Confirmed confirm_case(std::vector<FixtureSpec> tonight, std::vector<FixtureSpec> rerun) {
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, two(1.0, 1.0));
  night(root, "n2", 2, two(1.0, 1.0));
  const std::string cur = night(fresh_dir("cur"), "t", 3, std::move(tonight));
  const std::string again = night(fresh_dir("rerun"), "t", 3, std::move(rerun));
  return {confirmed_gate(cur, {root}, ""), confirmed_gate(cur, {root}, again)};
}

TEST(ReportConfirm, TimingMovesOfTonightAwaitARerun) {
  const Confirmed c = confirm_case(two(1.12, 1.0), two(1.12, 1.0));
  const RegressionRow& r = row_of(c.before, "1f1b");
  EXPECT_EQ(r.status, RegressionStatus::kRegressed);
  EXPECT_FALSE(c.before.confirming);
  // samples/s and bubble ratio moved tonight; memory did not move.
  EXPECT_EQ(r.count(Confirmation::kAwaiting), 2);
  EXPECT_EQ(r.metrics[0].confirmation, Confirmation::kAwaiting);
  EXPECT_EQ(r.metrics[2].name, "peak memory");
  EXPECT_EQ(r.metrics[2].confirmation, Confirmation::kNone);
  // The list holds it, then its control: gpipe, which did not move.
  ASSERT_EQ(c.before.rerun_list().size(), 2u);
  EXPECT_EQ(c.before.rerun_list()[0], r.current->source);
  EXPECT_EQ(row_of(c.before, "gpipe").count(Confirmation::kAwaiting), 0);
  ASSERT_NE(r.control, nullptr);
  EXPECT_EQ(r.control, row_of(c.before, "gpipe").current);
  EXPECT_EQ(c.before.rerun_list()[1], r.control->source);
  EXPECT_EQ(row_of(c.before, "gpipe").control, nullptr);
}

// two(), on a machine `m1f1b` and `mgpipe` times slower while each ran.
std::vector<FixtureSpec> on_machine(double m1f1b, double mgpipe) {
  std::vector<FixtureSpec> out = two(1.0, 1.0);
  out[0].machine = m1f1b;
  out[1].machine = mgpipe;
  return out;
}

TEST(ReportConfirm, AControlIsACombinationThatDidNotMove) {
  const auto control_of = [](std::vector<FixtureSpec> tonight) {
    const std::string root = fresh_dir("nights");
    std::vector<FixtureSpec> usual = two(1.0, 1.0);
    const int tonight_steps = tonight[1].steps;
    usual[1].steps = tonight_steps;
    night(root, "n1", 1, usual);
    night(root, "n2", 2, usual);
    const std::string cur = night(fresh_dir("cur"), "t", 3, std::move(tonight));
    const RegressionSummary s = confirmed_gate(cur, {root}, "");
    const RegressionRow& r = row_of(s, "1f1b");
    EXPECT_EQ(r.count(Confirmation::kAwaiting), 2);
    if (tonight_steps == 3) {
      EXPECT_EQ(row_of(s, "gpipe").status, RegressionStatus::kUndecidable);
    }
    return std::make_pair(r.control != nullptr ? r.control->label : "", s.rerun_list().size());
  };
  // gpipe unchanged: the control.
  EXPECT_EQ(control_of(two(1.12, 1.0)),
            std::make_pair(std::string("gpipe x balanced P=4 M=8"), size_t{2}));
  // gpipe with three steps a side is too noisy to tell, and did not move:
  // still a control (on a noisy machine every row may be undecidable).
  std::vector<FixtureSpec> noisy = two(1.12, 1.0);
  noisy[1].steps = 3;
  EXPECT_EQ(control_of(noisy).first, "gpipe x balanced P=4 M=8");
  // gpipe faster tonight moved itself: no control; both are re-run, each
  // without one.
  EXPECT_EQ(control_of(two(1.12, 0.85)), std::make_pair(std::string(), size_t{2}));
}

TEST(ReportConfirm, TheControlsSpeedInTheRerunsScalesTheRerun) {
  // Tonight the machine ran 12% slower while 1f1b was measured (its probe
  // did not see it), and still does minutes later, in the re-runs: 1f1b's
  // re-run is as slow, and so is its control gpipe, which was at the usual
  // speed in the sweep. Scaled by the control, 1f1b's re-run is at the usual
  // speed: a transient, not a regression.
  const Confirmed slow_window = confirm_case(on_machine(1.12, 1.0), on_machine(1.12, 1.12));
  const RegressionRow& r = row_of(slow_window.before, "1f1b");
  EXPECT_EQ(r.status, RegressionStatus::kRegressed);
  const int moved = r.count(Confirmation::kAwaiting);
  EXPECT_GE(moved, 2);  // samples/s and the stages' compute
  const RegressionRow& after = row_of(slow_window.after, "1f1b");
  EXPECT_EQ(after.status, RegressionStatus::kUndecidable);
  EXPECT_EQ(after.count(Confirmation::kNotReproduced), moved);
  ASSERT_NE(after.control_rerun, nullptr);
  EXPECT_NE(after.control_rerun->source.find("/gpipe"), std::string::npos);
  ASSERT_FALSE(after.notes.empty());
  const std::string& note = after.notes.back();
  EXPECT_EQ(note.rfind("control gpipe x balanced P=4 M=8: samples/s ", 0), 0u) << note;
  EXPECT_NE(note.find(" in the re-runs (-10.7%), "), std::string::npos) << note;
  EXPECT_NE(note.find(" over its history (-10.7%); the re-run's times are scaled by 0.893"),
            std::string::npos)
      << note;
  // Unscaled (without the control's re-run), the same re-run confirms it.
  EXPECT_EQ(
      row_of(confirm_case(on_machine(1.12, 1.0), {on_machine(1.12, 1.12)[0]}).after, "1f1b").status,
      RegressionStatus::kRegressed);
  // A control as fast in the re-runs as in the sweep leaves the re-run as it
  // is: a regression on a machine at its usual speed stands.
  const Confirmed steady = confirm_case(two(1.12, 1.0), two(1.12, 1.0));
  EXPECT_EQ(row_of(steady.after, "1f1b").status, RegressionStatus::kRegressed);
  EXPECT_NE(row_of(steady.after, "1f1b")
                .notes.back()
                .find("(+0.0%); the re-run's times are "
                      "scaled by 1.000"),
            std::string::npos)
      << row_of(steady.after, "1f1b").notes.back();
  // The sweep itself ran slow: 1f1b 12% in a burst, its control gpipe 5%
  // (not a move). In the re-runs the machine is back to its usual speed and
  // 1f1b 3% slow. Against the sweep, the control would say the re-runs ran
  // 5% fast and scale 1f1b's re-run to +8%, a confirmation; against its
  // history it says 0%, and the re-run refutes the regression.
  const Confirmed slow_sweep = confirm_case(on_machine(1.12, 1.05), on_machine(1.03, 1.0));
  EXPECT_EQ(row_of(slow_sweep.before, "1f1b").status, RegressionStatus::kRegressed);
  EXPECT_EQ(row_of(slow_sweep.before, "1f1b").control, row_of(slow_sweep.before, "gpipe").current);
  const RegressionRow& refuted = row_of(slow_sweep.after, "1f1b");
  EXPECT_EQ(refuted.status, RegressionStatus::kUndecidable);
  EXPECT_NE(refuted.notes.back().find(" in the re-runs (+5.0%), "), std::string::npos)
      << refuted.notes.back();
  EXPECT_NE(refuted.notes.back().find(" over its history (+0.0%); the re-run's times are scaled "
                                      "by 1.000"),
            std::string::npos)
      << refuted.notes.back();
  // Without the control's re-run, the re-run is taken as measured.
  const Confirmed lone = confirm_case(two(1.12, 1.0), {two(1.12, 1.12)[0]});
  const RegressionRow& l = row_of(lone.after, "1f1b");
  EXPECT_EQ(l.status, RegressionStatus::kRegressed);
  EXPECT_EQ(l.notes.back(),
            "control gpipe x balanced P=4 M=8: no re-run of it to compare; the re-run is taken "
            "as measured");
}

TEST(ReportConfirm, ReproducedRegressionStands) {
  const Confirmed c = confirm_case(two(1.12, 1.0), two(1.12, 1.0));
  EXPECT_TRUE(c.after.confirming);
  EXPECT_EQ(c.after.regressions(), 1);
  const RegressionRow& r = row_of(c.after, "1f1b");
  EXPECT_EQ(r.status, RegressionStatus::kRegressed);
  ASSERT_NE(r.rerun, nullptr);
  EXPECT_EQ(r.count(Confirmation::kConfirmed), 2);
  EXPECT_EQ(confirmation_summary(r), "confirmed");
  ASSERT_EQ(r.reasons.size(), 2u);
  EXPECT_EQ(r.reasons[0].rfind("samples/s ", 0), 0u) << r.reasons[0];
  EXPECT_NE(r.reasons[0].find("; confirmed by a re-run: samples/s "), std::string::npos)
      << r.reasons[0];
  EXPECT_EQ(r.arrived, "tonight");
  EXPECT_TRUE(c.after.rerun_list().empty());
  // gpipe did not move: its re-run changes nothing.
  EXPECT_EQ(row_of(c.after, "gpipe").status, RegressionStatus::kPass);
  EXPECT_EQ(row_of(c.after, "gpipe").rerun, nullptr);
}

TEST(ReportConfirm, RegressionThatDidNotReproduceIsUndecidableWithTheRerunsFigures) {
  const Confirmed c = confirm_case(two(1.12, 1.0), two(1.0, 1.0));
  EXPECT_EQ(c.after.regressions(), 0);
  const RegressionRow& r = row_of(c.after, "1f1b");
  EXPECT_EQ(r.status, RegressionStatus::kUndecidable);
  EXPECT_EQ(r.count(Confirmation::kNotReproduced), 2);
  EXPECT_EQ(confirmation_summary(r), "did not reproduce");
  EXPECT_EQ(r.undecided(), Undecided::kNotReproduced);
  EXPECT_EQ(c.after.undecidable_causes(), "1 did not reproduce on a re-run");
  EXPECT_TRUE(r.arrived.empty());
  ASSERT_GE(r.notes.size(), 1u);
  const std::string& why = r.notes[0];
  EXPECT_EQ(why.rfind("undecidable: samples/s ", 0), 0u) << why;
  EXPECT_NE(why.find("(-10.7%"), std::string::npos) << why;  // tonight's own figures stay
  EXPECT_NE(why.find("; did not reproduce on a re-run (no change: samples/s "), std::string::npos)
      << why;
  EXPECT_NE(why.find("(+0.0%"), std::string::npos) << why;  // the re-run's figures
  EXPECT_EQ(why.substr(why.size() - 13), "; a transient") << why;
  EXPECT_EQ(rerun_text(r.metrics[0]).rfind("no change: samples/s ", 0), 0u);
}

TEST(ReportConfirm, ImprovementIsConfirmedTheSameWay) {
  const Confirmed kept = confirm_case(two(0.85, 1.0), two(0.85, 1.0));
  EXPECT_EQ(row_of(kept.after, "1f1b").status, RegressionStatus::kImproved);
  EXPECT_GT(row_of(kept.after, "1f1b").count(Confirmation::kConfirmed), 0);
  const Confirmed gone = confirm_case(two(0.85, 1.0), two(1.0, 1.0));
  const RegressionRow& r = row_of(gone.after, "1f1b");
  EXPECT_EQ(r.status, RegressionStatus::kUndecidable);
  EXPECT_EQ(r.notes.at(0).rfind("undecidable: samples/s ", 0), 0u) << r.notes.at(0);
  EXPECT_NE(r.notes.at(0).find("did not reproduce on a re-run"), std::string::npos);
  // A re-run that regresses where tonight improved does not confirm either.
  const Confirmed flipped = confirm_case(two(0.85, 1.0), two(1.12, 1.0));
  EXPECT_EQ(row_of(flipped.after, "1f1b").status, RegressionStatus::kUndecidable);
  EXPECT_NE(row_of(flipped.after, "1f1b").notes.at(0).find("(regression: samples/s "),
            std::string::npos);
}

TEST(ReportConfirm, MemoryRegressionIsNotSubjectToConfirmation) {
  std::vector<FixtureSpec> tonight = two(1.12, 1.0);
  tonight[0].extra_memory = 2 * kMiB;
  const Confirmed c = confirm_case(tonight, two(1.0, 1.0));
  const RegressionRow& r = row_of(c.after, "1f1b");
  EXPECT_EQ(r.status, RegressionStatus::kRegressed);
  ASSERT_EQ(r.reasons.size(), 1u);
  EXPECT_EQ(r.reasons[0].rfind("peak memory ", 0), 0u) << r.reasons[0];
  EXPECT_EQ(r.metrics[2].confirmation, Confirmation::kNone);
  EXPECT_EQ(r.count(Confirmation::kNotReproduced), 2);
}

TEST(ReportConfirm, MissingRerunLeavesTheVerdict) {
  // Re-runs of gpipe only.
  const Confirmed c = confirm_case(two(1.12, 1.0), {two(1.0, 1.0)[1]});
  const RegressionRow& r = row_of(c.after, "1f1b");
  EXPECT_EQ(r.status, RegressionStatus::kRegressed);
  EXPECT_EQ(r.rerun, nullptr);
  EXPECT_EQ(r.count(Confirmation::kAwaiting), 2);
  EXPECT_NE(r.reasons.at(0).find("; not confirmed: no re-run of it"), std::string::npos);
  EXPECT_EQ(c.after.rerun_list(), c.before.rerun_list());
  // A re-run of another build is no confirmation either.
  std::vector<FixtureSpec> other = two(1.0, 1.0);
  for (FixtureSpec& f : other) f.git = "fff0000";
  EXPECT_EQ(row_of(confirm_case(two(1.12, 1.0), other).after, "1f1b").status,
            RegressionStatus::kRegressed);
}

TEST(ReportConfirm, RerunThatCannotTellLeavesItUndecidable) {
  std::vector<FixtureSpec> crowded = two(1.12, 1.0);
  for (FixtureSpec& f : crowded) f.oversubscribed = true;
  const Confirmed c = confirm_case(two(1.12, 1.0), crowded);
  const RegressionRow& r = row_of(c.after, "1f1b");
  EXPECT_EQ(r.status, RegressionStatus::kUndecidable);
  EXPECT_NE(r.notes.at(0).find("did not reproduce on a re-run (the re-run was oversubscribed (kept "
                               "out of the gate)); the re-run could not tell"),
            std::string::npos)
      << r.notes.at(0);
}

TEST(ReportConfirm, RerunOnASlowMachineSaysWhyItCannotTell) {
  // Tonight 1f1b's stage 1 computes 10% longer on the usual machine; its
  // re-run ran while the machine itself was 30% slower (its speed probe), so
  // the re-run's timings are not judged and it has no stage figures: the
  // row says why rather than that a figure is missing.
  std::vector<FixtureSpec> slow = probed(two(1.03, 1.0));
  slow[0].slow_stage = 1;
  slow[0].stage_factor = 1.10;
  std::vector<FixtureSpec> again = probed(two(1.03, 1.0), 1.3);
  again[0].slow_stage = 1;
  again[0].stage_factor = 1.10;
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, probed(two(1.0, 1.0)));
  night(root, "n2", 2, probed(two(1.0, 1.0)));
  const std::string cur = night(fresh_dir("cur"), "t", 3, slow);
  const std::string rerun = night(fresh_dir("rerun"), "t", 3, again);
  EXPECT_EQ(row_of(confirmed_gate(cur, {root}, ""), "1f1b").status, RegressionStatus::kRegressed);
  const RegressionSummary after = confirmed_gate(cur, {root}, rerun);
  const RegressionRow& r = row_of(after, "1f1b");
  EXPECT_EQ(r.status, RegressionStatus::kUndecidable);
  bool said = false;
  for (const std::string& n : r.notes) {
    said = said || (n.rfind("undecidable: stage 1 compute ", 0) == 0 &&
                    n.find("did not reproduce on a re-run (the re-run's samples/s not judged: the "
                           "machine itself ran 30.0% slower on stage 0") != std::string::npos);
  }
  EXPECT_TRUE(said) << r.notes.at(0);
}

TEST(ReportConfirm, StepOfAnEarlierNightNeedsNoRerun) {
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, two(1.0, 1.0));
  night(root, "n2", 2, two(1.0, 1.0));
  night(root, "n3", 3, two(1.12, 1.0));
  const std::string cur = night(fresh_dir("cur"), "t", 4, two(1.12, 1.0));
  const RegressionSummary s = confirmed_gate(cur, {root}, "");
  EXPECT_EQ(row_of(s, "1f1b").arrived, "n3");
  EXPECT_TRUE(s.rerun_list().empty());
}

// 1f1b's samples/s tonight, a move dated to `arrived` that no night
// reported before tonight: regressed, awaiting tonight's re-run, listed with
// its control.
void expect_first_report(const RegressionSummary& s, const std::string& arrived) {
  const MetricVerdict& v = row_of(s, "1f1b").metrics.at(0);
  EXPECT_EQ(v.status, RegressionStatus::kRegressed);
  EXPECT_EQ(v.arrived, arrived);
  EXPECT_FALSE(v.reported_before);
  EXPECT_EQ(v.confirmation, Confirmation::kAwaiting);
  EXPECT_EQ(s.rerun_list().size(), 2u);  // with its control
}

// 1f1b's samples/s tonight, a move dated to `arrived` that the last night
// already reported: seen again, no re-run.
void expect_seen_again(const RegressionSummary& s, const std::string& arrived) {
  const MetricVerdict& v = row_of(s, "1f1b").metrics.at(0);
  EXPECT_EQ(v.status, RegressionStatus::kRegressed);
  EXPECT_EQ(v.arrived, arrived);
  EXPECT_TRUE(v.reported_before);
  EXPECT_TRUE(s.rerun_list().empty());
}

TEST(ReportConfirm, WhatTheLastNightReportedIsItsOwnGatesVerdict) {
  // A window of three nights. n1 was slow, then two quiet nights, then n4
  // slow again. n4's own gate compared it with n1 to n3: their medians
  // spread as wide as the step, so it could not tell. Tonight, as slow,
  // compares with n2 to n4, where the step shows, dated to n4; but n4 did
  // not report it, so tonight's is its first report and awaits a re-run.
  GateOptions o;
  o.window = 3;
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, two(1.12, 1.0));
  night(root, "n2", 2, two(1.0, 1.0));
  night(root, "n3", 3, two(1.0, 1.0));
  night(root, "n4", 4, two(1.12, 1.0));
  const std::string upto_n3 = fresh_dir("upto-n3");
  night(upto_n3, "n1", 1, two(1.12, 1.0));
  night(upto_n3, "n2", 2, two(1.0, 1.0));
  night(upto_n3, "n3", 3, two(1.0, 1.0));
  const RegressionSummary n4 = gate(root + "/n4", {upto_n3}, o);
  EXPECT_EQ(row_of(n4, "1f1b").metrics[0].status, RegressionStatus::kUndecidable)
      << verdict_text(row_of(n4, "1f1b").metrics[0]);
  const std::string cur = night(fresh_dir("cur"), "t", 5, two(1.12, 1.0));
  expect_first_report(confirmed_gate(cur, {root}, "", o), "n4");
  // A night later n1 has left the window, and n5's own gate (n2 to n4)
  // reported the step: seen again, no re-run.
  night(root, "n5", 5, two(1.12, 1.0));
  const std::string next = night(fresh_dir("cur"), "t", 6, two(1.12, 1.0));
  expect_seen_again(confirmed_gate(next, {root}, "", o), "n4");
}

TEST(ReportConfirm, StepFirstReportedTonightAwaitsARerunWhateverNightItIsDatedTo) {
  // n4 is a little slow, within the threshold: its own gate said no change.
  // Tonight is slower again, and the step is dated back to n4. No night
  // reported it before tonight, so it awaits tonight's re-run like a move of
  // tonight, and a re-run at the usual speed refutes it.
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, two(1.0, 1.0));
  night(root, "n2", 2, two(1.0, 1.0));
  night(root, "n3", 3, two(1.0, 1.0));
  const std::string n4 = night(root, "n4", 4, two(1.068, 1.0));
  const std::string earlier = fresh_dir("earlier");
  for (int day = 1; day <= 3; ++day) night(earlier, "n" + std::to_string(day), day, two(1.0, 1.0));
  EXPECT_EQ(row_of(gate(n4, {earlier}), "1f1b").status, RegressionStatus::kPass);
  const std::string cur = night(fresh_dir("cur"), "t", 5, two(1.10, 1.0));
  const RegressionSummary s = confirmed_gate(cur, {root}, "");
  const RegressionRow& r = row_of(s, "1f1b");
  EXPECT_EQ(r.status, RegressionStatus::kRegressed);
  EXPECT_EQ(r.arrived, "n4");
  EXPECT_FALSE(r.metrics[0].reported_before);
  EXPECT_EQ(r.metrics[0].confirmation, Confirmation::kAwaiting);
  ASSERT_EQ(s.rerun_list().size(), 2u);  // with its control
  const std::string usual = night(fresh_dir("rerun"), "t", 5, two(1.0, 1.0));
  const RegressionSummary with_usual = confirmed_gate(cur, {root}, usual);
  const RegressionRow& refuted = row_of(with_usual, "1f1b");
  EXPECT_EQ(refuted.status, RegressionStatus::kUndecidable);
  EXPECT_GT(refuted.count(Confirmation::kNotReproduced), 0);
  const std::string slow = night(fresh_dir("rerun"), "t", 5, two(1.10, 1.0));
  const RegressionSummary with_slow = confirmed_gate(cur, {root}, slow);
  const RegressionRow& kept = row_of(with_slow, "1f1b");
  EXPECT_EQ(kept.status, RegressionStatus::kRegressed);
  EXPECT_EQ(kept.arrived, "n4");
  EXPECT_GT(kept.count(Confirmation::kConfirmed), 0);
  // A night later, the step is what the last judged night already showed.
  night(root, "n5", 5, two(1.10, 1.0));
  const std::string next = night(fresh_dir("cur"), "t", 6, two(1.10, 1.0));
  const RegressionSummary later = confirmed_gate(next, {root}, "");
  EXPECT_EQ(row_of(later, "1f1b").status, RegressionStatus::kRegressed);
  EXPECT_TRUE(row_of(later, "1f1b").metrics[0].reported_before);
  EXPECT_TRUE(later.rerun_list().empty());
}

// The night `name` of day `day` under `root`, and its re-runs an hour later
// in <name>/rerun/, as ci/suite leaves them.
void night_with_reruns(const std::string& root, const std::string& name, int day,
                       std::vector<FixtureSpec> first, std::vector<FixtureSpec> reruns) {
  const std::string dir = night(root, name, day, std::move(first));
  for (FixtureSpec& f : reruns) f.date = "2026-11-" + std::to_string(10 + day) + "T03:00:00Z";
  write_sweep(dir + "/rerun", reruns);
}

// Two quiet nights, then n3, when the machine was 12% slower while 1f1b ran,
// with n3's re-runs in n3/rerun/; returns the nights' root.
std::string slow_n3(std::vector<FixtureSpec> reruns) {
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, two(1.0, 1.0));
  night(root, "n2", 2, two(1.0, 1.0));
  night_with_reruns(root, "n3", 3, on_machine(1.12, 1.0), std::move(reruns));
  return root;
}

TEST(ReportConfirm, StepThatTheLastNightsRerunRefutedAwaitsARerunAgain) {
  // n3 ran 1f1b while the machine was 12% slower for minutes: n3's gate
  // flagged it, and its re-runs (1f1b and its control gpipe, both slow now)
  // refuted it. Tonight 1f1b is slow again, and the step is dated to n3,
  // whose history figures are its re-run's, slow too. n3 did not report the
  // move (its re-run refuted it), so tonight's is a first report: it awaits
  // a re-run, which decides it.
  const std::string root = slow_n3(on_machine(1.12, 1.12));
  const std::vector<Night> history = load_nights({root}, false);
  ASSERT_EQ(history.size(), 3u);
  EXPECT_EQ(history[2].results.replaced.size(), 2u);  // the first measurements
  // n3's own gate, as the nightly job made it: refuted, undecidable.
  const std::string n3 = root + "/n3";
  const LoadedResults n3_first = load_results({n3}, false, {n3 + "/rerun"});
  const LoadedResults n3_reruns = load_results({n3 + "/rerun"}, false);
  const std::vector<Night> before_n3(history.begin(), history.begin() + 2);
  EXPECT_EQ(
      row_of(run_gate(n3_first.results, "n3", before_n3, {}, &n3_reruns.results), "1f1b").status,
      RegressionStatus::kUndecidable);
  const std::string cur = night(fresh_dir("cur"), "t", 4, on_machine(1.12, 1.0));
  const RegressionSummary s = confirmed_gate(cur, {root}, "");
  const RegressionRow& r = row_of(s, "1f1b");
  EXPECT_EQ(r.status, RegressionStatus::kRegressed);
  EXPECT_EQ(r.arrived, "n3");
  EXPECT_FALSE(r.metrics[0].reported_before);
  EXPECT_EQ(r.metrics[0].confirmation, Confirmation::kAwaiting);
  ASSERT_EQ(s.rerun_list().size(), 2u);  // with its control
  // Tonight's re-runs, on the machine at its usual speed, refute it again.
  const std::string usual = night(fresh_dir("rerun"), "t", 4, two(1.0, 1.0));
  EXPECT_EQ(row_of(confirmed_gate(cur, {root}, usual), "1f1b").status,
            RegressionStatus::kUndecidable);

  // A re-gate of n3 later (ci/suite --regate, against another baseline)
  // re-ran it again, on a machine at its usual speed for gpipe: that re-run
  // would confirm it, but n3's nightly verdict is its first re-run's.
  const std::string regated = slow_n3(on_machine(1.12, 1.12));
  std::vector<FixtureSpec> later = on_machine(1.12, 1.0);
  for (FixtureSpec& f : later) f.date = "2026-11-13T05:00:00Z";
  write_sweep(regated + "/n3/rerun-20261113T050000Z", later);
  const RegressionSummary after_regate = confirmed_gate(cur, {regated}, "");
  EXPECT_FALSE(row_of(after_regate, "1f1b").metrics[0].reported_before);
  EXPECT_EQ(after_regate.rerun_list().size(), 2u);
  // Nor is a re-gate's re-run read as the nightly gate's where that made
  // none: n3's nightly verdict stood unconfirmed (regressed), so tonight has
  // seen the step again, though a re-gate's re-run (with its control, both
  // slow) would have refuted it.
  const std::string unconfirmed = fresh_dir("nights");
  night(unconfirmed, "n1", 1, two(1.0, 1.0));
  night(unconfirmed, "n2", 2, two(1.0, 1.0));
  night(unconfirmed, "n3", 3, on_machine(1.12, 1.0));
  std::vector<FixtureSpec> refuting = on_machine(1.12, 1.12);
  for (FixtureSpec& f : refuting) f.date = "2026-11-13T05:00:00Z";
  write_sweep(unconfirmed + "/n3/rerun-20261113T050000Z", refuting);
  const RegressionSummary regate_only = confirmed_gate(cur, {unconfirmed}, "");
  EXPECT_EQ(row_of(regate_only, "1f1b").status, RegressionStatus::kRegressed);
  EXPECT_TRUE(row_of(regate_only, "1f1b").metrics[0].reported_before);
  EXPECT_TRUE(regate_only.rerun_list().empty());

  // Had n3's re-runs confirmed it (its control at the usual speed, 1f1b as
  // slow), n3 reported it: tonight has seen it again, no re-run.
  const std::string kept = slow_n3(on_machine(1.12, 1.0));
  const RegressionSummary again = confirmed_gate(cur, {kept}, "");
  EXPECT_EQ(row_of(again, "1f1b").status, RegressionStatus::kRegressed);
  EXPECT_TRUE(row_of(again, "1f1b").metrics[0].reported_before);
  EXPECT_TRUE(again.rerun_list().empty());
}

TEST(ReportConfirm, WhatANightReportedFollowsFromWhatTheNightBeforeItReported) {
  // 1f1b slowed on n3 and stayed slow. n4 re-ran it while the machine was
  // slow for minutes (its control gpipe slow too), which refutes a move
  // awaiting a re-run. Whether n4's move awaited one depends on n3: had n3
  // reported it, n4 saw it again and stood by it (its re-run not asked);
  // had n3's re-run refuted it, n4's re-run did too. Tonight, slow again and
  // dated to n3, follows n4's verdict, so n3's, judged again in turn.
  const auto history_with = [](std::vector<FixtureSpec> n3_reruns) {
    const std::string root = fresh_dir("nights");
    night(root, "n1", 1, two(1.0, 1.0));
    night(root, "n2", 2, two(1.0, 1.0));
    night_with_reruns(root, "n3", 3, on_machine(1.12, 1.0), std::move(n3_reruns));
    night_with_reruns(root, "n4", 4, on_machine(1.12, 1.0), on_machine(1.12, 1.12));
    return root;
  };
  const std::string cur = night(fresh_dir("cur"), "t", 5, on_machine(1.12, 1.0));
  // n3's re-run confirmed it (its control at the usual speed): reported on
  // n3 and n4, seen again tonight.
  expect_seen_again(confirmed_gate(cur, {history_with(on_machine(1.12, 1.0))}, ""), "n3");
  // n3's re-run refuted it: n4 awaited its own re-run, which refuted it
  // too; no night reported it, so tonight's awaits a re-run.
  expect_first_report(confirmed_gate(cur, {history_with(on_machine(1.12, 1.12))}, ""), "n3");
}

TEST(ReportConfirm, TwoNightsOfOneNameAreTwoNights) {
  // Nights are named by their folders: under two baselines two folders
  // may share a name. 1f1b slowed on the first "x", which reported it; the
  // second "x" did not run it. Tonight's step is dated to the first "x",
  // whose own gate is the one judged again.
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, two(1.0, 1.0));
  night(root, "n2", 2, two(1.0, 1.0));
  const std::string a = fresh_dir("a");
  const std::string b = fresh_dir("b");
  night(a, "x", 3, two(1.12, 1.0));
  night(b, "x", 4, {two(1.0, 1.0)[1]});  // gpipe only
  const std::string cur = night(fresh_dir("cur"), "t", 5, two(1.12, 1.0));
  expect_seen_again(confirmed_gate(cur, {root, a + "/x", b + "/x"}, ""), "x");
}

TEST(ReportConfirm, RerunsInsideTonightsFolderAreNotTonightsResults) {
  const std::string cur = night(fresh_dir("cur"), "t", 3, two(1.12, 1.0));
  night(cur, "rerun", 3, two(1.0, 1.0));
  EXPECT_EQ(load_results({cur}, false).superseded.size(), 2u);  // a later night sees the re-runs
  const LoadedResults tonight = load_results({cur}, false, {cur + "/rerun"});
  EXPECT_EQ(tonight.results.size(), 2u);
  EXPECT_TRUE(tonight.superseded.empty());
  for (const ResultEntry& e : tonight.results)
    EXPECT_EQ(e.source.find("/rerun/"), std::string::npos) << e.source;
}

TEST(ReportConfirm, ReportWritesTheRerunListAndShowsConfirmation) {
  const std::string root = fresh_dir("nights");
  night(root, "n1", 1, two(1.0, 1.0));
  night(root, "n2", 2, two(1.0, 1.0));
  const std::string out = fresh_dir("out");
  // Without re-runs: exit 1, and the list names tonight's 1f1b file.
  const std::string first = night(fresh_dir("first"), "t", 3, two(1.12, 1.0));
  ReportOptions o;
  o.inputs = {first};
  o.baselines = {root};
  o.rerun_list = out + "/first.txt";
  std::ostringstream before;
  EXPECT_EQ(run_report(o, before), 1);
  EXPECT_NE(before.str().find("confirm: 1 combination(s) moved tonight in timing"),
            std::string::npos)
      << before.str();
  std::ifstream list(out + "/first.txt");
  std::string line;
  ASSERT_TRUE(std::getline(list, line));
  EXPECT_EQ(line.rfind(first + "/1f1b", 0), 0u) << line;
  ASSERT_TRUE(std::getline(list, line));  // its control
  EXPECT_EQ(line.rfind(first + "/gpipe", 0), 0u) << line;
  EXPECT_FALSE(std::getline(list, line)) << line;
  // The re-runs inside tonight's folder, given with --confirm: 1f1b did not
  // reproduce, exit 0, and nothing awaits a re-run.
  const std::string cur = night(fresh_dir("cur"), "t", 3, two(1.12, 1.0));
  const std::string again = night(cur, "rerun", 3, two(1.0, 1.0));
  o.inputs = {cur};
  o.confirm = {again};
  o.rerun_list = out + "/second.txt";
  o.markdown = out + "/r.md";
  o.html = out + "/r.html";
  o.junit = out + "/r.xml";
  std::ostringstream after;
  EXPECT_EQ(run_report(o, after), 0) << after.str();
  EXPECT_NE(after.str().find("confirm: 0 confirmed by a re-run, 1 did not reproduce "
                             "(undecidable), 0 without a re-run"),
            std::string::npos)
      << after.str();
  EXPECT_NE(after.str().find("  UNDECIDABLE 1f1b x balanced P=4 M=8: samples/s "),
            std::string::npos);
  EXPECT_EQ(read(out + "/second.txt"), "");
  const std::string md = read(out + "/r.md");
  EXPECT_NE(md.find("did not reproduce** (undecidable"), std::string::npos);
  EXPECT_NE(md.find("| did not reproduce |"), std::string::npos);
  EXPECT_NE(read(out + "/r.html").find("<td>did not reproduce</td>"), std::string::npos);
  EXPECT_NE(read(out + "/r.xml").find("<skipped message=\"undecidable: samples/s"),
            std::string::npos);
  // --confirm without --baseline: bad input.
  ReportOptions lone;
  lone.inputs = {cur};
  lone.confirm = {again};
  std::ostringstream ignored;
  EXPECT_THROW(run_report(lone, ignored), UsageError);
}

// ------------------------------------------------------------ verdict text --

// A verdict is data; verdict_text and rerun_text put each kind of it into
// words, here every reason a figure is not judged and every outcome of a
// re-run.
TEST(VerdictText, EveryReasonAndOutcomeInWords) {
  MetricVerdict judged;
  judged.name = "samples/s";
  judged.status = RegressionStatus::kRegressed;
  judged.reference = 100;
  judged.current = 88;
  judged.change = -0.12;
  judged.p = 2e-6;
  judged.band = 0.011;
  judged.floor = 0.02;
  judged.detectable = 0.07;
  judged.threshold = 0.07;
  judged.arrived = "tonight";
  const std::string figures =
      "samples/s 100 -> 88.0 (-12.0%, p=2e-06, band 1.1%, sweep noise floor 2.0%, detectable 7.0%, "
      "threshold 7.0%), since tonight";
  EXPECT_EQ(verdict_text(judged), figures);
  EXPECT_EQ(rerun_text(judged), "");

  MetricVerdict memory;
  memory.name = "peak memory";
  memory.timing = false;
  memory.reference = 16 * kMiB;
  memory.current = 18 * kMiB;
  memory.change = 0.125;
  memory.threshold = 0.07;
  EXPECT_EQ(verdict_text(memory), "peak memory 16.0 MiB -> 18.0 MiB (+12.5%, threshold +7%)");

  MetricVerdict skipped = judged;
  skipped.name = "bubble ratio";
  skipped.not_judged = {.kind = NotJudged::kHostBusy, .limit = 0.2, .share = 0.9};
  EXPECT_EQ(verdict_text(skipped),
            "bubble ratio not judged: the host was busy: other processes used 90% of its CPU "
            "during tonight's timed steps (limit 20%)");
  skipped.not_judged = {.kind = NotJudged::kMachineSpeed,
                        .limit = 0.05,
                        .stage = 1,
                        .drift = -0.3,
                        .probe = 0.0035,
                        .usual = 0.005};
  EXPECT_EQ(verdict_text(skipped),
            "bubble ratio not judged: the machine itself ran 30.0% faster on stage 1 than on the "
            "earlier nights (speed probe 3.50 ms, usually 5.00 ms; limit 5%): its timings are not "
            "comparable");
  skipped.not_judged = {.kind = NotJudged::kEveryNightSpeed, .limit = 0.05};
  EXPECT_EQ(verdict_text(skipped),
            "bubble ratio not judged: every earlier night's machine ran at another speed than "
            "usual (speed probe, limit 5%)");
  skipped.not_judged = {.kind = NotJudged::kEveryNightBusy, .limit = 0.2};
  EXPECT_EQ(verdict_text(skipped),
            "bubble ratio not judged: every earlier night's host was busy with other processes "
            "(limit 20%)");

  MetricVerdict v = judged;
  v.confirmation = Confirmation::kAwaiting;
  EXPECT_EQ(verdict_text(v), figures);
  v.reruns_given = true;
  EXPECT_EQ(verdict_text(v), figures + "; not confirmed: no re-run of it");
  MetricVerdict again = judged;
  again.current = 90;
  again.change = -0.1;
  const std::string again_figures =
      "samples/s 100 -> 90.0 (-10.0%, p=2e-06, band 1.1%, sweep noise floor 2.0%, detectable "
      "7.0%, threshold 7.0%), since tonight";
  v.confirmation = Confirmation::kConfirmed;
  v.rerun_outcome = RerunOutcome::kSameVerdict;
  v.rerun = std::make_shared<const MetricVerdict>(again);
  EXPECT_EQ(rerun_text(v), again_figures);
  EXPECT_EQ(verdict_text(v), figures + "; confirmed by a re-run: " + again_figures);
  const auto refuted = [&](RerunOutcome outcome, std::shared_ptr<const MetricVerdict> rerun) {
    MetricVerdict r = judged;
    r.status = RegressionStatus::kUndecidable;
    r.confirmation = Confirmation::kNotReproduced;
    r.rerun_outcome = outcome;
    r.rerun = std::move(rerun);
    r.rerun_status = ResultStatus::kError;
    r.rerun_error = "rank 1 failed";
    return verdict_text(r);
  };
  again.status = RegressionStatus::kPass;
  EXPECT_EQ(
      refuted(RerunOutcome::kOtherVerdict, std::make_shared<const MetricVerdict>(again)),
      figures + "; did not reproduce on a re-run (no change: " + again_figures + "); a transient");
  again.status = RegressionStatus::kUndecidable;
  EXPECT_EQ(refuted(RerunOutcome::kOtherVerdict, std::make_shared<const MetricVerdict>(again)),
            figures + "; did not reproduce on a re-run (undecidable: " + again_figures +
                "); the re-run could not tell");
  EXPECT_EQ(refuted(RerunOutcome::kNotJudged, std::make_shared<const MetricVerdict>(skipped)),
            figures + "; did not reproduce on a re-run (the re-run's " + verdict_text(skipped) +
                "); the re-run could not tell");
  // A busy host during the re-run is the re-run's, not tonight's.
  skipped.not_judged = {.kind = NotJudged::kHostBusy, .limit = 0.2, .share = 0.59};
  EXPECT_EQ(refuted(RerunOutcome::kNotJudged, std::make_shared<const MetricVerdict>(skipped)),
            figures +
                "; did not reproduce on a re-run (the re-run's bubble ratio not judged: the host "
                "was busy: other processes used 59% of its CPU during the re-run's timed steps "
                "(limit 20%)); the re-run could not tell");
  EXPECT_EQ(refuted(RerunOutcome::kNoFigure, nullptr),
            figures +
                "; did not reproduce on a re-run (the re-run has no samples/s figure); the re-run "
                "could not tell");
  EXPECT_EQ(refuted(RerunOutcome::kOversubscribed, nullptr),
            figures +
                "; did not reproduce on a re-run (the re-run was oversubscribed (kept out of the "
                "gate)); the re-run could not tell");
  EXPECT_EQ(refuted(RerunOutcome::kEnded, nullptr),
            figures +
                "; did not reproduce on a re-run (the re-run ended with status error: rank 1 "
                "failed); the re-run could not tell");
}

}  // namespace
}  // namespace ppb::reports
