// The report's writers (writers.hpp: JUnit, CSV, Google Benchmark JSON,
// HTML, Markdown) on fixture sweeps made with the tool itself
// (fixtures.hpp).
#include "ppb/reports/writers.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "ppb/reports/format.hpp"
#include "ppb/reports/report.hpp"
#include "ppb/reports/report_model.hpp"

namespace ppb::reports {
namespace {

namespace json = boost::json;
using testing::FixtureSpec;
using testing::fresh_dir;
using testing::model_of;
using testing::read;
using testing::sweep;
using testing::two;
using testing::write_fixture;
using testing::write_sweep;

TEST(ReportJunit, ShapeThatCiSystemsRead) {
  const std::string base = write_sweep(fresh_dir("base"), two(1.0, 1.0));
  FixtureSpec gone;
  gone.schedule = "pipedream";
  write_fixture(base, gone);
  const std::string cur = write_sweep(fresh_dir("cur"), two(1.10, 1.0));
  const std::string path = fresh_dir("out") + "/junit.xml";
  ReportOptions o;
  o.inputs = {cur};
  o.baselines = {base};
  o.junit = path;
  std::ostringstream out;
  ASSERT_EQ(run_report(o, out), 1);

  namespace pt = boost::property_tree;
  pt::ptree doc;
  pt::read_xml(path, doc);
  const pt::ptree& root = doc.get_child("testsuites");
  EXPECT_EQ(root.get<int>("<xmlattr>.tests"), 3);
  EXPECT_EQ(root.get<int>("<xmlattr>.failures"), 1);
  EXPECT_EQ(root.get<int>("<xmlattr>.errors"), 0);
  EXPECT_EQ(root.get<int>("<xmlattr>.skipped"), 1);
  int suites = 0, cases = 0, failures = 0, skipped = 0;
  for (const auto& [tag, suite] : root) {
    if (tag != "testsuite") continue;
    ++suites;
    EXPECT_FALSE(suite.get<std::string>("<xmlattr>.name").empty());
    const int tests = suite.get<int>("<xmlattr>.tests");
    int here = 0;
    int here_failed = 0;
    EXPECT_GE(suite.get<double>("<xmlattr>.time"), 0.0);
    for (const auto& [ctag, tc] : suite) {
      if (ctag != "testcase") continue;
      ++here;
      ++cases;
      EXPECT_FALSE(tc.get<std::string>("<xmlattr>.name").empty());
      EXPECT_EQ(tc.get<std::string>("<xmlattr>.classname").rfind("pipebench.", 0), 0u);
      EXPECT_GE(tc.get<double>("<xmlattr>.time"), 0.0);
      if (const auto f = tc.get_child_optional("failure")) {
        ++failures;
        ++here_failed;
        EXPECT_EQ(f->get<std::string>("<xmlattr>.type"), "regression");
        EXPECT_EQ(f->get<std::string>("<xmlattr>.message").rfind("samples/s ", 0), 0u);
        EXPECT_EQ(tc.get<std::string>("<xmlattr>.name"),
                  "1f1b x balanced P=4 M=8 [gpt-tiny, mbs 2, fp32]");
      }
      if (tc.get_child_optional("skipped")) ++skipped;
    }
    EXPECT_EQ(here, tests);
    EXPECT_EQ(suite.get<int>("<xmlattr>.failures"), here_failed);
  }
  EXPECT_EQ(suites, 2);  // the machine group and "missing from this run"
  EXPECT_EQ(cases, 3);
  EXPECT_EQ(failures, 1);
  EXPECT_EQ(skipped, 1);
}

// ------------------------------------------------------------- csv, gbench --

TEST(ReportCsv, RoundTrips) {
  const std::string dir = write_sweep(fresh_dir("sweep"), sweep());
  const std::string path = fresh_dir("out") + "/r.csv";
  ReportOptions o;
  o.inputs = {dir};
  o.csv = path;
  std::ostringstream out;
  ASSERT_EQ(run_report(o, out), 0);
  const auto rows = parse_csv(read(path), path);
  const ReportModel m = model_of(dir);
  ASSERT_EQ(rows.size(), m.loaded.results.size() + 1);
  EXPECT_EQ(rows[0], csv_columns());
  auto col = [&](const std::string& name) {
    return static_cast<size_t>(std::find(csv_columns().begin(), csv_columns().end(), name) -
                               csv_columns().begin());
  };
  for (size_t i = 0; i < m.loaded.results.size(); ++i) {
    const ResultEntry& e = m.loaded.results[i];
    const auto& row = rows[i + 1];
    EXPECT_EQ(row[col("source")], e.source);
    EXPECT_EQ(row[col("schedule")], e.result.config.schedule);
    EXPECT_EQ(std::stoi(row[col("microbatches")]), e.result.config.microbatches);
    // Exact doubles back.
    EXPECT_EQ(std::strtod(row[col("samples_per_second")].c_str(), nullptr),
              e.result.metrics->samples_per_second);
    EXPECT_EQ(std::strtod(row[col("step_time_median")].c_str(), nullptr),
              e.result.metrics->step_time_seconds.median);
    EXPECT_EQ(std::strtod(row[col("bubble_ratio")].c_str(), nullptr),
              e.result.metrics->bubble_ratio.measured);
    EXPECT_EQ(std::strtod(row[col("peak_memory_bytes")].c_str(), nullptr),
              *metric_value(e, "peak_memory"));
    EXPECT_EQ(row[col("machine")], e.machine);  // contains '|' and spaces, survives
  }
  // Quoting: a model spec with commas and quotes survives.
  EXPECT_EQ(parse_csv("a,b\n\"gpt:layers=2,hidden=64\",\"say \"\"hi\"\"\"\n", "x")[1],
            (std::vector<std::string>{"gpt:layers=2,hidden=64", "say \"hi\""}));
  EXPECT_THROW(parse_csv("a,b\n1,2,3\n", "x.csv"), UsageError);
}

TEST(ReportGbench, GoogleBenchmarkJsonThatCompareReads) {
  std::vector<FixtureSpec> specs = two(1.0, 1.0);
  for (FixtureSpec& f : specs) f.steps = 3;
  const std::string dir = write_sweep(fresh_dir("sweep"), specs);
  const std::string path = fresh_dir("out") + "/g.json";
  ReportOptions o;
  o.inputs = {dir};
  o.gbench = path;
  std::ostringstream out;
  ASSERT_EQ(run_report(o, out), 0);
  const json::value doc = json::parse(read(path));
  EXPECT_TRUE(doc.at("context").is_object());
  EXPECT_TRUE(doc.at("context").at("date").is_string());
  const json::array& b = doc.at("benchmarks").as_array();
  ASSERT_EQ(b.size(), 2u * (3 + 1));  // 3 timed steps + the median aggregate, per combination
  const json::object& first = b[0].as_object();
  EXPECT_EQ(first.at("name").as_string(),
            "pipebench/1f1b/balanced/P:4/M:8/model:gpt-tiny/mbs:2/dtype:fp32");
  EXPECT_EQ(first.at("run_type").as_string(), "iteration");
  EXPECT_EQ(first.at("time_unit").as_string(), "ms");
  EXPECT_EQ(first.at("repetitions").as_int64(), 3);
  // 1F1B, P=4, M=8: step (M+P-1)(TF+TB) = 33 ms; the first timed step is 1.02 x that.
  EXPECT_NEAR(first.at("real_time").to_number<double>(), 33.0 * 1.02, 1e-9);
  EXPECT_NEAR(first.at("items_per_second").to_number<double>(), 16 / (0.033 * 1.02), 1e-6);
  const json::object& median = b[3].as_object();
  EXPECT_EQ(median.at("run_type").as_string(), "aggregate");
  EXPECT_EQ(median.at("aggregate_name").as_string(), "median");
  EXPECT_EQ(median.at("name").as_string(),
            "pipebench/1f1b/balanced/P:4/M:8/model:gpt-tiny/mbs:2/dtype:fp32_median");
  EXPECT_NEAR(median.at("items_per_second").to_number<double>(), 16 / 0.033, 1e-6);
}

// compare.py matches runs by name: two measurements never share one. The
// same combinations over another transport, and from another build of the
// same machine (an A/B of two builds), get names of their own.
TEST(ReportGbench, NamesTellEveryMeasurementApart) {
  namespace fs = std::filesystem;
  const std::string dir = write_sweep(fresh_dir("gb_base"), two(1.0, 1.0));
  const std::string ordered = fresh_dir("gb_ordered");
  const std::string other_build = fresh_dir("gb_build");
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() != ".json" || f.path().string().ends_with(".trace.json")) continue;
    json::value doc = json::parse(read(f.path().string()));
    if (!doc.is_object() || !doc.as_object().contains("environment")) continue;
    doc.at("config").as_object()["transport"] = "mpi-ordered";
    std::ofstream(ordered + "/" + f.path().filename().string()) << json::serialize(doc);
    doc = json::parse(read(f.path().string()));
    doc.at("environment").as_object()["git"] = "0123456789ab";
    std::ofstream(other_build + "/" + f.path().filename().string()) << json::serialize(doc);
  }
  const auto medians = [](const std::vector<std::string>& inputs) {
    ReportOptions o;
    o.inputs = inputs;
    o.gbench = fresh_dir("gb_out") + "/g.json";
    std::ostringstream out;
    EXPECT_EQ(run_report(o, out), 0) << out.str();
    std::vector<std::string> names;
    const json::value doc = json::parse(read(o.gbench));
    for (const json::value& b : doc.at("benchmarks").as_array()) {
      if (b.at("run_type").as_string() == "aggregate") names.emplace_back(b.at("name").as_string());
    }
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> transports = medians({dir, ordered});
  ASSERT_EQ(transports.size(), 4u);
  EXPECT_EQ(std::adjacent_find(transports.begin(), transports.end()), transports.end());
  EXPECT_NE(std::find(transports.begin(), transports.end(),
                      "pipebench/1f1b/balanced/P:4/M:8/model:gpt-tiny/mbs:2/dtype:fp32/"
                      "transport:mpi-ordered_median"),
            transports.end());
  // JUnit's case names and the tables say what tells the two apart; in the
  // common case, one measurement per combination, labels stay as they are.
  ModelOptions mo;
  mo.inputs = {dir, ordered};
  const ReportModel both =
      build_report_model(load_results(mo.inputs, false), builtin_reference(), std::nullopt, mo);
  const std::string junit = write_junit(both);
  for (const char* transport : {"mpi", "mpi-ordered"}) {
    EXPECT_NE(junit.find("name=\"1f1b x balanced P=4 M=8 [transport " + std::string(transport) +
                         "] [gpt-tiny, mbs 2, fp32]\""),
              std::string::npos)
        << junit;
  }
  const std::string md = write_markdown(both);
  EXPECT_NE(md.find("\n| 1f1b [transport mpi-ordered] | balanced | 4 | 8 | ok |"),
            std::string::npos)
      << md;
  EXPECT_EQ(write_junit(model_of(dir)).find("[transport "), std::string::npos);
  const std::vector<std::string> builds = medians({dir, other_build});
  ASSERT_EQ(builds.size(), 4u);
  EXPECT_EQ(std::adjacent_find(builds.begin(), builds.end()), builds.end());
  for (const std::string& n : builds) EXPECT_NE(n.find("/build:"), std::string::npos) << n;
}

// -------------------------------------------------------------- html / md --

TEST(ReportHtml, OneSelfContainedPageWithEverySection) {
  const std::string dir = write_sweep(fresh_dir("sweep"), sweep());
  const ReportModel m = model_of(dir);
  const std::string html = write_html(m);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  size_t pos = 0;
  int external = 0;
  while ((pos = html.find("http", pos)) != std::string::npos) {
    if (html.compare(pos, 26, "http://www.w3.org/2000/svg") != 0) ++external;
    ++pos;
  }
  EXPECT_EQ(external, 0);
  const std::string work = ": gpt-tiny, mbs 2, fp32</h3>";
  for (const std::string& heading :
       {std::string("<h2>Verdict</h2>"), "<h3>Throughput" + work, "<h3>Memory per stage" + work,
        "<h3>Bubbles, measured against theory" + work,
        "<h3>Pipeline pictures, measured median step beside the prediction" + work,
        std::string("<h2>The documents' claims: "), std::string("<h2>Environment</h2>")}) {
    EXPECT_NE(html.find(heading), std::string::npos) << heading;
  }
  // The verdict comes first.
  EXPECT_LT(html.find("<h2>Verdict</h2>"), html.find("<h3>Throughput: "));
  // Gantt pairs: measured and predicted for every schedule of the showcase setup.
  ASSERT_EQ(m.groups.size(), 1u);
  const GroupView& g = m.groups[0];
  EXPECT_EQ(g.showcase_label, "gpt-tiny, mbs 2, fp32, balanced partition, P=4, M=8");
  EXPECT_EQ(g.gantt.size(), 8u);
  for (const GanttPair& p : g.gantt) {
    EXPECT_EQ(p.predicted.size(), 4u) << p.entry->label << ": " << p.predicted_source;
    // The prediction simulates the same actions the fixture ran.
    // (to 1e-12 s: Boost.JSON 1.81 parses some doubles 1 ulp off)
    for (size_t s = 0; s < p.predicted.size() && s < p.entry->result.timeline.size(); ++s) {
      const auto& want = p.entry->result.timeline[s];
      const auto& got = p.predicted[s];
      ASSERT_EQ(got.size(), want.size()) << p.entry->label << " stage " << s;
      for (size_t k = 0; k < got.size(); ++k) {
        EXPECT_EQ(got[k].op, want[k].op) << p.entry->label << " s" << s << " #" << k;
        EXPECT_EQ(got[k].mb, want[k].mb) << p.entry->label << " s" << s << " #" << k;
        EXPECT_EQ(got[k].chunk, want[k].chunk) << p.entry->label << " s" << s << " #" << k;
        EXPECT_NEAR(got[k].start, want[k].start, 1e-12) << p.entry->label << " s" << s << " #" << k;
        EXPECT_NEAR(got[k].end, want[k].end, 1e-12) << p.entry->label << " s" << s << " #" << k;
      }
    }
  }
  for (const char* id : {"S1", "S10", "P8", "D1"}) {
    EXPECT_NE(html.find(std::string("<b>") + id + "</b>"), std::string::npos);
  }
  // The bubble table's closed forms, (P-1)/(M+P-1) and (P-1)/M, only on the
  // rows of the schedules they describe.
  const size_t bubbles = html.find("<h3>Bubbles, measured against theory");
  const auto bubble_row = [&](const std::string& label) {
    const size_t at = html.find("<tr><td>" + label + "</td>", bubbles);
    return at == std::string::npos ? std::string() : html.substr(at, html.find("</tr>", at) - at);
  };
  const auto cells = [](const std::string& row) {
    std::vector<std::string> out;
    for (size_t at = row.find("<td"); at != std::string::npos; at = row.find("<td", at + 1)) {
      const size_t open = row.find('>', at) + 1;
      out.push_back(row.substr(open, row.find("</td>", open) - open));
    }
    return out;
  };
  const std::vector<std::string> gpipe = cells(bubble_row("gpipe x balanced P=4 M=8"));
  ASSERT_EQ(gpipe.size(), 8u);
  EXPECT_EQ(gpipe[3], "0.273");  // 3/11
  EXPECT_EQ(gpipe[6], "0.375");  // 3/8
  for (const char* other : {"zb-h1 x balanced P=4 M=8", "sync-1f1b x balanced P=4 M=8",
                            "interleaved-1f1b x balanced P=4 M=8 V=2"}) {
    const std::vector<std::string> row = cells(bubble_row(other));
    ASSERT_EQ(row.size(), 8u) << other;
    EXPECT_EQ(row[3], "-") << other;
    EXPECT_EQ(row[6], "-") << other;
  }
  size_t svgs = 0;
  for (pos = html.find("<svg"); pos != std::string::npos; pos = html.find("<svg", pos + 1)) ++svgs;
  EXPECT_EQ(svgs, 1u + 1 + 1 + 1 + 2 * 8);  // throughput, memory, bubbles, Gantt legend, 8 pairs
}

TEST(ReportMarkdown, FitsACiLog) {
  const std::string dir = write_sweep(fresh_dir("sweep"), sweep());
  const std::string md = write_markdown(model_of(dir));
  EXPECT_EQ(md.rfind("# pipebench report\n", 0), 0u);
  EXPECT_LT(md.find("## Verdict"), md.find("## Throughput"));
  EXPECT_NE(md.find("| 1f1b | balanced | 4 | 8 | ok | 485 | 33.0 | 0.273 (0.273) | 0.375 (0.375) | "
                    "16.8 MiB | ok (2e-06) |"),
            std::string::npos)
      << md;
  size_t lines = 0;
  for (char c : md) lines += c == '\n' ? 1 : 0;
  EXPECT_LT(lines, 120u);
}

// The environment row of a group is every result's: sweeps of 2 and 4
// ranks sharing one GPU, on two dates, are one group, and its row names
// both rank counts, both sharings and the span of dates.
TEST(ReportEnvironment, AGroupsRowIsEveryResultsEnvironment) {
  FixtureSpec two_ranks;
  two_ranks.stages = 2;
  two_ranks.gpus = 1;
  two_ranks.date = "2026-11-29T07:00:00Z";
  FixtureSpec four_ranks = two_ranks;
  four_ranks.stages = 4;
  four_ranks.date = "2026-11-29T08:00:00Z";
  const std::string dir = write_sweep(fresh_dir("env"), {two_ranks, four_ranks});
  const ReportModel m = model_of(dir);
  ASSERT_EQ(m.groups.size(), 1u);
  const GroupEnvironment env = group_environment(m.groups[0]);
  EXPECT_EQ(env.ranks, "2, 4");
  EXPECT_EQ(env.gpus, "NVIDIA H200 (2 or 4 ranks per GPU)");
  EXPECT_EQ(env.dates, "2026-11-29T07:00:00Z .. 2026-11-29T08:00:00Z");
  const std::string md = write_markdown(m);
  EXPECT_NE(md.find(" | 2, 4 | "), std::string::npos) << md;
  EXPECT_NE(md.find(" | NVIDIA H200 (2 or 4 ranks per GPU) | "), std::string::npos) << md;
  const std::string html = write_html(m);
  EXPECT_NE(html.find("<td class=\"num\">2, 4</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>2026-11-29T07:00:00Z .. 2026-11-29T08:00:00Z</td>"), std::string::npos);
}

// A check that also covered the first warm-up step (check.steps 2) says so
// in both reports' check column; one that did not (or a file written
// before the field) shows the error alone.
TEST(ReportCheckColumn, SaysWhenTheWarmUpStepWasCheckedToo) {
  const std::string dir = write_sweep(fresh_dir("check_steps"), sweep());
  ReportModel m = model_of(dir);
  ASSERT_FALSE(m.loaded.results.empty());
  for (ResultEntry& e : m.loaded.results) e.result.metrics->check->steps = 1;
  EXPECT_EQ(write_markdown(m).find(" steps) |"), std::string::npos);
  EXPECT_EQ(write_html(m).find(" steps</td>"), std::string::npos);
  m.loaded.results.front().result.metrics->check->steps = 2;
  EXPECT_NE(write_markdown(m).find("| ok (2e-06, 2 steps) |"), std::string::npos);
  EXPECT_NE(write_html(m).find(" 2e-06 over 2 steps</td>"), std::string::npos);
  // The optimizer step's error beside the gradients', as run prints it.
  m.loaded.results.front().result.metrics->check->update_rel_error = 3e-07;
  EXPECT_NE(write_markdown(m).find("| ok (2e-06, update 3e-07, 2 steps) |"), std::string::npos);
  EXPECT_NE(write_html(m).find(" 2e-06, update 3e-07 over 2 steps</td>"), std::string::npos);
}

// A combination whose --check failed, and one that ended with an error:
// the verdict names both, and JUnit fails the check ("check") beside the
// run error.
TEST(ReportFailures, AFailedCheckAndAnErrorAreNamedInTheVerdictAndJunit) {
  const std::string dir = fresh_dir("failures");
  std::vector<FixtureSpec> specs = two(1.0, 1.0);
  Result failed = testing::make_fixture(specs[0]);
  failed.metrics->check->passed = false;
  failed.metrics->check->max_rel_error = 0.03;
  write_result_file(OutputPath(dir, "failed.json"), failed);
  Result error = testing::make_fixture(specs[1]);
  error.status = ResultStatus::kError;
  error.error = "rank 1: cudaErrorIllegalAddress";
  error.metrics.reset();
  write_result_file(OutputPath(dir, "error.json"), error);
  const ReportModel m = model_of(dir);
  ASSERT_EQ(m.groups.size(), 1U);
  EXPECT_NE(m.groups[0].verdict.find("FAILED: 2 combination(s): "), std::string::npos)
      << m.groups[0].verdict;
  EXPECT_NE(m.groups[0].verdict.find("1f1b x balanced P=4 M=8 (--check failed: max relative "
                                     "error 0.030)"),
            std::string::npos)
      << m.groups[0].verdict;
  EXPECT_NE(m.groups[0].verdict.find(
                "gpipe x balanced P=4 M=8 (status error: rank 1: cudaErrorIllegalAddress)"),
            std::string::npos)
      << m.groups[0].verdict;
  // Neither is a choice: the verdict recommends no combination.
  EXPECT_EQ(m.groups[0].verdict.find("the best is"), std::string::npos) << m.groups[0].verdict;
  const std::string junit = write_junit(m);
  EXPECT_NE(junit.find("<failure type=\"check\" message=\"--check failed: max relative error "
                       "0.030\">"),
            std::string::npos)
      << junit;
  EXPECT_NE(junit.find("<error type=\"run-error\" message=\"rank 1: cudaErrorIllegalAddress\">"),
            std::string::npos)
      << junit;
  // A sweep whose checks passed has no such point, nor has an invalid
  // combination (a cut that cannot place its stages: a sweep's routine answer).
  Result invalid = testing::make_fixture(specs[1]);
  invalid.status = ResultStatus::kInvalid;
  invalid.error = "partition layer cannot place 4 stages";
  invalid.metrics.reset();
  const std::string routine = write_sweep(fresh_dir("routine"), {specs[0]});
  write_result_file(OutputPath(routine, "invalid.json"), invalid);
  EXPECT_EQ(model_of(routine).groups[0].verdict.find("FAILED"), std::string::npos)
      << model_of(routine).groups[0].verdict;
  EXPECT_EQ(
      model_of(write_sweep(fresh_dir("passed"), two(1.0, 1.0))).groups[0].verdict.find("FAILED"),
      std::string::npos);
}

// A result's text with control bytes (a library's coloured error) or
// bytes that are not UTF-8 is written as \xNN, as on a terminal (a result
// file holds only UTF-8, or it could not be read back), and the JUnit file
// stays well-formed XML.
TEST(ReportFailures, ControlBytesInAResultLeaveJunitWellFormed) {
  const std::string dir = fresh_dir("control_bytes");
  Result error = testing::make_fixture(two(1.0, 1.0)[1]);
  error.status = ResultStatus::kError;
  error.error = "rank 1: \x1b[31mcudaErrorIllegalAddress\x01 \xff";
  error.metrics.reset();
  write_result_file(OutputPath(dir, "error.json"), error);
  const std::string junit = write_junit(model_of(dir));
  EXPECT_NE(junit.find("message=\"rank 1: \\x1b[31mcudaErrorIllegalAddress\\x01 \\xff\""),
            std::string::npos)
      << junit;
  for (const char c : junit) {
    const auto u = static_cast<unsigned char>(c);
    EXPECT_TRUE(u >= 0x20 || c == '\n' || c == '\t' || c == '\r') << "byte " << static_cast<int>(u);
  }
  // Read back from a file that holds them (as JSON's \u001b), they are
  // escaped on the way into XML; newlines stay.
  EXPECT_EQ(xml_escape("a\x1b[31m\x01\xff\nb<"), "a\\x1b[31m\\x01\\xff\nb&lt;");
  // Valid UTF-8 that XML 1.0 forbids (U+FFFF, U+FFFE), a C1 control a
  // terminal takes as CSI (U+009B) and a direction override (U+202E) are
  // shown as their codes: the file parses, and reads as it is.
  EXPECT_EQ(xml_escape("s\xef\xbf\xbf \xef\xbf\xbe \xc2\x9b"
                       "31m \xe2\x80\xae!"),
            "s\\uffff \\ufffe \\u009b31m \\u202e!");
  EXPECT_EQ(xml_escape("caf\xc3\xa9 \xce\xbcs"), "caf\xc3\xa9 \xce\xbcs");  // text stays text
}

// Markdown: text from the results neither splits a table row nor starts a
// tag; a backslash stays one.
TEST(ReportMarkdown, ResultTextStaysInItsCell) {
  std::vector<FixtureSpec> specs = two(1.0, 1.0);
  const std::string dir = write_sweep(fresh_dir("md_cells"), specs);
  namespace fs = std::filesystem;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() != ".json") continue;
    json::value doc = json::parse(read(f.path().string()));
    if (!doc.is_object() || !doc.as_object().contains("metrics")) continue;
    doc.at("metrics").as_object()["peak_memory_bytes"].as_object()["device_profiler"] =
        "a|b <img src=x> c\\|d";
    std::ofstream(f.path()) << json::serialize(doc);
  }
  const std::string md = write_markdown(model_of(dir));
  const size_t head = md.find("\n| schedule | partition | P | M | status |");
  ASSERT_NE(head, std::string::npos) << md;
  const auto cells = [](const std::string& line) {
    size_t n = 0;
    for (size_t i = 0; i < line.size(); ++i) n += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    return n;
  };
  const std::string header = md.substr(head + 1, md.find('\n', head + 1) - head - 1);
  size_t at = md.find('\n', head + 1);  // the |---| line
  at = md.find('\n', at + 1);           // the first row
  const std::string row = md.substr(at + 1, md.find('\n', at + 1) - at - 1);
  EXPECT_EQ(cells(row), cells(header)) << row;
  EXPECT_NE(row.find("(a\\|b \\<img src=x> c\\\\\\|d attached)"), std::string::npos) << row;
}

