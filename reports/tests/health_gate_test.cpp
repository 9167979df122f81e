// The gate on the GPUs' own health (health_gate.cpp): synthetic health
// files beside fixture GPU sweeps, each night a folder <night>/cuda (the
// results) and <night>/health (the probe), gated through `pipebench report`
// as the nightly job runs it.
#include "ppb/reports/health_gate.hpp"

#include <gtest/gtest.h>

#include <filesystem>
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
};

// Two clean nights, then tonight (sweep x slow, probe as given), gated as
// ci/suite gates: tonight's sweep folder, the earlier nights' root.
Gated gate(double slow, const HealthFile& tonight) {
  const std::string root = fresh_dir("health-nights");
  gpu_night(root, "n1", 1, 1.0, probe("", 1.0));
  gpu_night(root, "n2", 2, 1.0, probe("", 1.0));
  const std::string cur = gpu_night(fresh_dir("health-tonight"), "t", 3, slow, tonight);
  ReportOptions o;
  o.inputs = {cur + "/cuda"};
  o.baselines = {root};
  o.junit = cur + "/report.junit.xml";
  o.markdown = cur + "/report.md";
  std::ostringstream out;
  Gated g;
  g.code = run_report(o, out);
  g.out = out.str();
  g.junit = testing::read(o.junit);
  g.md = testing::read(o.markdown);
  return g;
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

TEST(HealthGate, ASlowerProbeAloneIsARegressionOfTheGpu) {
  const Gated g = gate(1.0, probe("", 0.85));
  EXPECT_EQ(g.code, 1);  // the sweep held, the GPU did not
  EXPECT_NE(g.out.find("the GPU sweep did not show it"), std::string::npos) << g.out;
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

}  // namespace
}  // namespace ppb::reports
