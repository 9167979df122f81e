// Device presets, the roofline unit times, calibration files and model_costs.
#include "ppb/pipeline/device.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "ppb/pipeline/model.hpp"
#include "ppb/pipeline/partition.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

DeviceSpec test_device() {
  DeviceSpec d;
  d.name = "test";
  d.peak_flops = 1e12;
  d.efficiency = 0.5;
  d.mem_bandwidth = 1e11;
  d.kernel_overhead_s = 1e-6;
  return d;
}

// A file under the test temp dir, named per process (two test runs on one
// machine do not share it), removed when it goes out of scope.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& text)
      : path_(::testing::TempDir() + "ppb_device_test_" + std::to_string(::getpid()) + "_" + name) {
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void expect_calibration_error(const std::string& json, const std::string& needle) {
  const TempFile file("bad_calibration.json", json);
  const std::string& path = file.path();
  try {
    read_calibration(path);
    ADD_FAILURE() << "no error for " << json;
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << "message '" << msg << "' lacks the file name";
    EXPECT_NE(msg.find(needle), std::string::npos)
        << "message '" << msg << "' lacks '" << needle << "'";
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
}

TEST(Device, PresetsAndErrors) {
  EXPECT_EQ(device_preset_names(), (std::vector<std::string>{"cpu", "a100", "h100", "h200"}));
  for (const std::string& name : device_preset_names()) {
    const DeviceSpec d = device_preset(name, 2);
    const DeviceSpec fp32 = device_preset(name, 4);
    // Only the GEMMs' peak depends on the storage.
    EXPECT_LE(fp32.peak_flops, d.peak_flops) << name;
    EXPECT_EQ(fp32.mem_bandwidth, d.mem_bandwidth) << name;
    EXPECT_EQ(fp32.vector_flops, d.vector_flops) << name;
    EXPECT_EQ(fp32.memory_bytes, d.memory_bytes) << name;
    EXPECT_EQ(d.name, name);
    EXPECT_GT(d.peak_flops, 0);
    EXPECT_GT(d.efficiency, 0);
    EXPECT_LE(d.efficiency, 1);
    EXPECT_GT(d.mem_bandwidth, 0);
    EXPECT_GT(d.memory_bytes, 0);
    EXPECT_GT(d.link_bandwidth, 0);
  }
  EXPECT_DOUBLE_EQ(device_preset("a100", 2).peak_flops, 312e12);
  EXPECT_DOUBLE_EQ(device_preset("h100", 2).peak_flops, 989.4e12);
  // fp32: the FP32 CUDA-core peak (the cuda backend's fp32 GEMMs use no TF32).
  EXPECT_DOUBLE_EQ(device_preset("a100", 4).peak_flops, 19.5e12);
  EXPECT_DOUBLE_EQ(device_preset("h100", 4).peak_flops, 67e12);
  EXPECT_DOUBLE_EQ(device_preset("h200", 4).peak_flops, 67e12);
  EXPECT_DOUBLE_EQ(device_preset("cpu", 2).peak_flops, device_preset("cpu", 4).peak_flops);
  EXPECT_DOUBLE_EQ(device_preset("h200", 2).mem_bandwidth, 4.8e12);
  EXPECT_EQ(device_preset("h200", 2).memory_bytes, 141'000'000'000);
  const LinkModel link = device_preset("h100", 2).link();
  EXPECT_DOUBLE_EQ(link.bandwidth, 450e9);
  EXPECT_DOUBLE_EQ(link.transfer_time(450'000'000), link.latency + 1e-3);
  try {
    device_preset("tpu", 2);
    ADD_FAILURE();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--device: unknown device 'tpu' (devices: cpu, a100, h100, h200)");
  }
}

TEST(Roofline, ComputeAndMemoryBoundUnits) {
  const DeviceSpec d = test_device();
  const auto units = expand_units(parse_model_spec("gpt-tiny"));
  const auto t = unit_times(units, d);
  ASSERT_EQ(t.size(), units.size());
  // l0.qkv: 12,632,064 FLOPs at 0.5 TFLOP/s effective = 25.26 us, far above
  // its 525,824 bytes at 100 GB/s = 5.26 us: compute bound.
  const Unit& qkv = units[2];
  EXPECT_DOUBLE_EQ(t[2].fwd, qkv.fwd_flops / 0.5e12 + 1e-6);
  EXPECT_DOUBLE_EQ(t[2].fwd, 12'632'064 / 0.5e12 + 1e-6);
  EXPECT_DOUBLE_EQ(t[2].bwd_input, qkv.bwd_input_flops / 0.5e12 + 1e-6);
  // l0.ln1: 131,072 FLOPs (0.26 us) but 1,024 + 66,560 + 131,072 bytes
  // (1.99 us) forward: memory bound.
  EXPECT_DOUBLE_EQ(t[1].fwd, 198'656 / 1e11 + 1e-6);
  // backward-input reads the output gradient too: + boundary bytes.
  EXPECT_DOUBLE_EQ(t[1].bwd_input, (198'656 + 131'072) / 1e11 + 1e-6);
  // Attention has no weights: no backward-weight pass, no overhead either.
  EXPECT_EQ(t[3].bwd_weight, 0);
  EXPECT_EQ(t[0].bwd_input, 0);  // embedding: token ids have no gradient
}

TEST(Roofline, ElementwiseWorkRunsAtTheVectorRate) {
  DeviceSpec d = test_device();
  d.vector_flops = 1e9;  // slow elementwise units
  const auto units = expand_units(parse_model_spec("gpt-tiny"));
  const auto t = unit_times(units, d);
  // ln1 forward: 131,072 elementwise FLOPs at 1 GFLOP/s = 131 us, now above
  // its memory time (1.99 us): compute bound.
  EXPECT_DOUBLE_EQ(t[1].fwd, 131'072 / 1e9 + 1e-6);
  // fc1_gelu forward: GEMM 16,777,216 at 0.5 TFLOP/s + (bias + GeLU)
  // 589,824 at 1 GFLOP/s.
  EXPECT_DOUBLE_EQ(t[6].fwd, 16'777'216 / 0.5e12 + 589'824 / 1e9 + 1e-6);
  // The head's weight gradient is a pure GEMM: unchanged by the vector rate.
  d.vector_flops = 0;
  EXPECT_DOUBLE_EQ(unit_times(units, d)[58].bwd_weight, t[58].bwd_weight);
  EXPECT_GT(t[58].fwd, unit_times(units, d)[58].fwd);
}

// A fused attention's products run at the device's fused_flops (the fp32
// flash kernels' 3xTF32: a third of the TF32 peak), every other unit's
// GEMMs (and a naive attention's) at peak_flops; 0 keeps peak_flops.
TEST(Roofline, FusedProductsRunAtTheFusedRate) {
  DeviceSpec d = test_device();  // 1 TFLOP/s at efficiency 0.5, no vector rate
  d.fused_flops = 4e12;
  d.mem_bandwidth = 1e18;  // compute bound
  ModelSpec spec = parse_model_spec("gpt-tiny");
  const std::vector<Unit> fused = expand_units(spec, Kernels::kCuda, Attention::kFused);
  const std::vector<Unit> naive = expand_units(spec, Kernels::kCuda, Attention::kNaive);
  const std::vector<UnitTime> tf = unit_times(fused, d);
  const std::vector<UnitTime> tn = unit_times(naive, d);
  ASSERT_EQ(fused[3].kind, UnitKind::kAttention);
  EXPECT_TRUE(fused[3].fused_products);
  EXPECT_FALSE(naive[3].fused_products);
  const Unit& a = fused[3];
  // gemm at 4 TFLOP/s x 0.5, elementwise at the GEMM rate (vector_flops 0: 0.5 TFLOP/s).
  EXPECT_DOUBLE_EQ(tf[3].fwd, (a.fwd_flops - a.fwd_elementwise_flops) / 2e12 +
                                  a.fwd_elementwise_flops / 0.5e12 + 1e-6);
  EXPECT_DOUBLE_EQ(tn[3].fwd, naive[3].fwd_flops / 0.5e12 + 1e-6);
  for (size_t i = 0; i < fused.size(); ++i) {
    if (fused[i].kind != UnitKind::kAttention) {
      EXPECT_EQ(tf[i], tn[i]) << fused[i].name;
    }
  }
  d.fused_flops = 0;
  EXPECT_DOUBLE_EQ(unit_times(fused, d)[3].fwd, a.fwd_flops / 0.5e12 + 1e-6);
  // The presets: fp32 fused at a third of the dense TF32 peak; bf16 at the GEMMs' peak.
  EXPECT_DOUBLE_EQ(device_preset("h100", 4).fused_flops, 494.7e12 / 3);
  EXPECT_DOUBLE_EQ(device_preset("a100", 4).fused_flops, 156e12 / 3);
  EXPECT_EQ(device_preset("h200", 2).fused_flops, 0);
}

TEST(Roofline, ScalesWithPeakAndWithTokens) {
  DeviceSpec d = test_device();
  d.kernel_overhead_s = 0;
  const auto units = expand_units(parse_model_spec("gpt-tiny"));
  const auto base = unit_times(units, d);
  d.peak_flops *= 2;
  const auto fast = unit_times(units, d);
  EXPECT_DOUBLE_EQ(fast[6].fwd, base[6].fwd / 2);  // fc1_gelu: compute bound
  EXPECT_DOUBLE_EQ(fast[1].fwd, base[1].fwd);      // ln1: memory bound, unchanged
  d.peak_flops /= 2;
  // Twice the micro-batch: every token-linear GEMM unit takes twice as long.
  const auto big = unit_times(
      expand_units(parse_model_spec("gpt:layers=8,hidden=128,heads=4,seq=64,vocab=512,mbs=4")), d);
  EXPECT_DOUBLE_EQ(big[2].fwd, 2 * base[2].fwd);                // qkv
  EXPECT_DOUBLE_EQ(big[7].bwd_weight, 2 * base[7].bwd_weight);  // fc2
  // On the cpu preset a gpt-tiny step is milliseconds, on an H100 far less.
  double cpu = 0;
  double h100 = 0;
  for (const UnitTime& x : unit_times(units, device_preset("cpu", 4))) cpu += x.total();
  for (const UnitTime& x : unit_times(units, device_preset("h100", 2))) h100 += x.total();
  EXPECT_GT(cpu, 1e-3);
  EXPECT_GT(cpu, 10 * h100);
}

TEST(Calibration, OverridesUnitsAndScalesKinds) {
  const DeviceSpec d = test_device();
  const auto units = expand_units(parse_model_spec("gpt-tiny"));
  const auto roof = unit_times(units, d);
  const TempFile file("calibration.json",
                      R"({"schema": "pipebench.calibration/1", "device": "test",
          "units": {"l0.qkv": {"fwd": 0.5, "bwd_input": 0.25, "bwd_weight": 0.125}},
          "kinds": {"qkv": 3, "fc2": {"fwd": 2, "bwd_input": 1, "bwd_weight": 0}}})");
  const std::string& path = file.path();
  const Calibration cal = read_calibration(path);
  EXPECT_EQ(cal.device, "test");
  EXPECT_EQ(cal.source, path);
  const auto t = unit_times(units, d, &cal);
  EXPECT_EQ(t[2], (UnitTime{0.5, 0.25, 0.125}));  // measured wins over the kind factor
  EXPECT_DOUBLE_EQ(t[9].fwd, 3 * roof[9].fwd);    // l1.qkv scaled
  EXPECT_DOUBLE_EQ(t[9].bwd_weight, 3 * roof[9].bwd_weight);
  EXPECT_DOUBLE_EQ(t[7].fwd, 2 * roof[7].fwd);  // l0.fc2
  EXPECT_DOUBLE_EQ(t[7].bwd_input, roof[7].bwd_input);
  EXPECT_EQ(t[7].bwd_weight, 0);
  EXPECT_EQ(t[3], roof[3]);  // attention untouched

  // Round trip through the writer.
  const Calibration again = parse_calibration(calibration_to_json(cal), "again");
  EXPECT_EQ(unit_times(units, d, &again), t);

  // A calibration of another device or another model is refused.
  Calibration other = cal;
  other.device = "h100";
  EXPECT_THROW(unit_times(units, d, &other), UsageError);
  Calibration wrong_model = cal;
  wrong_model.unit_seconds["l11.qkv"] = {1, 1, 1};
  try {
    unit_times(units, d, &wrong_model);
    ADD_FAILURE();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("units.l11.qkv"), std::string::npos) << e.what();
  }
}

TEST(Calibration, BadFilesNameFileAndField) {
  expect_calibration_error("{", "not valid JSON");
  expect_calibration_error("[]", "field '(document)': expected an object");
  expect_calibration_error(R"({"device": "cpu"})", "field 'schema': missing");
  expect_calibration_error(R"({"schema": "pipebench.calibration/2", "device": "cpu"})",
                           "field 'schema': expected \"pipebench.calibration/1\"");
  expect_calibration_error(R"({"schema": "pipebench.calibration/1"})", "field 'device': missing");
  expect_calibration_error(R"({"schema": "pipebench.calibration/1", "device": 3})",
                           "field 'device': expected a device name");
  expect_calibration_error(
      R"({"schema": "pipebench.calibration/1", "device": "cpu", "units": {"l0.qkv": {"fwd": -1, "bwd_input": 0, "bwd_weight": 0}}})",
      "field 'units.l0.qkv.fwd': expected a number in [0, 1e6]");
  expect_calibration_error(
      R"({"schema": "pipebench.calibration/1", "device": "cpu", "units": {"l0.qkv": {"fwd": "1", "bwd_input": 0, "bwd_weight": 0}}})",
      "field 'units.l0.qkv.fwd': expected a number in [0, 1e6]");
  expect_calibration_error(
      R"({"schema": "pipebench.calibration/1", "device": "cpu", "units": {"l0.qkv": {"fwd": 1, "bwd_input": 0}}})",
      "field 'units.l0.qkv.bwd_weight': missing");
  expect_calibration_error(
      R"({"schema": "pipebench.calibration/1", "device": "cpu", "units": {"l0.qkv": 1}})",
      "field 'units.l0.qkv': expected an object");
  expect_calibration_error(
      R"({"schema": "pipebench.calibration/1", "device": "cpu", "kinds": {"mlp": 2}})",
      "field 'kinds.mlp': unknown unit kind");
  // Finite but beyond any measurement: a plan's sums would overflow.
  expect_calibration_error(
      R"({"schema": "pipebench.calibration/1", "device": "cpu", "kinds": {"qkv": 1e308}})",
      "field 'kinds.qkv': expected a number in [0, 1e6]");
  expect_calibration_error(
      R"({"schema": "pipebench.calibration/1", "device": "cpu", "kinds": {"qkv": {"fwd": 1, "bwd_input": 1000001, "bwd_weight": 1}}})",
      "field 'kinds.qkv.bwd_input': expected a number in [0, 1e6]");
  expect_calibration_error(R"({"schema": "pipebench.calibration/1", "device": "cpu", "extra": 1})",
                           "field 'extra': unknown field");
  try {
    read_calibration("/nonexistent/dir/cal.json");
    ADD_FAILURE();
  } catch (const UsageError& e) {
    EXPECT_STREQ(
        e.what(),
        "/nonexistent/dir/cal.json: cannot open calibration file: No such file or directory");
  }
}

TEST(ModelCosts, SumsUnitsPerVirtualStage) {
  const auto units = expand_units(parse_model_spec("gpt-tiny"));
  const auto times = unit_times(units, device_preset("cpu", 4));
  const int stages = 2;
  const int chunks = 2;
  const auto parts = make_partition("layer", units, times, stages * chunks);
  LinkModel link;
  link.latency = 1e-6;
  const StageCosts costs = model_costs(units, times, parts, stages, chunks, link);
  EXPECT_EQ(costs.stages, 2);
  EXPECT_EQ(costs.chunks_per_stage, 2);
  EXPECT_TRUE(costs.has_bytes);
  EXPECT_EQ(costs.link.latency, 1e-6);
  ASSERT_EQ(costs.chunks.size(), 4U);
  int64_t acts = 0;
  int64_t params = 0;
  for (int v = 0; v < 4; ++v) {
    const UnitRange r = parts[static_cast<size_t>(v)];
    // virtual stage v = chunk * P + stage
    const ChunkCost& c = costs.chunks[static_cast<size_t>(v)];
    double fwd = 0;
    int64_t a = 0;
    for (int i = r.begin; i < r.end; ++i) {
      fwd += times[static_cast<size_t>(i)].fwd;
      a += units[static_cast<size_t>(i)].activation_bytes;
    }
    EXPECT_DOUBLE_EQ(c.fwd, fwd);
    EXPECT_EQ(c.activation_bytes, a);
    EXPECT_EQ(c.send_bytes, units[static_cast<size_t>(r.end - 1)].boundary_bytes);
    acts += c.activation_bytes;
    params += c.param_bytes;
  }
  // Layer cuts fall after fc2: T*h*e = 65,536 bytes cross; the head sends nothing.
  EXPECT_EQ(costs.chunks[0].send_bytes, 65'536);
  EXPECT_EQ(costs.chunks[3].send_bytes, 0);
  const ModelSpec spec = parse_model_spec("gpt-tiny");
  EXPECT_EQ(params, stored_parameter_count(spec) * 4);
  int64_t all_acts = 0;
  for (const Unit& u : units) all_acts += u.activation_bytes;
  EXPECT_EQ(acts, all_acts);
}

}  // namespace
}  // namespace ppb