// A claim whose checks all miss the same run says why once: on a sweep of
// 1f1b alone, S1's two checks (sync 1F1B's in-flight count and its
// memory) both lack a sync-1f1b run.
TEST(ReportMarkdown, ClaimsSayEachReasonOnce) {
  FixtureSpec f;
  f.schedule = "1f1b";
  const std::string dir = write_sweep(fresh_dir("one_schedule"), {f});
  const std::string md = write_markdown(model_of(dir));
  const std::string reason = "no successful sync-1f1b run among the results";
  const size_t s1 = md.find("\n| S1 |");
  ASSERT_NE(s1, std::string::npos) << md;
  const std::string row = md.substr(s1 + 1, md.find('\n', s1 + 1) - s1 - 1);
  EXPECT_NE(row.find("**not measurable here** (" + reason + ")"), std::string::npos) << row;
  size_t rows = 0;
  for (size_t at = md.find("\n| ", md.find("## The documents' claims")); at != std::string::npos;
       at = md.find("\n| ", at + 1)) {
    const std::string line = md.substr(at + 1, md.find('\n', at + 1) - at - 1);
    const size_t open = line.find("** (");
    if (open == std::string::npos) continue;
    ++rows;
    std::vector<std::string> parts;
    const std::string reasons = line.substr(open + 4, line.rfind(") |") - open - 4);
    for (size_t b = 0, e = 0; e != std::string::npos; b = e + 2) {
      e = reasons.find("; ", b);
      const std::string part = reasons.substr(b, e == std::string::npos ? e : e - b);
      EXPECT_EQ(std::count(parts.begin(), parts.end(), part), 0) << line;
      parts.push_back(part);
    }
  }
  EXPECT_GT(rows, 5u);
}

}  // namespace
}  // namespace ppb::reports
