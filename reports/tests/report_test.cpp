// The report on fixture sweeps made with the tool itself (fixtures.hpp): the
// claims table (golden verdicts worked out by hand below), the device
// figures, every malformed-input case, and two models in one report.
#include "ppb/reports/report.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "fixtures.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/reports/format.hpp"
#include "ppb/reports/report_model.hpp"
#include "ppb/reports/writers.hpp"

namespace ppb::reports {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using testing::FixtureSpec;
using testing::fresh_dir;
using testing::kMiB;
using testing::model_of;
using testing::read;
using testing::sweep;
using testing::two;
using testing::usage_error;
using testing::write_fixture;
using testing::write_sweep;

// The claims of the one group of `m` (a fixture of one machine and work).
const ClaimRow& claim(const ReportModel& m, const std::string& id) {
  for (const ClaimRow& r : m.groups.at(0).claims) {
    if (r.id == id) return r;
  }
  ADD_FAILURE() << "no claim " << id;
  return m.groups.at(0).claims.front();
}

// ------------------------------------------------------------------ claims --

TEST(ReportClaims, BuiltinReferenceCarriesEveryClaimOfTheDocuments) {
  const Reference ref = builtin_reference();
  std::vector<std::string> ids;
  for (const Claim& c : ref.claims) ids.push_back(c.id);
  EXPECT_EQ(ids,
            (std::vector<std::string>{"S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8", "S9", "S10",
                                      "P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "D1"}));
  EXPECT_FALSE(ref.setup_matches);
  auto figures = [&](const std::string& id) {
    std::vector<double> v;
    for (const Claim& c : ref.claims) {
      if (c.id == id) {
        for (const ClaimFigure& f : c.figures) v.push_back(f.value);
      }
    }
    return v;
  };
  EXPECT_EQ(figures("S3"), (std::vector<double>{120, 185}));
  EXPECT_EQ(figures("S4"), (std::vector<double>{8, 12}));
  EXPECT_EQ(figures("S5"), (std::vector<double>{6}));
  EXPECT_EQ(figures("S6"), (std::vector<double>{450, 720, 8.2, 14.6}));
  EXPECT_EQ(figures("S9"), (std::vector<double>{0.85}));
  EXPECT_EQ(figures("P4"), (std::vector<double>{0.60}));
  // The ratios the documents imply.
  for (const Claim& c : ref.claims) {
    for (const ClaimCheck& k : c.checks) {
      if (k.kind != CheckKind::kRatio) continue;
      if (c.id == "S3") {
        EXPECT_NEAR(k.documented, 185.0 / 120.0, 1e-3);
      }
      if (c.id == "S6" && k.metric == "samples_per_second") {
        EXPECT_NEAR(k.documented, 720.0 / 450.0, 1e-3);
      }
      if (c.id == "S6" && k.metric == "peak_memory") {
        EXPECT_NEAR(k.documented, 14.6 / 8.2, 1e-3);
      }
    }
  }
}

// Worked out by hand for the sweep above (P=4, M=8, TF=1, TB=2 ms):
//  S3: sync step = M*P*(TF+TB) = 96 ms, async (1F1B) (M+P-1)*(TF+TB) = 33 ms:
//      ratio 2.91, not 1.54 +-25% -> inconsistent.
//  S4: sync sum = 4a = M x P; async N=4 holds 4+3+2+1 = 10a, not 7a -> inconsistent.
//  S6: a 32-GPU claim: not measurable on 4 ranks (see the test after this one).
//  P5: 1F1B's bubble equals GPipe's, (P-1)/(M+P-1) -> "1F1B shrinks bubbles" inconsistent.
//  P7: pipedream over one batch has 1F1B's bubble, not below GPipe's -> inconsistent.
//  P8: pipedream's weight stash (3 x 4 MiB on stage 0) puts its peak above GPipe's -> inconsistent.
//  P4: absolute (60% utilisation) -> not measurable without --reference-setup.
// S6's checks take only 32-rank runs ("ranks": 32): the same sweep recorded
// as 4 stages x 8 data-parallel replicas is measured against it. Memory
// ratio (4+12.75)/(1+12.75) = 1.22, not 1.78 -> inconsistent.
TEST(ReportClaims, ThirtyTwoGpuClaimIsCheckedOnThirtyTwoRanksOnly) {
  const std::string dir = write_sweep(fresh_dir("sweep32"), sweep());
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    Result r = read_result_file(entry.path().string());
    r.config.data_parallel = 8;
    r.environment.ranks = 32;
    write_result_file(entry.path().string(), r);
  }
  const ReportModel m = model_of(dir);
  EXPECT_EQ(verdict_name(claim(m, "S6").verdict), verdict_name(Verdict::kInconsistent));
  EXPECT_NEAR(claim(m, "S6").checks[1].value, (4 + 12.75) / (1 + 12.75), 1e-9);
  EXPECT_NE(claim(m, "S6").checks[0].measured.find("P=4"), std::string::npos);
}

TEST(ReportClaims, GoldenVerdictsOnTheFixtureSweep) {
  const std::string dir = write_sweep(fresh_dir("sweep"), sweep());
  const ReportModel m = model_of(dir);
  const std::map<std::string, Verdict> expected = {
      {"S1", Verdict::kConsistent},   {"S2", Verdict::kConsistent},
      {"S3", Verdict::kInconsistent}, {"S4", Verdict::kInconsistent},
      {"S5", Verdict::kConsistent},   {"S6", Verdict::kNotMeasurable},
      {"S7", Verdict::kConsistent},   {"S8", Verdict::kConsistent},
      {"S9", Verdict::kConsistent},   {"S10", Verdict::kConsistent},
      {"P1", Verdict::kConsistent},   {"P2", Verdict::kConsistent},
      {"P3", Verdict::kConsistent},   {"P4", Verdict::kNotMeasurable},
      {"P5", Verdict::kInconsistent}, {"P6", Verdict::kConsistent},
      {"P7", Verdict::kInconsistent}, {"P8", Verdict::kInconsistent},
      {"D1", Verdict::kConsistent}};
  ASSERT_EQ(m.groups.size(), 1u);
  ASSERT_EQ(m.groups[0].claims.size(), expected.size());
  for (const ClaimRow& r : m.groups[0].claims) {
    std::string detail;
    for (const CheckOutcome& o : r.checks) {
      detail += "\n  [" + std::string(verdict_name(o.verdict)) + "] " + o.description + ": " +
                o.measured + " / " + o.why;
    }
    EXPECT_EQ(verdict_name(r.verdict), verdict_name(expected.at(r.id))) << r.id << detail;
  }
  // The measured figures behind the verdicts.
  EXPECT_NEAR(claim(m, "S3").checks[0].value, 96.0 / 33.0, 1e-9);
  EXPECT_NEAR(claim(m, "S4").checks[0].value, 1.0, 1e-12);
  EXPECT_NEAR(claim(m, "S4").checks[1].value, 10.0 / 7.0, 1e-12);
  EXPECT_EQ(claim(m, "S1").checks[0].measured.rfind(
                "1 of 1 runs; sync-1f1b x balanced P=4 M=8: [1 1 1 1]", 0),
            0u)
      << claim(m, "S1").checks[0].measured;
  EXPECT_EQ(claim(m, "S9").checks[0].cases, 1);
  // An order judged with a margin says it beside what held.
  const auto margin_of = [&](const std::string& id, const std::string& margin) {
    const std::vector<CheckOutcome>& checks = claim(m, id).checks;
    return std::any_of(checks.begin(), checks.end(), [&](const CheckOutcome& o) {
      return o.measured.find(" setups" + margin) != std::string::npos;
    });
  };
  EXPECT_TRUE(margin_of("P5", " (a step down of up to 2% counts as holding)"));
  EXPECT_TRUE(margin_of("P5", " (each step by more than 5%)"));
  EXPECT_TRUE(margin_of("S8", " (a step down of up to 0.1% counts as holding)"));
  EXPECT_EQ(claim(m, "P4").checks[0].why,
            "an absolute figure of the documents' own (unknown) hardware and model; checked only "
            "with --reference-setup");
  // S7 and the documents' disagreement are stated in the verdict.
  ASSERT_EQ(m.groups.size(), 1u);
  EXPECT_NE(m.groups[0].verdict.find("S7 (memory tight: sync 1F1B; ample: async) is supported"),
            std::string::npos)
      << m.groups[0].verdict;
  EXPECT_NE(m.groups[0].verdict.find("peak memory ordered sync-1F1B < async-1F1B < GPipe in"),
            std::string::npos);
  EXPECT_NE(m.groups[0].verdict.find("Within 16.0 MiB per stage, the best is"), std::string::npos)
      << m.groups[0].verdict;
  // A combination's peak is its worst stage's.
  EXPECT_NE(m.groups[0].verdict.find(" on its worst stage, bubble "), std::string::npos)
      << m.groups[0].verdict;
  // Which schedule for this machine: the planner, calibrated on these results.
  EXPECT_NE(m.groups[0].verdict.find("For this machine (4 x cpu"), std::string::npos)
      << m.groups[0].verdict;
  EXPECT_NE(m.groups[0].verdict.find("the planner "), std::string::npos) << m.groups[0].verdict;
}

// The claims weigh peak memory as the verdict does: only peaks measured
// without a device profiler attached, a run's clean twin where one was made.
TEST(ReportClaims, MemoryClaimsWeighOnlyPeaksMeasuredWithoutADeviceProfiler) {
  const std::string profiled = write_sweep(fresh_dir("profiled"), sweep());
  for (const auto& entry : fs::directory_iterator(profiled)) {
    if (entry.path().extension() != ".json") continue;
    Result r = read_result_file(entry.path().string());
    r.metrics->peak_memory_bytes.device_profiler = "cupti";
    write_result_file(entry.path().string(), r);
  }
  const ReportModel only = model_of(profiled);
  // P8's first check and S8's second order the schedules' peaks.
  for (const auto& [id, check] : {std::pair<std::string, size_t>{"P8", 0}, {"S8", 1}}) {
    const ClaimRow& r = claim(only, id);
    ASSERT_GT(r.checks.size(), check) << id;
    const CheckOutcome& memory = r.checks[check];
    EXPECT_EQ(verdict_name(memory.verdict), verdict_name(Verdict::kNotMeasurable)) << id;
    EXPECT_EQ(memory.why.find("the order"), std::string::npos) << id << ": " << memory.why;
    EXPECT_NE(memory.why.find("with a device profiler attached, which are not weighed"),
              std::string::npos)
        << id << ": " << memory.why;
  }
  // Without the memory check P8 has nothing inconsistent left.
  EXPECT_NE(verdict_name(claim(only, "P8").verdict), verdict_name(Verdict::kInconsistent));
  // Samples/s is no memory figure: S3 is judged as before.
  EXPECT_NEAR(claim(only, "S3").checks[0].value, 96.0 / 33.0, 1e-9);

  // Beside clean runs of the same combinations, the clean peaks decide.
  const std::string both = write_sweep(fresh_dir("clean"), sweep());
  for (const auto& entry : fs::directory_iterator(profiled)) {
    if (entry.path().extension() != ".json") continue;
    fs::copy_file(entry.path(), both + "/profiled-" + entry.path().filename().string());
  }
  const ReportModel m = model_of(both);
  EXPECT_EQ(verdict_name(claim(m, "P8").verdict), verdict_name(Verdict::kInconsistent));
  EXPECT_EQ(claim(m, "P8").checks.back().why.find("device profiler"), std::string::npos);
}

TEST(ReportClaims, AbsoluteFiguresOnlyWithReferenceSetup) {
  const std::string dir = write_sweep(fresh_dir("sweep"), sweep());
  const ReportModel m = model_of(dir, /*setup=*/true);
  // GPipe utilisation: 1 - 9/33 (M=8) and 1 - 9/57 (M=16), median 0.785, not 0.60 +-15%.
  const CheckOutcome& p4 = claim(m, "P4").checks[0];
  EXPECT_EQ(p4.verdict, Verdict::kInconsistent);
  EXPECT_NEAR(p4.value, 0.5 * ((1 - 9.0 / 33) + (1 - 9.0 / 57)), 1e-9);
  EXPECT_NE(p4.measured.find("(gpipe, median of 2 runs on 4 ranks)"), std::string::npos)
      << p4.measured;
  // S3's absolute figure is the document's 8 GPUs': these 4-rank runs are
  // not measured against it.
  const CheckOutcome& s3 = claim(m, "S3").checks.at(1);
  EXPECT_EQ(s3.verdict, Verdict::kNotMeasurable);
  EXPECT_EQ(s3.measured, "");
  EXPECT_EQ(s3.why,
            "the documents measured it on 8 GPUs, and no run on 8 ranks is among the results");
}

TEST(ReportClaims, UserReferenceFileInTheSameFormat) {
  const std::string dir = write_sweep(fresh_dir("sweep"), sweep());
  const std::string ref = fresh_dir("ref") + "/user_reference.json";
  std::ofstream(ref) << R"({"schema":"pipebench.reference/1","claims":[
    {"id":"U1","document":"ours","statement":"1F1B is 2.9x sync here","figures":[],
     "checks":[{"kind":"ratio","metric":"samples_per_second","numerator":"1f1b","denominator":"sync-1f1b",
                "documented":2.909,"tolerance":0.01}]}]})";
  ReportOptions o;
  o.inputs = {dir};
  o.reference = ref;
  o.markdown = fresh_dir("out") + "/r.md";
  std::ostringstream out;
  EXPECT_EQ(run_report(o, out), 0);
  const std::string md = read(o.markdown);
  EXPECT_NE(md.find("| U1 |"), std::string::npos);
  EXPECT_NE(md.find("**consistent**"), std::string::npos) << md;
  EXPECT_EQ(md.find("| S1 |"), std::string::npos);

