// The --check probe's optimizer-update check (run/check.hpp): the update's
// error formula on hand-made weights, and CheckProbe's hooks around real
// optimizer steps of the cpu backend, which pass for a correct step and fail
// (error of order 1) for a step that did nothing and for a learning rate
// other than the backend's; the next step's gradients against the
// reference's second step; NaN in the check's figures.
#include "run/check.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "ppb/exec/backend.hpp"
#include "ppb/exec/cpu_reference.hpp"
#include "ppb/pipeline/model.hpp"

namespace ppb::run {
namespace {

TEST(SgdUpdateError, ZeroForTheFp32StepFusedOrNot) {
  const float lr = 1e-3f;
  const std::vector<float> before = {1.0f, -0.25f, 0.0f, 3.0e-2f};
  const std::vector<float> grads = {0.5f, -2.0f, 1.0e-3f, 7.0f};
  std::vector<float> separate(before.size());
  std::vector<float> fused(before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    separate[i] = before[i] - static_cast<float>(static_cast<double>(lr) * grads[i]);
    fused[i] = std::fma(-lr, grads[i], before[i]);
  }
  EXPECT_EQ(sgd_update_error(before, grads, separate, lr), 0.0);
  EXPECT_EQ(sgd_update_error(before, grads, fused, lr), 0.0);
}

TEST(SgdUpdateError, MeasuredOnTheUpdateNotOnTheWeights) {
  const float lr = 0.5f;
  // Exact in fp32: lr * g = {0.25, -1}, the largest |lr * g| is 1.
  const std::vector<float> before = {4.0f, 8.0f};
  const std::vector<float> grads = {0.5f, -2.0f};
  EXPECT_EQ(sgd_update_error(before, grads, std::vector<float>{3.75f, 9.0f}, lr), 0.0);
  // No update: off by the whole update, 1 of max|lr * g|.
  EXPECT_EQ(sgd_update_error(before, grads, before, lr), 1.0);
  // Twice the learning rate: off by one update.
  EXPECT_EQ(sgd_update_error(before, grads, std::vector<float>{3.5f, 10.0f}, lr), 1.0);
  // Half of it: off by half an update.
  EXPECT_EQ(sgd_update_error(before, grads, std::vector<float>{3.875f, 8.5f}, lr), 0.5);
  // One element updated from a stale gradient of 0.
  EXPECT_EQ(sgd_update_error(before, grads, std::vector<float>{4.0f, 9.0f}, lr), 0.25);
}

TEST(SgdUpdateError, ZeroGradientsAndNonFiniteWeights) {
  const std::vector<float> w = {1.0f, 2.0f};
  const std::vector<float> zero = {0.0f, 0.0f};
  EXPECT_EQ(sgd_update_error(w, zero, w, 1e-3f), 0.0);
  EXPECT_EQ(sgd_update_error(w, zero, std::vector<float>{1.0f, 2.5f}, 1e-3f), 1.0);
  const std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN(), 2.0f};
  EXPECT_EQ(sgd_update_error(w, std::vector<float>{1.0f, 1.0f}, nan, 1e-3f), 1.0);
  EXPECT_EQ(sgd_update_error(std::vector<float>{}, {}, {}, 1e-3f), 0.0);
}

TEST(SgdUpdateError, WorstUnitOfAChunk) {
  const std::vector<std::vector<float>> before = {{4.0f}, {}, {8.0f}};
  const std::vector<std::vector<float>> grads = {{0.5f}, {}, {-2.0f}};
  // The second unit with weights (small next to the first's update) did nothing.
  EXPECT_EQ(sgd_update_error(before, grads, {{3.75f}, {}, {8.0f}}, 0.5f), 1.0);
  EXPECT_EQ(sgd_update_error(before, grads, {{3.75f}, {}, {9.0f}}, 0.5f), 0.0);
}

// The cpu backend, the whole of a tiny model on one stage.
std::unique_ptr<Backend> cpu_backend(float learning_rate) {
  BackendConfig cfg;
  cfg.spec = parse_model_spec("gpt:layers=1,hidden=32,heads=2,seq=8,vocab=32,ffn=4,mbs=1");
  cfg.units = expand_units(cfg.spec);
  cfg.parts = {{0, static_cast<int>(cfg.units.size())}};
  cfg.learning_rate = learning_rate;
  return make_backend("cpu", cfg);
}

// A forward and a backward of micro-batch 0: gradients for the next step.
void forward_backward(Backend& b) {
  for (const ActionKind kind : {ActionKind::kForward, ActionKind::kBackward}) {
    const StreamTicket t = b.enqueue({.kind = kind, .chunk = 0, .microbatch = 0});
    while (!b.wait(t, 1.0, nullptr)) {
    }
  }
}

// The probe around one optimizer step of chunk 0, armed with `probe_lr`;
// `step` false leaves the step out. Returns its UpdateCheck.
UpdateCheck probed_step(Backend& b, float probe_lr, bool step) {
  forward_backward(b);
  CheckProbe probe;
  probe.arm(*b.check(), probe_lr, /*stashing=*/false);
  probe.optimizer_begin(0);
  if (step) b.optimizer_step(0);
  probe.optimizer_end(0);
  EXPECT_EQ(probe.updates.size(), 1u);
  EXPECT_EQ(probe.grads.size(), 1u);  // a flush schedule's gradients, for the reference
  return probe.updates.at(0);
}

TEST(CheckProbeUpdate, PassesForTheBackendsOwnStep) {
  const std::unique_ptr<Backend> b = cpu_backend(1e-3f);
  const UpdateCheck u = probed_step(*b, 1e-3f, true);
  EXPECT_EQ(u.rel_error, 0.0);
  EXPECT_EQ(u.stale_compute, 0);
}

TEST(CheckProbeUpdate, FailsForAMissingUpdate) {
  const std::unique_ptr<Backend> b = cpu_backend(1e-3f);
  const UpdateCheck u = probed_step(*b, 1e-3f, false);
  EXPECT_GT(u.rel_error, kUpdateTolerance);
  EXPECT_NEAR(u.rel_error, 1.0, 0.05);
}

TEST(CheckProbeUpdate, FailsForAnotherLearningRate) {
  const std::unique_ptr<Backend> b = cpu_backend(1e-3f);
  // The backend steps with 1e-3: against 2e-3 it applied half the update,
  // against 5e-4 twice it.
  EXPECT_NEAR(probed_step(*b, 2e-3f, true).rel_error, 0.5, 0.05);
  EXPECT_NEAR(probed_step(*b, 5e-4f, true).rel_error, 1.0, 0.05);
}

TEST(CheckProbeUpdate, OnlyEachChunksFirstStep) {
  const std::unique_ptr<Backend> b = cpu_backend(1e-3f);
  forward_backward(*b);
  CheckProbe probe;
  probe.arm(*b->check(), 1e-3f, /*stashing=*/true);
  probe.optimizer_begin(0);
  b->optimizer_step(0);
  probe.optimizer_end(0);
  ASSERT_EQ(probe.updates.size(), 1u);
  EXPECT_EQ(probe.updates.at(0).rel_error, 0.0);
  EXPECT_TRUE(probe.grads.empty());  // weight stashing compares no gradients
  // A second step of the chunk (here one that does nothing) is not checked.
  forward_backward(*b);
  probe.optimizer_begin(0);
  probe.optimizer_end(0);
  EXPECT_EQ(probe.updates.at(0).rel_error, 0.0);
}

// next_step(): the step after the check step has its chunks' first
// optimizer steps checked afresh (a replay that does nothing fails), and
// its gradients are that step's.
TEST(CheckProbeUpdate, TheNextStepsFirstUpdateIsCheckedToo) {
  const std::unique_ptr<Backend> b = cpu_backend(1e-3f);
  forward_backward(*b);
  CheckProbe probe;
  probe.arm(*b->check(), 1e-3f, /*stashing=*/false);
  probe.optimizer_begin(0);
  b->optimizer_step(0);
  probe.optimizer_end(0);
  ASSERT_EQ(probe.updates.at(0).rel_error, 0.0);
  for (const bool step : {true, false}) {
    forward_backward(*b);
    const std::vector<std::vector<float>> now = b->check()->gradients(0);
    probe.next_step();
    EXPECT_TRUE(probe.updates.empty());
    EXPECT_TRUE(probe.grads.empty());
    probe.optimizer_begin(0);
    if (step) b->optimizer_step(0);
    probe.optimizer_end(0);
    ASSERT_EQ(probe.updates.size(), 1u);
    if (step) {
      EXPECT_EQ(probe.updates.at(0).rel_error, 0.0);
    } else {
      EXPECT_NEAR(probe.updates.at(0).rel_error, 1.0, 0.05);
    }
    EXPECT_EQ(probe.grads.at(0), now);
  }
}

// The worst relative error of the gradients the probe read against a
// reference step, over the units.
double against(const CheckProbe& probe, const ReferenceStep& ref) {
  const std::vector<std::vector<float>>& mine = probe.grads.at(0);
  EXPECT_EQ(mine.size(), ref.grads.size());
  double worst = 0;
  for (size_t u = 0; u < mine.size(); ++u) {
    worst = std::max(worst, max_relative_error(mine[u], ref.grads[u]));
  }
  return worst;
}

// Two steps of the cpu backend against reference_steps(): the first step's
// gradients are the reference's first, the second step's (from the weights
// the first step's SGD left) its second, which is another step altogether;
// a second step that carried the first's gradients over (here: its
// micro-batch accumulated twice, as if nothing had zeroed them) is caught.
TEST(CheckProbeNextStep, TheSecondStepIsTheReferencesSecond) {
  const float lr = 0.05f;  // large enough that the second step's gradients move
  const std::unique_ptr<Backend> b = cpu_backend(lr);
  const ModelSpec spec =
      parse_model_spec("gpt:layers=1,hidden=32,heads=2,seq=8,vocab=32,ffn=4,mbs=1");
  CpuModelOptions mo;
  mo.seed = BackendConfig{}.seed;
  const std::vector<ReferenceStep> ref = reference_steps(spec, 1, 1, mo, 2, lr);
  ASSERT_EQ(ref.size(), 2u);
  CheckProbe probe;
  probe.arm(*b->check(), lr, /*stashing=*/false);
  forward_backward(*b);
  probe.optimizer_begin(0);
  b->optimizer_step(0);
  probe.optimizer_end(0);
  EXPECT_LE(against(probe, ref[0]), 1e-6);
  const std::vector<std::vector<float>> first = probe.grads.at(0);

  probe.next_step();
  forward_backward(*b);
  probe.optimizer_begin(0);
  EXPECT_LE(against(probe, ref[1]), 1e-5);
  EXPECT_GT(against(probe, ref[0]), 1e-3);  // the second step is not the first again
  EXPECT_NE(probe.grads.at(0), first);
  b->optimizer_step(0);
  probe.optimizer_end(0);

  // A third step that accumulates its micro-batch twice: twice the gradients.
  probe.next_step();
  forward_backward(*b);
  forward_backward(*b);
  probe.optimizer_begin(0);
  EXPECT_GT(against(probe, ref[1]), 0.5);
}

TEST(CheckReference, ANonFiniteGradientIsAsFarOffAsCanBe) {
  const std::vector<float> ref = {1.0f, 2.0f};
  const std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN(), 2.0f};
  const std::vector<float> inf = {1.0f, std::numeric_limits<float>::infinity()};
  EXPECT_EQ(max_relative_error(nan, ref), std::numeric_limits<double>::infinity());
  EXPECT_EQ(max_relative_error(inf, ref), std::numeric_limits<double>::infinity());
  EXPECT_EQ(max_relative_error(ref, ref), 0.0);
  EXPECT_TRUE(std::isnan(worse(0.5, std::numeric_limits<double>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(worse(std::numeric_limits<double>::quiet_NaN(), 0.5)));
  EXPECT_EQ(worse(0.5, 0.25), 0.5);
}

}  // namespace
}  // namespace ppb::run
