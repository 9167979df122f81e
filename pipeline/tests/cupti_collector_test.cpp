// The CUPTI collector on a real GPU (label gpu): kernels, a memset and a copy
// launched inside the launch hooks of two actions and an optimizer step, one
// memset outside them. Every operation must come back once, attributed to the
// launch it came from, classified (the NCCL-named kernel as communication, the
// unlaunched memset as message staging), on the launching stream, with no
// dropped or skipped records, and inside the host's steady-clock window
// around the work (the clock alignment); and a CUDA graph's kernels tied to
// the action that launched the graph; and copies still running at a step's
// end on a context made before the collector synchronised into their step.
// Skipped, saying why, where CUPTI cannot run (no driver, no device, CUPTI
// held by another tool).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cupti_test_kernels.hpp"
#include "emulated_label.hpp"
#include "ppb/exec/collector.hpp"
#include "ppb/profiling/clock.hpp"

namespace ppb {
namespace {

#define PPB_TEST_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

// Why the cupti collector cannot run here ("" where it can).
std::string cupti_unavailable() {
  for (const CollectorInfo& c : collector_list()) {
    if (c.name == "cupti" && !c.available) return "cupti is not available here: " + c.why_not;
  }
  return "";
}

// The cupti collector, or null with *why saying why it could not start.
std::unique_ptr<Collector> start_cupti(std::string* why, const CollectorContext& context = {}) {
  try {
    return make_collector("cupti", context);
  } catch (const CollectorUnavailable& e) {
    *why = std::string("cupti could not start: ") + e.what();
    return nullptr;
  }
}

// Ends a step of two actions, F(0) and B(0), both launched at `launched`
// (seconds after `origin`) and done now (*done), and collects it.
CollectedFigures end_step(Collector& cupti, double origin, double launched, double* done) {
  *done = now_seconds() - origin;
  cupti.step_end(0);
  StepRecord record;
  record.origin = origin;
  record.actions = {{F(0), launched, *done, 0, launched}, {B(0), launched, *done, 0, launched}};
  record.actions_end = *done;
  record.end = *done;
  CollectedFigures out;
  cupti.finish_step(record, out);
  return out;
}

TEST(CuptiCollectorGpu, AttributesClassifiesAndAlignsRealRecords) {
  std::string why = cupti_unavailable();
  if (!why.empty()) GTEST_SKIP() << why;
  // An idle GPU runs far below its peak clock (an H200: 345 against 1980
  // MHz): spin before CUPTI starts recording, so that the clocks ramp up.
  int peak_khz = 0;
  PPB_TEST_CUDA(cudaDeviceGetAttribute(&peak_khz, cudaDevAttrClockRate, 0));
  ppb_test_launch_spin(nullptr, 20LL * peak_khz);
  PPB_TEST_CUDA(cudaDeviceSynchronize());

  const std::unique_ptr<Collector> cupti = start_cupti(&why);
  if (!cupti) GTEST_SKIP() << why;

  cudaStream_t stream = nullptr;
  PPB_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  constexpr size_t kBytes = size_t{1} << 20;
  void* dev = nullptr;
  void* host = nullptr;
  PPB_TEST_CUDA(cudaMalloc(&dev, kBytes));
  PPB_TEST_CUDA(cudaMallocHost(&host, kBytes));
  const long long two_ms = 2LL * peak_khz;  // cycles in 2 ms at the peak clock

  const double origin = now_seconds();
  cupti->step_begin(0);
  const double launched = now_seconds() - origin;
  cupti->launch_begin(0, F(0));
  ppb_test_launch_spin(stream, two_ms);
  PPB_TEST_CUDA(cudaMemsetAsync(dev, 0, kBytes, stream));
  cupti->launch_end(0, F(0));
  cupti->launch_begin(0, B(0));
  ppb_test_launch_fake_nccl(stream);
  PPB_TEST_CUDA(cudaMemcpyAsync(host, dev, kBytes, cudaMemcpyDeviceToHost, stream));
  cupti->launch_end(0, B(0));
  PPB_TEST_CUDA(cudaMemsetAsync(dev, 1, kBytes, stream));  // outside every launch
  cupti->optimizer_begin(0);
  ppb_test_launch_spin(stream, 1000);
  cupti->optimizer_end(0);
  PPB_TEST_CUDA(cudaStreamSynchronize(stream));
  double done = 0;
  const CollectedFigures out = end_step(*cupti, origin, launched, &done);
  ASSERT_TRUE(out.device.has_value());
  const device::DeviceStep& step = *out.device;
  EXPECT_EQ(step.dropped, 0);
  EXPECT_EQ(step.skipped, 0);
  EXPECT_EQ(out.step.at("unattributed_kernels"), 0.0);
  ASSERT_EQ(step.ops.size(), 6u);
  // In launch order on one stream: spin, memset | fake NCCL, copy | memset | spin.
  const struct {
    device::OpKind kind;
    device::OpClass cls;
    int action;
    const char* name_prefix;
  } want[] = {
      {device::OpKind::kKernel, device::OpClass::kCompute, 0, "ppb_test_spin("},
      {device::OpKind::kMemset, device::OpClass::kCompute, 0, "Memset (Device)"},
      {device::OpKind::kKernel, device::OpClass::kCommunication, 1, "ncclDevKernel_TestFake(int)"},
      {device::OpKind::kMemcpy, device::OpClass::kCompute, 1, "Memcpy DtoH (Device -> Pinned)"},
      {device::OpKind::kMemset, device::OpClass::kOther, -1, "Memset (Device)"},
      {device::OpKind::kKernel, device::OpClass::kOptimizer, -1, "ppb_test_spin("},
  };
  // The alignment: CUPTI's realtime stamps mapped onto steady seconds fall
  // inside the host window around the work (with the clocks' read jitter).
  constexpr double kSlack = 50e-6;
  for (size_t i = 0; i < step.ops.size(); ++i) {
    const device::DeviceOp& op = step.ops[i];
    SCOPED_TRACE("op " + std::to_string(i) + " " + op.name);
    EXPECT_EQ(op.kind, want[i].kind);
    EXPECT_EQ(op.op_class, want[i].cls);
    EXPECT_EQ(op.action, want[i].action);
    EXPECT_EQ(op.name.rfind(want[i].name_prefix, 0), 0u);
    EXPECT_EQ(op.stream, step.ops[0].stream);
    EXPECT_GE(op.start, launched - kSlack);
    EXPECT_LE(op.end, done + kSlack);
    EXPECT_LE(op.start, op.end);
    if (i > 0) {
      EXPECT_GE(op.start, step.ops[i - 1].end - 1e-6);  // one stream: in order
    }
  }
  EXPECT_EQ(step.ops[1].bytes, static_cast<int64_t>(kBytes));
  EXPECT_EQ(step.ops[3].bytes, static_cast<int64_t>(kBytes));
  // The spin ran about 2 ms at the peak clock (longer when clocked down).
  EXPECT_GT(step.ops[0].end - step.ops[0].start, 0.5e-3);
  // At most 5.7 times longer: the idle clock's share of the peak, should
  // the clocks have fallen back between the warm-up and the step.
  EXPECT_LT(step.ops[0].end - step.ops[0].start, 15e-3);
  const std::vector<double>& per_action = out.action.at("device_seconds");
  ASSERT_EQ(per_action.size(), 2u);
  EXPECT_GT(per_action[0], step.ops[0].end - step.ops[0].start - 1e-9);

  PPB_TEST_CUDA(cudaFreeHost(host));
  PPB_TEST_CUDA(cudaFree(dev));
  PPB_TEST_CUDA(cudaStreamDestroy(stream));
}

// Kernels a CUDA graph launches (as the cuda backend replays each action's
// graph): CUPTI reports them under the graph launch's correlation, which
// the collector must tie to the action whose hooks surround the launch. One
// graph of two spin kernels, captured outside the step, launched once
// inside F(0) and once inside B(0): four kernels, two per action.
TEST(CuptiCollectorGpu, KernelsOfALaunchedGraphAreAttributedToTheLaunchingAction) {
  std::string why = cupti_unavailable();
  if (!why.empty()) GTEST_SKIP() << why;
  const std::unique_ptr<Collector> cupti = start_cupti(&why);
  if (!cupti) GTEST_SKIP() << why;
  cudaStream_t stream = nullptr;
  PPB_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  PPB_TEST_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  ppb_test_launch_spin(stream, 1000);
  ppb_test_launch_spin(stream, 2000);
  PPB_TEST_CUDA(cudaStreamEndCapture(stream, &graph));
  PPB_TEST_CUDA(cudaGraphInstantiateWithFlags(&exec, graph, 0));
  PPB_TEST_CUDA(cudaStreamSynchronize(stream));

  const double origin = now_seconds();
  cupti->step_begin(0);
  const double launched = now_seconds() - origin;
  cupti->launch_begin(0, F(0));
  PPB_TEST_CUDA(cudaGraphLaunch(exec, stream));
  cupti->launch_end(0, F(0));
  cupti->launch_begin(0, B(0));
  PPB_TEST_CUDA(cudaGraphLaunch(exec, stream));
  cupti->launch_end(0, B(0));
  PPB_TEST_CUDA(cudaStreamSynchronize(stream));
  double done = 0;
  const CollectedFigures out = end_step(*cupti, origin, launched, &done);
  ASSERT_TRUE(out.device.has_value());
  const device::DeviceStep& step = *out.device;
  EXPECT_EQ(step.dropped, 0);
  EXPECT_EQ(out.step.at("unattributed_kernels"), 0.0);
  ASSERT_EQ(step.ops.size(), 4u);
  for (size_t i = 0; i < step.ops.size(); ++i) {
    SCOPED_TRACE("op " + std::to_string(i) + " " + step.ops[i].name);
    EXPECT_EQ(step.ops[i].kind, device::OpKind::kKernel);
    EXPECT_EQ(step.ops[i].op_class, device::OpClass::kCompute);
    EXPECT_EQ(step.ops[i].action, i < 2 ? 0 : 1);
    EXPECT_EQ(step.ops[i].name.rfind("ppb_test_spin(", 0), 0u);
  }
  PPB_TEST_CUDA(cudaGraphExecDestroy(exec));
  PPB_TEST_CUDA(cudaGraphDestroy(graph));
  PPB_TEST_CUDA(cudaStreamDestroy(stream));
}

// A context made before any collector listened (as cuDNN's trial build of
// the attention makes one), and a step that ends with its copies still
// running, before any record was flushed: the collector synchronises the
// current context's device before it flushes, so the step holds every copy
// rather than none. Copies only, so that it runs on the CUDA emulator too
// (label emulated), where it failed with 0 of 4 before the collector asked
// for the current context.
TEST(CuptiCollectorGpu, CopiesStillRunningOnAContextMadeBeforeTheCollectorAreInTheirStep) {
  std::string why = cupti_unavailable();
  if (!why.empty()) PPB_SKIP_UNLESS_EMULATED(why);
  constexpr size_t kBytes = size_t{128} << 20;
  void* dev = nullptr;
  void* host = nullptr;
  PPB_TEST_CUDA(cudaMalloc(&dev, kBytes));  // the context, before the collector
  PPB_TEST_CUDA(cudaMallocHost(&host, kBytes));
  cudaStream_t stream = nullptr;
  PPB_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // As a device backend's rank runs it: the backend's context is current.
  const std::unique_ptr<Collector> cupti = start_cupti(&why, {.device_backend = true});
  if (!cupti) PPB_SKIP_UNLESS_EMULATED(why);

  const double origin = now_seconds();
  cupti->step_begin(0);
  const double launched = now_seconds() - origin;
  cupti->launch_begin(0, F(0));
  for (int i = 0; i < 4; ++i)
    PPB_TEST_CUDA(cudaMemcpyAsync(host, dev, kBytes, cudaMemcpyDeviceToHost, stream));
  cupti->launch_end(0, F(0));
  double done = 0;
  const CollectedFigures out = end_step(*cupti, origin, launched, &done);  // no synchronise
  ASSERT_TRUE(out.device.has_value());
  const device::DeviceStep& step = *out.device;
  ASSERT_EQ(step.ops.size(), 4u) << "copies still running when the step was flushed";
  for (const device::DeviceOp& op : step.ops) {
    EXPECT_EQ(op.kind, device::OpKind::kMemcpy);
    EXPECT_EQ(op.bytes, static_cast<int64_t>(kBytes));
    EXPECT_EQ(op.action, 0);
  }

  PPB_TEST_CUDA(cudaStreamSynchronize(stream));
  PPB_TEST_CUDA(cudaFreeHost(host));
  PPB_TEST_CUDA(cudaFree(dev));
  PPB_TEST_CUDA(cudaStreamDestroy(stream));
}

TEST(CuptiCollectorGpu, UnavailableSaysWhyInOneLine) {
  for (const CollectorInfo& c : collector_list()) {
    if (c.name != "cupti") continue;
    if (c.available) GTEST_SKIP() << "cupti is available here";
    EXPECT_FALSE(c.why_not.empty());
    EXPECT_EQ(c.why_not.find('\n'), std::string::npos);
    EXPECT_THROW((void)make_collector("cupti", {}), CollectorUnavailable);
    return;
  }
  FAIL() << "cupti is not registered";
}

}  // namespace
}  // namespace ppb