  std::ofstream(ref)
      << R"({"schema":"pipebench.reference/1","claims":[{"id":"U1","document":"d","statement":"s",
    "checks":[{"kind":"ratio","metric":"joules","numerator":"a","denominator":"b","documented":1}]}]})";
  EXPECT_EQ(usage_error(o),
            ref + ": field 'claims[0].checks[0].metric': unknown metric \"joules\"");
}

TEST(ReportDevice, DeviceFiguresBesideTheHostBubbleOnlyWhenPresent) {
  const std::string plain = write_sweep(fresh_dir("plain"), {FixtureSpec{}});
  EXPECT_EQ(write_html(model_of(plain)).find("Device activity"), std::string::npos);
  EXPECT_EQ(write_markdown(model_of(plain)).find("Device activity"), std::string::npos);

  Result r = testing::make_fixture(FixtureSpec{});
  r.metrics->device = DeviceFigures{.profiler = "cupti",
                                    .bubble_ratio = 0.3124,
                                    .bubble_ratio_per_stage = {0.25, 0.3, 0.35, 0.3496},
                                    .compute_seconds_per_stage = {0.02, 0.021, 0.022, 0.023},
                                    .communication_seconds_per_stage = {0.001, 0.002, 0.003, 0.004},
                                    .overlap_seconds_per_stage = {0, 0.001, 0.001, 0.002},
                                    .busy_seconds_per_stage = {0.021, 0.022, 0.024, 0.025},
                                    .bubble_ratio_samples = {}};
  r.metrics->peak_memory_bytes.device_profiler = "cupti";
  const std::string dir = fresh_dir("device");
  write_result_file(dir + "/1f1b.json", r);
  const ReportModel m = model_of(dir);
  const std::string html = write_html(m);
  EXPECT_NE(html.find("<h3>Device activity, the device bubble beside the host bubble: "),
            std::string::npos);
  // host bubble, device bubble, mean compute / communication / overlap in ms, per stage
  EXPECT_NE(html.find("<td class=\"num\">0.312</td><td class=\"num\">21.500</td>"
                      "<td class=\"num\">2.500</td><td class=\"num\">1.000</td>"
                      "<td>0.25 0.30 0.35 0.35</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("Measured with a device profiler attached"), std::string::npos);
  const std::string md = write_markdown(m);
  EXPECT_NE(md.find("### Device activity (cupti)"), std::string::npos) << md;
  EXPECT_NE(md.find(" | 0.312 | 21.500 | 2.500 | 1.000 | 0.25 0.30 0.35 0.35 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("(cupti attached)"), std::string::npos) << md;
}

// A cuda result's fast paths, each fallback flagged with its reason, in
// both writers; a cpu result has no such section.
TEST(ReportDevice, FastPathsOfCudaResultsShowEachFallbackAndWhy) {
  const std::string plain = write_sweep(fresh_dir("plain-paths"), {FixtureSpec{}});
  EXPECT_EQ(write_markdown(model_of(plain)).find("Fast paths"), std::string::npos);
  EXPECT_EQ(write_html(model_of(plain)).find("Fast paths"), std::string::npos);

  Result slow = testing::make_fixture(FixtureSpec{});
  slow.config.backend = "cuda";
  slow.config.attention = "naive";
  slow.config.attention_reason = "the CUDA emulator has no cuDNN";
  slow.metrics->cuda_graphs = CudaGraphFigures{.captured = 4,
                                               .replayed = 20,
                                               .rebuilt = 0,
                                               .eager = 96,
                                               .eager_reason = "--cuda-graphs off"};
  slow.metrics->gemm_epilogues = GemmEpilogueFigures{
      .fused = 90, .refused = 6, .first_refusal = "rank 1: bias GEMM 2 x 12 x 3 fp32: refused"};
  Result fast = slow;
  fast.config.microbatches = 12;  // another combination (a timeline of 8 fits it)
  fast.config.attention = "fused";
  fast.config.attention_reason = "";
  fast.metrics->cuda_graphs = CudaGraphFigures{
      .captured = 4, .replayed = 116, .rebuilt = 0, .eager = 0, .eager_reason = ""};
  fast.metrics->gemm_epilogues =
      GemmEpilogueFigures{.fused = 96, .refused = 0, .first_refusal = ""};
  Result old = slow;  // a cuda result written before the fields
  old.config.microbatches = 16;
  old.config.attention = "";
  old.config.attention_reason = "";
  old.metrics->cuda_graphs.reset();
  old.metrics->gemm_epilogues.reset();
  const std::string dir = fresh_dir("fast-paths");
  write_result_file(dir + "/slow.json", slow);
  write_result_file(dir + "/fast.json", fast);
  write_result_file(dir + "/old.json", old);
  const ReportModel m = model_of(dir);
  ASSERT_EQ(fast_path_entries(m.groups.at(0)).size(), 3u);

  const std::string md = write_markdown(m);
  const std::string head = "### Fast paths: " + m.groups.at(0).work + "\n";
  EXPECT_NE(md.find(head), std::string::npos) << md;
  EXPECT_NE(md.find(" | **fell back:** naive (the CUDA emulator has no cuDNN) | **fell back:** 4 "
                    "captured, 20 replayed, 96 eager (--cuda-graphs off) | **fell back:** 90 "
                    "fused, 6 refused (rank 1: bias GEMM 2 x 12 x 3 fp32: refused) |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find(" | fused | 4 captured, 116 replayed | 96 fused |\n"), std::string::npos) << md;
  EXPECT_NE(
      md.find(" | **fell back:** naive (reason not recorded) | not recorded | not recorded |"),
      std::string::npos)
      << md;

  const std::string html = write_html(m);
  EXPECT_NE(html.find("<h3>Fast paths: "), std::string::npos);
  EXPECT_NE(html.find("<td><span class=\"badge fell-back\">fell back</span> naive (the CUDA "
                      "emulator has no cuDNN)</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<td>fused</td><td>4 captured, 116 replayed</td><td>96 fused</td>"),
            std::string::npos)
      << html;
}

// ------------------------------------------------------------- bad input --

TEST(ReportInput, EveryMalformedResultExits2NamingFileAndField) {
  FixtureSpec f;
  const std::string good = json::serialize(result_to_json(testing::make_fixture(f)));
  struct Case {
    std::string name;
    std::string text;
    std::string message;  // after "<path>: "
  };
  json::value missing = json::parse(good);
  missing.at("metrics").as_object().erase("samples_per_second");
  json::value wrong = json::parse(good);
  wrong.at("metrics").at("step_time_seconds").as_object()["median"] = "fast";
  json::value schema = json::parse(good);
  schema.as_object()["schema"] = "pipebench.result/9";
  json::value stages = json::parse(good);
  stages.at("config").as_object()["stages"] = 3;
  const std::vector<Case> cases = {
      {"truncated", good.substr(0, good.size() / 3), "malformed JSON ("},
      {"empty", "", "empty file, expected a pipebench result"},
      {"missing", json::serialize(missing), "field 'metrics.samples_per_second': missing"},
      {"wrongtype", json::serialize(wrong),
       "field 'metrics.step_time_seconds.median': expected a number, got a string"},
      {"schema", json::serialize(schema),
       "field 'schema': expected \"pipebench.result/1\", got \"pipebench.result/9\""},
      {"stages", json::serialize(stages),
       "field 'metrics.bubble_ratio.per_stage': expected 3 entries (one per stage, config.stages), "
       "got 4"},
  };
  for (const Case& c : cases) {
    const std::string dir = fresh_dir(c.name);
    write_fixture(dir, f);
    const std::string bad = dir + "/zz_" + c.name + ".json";
    std::ofstream(bad) << c.text;
    ReportOptions o;
    o.inputs = {dir};
    const std::string err = usage_error(o);
    EXPECT_EQ(err.rfind(bad + ": " + c.message, 0), 0u) << c.name << ": " << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << "one line";
    // --skip-bad: the report goes on and lists the file.
    o.skip_bad = true;
    std::ostringstream out;
    EXPECT_EQ(run_report(o, out), 0);
    EXPECT_NE(out.str().find("## Unreadable result files (--skip-bad)"), std::string::npos);
    EXPECT_NE(out.str().find(bad), std::string::npos);
  }
}

TEST(ReportInput, EmptyFolderSaysThereIsNothingToReport) {
  const std::string dir = fresh_dir("empty");
  std::ofstream(dir + "/trace.json") << R"({"traceEvents":[]})";  // other JSON is not a result
  ReportOptions o;
  o.inputs = {dir};
  // What the folder holds instead is said.
  EXPECT_EQ(usage_error(o), "nothing to report: no pipebench result files in " + dir + " (" + dir +
                                "/trace.json is another kind of JSON, not a result)");
  o.inputs = {dir + "/does-not-exist"};
  EXPECT_EQ(usage_error(o), dir + "/does-not-exist: no such file or directory");
  o.inputs = {};
  EXPECT_EQ(usage_error(o),
            "report: expected at least one result folder (pipebench report DIR...)");
  o.inputs = {dir};
  o.threshold = -0.1;
  EXPECT_EQ(usage_error(o), "--threshold: expected a fraction in [0, 1), got -0.1");
}

TEST(ReportInput, MachinesAndBuildsAreKeptApart) {
  const std::string dir = fresh_dir("mixed");
  std::vector<FixtureSpec> a = two(1.0, 1.0);
  std::vector<FixtureSpec> b = two(3.0, 3.0);
  for (FixtureSpec& f : b) f.host = "node2";
  std::vector<FixtureSpec> c = two(2.0, 2.0);
  for (FixtureSpec& f : c) f.git = "def5678";
  write_sweep(dir + "/a", a);
  write_sweep(dir + "/b", b);
  write_sweep(dir + "/c", c);
  const ReportModel m = model_of(dir);
  ASSERT_EQ(m.groups.size(), 3u);
  for (const GroupView& g : m.groups) {
    EXPECT_EQ(g.entries.size(), 2u);
    for (const ResultEntry* e : g.entries) EXPECT_EQ(e->group, g.key);
  }
  // Same combination in one group twice (a rerun): the newer one is kept.
  FixtureSpec again;
  again.schedule = "1f1b";
  again.slowdown = 1.5;
  again.date = "2026-11-30T07:00:00Z";
  write_fixture(dir + "/rerun", again);
  const ReportModel m2 = model_of(dir);
  EXPECT_EQ(m2.loaded.superseded.size(), 1u);
  EXPECT_EQ(m2.loaded.results.size(), 6u);
  // The Markdown report names it; the summary line counts it.
  EXPECT_NE(write_markdown(m2).find("## Superseded result files"), std::string::npos);
  ReportOptions o;
  o.inputs = {dir};
  o.csv = dir + "/report.csv";
  std::ostringstream out;
  EXPECT_EQ(run_report(o, out), 0);
  EXPECT_NE(out.str().find(", 1 superseded (another result of the same combination is reported)"),
            std::string::npos)
      << out.str();
  // Two at the same date: the first read is kept, and said to be, never
  // called the newer.
  again.date = FixtureSpec{}.date;
  write_fixture(dir + "/same", again);
  const ReportModel m3 = model_of(dir + "/same");
  write_fixture(dir + "/same/zz", again);
  const ReportModel tie = model_of(dir + "/same");
  ASSERT_EQ(tie.loaded.superseded.size(), 1u);
  EXPECT_NE(tie.loaded.superseded[0].find(
                " (same date 2026-11-29T07:00:00Z; kept, the first read: " + dir + "/same/"),
            std::string::npos)
      << tie.loaded.superseded[0];
  EXPECT_EQ(tie.loaded.superseded[0].find("newer"), std::string::npos);
  EXPECT_TRUE(m3.loaded.superseded.empty());
}

// ------------------------------------------------------------------ work --

// Results of one machine: `backends` x {gpt-tiny, gpt-small} x {1f1b,
// gpipe}; gpt-small's actions take 10x as long (far fewer samples/s).
std::string two_models(const std::string& dir, const std::vector<std::string>& backends) {
  for (const std::string& backend : backends) {
    for (const std::string model : {"gpt-tiny", "gpt-small"}) {
      for (const std::string schedule : {"1f1b", "gpipe"}) {
        FixtureSpec f;
        f.schedule = schedule;
        if (model == "gpt-small") {
          f.fwd *= 10;
          f.bwd *= 10;
        }
        Result r = testing::make_fixture(f);
        r.config.model = model;
        r.config.backend = backend;
        write_result_file(dir + "/" + backend + "_" + model + "_" + schedule + ".json", r);
      }
    }
  }
  return dir;
}

TEST(ReportWork, TwoModelsAreTwoVerdictsAndEveryOutputNamesTheModel) {
  const std::string dir = two_models(fresh_dir("models"), {"cpu", "timed"});
  const ReportModel m = model_of(dir);
  ASSERT_EQ(m.groups.size(), 4u);  // cpu and timed x two models
  EXPECT_TRUE(m.several_works());
  for (const GroupView& g : m.groups) {
    ASSERT_EQ(g.entries.size(), 2u) << g.key;
    const std::string& model = g.entries.front()->result.config.model;
    EXPECT_EQ(g.work, model + ", mbs 2, fp32");
    const ResultEntry* best = nullptr;
    for (const ResultEntry* e : g.entries) {
      EXPECT_EQ(e->result.config.model, model) << g.key;
      EXPECT_EQ(e->result.config.backend, g.backend) << g.key;
      if (best == nullptr ||
          e->result.metrics->samples_per_second > best->result.metrics->samples_per_second)
        best = e;
    }
    // The verdict ranks the group's own results only: its best is its
    // own fastest, of its own two combinations.
    EXPECT_NE(
        g.verdict.find("the best is " + best->label + ": " +
                       format_number(best->result.metrics->samples_per_second) + " samples/s"),
        std::string::npos)
        << g.verdict;
    EXPECT_NE(g.verdict.find("(of 2 measured combinations)"), std::string::npos) << g.verdict;
    EXPECT_FALSE(g.claims.empty());
  }
  const std::string md = write_markdown(m);
  const std::string html = write_html(m);
  for (const std::string model : {"gpt-tiny", "gpt-small"}) {
    const std::string work = model + ", mbs 2, fp32";
    for (const std::string backend : {"cpu", "timed"}) {
      const std::string title = m.groups[0].machine + ", " + backend + " backend, " + work;
      std::string md_title;  // a Markdown cell escapes '|'
      for (const char ch : title) md_title += ch == '|' ? std::string("\\|") : std::string(1, ch);
      EXPECT_NE(md.find("## Verdict: " + md_title), std::string::npos) << md_title;
      EXPECT_NE(md.find("## Throughput: " + md_title), std::string::npos) << md_title;
      EXPECT_NE(md.find("## The documents' claims: " + md_title), std::string::npos) << md_title;
      EXPECT_NE(html.find("<h2>Measurements: " + xml_escape(title)), std::string::npos) << title;
      EXPECT_NE(html.find("<h2>The documents' claims: " + xml_escape(title)), std::string::npos);
    }
    for (const std::string heading : {"Throughput", "Memory per stage"})
      EXPECT_NE(html.find("<h3>" + heading + ": " + work + "</h3>"), std::string::npos) << heading;
    // The charts' titles name the work too.
    EXPECT_NE(html.find("Samples per second (median step, " + work + ")"), std::string::npos);
    EXPECT_NE(html.find("Bubble per schedule (" + work + ", balanced partition"),
              std::string::npos);
  }
  // CSV: the model and dtype columns; JUnit: the work in every test case's
  // name; Google Benchmark: in every benchmark's name.
  const auto rows = parse_csv(write_csv(m), "r.csv");
  const auto col = [&](const std::string& name) {
    return static_cast<size_t>(std::find(csv_columns().begin(), csv_columns().end(), name) -
                               csv_columns().begin());
  };
  ASSERT_EQ(rows.size(), 9u);
  std::map<std::string, int> per_model;
  for (size_t i = 1; i < rows.size(); ++i) {
    ++per_model[rows[i][col("model")]];
    EXPECT_EQ(rows[i][col("dtype")], "fp32");
  }
  EXPECT_EQ(per_model, (std::map<std::string, int>{{"gpt-small", 4}, {"gpt-tiny", 4}}));
  std::istringstream xml(write_junit(m));
  boost::property_tree::ptree doc;
  boost::property_tree::read_xml(xml, doc);
  std::map<std::string, int> cases;
  for (const auto& [tag, suite] : doc.get_child("testsuites")) {
    if (tag != "testsuite") continue;
    for (const auto& [ctag, tc] : suite) {
      if (ctag == "testcase") ++cases[tc.get<std::string>("<xmlattr>.name")];
    }
  }
  for (const std::string model : {"gpt-tiny", "gpt-small"}) {
    for (const std::string schedule : {"1f1b", "gpipe"}) {
      EXPECT_EQ(cases[schedule + " x balanced P=4 M=8 [" + model + ", mbs 2, fp32]"], 2)
          << model << " " << schedule;  // once per backend
    }
  }
  const json::value gb = json::parse(write_gbench_json(m));
  std::map<std::string, int> names;
  for (const json::value& b : gb.at("benchmarks").as_array()) {
    const std::string name(b.at("name").as_string());
    EXPECT_NE(name.find("/model:"), std::string::npos) << name;
    if (b.at("run_type").as_string() == "aggregate") ++names[name];
  }
  EXPECT_EQ(names.count("pipebench/gpipe/balanced/P:4/M:8/model:gpt-small/mbs:2/dtype:fp32/"
                        "machine:" +
                        m.groups[0].machine + "/backend:timed_median"),
            1u);
  EXPECT_EQ(names.size(), 8u);
  for (const auto& [name, n] : names) EXPECT_EQ(n, 1) << name;  // every name tells one apart
}

// A head padded beyond the true vocabulary is another work; unpadded runs
// and files from before padding keep the key they always had.
TEST(ReportWork, APaddedHeadIsAnotherWork) {
  ResultConfig c;
  c.model = "gpt-small";
  c.micro_batch_size = 4;
  EXPECT_EQ(work_key(c), "model=gpt-small mbs=4 dtype=fp32");
  c.vocab_padding = VocabPadding{.divisor = 128, .vocab = 50257, .padded = 50304};
  EXPECT_EQ(work_key(c), "model=gpt-small mbs=4 dtype=fp32 padded_vocab=50304");
  EXPECT_EQ(work_label(c), "gpt-small, mbs 4, fp32, padded_vocab 50304");
  c.model = "gpt-tiny";  // 512 is a multiple of 128: the same work as unpadded
  c.vocab_padding = VocabPadding{.divisor = 128, .vocab = 512, .padded = 512};
  EXPECT_EQ(work_key(c), "model=gpt-tiny mbs=4 dtype=fp32");
}

TEST(ReportWork, TheGateMatchesBaselineRowsByModel) {
  // The baseline ran gpt-tiny only; tonight gpt-small's combinations, of the
  // same schedules and shapes, are new, not compared with gpt-tiny's.
  const std::string night = two_models(fresh_dir("tonight"), {"timed"});
  const std::string base = fresh_dir("base");
  for (const auto& f : std::filesystem::directory_iterator(night)) {
    if (f.path().filename().string().find("gpt-tiny") != std::string::npos)
      std::filesystem::copy(f.path(), base + "/" + f.path().filename().string());
  }
  ModelOptions o;
  o.inputs = {night};
  const ReportModel m = build_report_model(load_results({night}, false), builtin_reference(),
                                           load_results({base}, false), o);
  ASSERT_TRUE(m.regression);
  ASSERT_EQ(m.regression->rows.size(), 4u);
  for (const RegressionRow& row : m.regression->rows) {
    const bool small = row.work.rfind("gpt-small", 0) == 0;
    // gpt-tiny's rows are matched with the baseline's (too few steps to
    // tell a change: undecidable), gpt-small's are new.
    EXPECT_EQ(row.status == RegressionStatus::kNew, small) << row.label << " " << row.work;
    EXPECT_EQ(row.baseline == nullptr, small) << row.label << " " << row.work;
    if (row.baseline != nullptr) {
      EXPECT_EQ(row.baseline->result.config.model, "gpt-tiny");
    }
    // Rows of the gate's table name their model: the night holds two.
    EXPECT_NE(write_markdown(m).find("| " + row.label + " [" + row.work + "] |"), std::string::npos)
        << row.label;
  }
}

TEST(ReportWork, MemoryWithADeviceProfilerIsQuotedFromARunWithoutIt) {
  Result clean = testing::make_fixture(FixtureSpec{});
  Result profiled = clean;
  profiled.metrics->peak_memory_bytes.device_profiler = "cupti";
  for (int64_t& b : profiled.metrics->peak_memory_bytes.per_stage) b += 64 * kMiB;
  const std::string both = fresh_dir("cupti_and_clean");
  write_result_file(both + "/profiled.json", profiled);
  write_result_file(both + "/clean.json", clean);
  const ReportModel m = model_of(both);
  ASSERT_EQ(m.loaded.results.size(), 2u);  // two measurements, neither superseded
  ASSERT_EQ(m.groups.size(), 1u);
  const GroupView& g = m.groups[0];
  EXPECT_EQ(g.unclean_memory, 0);
  const double peak =
      static_cast<double>(*std::max_element(clean.metrics->peak_memory_bytes.per_stage.begin(),
                                            clean.metrics->peak_memory_bytes.per_stage.end()));
  for (const ResultEntry* e : g.entries) {
    const ResultEntry* quoted = clean_memory(g, *e);
    ASSERT_NE(quoted, nullptr);
    EXPECT_EQ(*metric_value(*quoted, "peak_memory"), peak) << e->source;
  }
  EXPECT_EQ(g.verdict.find("No clean memory figure"), std::string::npos) << g.verdict;
  EXPECT_EQ(g.verdict.find(format_bytes(peak + 64 * kMiB)), std::string::npos) << g.verdict;

  const std::string only = fresh_dir("cupti_only");
  write_result_file(only + "/profiled.json", profiled);
  const ReportModel p = model_of(only);
  EXPECT_EQ(p.groups.at(0).unclean_memory, 1);
  EXPECT_NE(p.groups[0].verdict.find("no peak memory without cupti"), std::string::npos)
      << p.groups[0].verdict;
  EXPECT_NE(p.groups[0].verdict.find("No clean memory figure was measured for 1 result(s)"),
            std::string::npos)
      << p.groups[0].verdict;
  EXPECT_EQ(p.groups[0].verdict.find(format_bytes(peak + 64 * kMiB)), std::string::npos)
      << p.groups[0].verdict;
}

// Where partitions cut the model into the same parts (the parts each
// result recorded), their combinations are one configuration measured once
// per name: the verdict gives how far apart the slowest and fastest of its
// samples/s were, at the median over such configurations and at most. A
// cut of its own, a lone partition and results that did not record their
// parts are not counted.
TEST(ReportVerdict, PartitionsThatCutAlikeGiveTheSpreadOfRunsOfOneConfiguration) {
  const std::string dir = fresh_dir("same_cut");
  std::map<std::string, double> sps;  // schedule/partition -> samples/s
  const auto add = [&](const std::string& schedule, const std::string& partition, double slowdown,
                       const std::string& ranges) {
    FixtureSpec f;
    f.schedule = schedule;
    f.partition = partition;
    f.slowdown = slowdown;
    Result r = testing::make_fixture(f);
    r.config.unit_ranges = ranges;
    write_result_file(dir + "/" + schedule + "_" + partition + ".json", r);
    sps[schedule + "/" + partition] = r.metrics->samples_per_second;
  };
  const std::string same = "0-3,4-7,8-11,12-15";
  add("1f1b", "operator", 1.0, same);
  add("1f1b", "balanced", 1.04, same);
  add("gpipe", "operator", 1.0, same);
  add("gpipe", "balanced", 1.01, same);
  add("zb-h1", "operator", 1.0, same);
  add("zb-h1", "balanced", 1.02, same);
  add("zb-h1", "layer", 1.06, same);                // three names of one cut
  add("1f1b", "layer", 1.5, "0-4,5-8,9-12,13-15");  // a cut of its own
  add("zb-h2", "operator", 1.0, "");                // no parts recorded
  add("zb-h2", "balanced", 1.3, "");
  const ReportModel m = model_of(dir);
  ASSERT_EQ(m.groups.size(), 1u);
  const std::string& verdict = m.groups[0].verdict;
  // The slowest against the fastest of a configuration's names.
  const auto gap = [&](const std::string& schedule, std::vector<std::string> names) {
    double lo = sps.at(schedule + "/" + names[0]), hi = lo;
    for (const std::string& n : names) {
      lo = std::min(lo, sps.at(schedule + "/" + n));
      hi = std::max(hi, sps.at(schedule + "/" + n));
    }
    return (hi - lo) / lo;
  };
  const double g1f1b = gap("1f1b", {"operator", "balanced"});
  const double ggpipe = gap("gpipe", {"operator", "balanced"});
  const double gzb = gap("zb-h1", {"operator", "balanced", "layer"});
  ASSERT_GT(gzb, g1f1b);
  ASSERT_GT(g1f1b, ggpipe);
  const std::string want =
      "balanced and operator (2); balanced, layer and operator (1) cut the model into the same "
      "parts in 3 combinations, each one configuration measured once per name: the slowest and "
      "fastest of its samples/s differed by " +
      format_percent(g1f1b, 1) + " at the median and at most " + format_percent(gzb, 1) +
      " (zb-h1 x balanced P=4 M=8 / layer / operator), the spread between runs of one "
      "configuration.";
  EXPECT_NE(verdict.find(want), std::string::npos) << verdict;

  // Without a second partition of a cut there is nothing to say.
  const std::string alone = fresh_dir("same_cut_alone");
  for (const char* partition : {"operator", "layer"}) {
    FixtureSpec f;
    f.partition = partition;
    Result r = testing::make_fixture(f);
    r.config.unit_ranges = std::string(partition) == "layer" ? "0-4,5-8,9-12,13-15" : same;
    write_result_file(alone + "/" + partition + ".json", r);
  }
  EXPECT_EQ(model_of(alone).groups.at(0).verdict.find("cut the model into the same parts"),
            std::string::npos);
}

// The verdict on a night of H200 results (tests/data/h200): gpt-tiny and
// gpt-small, CUPTI attached, two ranks sharing the GPU.
TEST(ReportWork, RecordedH200ResultsAreJudgedPerModelOnTheGpu) {
  const ReportModel m = model_of(PPB_REPORTS_H200_DATA);
  ASSERT_EQ(m.groups.size(), 2u);
  std::set<std::string> works;
  for (const GroupView& g : m.groups) {
    works.insert(g.work);
    EXPECT_NE(g.verdict.find("For this machine (1 x NVIDIA H200, 131 GiB each, the h200 roofline), "
                             "the planner does not predict: 2 ranks shared one GPU"),
              std::string::npos)
        << g.verdict;
    EXPECT_EQ(g.verdict.find(" x cpu"), std::string::npos) << g.verdict;
    EXPECT_EQ(g.unclean_memory, static_cast<int>(g.entries.size()));
    EXPECT_NE(g.verdict.find("No clean memory figure was measured"), std::string::npos);
  }
  EXPECT_EQ(works, (std::set<std::string>{"gpt-small, mbs 4, fp32", "gpt-tiny, mbs 2, fp32"}));
  // The memory table gives the tracked peak and the device's apart
  // (bubble-P2's 1f1b: 5,747,992,576 and 6,182,103,040 bytes on stage 0).
  const std::string html = write_html(m);
  EXPECT_NE(html.find("<th>peak tracked (max stage)</th><th>peak on the device (max stage)</th>"),
            std::string::npos);
  EXPECT_NE(
      html.find("<td class=\"num\">" + format_bytes(5747992576.0) + "</td><td class=\"num\">" +
                format_bytes(6182103040.0) + " (cupti attached)</td>"),
      std::string::npos)
      << html;
  // A memory budget ranks no peak measured with CUPTI attached.
  ModelOptions budget;
  budget.memory_budget = int64_t{1} << 30;
  const ReportModel b = build_report_model(load_results({PPB_REPORTS_H200_DATA}, false),
                                           builtin_reference(), std::nullopt, budget);
  for (const GroupView& g : b.groups) {
    EXPECT_NE(g.verdict.find("Within 1.00 GiB per stage, nothing can be ranked: no peak memory "
                             "was measured without a device profiler attached."),
              std::string::npos)
        << g.verdict;
  }

  // The same results as if each rank had had its own H200: the planner
  // calibrates the h200 roofline on them and plans for its memory (85% of
  // 141 GB), not the host's.
  LoadedResults own = load_results({PPB_REPORTS_H200_DATA}, false);
  for (ResultEntry& e : own.results) e.result.environment.ranks_per_gpu = 1;
  ModelOptions o;
  const ReportModel c = build_report_model(std::move(own), builtin_reference(), std::nullopt, o);
  for (const GroupView& g : c.groups) {
    EXPECT_NE(g.verdict.find("For this machine (2 x NVIDIA H200, 131 GiB each, the h200 roofline, "
                             "calibrated on " +
                             std::to_string(g.entries.size()) + " results"),
              std::string::npos)
        << g.verdict;
    EXPECT_NE(g.verdict.find(" of 112 GiB"), std::string::npos) << g.verdict;
  }
}

}  // namespace
}  // namespace ppb::reports
