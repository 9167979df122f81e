// The gate on the GPUs' own health (health_gate.cpp): synthetic health
// files beside fixture GPU sweeps, each night a folder <night>/cuda (the
// results) and <night>/health (the probe), gated through `pipebench report`
// as the nightly job runs it.
#include "ppb/reports/health_gate.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "ppb/pipeline/health.hpp"
#include "ppb/reports/report.hpp"

namespace ppb::reports {
namespace {

using testing::FixtureSpec;
using testing::fresh_dir;
using testing::two;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The machine of the fixtures (fixtures.cpp), with one H200.
ResultEnvironment machine(const std::string& date) {
  ResultEnvironment env;
  env.hosts = {"node1"};
  env.rank_hosts = {"node1"};
  env.ranks = 1;
  env.hostname = "node1";
  env.cpu = "Fixture CPU @ 2.0GHz";
  env.gpus = {"NVIDIA H200"};
  env.date = date;
  return env;
}

// Five samples +/- 0.4% around `median`.
std::vector<double> around(double median) {
  return {median * 0.996, median * 0.998, median, median * 1.002, median * 1.004};
}

// The probe of one night: `gemm` x the usual GEMM throughput, copies as
// usual, `reasons` the throttle bits NVML showed.
HealthFile probe(const std::string& date, double gemm, uint64_t reasons = 0) {
  HealthFile h;
  h.date = date;
  h.config = {.model = "gpt-small", .iters = 20, .repeats = 5, .copy_bytes = 256 << 20};
  HealthGpu g{
      .device = 0, .name = "NVIDIA H200", .bus = "0000:3B:00.0", .figures = {}, .gpu_state = {}};
  g.figures["gemm_bf16_tflops"] = around(600 * gemm);
  g.figures["gemm_fp32_tflops"] = around(50 * gemm);
  g.figures["copy_d2d_gbps"] = around(3900);
  g.figures["copy_h2d_gbps"] = around(53);
  GpuSample s;
  s.sm_clock_mhz = reasons != 0 ? 1400 : 1980;
  s.temperature_c = reasons != 0 ? 88 : 62;
  s.throttle_reasons = reasons;
  g.gpu_state = summarise_gpu_samples({s});
  h.gpus.push_back(g);
  h.environment = machine(date);
  return h;
}

// One night: the GPU sweep (two combinations, x slow) in <root>/<name>/cuda
// and the probe in <root>/<name>/health; returns the night's folder.
std::string gpu_night(const std::string& root, const std::string& name, int day, double slow,
                      const HealthFile& health) {
  std::string dir = root + "/" + name;
  const std::string date = "2026-11-" + std::to_string(10 + day) + "T02:00:00Z";
  std::filesystem::create_directories(dir + "/cuda");
  std::filesystem::create_directories(dir + "/health");
  for (FixtureSpec f : two(slow, slow)) {
    f.date = date;
    Result r = testing::make_fixture(f);
    r.config.backend = "cuda";
    r.environment.gpus.assign(static_cast<size_t>(r.environment.ranks), "NVIDIA H200");
    r.environment.ranks_per_gpu = r.environment.ranks;  // the machine's one H200, shared
    write_result_file(OutputPath(dir + "/cuda", f.schedule + ".json"), r);
  }
  HealthFile h = health;
  h.date = h.environment.date = date;
  write_health_file(OutputPath(dir + "/health", "health.json"), h);
  return dir;
}

struct Gated {
  int code = 0;
  std::string out;    ///< what the report printed
  std::string junit;  ///< its JUnit file
  std::string md;     ///< its Markdown file
  std::string html;   ///< its HTML file
};

// `pipebench report` of `input` against the nights under `root`, its
// outputs beside the input (in `dir`).
Gated report_of(const std::string& input, const std::string& root, const std::string& dir) {
  ReportOptions o;
  o.inputs = {input};
  o.baselines = {root};
  o.junit = dir + "/report.junit.xml";
  o.markdown = dir + "/report.md";
  o.html = dir + "/report.html";
  std::ostringstream out;
  Gated g;
  g.code = run_report(o, out);
  g.out = out.str();
  g.junit = testing::read(o.junit);
  g.md = testing::read(o.markdown);
  g.html = testing::read(o.html);
  return g;
}

// Two clean nights, then tonight (sweep x slow, probe as given), gated as
// ci/suite gates: tonight's sweep folder, the earlier nights' root.
Gated gate(double slow, const HealthFile& tonight) {
  const std::string root = fresh_dir("health-nights");
  gpu_night(root, "n1", 1, 1.0, probe("", 1.0));
  gpu_night(root, "n2", 2, 1.0, probe("", 1.0));
  const std::string cur = gpu_night(fresh_dir("health-tonight"), "t", 3, slow, tonight);
  return report_of(cur + "/cuda", root, cur);
}

TEST(HealthGate, ASlowerGemmNightWithASlowerSweepBlamesTheGpu) {
  const Gated g = gate(1.2, probe("", 0.85));
  EXPECT_EQ(g.code, 1);
  EXPECT_NE(g.out.find("the GPU itself got slower (clocks, throttling, a failing part): GPU 0 "
                       "NVIDIA H200 (0000:3B:00.0) gemm_bf16_tflops 600 -> 510 (-15.0%"),
            std::string::npos)
      << g.out;
  EXPECT_NE(g.out.find("the GPU sweep's 2 regression(s) on this machine follow it, not the code"),
            std::string::npos)
      << g.out;
  EXPECT_EQ(g.out.find("software's"), std::string::npos) << g.out;
  // The JUnit file fails the slower figure's case.
  EXPECT_NE(
      g.junit.find("<testcase name=\"GPU 0 NVIDIA H200 (0000:3B:00.0) gemm_bf16_tflops\" "
                   "classname=\"pipebench.health\" time=\"0.000000\">\n      <failure "
                   "type=\"regression\" message=\"regression: gemm_bf16_tflops 600 -&gt; 510"),
      std::string::npos)
      << g.junit;
}

TEST(HealthGate, AHeldProbeWithASlowerSweepBlamesTheSoftware) {
  const Gated g = gate(1.2, probe("", 1.0));
  EXPECT_EQ(g.code, 1);
  EXPECT_NE(g.out.find("the probe held (4 figure(s) unchanged"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("the GPU sweep's 2 regression(s) on this machine are the software's"),
            std::string::npos)
      << g.out;
  EXPECT_EQ(g.out.find("the GPU itself got slower"), std::string::npos) << g.out;
}

TEST(HealthGate, OfTwoProbesOfAMachineInANightTheNewestIsGatedAndTheOtherNamed) {
  // Tonight's probe ran twice: first while the GPU was slower, then again,
  // as usual. One verdict for the machine, from the newest probe, as a
  // night of the history is read; the earlier probe is named, not gated.
  const std::string root = fresh_dir("health-nights");
  gpu_night(root, "n1", 1, 1.0, probe("", 1.0));
  gpu_night(root, "n2", 2, 1.0, probe("", 1.0));
  const std::string cur = gpu_night(fresh_dir("health-tonight"), "t", 3, 1.2, probe("", 1.0));
  HealthFile early = probe("2026-11-13T01:00:00Z", 0.85);
  early.environment = machine(early.date);
  write_health_file(OutputPath(cur + "/health", "health-early.json"), early);
  ASSERT_EQ(load_health({cur}).size(), 2U);
  const Gated g = report_of(cur + "/cuda", root, cur);
  EXPECT_EQ(g.code, 1);
  const auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(g.out, "GPU health ("), 1U) << g.out;
  EXPECT_NE(g.out.find("the probe held (4 figure(s) unchanged"), std::string::npos) << g.out;
  EXPECT_EQ(g.out.find("the GPU itself got slower"), std::string::npos) << g.out;
  const std::string note =
      "another probe of this machine tonight is not gated: " + cur +
      "/health/health-early.json (2026-11-13T01:00:00Z; the newest is gated: " + cur +
      "/health/health.json)";
  EXPECT_NE(g.out.find(note), std::string::npos) << g.out;
  EXPECT_NE(g.md.find(note), std::string::npos);
  EXPECT_NE(g.html.find("another probe of this machine tonight is not gated"), std::string::npos);
  EXPECT_NE(g.junit.find("another probe of this machine tonight is not gated"), std::string::npos);
}

TEST(HealthGate, WithSkipBadABadHealthFileIsListedWithTheUnreadableResults) {
  // A health file cut short tonight and one hand-edited in an earlier
  // night: named (exit 2) without --skip-bad; with it, listed among the
  // unreadable files, and the rest gated.
  const std::string root = fresh_dir("health-bad-nights");
  gpu_night(root, "n1", 1, 1.0, probe("", 1.0));
  const std::string n2 = gpu_night(root, "n2", 2, 1.0, probe("", 1.0));
  const std::string cur = gpu_night(fresh_dir("health-bad-tonight"), "t", 3, 1.0, probe("", 1.0));
  std::ofstream(n2 + "/health/health-edited.json")
      << R"({"schema": "pipebench.health/1", "gpus": "none"})";
  ReportOptions o;
  o.inputs = {cur + "/cuda"};
  o.baselines = {root};
  std::ostringstream out;
  EXPECT_THROW(run_report(o, out), UsageError);
  o.skip_bad = true;
  EXPECT_EQ(run_report(o, out), 0) << out.str();
  EXPECT_NE(out.str().find(n2 + "/health/health-edited.json: "), std::string::npos) << out.str();
  // Tonight's, cut short, in the health folder beside the sweep's: named too.
  std::ofstream(cur + "/health/health-cut.json") << R"({"schema": "pipebench.health/1", "gpus": [)";
  o.skip_bad = false;
  try {
    (void)run_report(o, out);
    ADD_FAILURE() << "a health file cut short was passed over";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(cur + "/health/health-cut.json: malformed JSON (", 0), 0u)
        << e.what();
  }
  o.skip_bad = true;
  std::ostringstream listed;
  EXPECT_EQ(run_report(o, listed), 0);
  EXPECT_NE(listed.str().find(cur + "/health/health-cut.json: malformed JSON"), std::string::npos)
      << listed.str();
  // Tonight's probe, and it alone: the earlier nights' is gone from n2 but not n1.
  std::vector<BadFile> bad;
  EXPECT_EQ(load_health({n2}, &bad).size(), 1U);
  ASSERT_EQ(bad.size(), 1U);
  EXPECT_EQ(bad[0].path, n2 + "/health/health-edited.json");
}

TEST(HealthGate, ASlowerProbeAloneIsARegressionOfTheGpu) {
  const Gated g = gate(1.0, probe("", 0.85));
  EXPECT_EQ(g.code, 1);  // the sweep held, the GPU did not
  EXPECT_NE(g.out.find("the GPU sweep's combinations did not show it"), std::string::npos) << g.out;
}

TEST(HealthGate, AThrottlingReasonSeenTonightIsNamed) {
  // gpu_idle (0x1) is no slowdown and is left out; hw_thermal_slowdown (0x40) is named.
  const Gated g = gate(1.0, probe("", 1.0, 0x41));
  EXPECT_EQ(g.code, 0);
  EXPECT_NE(g.out.find("GPU 0 NVIDIA H200 (0000:3B:00.0): throttled tonight: "
                       "hw_thermal_slowdown (SM clock down to 1400 MHz, up to 88 C)"),
            std::string::npos)
      << g.out;
  EXPECT_EQ(g.out.find("gpu_idle"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("4 of 4 figure(s) unchanged, none slower"), std::string::npos) << g.out;
  // The Markdown report says both, and each figure's verdict.
  EXPECT_NE(g.md.find("- GPU 0 NVIDIA H200 (0000:3B:00.0): throttled tonight: hw_thermal_slowdown"),
            std::string::npos)
      << g.md;
  EXPECT_NE(g.md.find("- GPU 0 NVIDIA H200 (0000:3B:00.0): no change: gemm_bf16_tflops 600 -> 600"),
            std::string::npos)
      << g.md;
}

TEST(HealthGate, ATroubleSaysOnlyWhatTheDriverRead) {
  GpuTrouble t{.gpu = "GPU 1 NVIDIA H200 (0000:4C:00.0)",
               .reasons = {"hw_slowdown"},
               .sm_clock_mhz_min = 1410,
               .temperature_c_max = 91};
  EXPECT_EQ(trouble_text(t),
            "GPU 1 NVIDIA H200 (0000:4C:00.0): throttled tonight: hw_slowdown (SM clock down to "
            "1410 MHz, up to 91 C)");
  // A partition or a virtual GPU whose clocks the driver does not expose.
  t.sm_clock_mhz_min = kNaN;
  EXPECT_EQ(trouble_text(t),
            "GPU 1 NVIDIA H200 (0000:4C:00.0): throttled tonight: hw_slowdown (up to 91 C)");
  t.temperature_c_max = kNaN;
  t.ecc_uncorrected = 2;
  EXPECT_EQ(trouble_text(t),
            "GPU 1 NVIDIA H200 (0000:4C:00.0): throttled tonight: hw_slowdown; 2 uncorrected ECC "
            "error(s) during the probe");
  t.sm_clock_mhz_min = 1410;
  EXPECT_EQ(trouble_text(t),
            "GPU 1 NVIDIA H200 (0000:4C:00.0): throttled tonight: hw_slowdown (SM clock down to "
            "1410 MHz); 2 uncorrected ECC error(s) during the probe");
}

TEST(HealthGate, ProbesOfAnotherMachineAreNotCompared) {
  HealthFile other = probe("", 0.5);
  other.environment.hosts = other.environment.rank_hosts = {"node2"};
  const std::string root = fresh_dir("health-other");
  gpu_night(root, "n1", 1, 1.0, probe("", 1.0));
  const std::string cur = gpu_night(fresh_dir("health-other-t"), "t", 2, 1.0, other);
  const std::vector<HealthSummary> s =
      gate_health(load_health({cur + "/cuda"}), "t", load_nights({root}, false), nullptr, {});
  ASSERT_EQ(s.size(), 1U);
  EXPECT_TRUE(s[0].figures.empty());
  EXPECT_EQ(s[0].new_figures, 4);
  EXPECT_EQ(health_text(s[0]).find("no earlier night to compare with (4 new figure(s))") ==
                std::string::npos,
            false)
      << health_text(s[0]);
}

// One night of a GPU sweep whose runs NVML sampled, without a probe: eight
// combinations (x slow) in <root>/<name>/cuda, each run's GPU state with
// its SM clock at work about `sm_mhz` (+/- 0.35% over the runs), the power
// limit `limit_w`, and the throttle bits `reasons` (hot, at 90 C, when
// any). Returns the night's cuda folder.
std::string sampled_night(const std::string& root, const std::string& name, int day, double slow,
                          double sm_mhz, double limit_w = 700, uint64_t reasons = 0,
                          bool reasons_read = true) {
  const std::string dir = root + "/" + name + "/cuda";
  std::filesystem::create_directories(dir);
  int i = 0;
  for (const char* schedule :
       {"1f1b", "gpipe", "sync-1f1b", "async-1f1b", "hybrid", "pipedream", "zb-h1"}) {
    for (int m : {8, 16}) {
      if (m == 16 && std::string(schedule) != "1f1b") continue;
      FixtureSpec f;
      f.schedule = schedule;
      f.microbatches = m;
      f.slowdown = slow;
      f.steps = 10;
      f.date = "2026-11-" + std::to_string(10 + day) + "T02:00:00Z";
      Result r = testing::make_fixture(f);
      r.config.backend = "cuda";
      r.environment.gpus.assign(static_cast<size_t>(r.environment.ranks), "NVIDIA H200");
      r.environment.ranks_per_gpu = r.environment.ranks;
      GpuSample x;
      x.sm_clock_mhz = sm_mhz * (1 + 0.001 * (i++ - 3.5));
      x.memory_clock_mhz = std::isfinite(sm_mhz) ? 3201 : sm_mhz;  // unread with the SM clock
      x.power_limit_watts = limit_w;
      x.power_watts = 650;
      x.temperature_c = reasons != 0 ? 90 : 60;
      x.throttle_reasons = reasons;
      x.throttle_read = reasons_read;
      x.ecc_corrected = x.ecc_uncorrected = 0;
      GpuState st = summarise_gpu_samples({x, x});
      st.gpu = "node1: NVIDIA H200 (0000:3B:00.0)";
      r.metrics->gpu_state = {st};
      write_result_file(OutputPath(dir, f.schedule + "_m" + std::to_string(m) + ".json"), r);
    }
  }
  return dir;
}

// Two nights of a sampled sweep at the usual clocks, then tonight's.
Gated sampled_gate(double slow, double sm_mhz, double limit_w, uint64_t reasons,
                   bool reasons_read = true) {
  const std::string root = fresh_dir("sampled-nights");
  sampled_night(root, "n1", 1, 1.0, 1980);
  sampled_night(root, "n2", 2, 1.0, 1980);
  const std::string cur = sampled_night(fresh_dir("sampled-tonight"), "t", 3, slow, sm_mhz, limit_w,
                                        reasons, reasons_read);
  return report_of(std::filesystem::path(cur).parent_path().string(), root, cur);  // tonight: "t"
}

TEST(HealthGate, ASweepAtLowerClocksIsTheGpusOwnSlowdownWithoutAProbe) {
  // Tonight the GPU ran the sweep hot, at 14% lower SM clocks, and every
  // combination 15% slower: no health file, but what NVML read during the
  // runs tells the GPU's slowdown from the code's.
  const Gated g = sampled_gate(1.15, 1700, 700, 0x40);
  EXPECT_EQ(g.code, 1);
  EXPECT_NE(g.out.find("the GPU itself got slower (clocks, throttling, a failing part): node1: "
                       "NVIDIA H200 (0000:3B:00.0) sweep_sm_clock_mhz 1980 -> 1700 (-14.1%, p="),
            std::string::npos)
      << g.out;
  EXPECT_NE(g.out.find("; the GPU sweep's 8 regression(s) on this machine follow it, not the code"),
            std::string::npos)
      << g.out;
  EXPECT_NE(g.out.find("GPU STATE node1: NVIDIA H200 (0000:3B:00.0): throttled during the GPU "
                       "sweep: hw_thermal_slowdown (SM clock down to 1694 MHz, up to 90 C)"),
            std::string::npos)
      << g.out;
  EXPECT_NE(g.out.find("REGRESSION GPU health node1: NVIDIA H200 (0000:3B:00.0): "
                       "sweep_sm_clock_mhz 1980 -> 1700 (-14.1%, p=9.81e-05, band 0.0%, "
                       "detectable 7.0%, threshold 7.0%), since t\n"),
            std::string::npos)
      << g.out;
  // The memory clock and the power limit held; the JUnit file fails the clock's case.
  EXPECT_NE(g.md.find("- node1: NVIDIA H200 (0000:3B:00.0): no change: sweep_memory_clock_mhz "
                      "3201 -> 3201"),
            std::string::npos)
      << g.md;
  EXPECT_NE(g.junit.find("<testcase name=\"node1: NVIDIA H200 (0000:3B:00.0) sweep_sm_clock_mhz\" "
                         "classname=\"pipebench.health\" time=\"0.000000\">\n      <failure "),
            std::string::npos)
      << g.junit;
  // The HTML report has the section: the verdict, the trouble, each figure.
  EXPECT_NE(g.html.find("<h2>GPU health</h2>"), std::string::npos);
  EXPECT_NE(g.html.find("<div class=\"verdict fail\">GPU health (node1 | Fixture CPU @ 2.0GHz | "
                        "NVIDIA H200): the GPU itself got slower"),
            std::string::npos);
  EXPECT_NE(g.html.find("<li>node1: NVIDIA H200 (0000:3B:00.0): throttled during the GPU sweep: "
                        "hw_thermal_slowdown"),
            std::string::npos);
  EXPECT_NE(g.html.find("<tr><td>node1: NVIDIA H200 (0000:3B:00.0)</td><td>sweep_sm_clock_mhz</"
                        "td><td><span class=\"badge regressed\">regression</span></td><td>"
                        "sweep_sm_clock_mhz 1980 -&gt; 1700 (-14.1%"),
            std::string::npos);
}

TEST(HealthGate, ASweepAtItsUsualClocksLeavesItsSlowdownToTheSoftware) {
  const Gated g = sampled_gate(1.15, 1980, 700, 0);
  EXPECT_EQ(g.code, 1);
  EXPECT_NE(g.out.find("GPU health (node1 | Fixture CPU @ 2.0GHz | NVIDIA H200): the GPU held "
                       "(3 figure(s) unchanged: the sweep's clocks and power limit as on earlier "
                       "nights): the GPU sweep's 8 regression(s) on this machine are the "
                       "software's"),
            std::string::npos)
      << g.out;
  EXPECT_EQ(g.out.find("GPU STATE"), std::string::npos) << g.out;
  // A lower power limit, the code unchanged: the GPU got slower (a limit is
  // the hardware's, never the build's), the combinations did not show it.
  const Gated capped = sampled_gate(1.0, 1980, 500, 0);
  EXPECT_EQ(capped.code, 1);
  EXPECT_NE(capped.out.find("the GPU itself got slower (clocks, throttling, a failing part): "
                            "node1: NVIDIA H200 (0000:3B:00.0) sweep_power_limit_watts 700 -> 500 "
                            "(-28.6%"),
            std::string::npos)
      << capped.out;
  EXPECT_NE(capped.out.find("; the GPU sweep's combinations did not show it"), std::string::npos)
      << capped.out;
}

TEST(HealthGate, LowerClocksAtThePowerCapAreNotBlamedOnTheGpu) {
  // A heavier build: every combination 15% slower, the GPU held at its power
  // cap (sw_power_cap) at 14% lower clocks, nothing thermal, the limit as
  // before. The clocks moved, but nothing says the GPU is the cause.
  const Gated g = sampled_gate(1.15, 1700, 700, 0x4);
  EXPECT_EQ(g.code, 1);
  EXPECT_NE(g.out.find("GPU health (node1 | Fixture CPU @ 2.0GHz | NVIDIA H200): the GPU ran the "
                       "sweep at lower clocks, with no hardware cause NVML names (no thermal or "
                       "hardware slowdown, no power brake, its power limit as before): node1: "
                       "NVIDIA H200 (0000:3B:00.0) sweep_sm_clock_mhz 1980 -> 1700"),
            std::string::npos)
      << g.out;
  EXPECT_NE(g.out.find("; a build that draws more power holds the GPU lower at its power cap too, "
                       "so the GPU sweep's 8 regression(s) on this machine may be the software's"),
            std::string::npos)
      << g.out;
  EXPECT_EQ(g.out.find("follow it, not the code"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("throttled during the GPU sweep: sw_power_cap"), std::string::npos) << g.out;
  // Lower clocks where the driver gave no reasons: it says so, not "none".
  const Gated unread = sampled_gate(1.15, 1700, 700, 0, false);
  EXPECT_EQ(unread.code, 1);
  EXPECT_NE(unread.out.find("the GPU ran the sweep at lower clocks, and NVML did not give its "
                            "throttle reasons (its power limit as before), so nothing tells the "
                            "GPU's slowdown from the code's: node1: NVIDIA H200"),
            std::string::npos)
      << unread.out;
}

TEST(HealthGate, TheProbeAndTheSweepOfOneMachineAreOneVerdictWhateverGpusTheRunsUsed) {
  // An eight-GPU machine's probe measures all eight; its sweep's runs used
  // one, shared: the probe's machine says 8x, the runs' 1x, and the probe
  // names its host in full: one machine.
  const std::string root = fresh_dir("merged-nights");
  const auto probe_of = [](const std::string& night_cuda, int day) {
    HealthFile h = probe("", 1.0);
    h.date = "2026-11-" + std::to_string(10 + day) + "T02:00:00Z";
    h.environment = machine(h.date);
    // gethostname() gives the full name where MPI's processor name may not.
    h.environment.hosts = {"node1.cluster.example"};
    h.environment.gpus.assign(8, "NVIDIA H200");
    h.environment.ranks = 8;
    const std::string dir = std::filesystem::path(night_cuda).parent_path().string() + "/health";
    std::filesystem::create_directories(dir);
    write_health_file(OutputPath(dir, "health.json"), h);
  };
  probe_of(sampled_night(root, "n1", 1, 1.0, 1980), 1);
  probe_of(sampled_night(root, "n2", 2, 1.0, 1980), 2);
  const std::string cur = sampled_night(fresh_dir("merged-tonight"), "t", 3, 1.15, 1980);
  probe_of(cur, 3);
  const LoadedResults tonight = load_results({cur}, false);
  const std::vector<Night> nights = load_nights({root}, false);
  const RegressionSummary sweep = run_gate(tonight.results, "t", nights, {});
  const std::vector<HealthSummary> s = gate_health(load_health({cur}), "t", nights, &sweep, {});
  ASSERT_EQ(s.size(), 1U);
  EXPECT_EQ(s[0].machine, "node1.cluster.example | Fixture CPU @ 2.0GHz | 8x NVIDIA H200");
  EXPECT_EQ(s[0].figures.size(), 4U + 3U);  // the probe's four, the sweep's three
  EXPECT_EQ(s[0].sweep_regressions, 8);
  EXPECT_EQ(s[0].cause, HealthCause::kSoftware);
  EXPECT_NE(health_text(s[0]).find("the GPU held (7 figure(s) unchanged: GEMM, copies and the "
                                   "sweep's clocks and power limit as on earlier nights)"),
            std::string::npos)
      << health_text(s[0]);
}

TEST(HealthGate, WhatTheSweepSawIsNamedWhenTheDriverGaveNoClock) {
  // NVML gave the reasons and no clock or power limit (NOT_SUPPORTED): no
  // figure to judge, the throttling still named.
  const double kUnread = kNaN;
  const std::string cur =
      sampled_night(fresh_dir("unread-tonight"), "t", 3, 1.0, kUnread, kUnread, 0x8);
  const LoadedResults tonight = load_results({cur}, false);
  const RegressionSummary sweep = run_gate(tonight.results, "t", {}, {});
  const std::vector<HealthSummary> s = gate_health({}, "t", {}, &sweep, {});
  ASSERT_EQ(s.size(), 1U);
  EXPECT_TRUE(s[0].figures.empty());
  ASSERT_EQ(s[0].trouble.size(), 1U);
  EXPECT_EQ(trouble_text(s[0].trouble[0]),
            "node1: NVIDIA H200 (0000:3B:00.0): throttled during the GPU sweep: hw_slowdown (up to "
            "90 C)");
  EXPECT_EQ(health_text(s[0]),
            "GPU health (node1 | Fixture CPU @ 2.0GHz | NVIDIA H200): no figure to compare (NVML "
            "read no clock or power limit during the sweep)");
}

}  // namespace
}  // namespace ppb::reports
