// Which capabilities each registered backend offers (backend.hpp), asked of
// the backend make_backend() returns, so that a backend that loses one, or
// offers one its registry entry does not promise, fails here; and what each
// offered capability answers after one real forward and backward of a tiny
// model on one stage. The cuda backend runs where a device is usable: under
// the label emulated, on the CUDA emulator (a missing emulator fails the
// test); elsewhere it skips, saying why.
#include "ppb/exec/backend.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "emulated_label.hpp"
#include "ppb/pipeline/costs.hpp"
#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/model.hpp"

namespace ppb {
namespace {

/// The capabilities a backend offers.
struct Offers {
  std::string name;
  bool check = false;
  bool probes = false;
  bool modelled_time = false;
  bool device = false;
};

const std::vector<Offers>& expected_offers() {
  static const std::vector<Offers> kOffers = {
      {.name = "cpu", .check = true, .probes = true},
      {.name = "timed", .modelled_time = true},
      {.name = "cuda", .check = true, .device = true},
  };
  return kOffers;
}

// The whole of a tiny model on one stage: every backend reads what it uses.
BackendConfig one_stage_config() {
  BackendConfig cfg;
  cfg.spec = parse_model_spec("gpt:layers=1,hidden=32,heads=2,seq=8,vocab=32,ffn=4,mbs=1");
  cfg.units = expand_units(cfg.spec);
  cfg.parts = {{0, static_cast<int>(cfg.units.size())}};
  const DeviceSpec device = device_preset("cpu", 4);
  cfg.costs = model_costs(cfg.units, unit_times(cfg.units, device), cfg.parts, 1, 1, device.link());
  return cfg;
}

// Runs `kind` of micro-batch 0 on the only chunk, which is the first and the
// last virtual stage: it receives and sends nothing.
void run_action(Backend& b, ActionKind kind) {
  ASSERT_EQ(b.input_bytes(0), 0);
  ASSERT_EQ(b.output_bytes(0), 0);
  const StreamTicket t = b.enqueue({.kind = kind, .chunk = 0, .microbatch = 0});
  while (!b.wait(t, 1.0, nullptr)) {
  }
}

std::vector<std::string> registered_names() {
  std::vector<std::string> names;
  for (const BackendInfo& b : backend_list()) names.push_back(b.name);
  return names;
}

TEST(BackendCapabilityTable, ListsEveryRegisteredBackendInOrder) {
  std::vector<std::string> listed;
  for (const Offers& o : expected_offers()) listed.push_back(o.name);
  EXPECT_EQ(registered_names(), listed) << "a new backend: add what it offers to expected_offers()";
}

class BackendCapabilities : public ::testing::TestWithParam<std::string> {};

TEST_P(BackendCapabilities, OfferedAsItsRegistryEntrySays) {
  const std::string& name = GetParam();
  const auto it = std::find_if(expected_offers().begin(), expected_offers().end(),
                               [&](const Offers& o) { return o.name == name; });
  ASSERT_NE(it, expected_offers().end()) << "add what '" << name << "' offers to expected_offers()";
  const Offers& want = *it;
  const BackendInfo& info = backend_info(want.name);
  if (info.unusable != nullptr) {
    if (const std::string why = info.unusable(); !why.empty()) {
      PPB_SKIP_UNLESS_EMULATED("--backend " + want.name + " cannot run here: " + why);
    }
  }
  const std::unique_ptr<Backend> b = make_backend(want.name, one_stage_config());
  ASSERT_EQ(b->name(), want.name);
  EXPECT_EQ(b->check() != nullptr, want.check);
  EXPECT_EQ(b->probes() != nullptr, want.probes);
  EXPECT_EQ(b->modelled_time() != nullptr, want.modelled_time);
  EXPECT_EQ(b->device() != nullptr, want.device);
  // The registry's flags and the capabilities say the same.
  EXPECT_EQ(b->check() != nullptr, info.real_gradients);
  EXPECT_EQ(b->modelled_time() != nullptr, info.modelled_time);
  EXPECT_EQ(b->device() != nullptr, info.traits.device);

  run_action(*b, ActionKind::kForward);
  if (const CheckAccess* ck = b->check()) {
    EXPECT_TRUE(std::isfinite(ck->loss(0, 0)));
    EXPECT_GT(ck->loss(0, 0), 0);  // a cross-entropy
    EXPECT_EQ(ck->weight_version(0), 0);
    EXPECT_EQ(ck->weight_version_of(0, 0), 0);
  }
  run_action(*b, ActionKind::kBackward);
  if (const CheckAccess* ck = b->check()) {
    const std::vector<std::vector<float>> grads = ck->gradients(0);
    ASSERT_EQ(grads.size(), one_stage_config().units.size());  // one per unit
    double sum = 0;
    for (const std::vector<float>& g : grads) {
      for (float x : g) sum += std::fabs(x);
    }
    EXPECT_GT(sum, 0) << "the backward accumulated no gradient";
  }
  if (StepProbes* probes = b->probes()) {
    EXPECT_GT(probes->speed_probe(), 0);
    const std::vector<UnitTime> spent = probes->take_kind_seconds();
    ASSERT_EQ(spent.size(), static_cast<size_t>(kUnitKinds));
    double fwd = 0;
    for (const UnitTime& t : spent) fwd += t.fwd;
    EXPECT_GT(fwd, 0) << "the forward's units were not timed";
  }
  if (const ModelledTime* modelled = b->modelled_time()) {
    EXPECT_GT(modelled->time_scale(), 0);
    EXPECT_DOUBLE_EQ(modelled->time_scale(), default_time_scale(one_stage_config().costs));
  }
  if (DeviceAccess* device = b->device()) {
    EXPECT_EQ(device->out_of_memory(), "");
    const DeviceMemoryFigures peak = device->device_memory();
    EXPECT_GT(peak.pool_peak, 0) << "the actions' activations come from the pool";
    EXPECT_GT(peak.outside_pool, 0) << "cuBLAS's workspace";
    device->reset_device_peak();
    EXPECT_LE(device->device_memory().pool_peak, peak.pool_peak);
  }
  std::vector<std::vector<float>> before;
  if (const CheckAccess* ck = b->check()) before = ck->weights(0);
  b->optimizer_step(0);
  if (const CheckAccess* ck = b->check()) {
    EXPECT_EQ(ck->weight_version(0), 1);
    // The fp32 master read back per unit, as the gradients; the step moved
    // it, and the weights the kernels read followed.
    const std::vector<std::vector<float>> after = ck->weights(0);
    const std::vector<std::vector<float>> grads = ck->gradients(0);
    ASSERT_EQ(after.size(), before.size());
    ASSERT_EQ(after.size(), grads.size());
    int64_t moved = 0;
    for (size_t u = 0; u < after.size(); ++u) {
      ASSERT_EQ(after[u].size(), grads[u].size());
      ASSERT_EQ(after[u].size(), before[u].size());
      for (size_t i = 0; i < after[u].size(); ++i) moved += after[u][i] != before[u][i] ? 1 : 0;
    }
    EXPECT_GT(moved, 0) << "the optimizer step left every weight as it was";
    EXPECT_EQ(ck->stale_compute_weights(0), 0);
  }
  if (const DeviceAccess* device = b->device()) {
    // F, B and the optimizer step, each counted once by how it ran; the
    // first step's actions run eagerly (they size the static buffers), and
    // that is no fallback: no reason unless graphs are off.
    const CudaGraphFigures g = device->graphs();
    EXPECT_EQ(g.captured + g.replayed + g.rebuilt + g.eager, 3);
    EXPECT_GE(g.eager, 2);
    // F's and B's linear layers: their bias, GeLU and bias gradient folded
    // into cuBLASLt GEMMs or refused, each counted.
    const GemmEpilogueFigures e = device->gemm_epilogues();
    EXPECT_GT(e.fused + e.refused, 0);
    EXPECT_EQ(e.refused == 0, e.first_refusal.empty()) << e.first_refusal;
    if (testing::emulator_required()) {  // the emulator captures: the step's first graph
      EXPECT_EQ(e.refused, 0) << e.first_refusal;
      EXPECT_EQ(g.captured, 1);
      EXPECT_EQ(g.eager, 2);
      EXPECT_EQ(g.eager_reason, "");
    }
  }
}

// Four steps of two micro-batches through two chunks on one stage (chunk
// 0's output is chunk 1's input), the message buffers alternating between
// two sets from step to step as the executor's do; with graphs off, and with
// graphs on, where the first step sizes the static buffers, the second
// captures each action and the rest replay them.
struct GraphRun {
  std::vector<std::vector<std::vector<std::vector<float>>>> weights;  // per step, chunk, unit
  std::vector<double> losses;                                         // per step and micro-batch
  CudaGraphFigures graphs;
  int64_t tracked_peak = 0;
};

GraphRun run_two_chunks(bool graphs) {
  BackendConfig cfg = one_stage_config();
  const int n = static_cast<int>(cfg.units.size());
  cfg.parts = {{0, n / 2}, {n / 2, n}};
  cfg.chunks = 2;
  cfg.microbatches = 2;
  cfg.learning_rate = 0.05f;
  cfg.cuda_graphs = graphs;
  const DeviceSpec device = device_preset("cpu", 4);
  cfg.costs = model_costs(cfg.units, unit_times(cfg.units, device), cfg.parts, 1, 2, device.link());
  const std::unique_ptr<Backend> b = make_backend("cuda", cfg);
  const int64_t boundary = b->output_bytes(0);
  EXPECT_EQ(boundary, b->input_bytes(1));
  EXPECT_GT(boundary, 0);
  std::vector<TrackedBuffer> acts;
  std::vector<TrackedBuffer> grads;
  for (int i = 0; i < 4; ++i) {  // two sets of two micro-batches
    acts.push_back(b->allocate(boundary, MemorySpace::kDevice, MemCategory::kCommBuffers));
    grads.push_back(b->allocate(boundary, MemorySpace::kDevice, MemCategory::kCommBuffers));
  }
  const auto act = [&](ActionKind kind, int chunk, int64_t mb, const std::byte* in,
                       std::byte* out) {
    const StreamTicket t =
        b->enqueue({.kind = kind, .chunk = chunk, .microbatch = mb, .in = in, .out = out});
    while (!b->wait(t, 1.0, nullptr)) {
    }
  };
  GraphRun run;
  const CheckAccess& ck = *b->check();
  for (int step = 0; step < 4; ++step) {
    for (int64_t mb = 0; mb < 2; ++mb) {
      const auto k = static_cast<size_t>(int64_t{2} * (step % 2) + mb);  // the buffers move
      act(ActionKind::kForward, 0, mb, nullptr, acts[k].data());
      act(ActionKind::kForward, 1, mb, acts[k].data(), nullptr);
    }
    for (int64_t mb = 0; mb < 2; ++mb) {
      const auto k = static_cast<size_t>(int64_t{2} * (step % 2) + mb);
      run.losses.push_back(ck.loss(1, mb));
      act(ActionKind::kBackward, 1, mb, nullptr, grads[k].data());
      act(ActionKind::kBackward, 0, mb, grads[k].data(), nullptr);
    }
    b->optimizer_step(0);
    b->optimizer_step(1);
    run.weights.push_back({ck.weights(0), ck.weights(1)});
  }
  run.graphs = b->device()->graphs();
  run.tracked_peak = b->memory().peak_total();
  return run;
}

TEST(CudaBackendGraphs, ReplayedActionsComputeWhatEagerOnesDoBitForBit) {
  if (const std::string why = backend_info("cuda").unusable(); !why.empty()) {
    PPB_SKIP_UNLESS_EMULATED("--backend cuda cannot run here: " + why);
  }
  const GraphRun off = run_two_chunks(false);
  const GraphRun on = run_two_chunks(true);
  EXPECT_EQ(off.graphs, (CudaGraphFigures{0, 0, 0, int64_t{4} * 10, "--cuda-graphs off"}));
  if (on.graphs.eager_reason.find("cudaStreamBeginCapture") == std::string::npos) {
    // 8 actions and 2 optimizer steps a step: the actions eager in the
    // first, captured in the second (each moved buffer staged, so nothing
    // is rebuilt), replayed in the last two.
    EXPECT_EQ(on.graphs, (CudaGraphFigures{2 + 8, 2 + int64_t{2} * 10, 0, 8, ""}));
  }
  EXPECT_EQ(on.losses, off.losses);  // exactly: the same kernels on the same data
  ASSERT_EQ(on.weights.size(), off.weights.size());
  for (size_t step = 0; step < on.weights.size(); ++step) {
    EXPECT_TRUE(on.weights[step] == off.weights[step]) << "the weights after step " << step;
  }
  EXPECT_NE(off.weights[0], off.weights[3]) << "the steps trained nothing";
  // The tracker counts the buffers placed in the static region as it counts
  // the pool's: the memory model's figure does not change with graphs.
  EXPECT_EQ(on.tracked_peak, off.tracked_peak);
}

INSTANTIATE_TEST_SUITE_P(Registered, BackendCapabilities, ::testing::ValuesIn(registered_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace ppb
