// Device activity on synthetic records: the buffer-walk log (zero
// timestamps, dropped counts, correlation), the clock alignment, the
// classification and the busy / overlap / bubble arithmetic, each against
// values computed by hand.
#include "ppb/profiling/device_activity.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

namespace ppb::device {
namespace {

// A realistic CLOCK_REALTIME origin (2026): as a double it would lose ~0.4 us.
constexpr uint64_t kT0 = 1'780'000'000'123'456'789ULL;

DeviceOp op(OpClass c, double start, double end, int64_t stream = 7, int action = -1) {
  DeviceOp o;
  o.op_class = c;
  o.start = start;
  o.end = end;
  o.stream = stream;
  o.action = action;
  return o;
}

RawRecord kernel(uint64_t start, uint64_t end, uint32_t correlation, std::string name,
                 uint32_t stream = 7) {
  RawRecord r;
  r.kind = OpKind::kKernel;
  r.start_ns = start;
  r.end_ns = end;
  r.stream = stream;
  r.correlation = correlation;
  r.name = std::move(name);
  return r;
}

TEST(DeviceActivityBusy, UnionsOverStreamsOverlapAndOptimizer) {
  // compute: [0,2] on stream 7 and [1,3] on stream 13 -> union [0,3] = 3
  // communication: [2.5,5] -> 2.5; overlap with compute [2.5,3] = 0.5
  // optimizer: [6,7] -> 1; other [8,8.5]; busy = [0,5] + [6,7] + [8,8.5] = 6.5
  const std::vector<DeviceOp> ops = {
      op(OpClass::kCompute, 0, 2, 7),          op(OpClass::kCompute, 1, 3, 13),
      op(OpClass::kCommunication, 2.5, 5, 21), op(OpClass::kOptimizer, 6, 7, 7),
      op(OpClass::kOther, 8, 8.5, 7),
  };
  const DeviceBusy b = device_busy(ops, 0, 10);
  EXPECT_DOUBLE_EQ(b.compute, 3.0);
  EXPECT_DOUBLE_EQ(b.communication, 2.5);
  EXPECT_DOUBLE_EQ(b.overlap, 0.5);
  EXPECT_DOUBLE_EQ(b.optimizer, 1.0);
  EXPECT_DOUBLE_EQ(b.busy, 6.5);
}

TEST(DeviceActivityBusy, OrderOfRecordsDoesNotMatter) {
  std::vector<DeviceOp> ops = {op(OpClass::kCompute, 4, 6), op(OpClass::kCompute, 0, 1),
                               op(OpClass::kCompute, 0.5, 2), op(OpClass::kCommunication, 5, 9),
                               op(OpClass::kCommunication, 1.5, 4.5)};
  const DeviceBusy forward = device_busy(ops, 0, 10);
  std::reverse(ops.begin(), ops.end());
  EXPECT_EQ(device_busy(ops, 0, 10), forward);
  // compute [0,2] + [4,6] = 4; comm [1.5,4.5] + [5,9] = 7;
  // overlap [1.5,2] + [4,4.5] + [5,6] = 2; busy [0,9] = 9
  EXPECT_DOUBLE_EQ(forward.compute, 4.0);
  EXPECT_DOUBLE_EQ(forward.communication, 7.0);
  EXPECT_DOUBLE_EQ(forward.overlap, 2.0);
  EXPECT_DOUBLE_EQ(forward.busy, 9.0);
}

TEST(DeviceActivityBusy, ClipsToTheWindow) {
  // [-1,1] and [3,6] clipped to [0,4]: 1 + 1.
  const std::vector<DeviceOp> ops = {op(OpClass::kCompute, -1, 1), op(OpClass::kCompute, 3, 6),
                                     op(OpClass::kCompute, 5, 7)};
  const DeviceBusy b = device_busy(ops, 0, 4);
  EXPECT_DOUBLE_EQ(b.compute, 2.0);
  EXPECT_DOUBLE_EQ(b.busy, 2.0);
  EXPECT_DOUBLE_EQ(device_busy({}, 0, 4).busy, 0.0);
}

TEST(DeviceActivityBusy, NestedAndTouchingIntervalsCountOnce) {
  const std::vector<DeviceOp> ops = {
      op(OpClass::kCompute, 0, 10), op(OpClass::kCompute, 2, 3), op(OpClass::kCompute, 10, 12),
      op(OpClass::kCommunication, 3, 4), op(OpClass::kCommunication, 3.5, 11)};
  const DeviceBusy b = device_busy(ops, 0, 20);
  EXPECT_DOUBLE_EQ(b.compute, 12.0);
  EXPECT_DOUBLE_EQ(b.communication, 8.0);
  EXPECT_DOUBLE_EQ(b.overlap, 8.0);  // all of [3,11] is inside compute [0,12]
  EXPECT_DOUBLE_EQ(b.busy, 12.0);
}

TEST(DeviceActivityBubble, IsTheHostDefinitionOnDeviceBusyTime) {
  // Step 10 ms, compute union 6 ms: (10 - 6) / 10.
  EXPECT_DOUBLE_EQ(device_bubble_ratio(0.006, 0.010), 0.4);
  EXPECT_DOUBLE_EQ(device_bubble_ratio(0.010, 0.010), 0.0);
  EXPECT_DOUBLE_EQ(device_bubble_ratio(0.0, 0.010), 1.0);
  EXPECT_DOUBLE_EQ(device_bubble_ratio(0.0, 0.0), 0.0);
}

// Kernels by family: cuBLAS's, CUTLASS's and the emulator's GEMMs, and
// pipebench's own kernels by their ppb_ stem, as CUPTI names them
// demangled; the step's compute time per family is a union per family.
TEST(DeviceActivityKernels, FamiliesByNameAndTheirUnionsOfComputeTime) {
  EXPECT_EQ(kernel_family("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32"), "gemm");
  EXPECT_EQ(kernel_family("cutlass_75_tensorop_s1688gemm_64x64_16x6_tn_align1"), "gemm");
  EXPECT_EQ(kernel_family("void splitKreduce_kernel<32, 16, int, float>(...)"), "gemm");
  EXPECT_EQ(kernel_family("ppb_cudaemu_gemm_bf16"), "gemm");
  EXPECT_EQ(kernel_family("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"), "gemm");
  EXPECT_EQ(
      kernel_family("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x64"),
      "attention");
  EXPECT_EQ(kernel_family("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_7"),
            "attention");
  EXPECT_EQ(kernel_family("void ppb::cuda::device::ppb_layernorm_fwd<float>(float const*)"),
            "layernorm");
  EXPECT_EQ(kernel_family("void ppb::cuda::device::ppb_attention_softmax_bwd<__nv_bfloat16>()"),
            "attention");
  for (const char* flash : {"void ppb::cuda::device::ppb_flash_attention_fwd<64>(float const*)",
                            "void ppb::cuda::device::ppb_flash_attention_bwd_kv<128>()",
                            "ppb_flash_attention_bwd_q<32>", "ppb_flash_attention_rowdot"}) {
    EXPECT_EQ(kernel_family(flash), "attention") << flash;
  }
  EXPECT_EQ(kernel_family("ppb_gelu_bwd"), "gelu");
  EXPECT_EQ(kernel_family("ppb_embedding_bwd_weight"), "embedding");
  EXPECT_EQ(kernel_family("ppb_cross_entropy_fwd"), "cross_entropy");
  EXPECT_EQ(kernel_family("ppb_loss_sum"), "cross_entropy");
  EXPECT_EQ(kernel_family("ppb_column_partials"), "column_reduce");
  EXPECT_EQ(kernel_family("ppb_to_storage"), "convert");
  EXPECT_EQ(kernel_family("ppb_bias_fill"), "other");
  for (const std::string& f : kernel_families()) EXPECT_FALSE(f.empty());

  const auto named = [](OpClass c, double start, double end, std::string name) {
    DeviceOp o = op(c, start, end);
    o.name = std::move(name);
    return o;
  };
  std::vector<DeviceOp> ops = {
      named(OpClass::kCompute, 0, 2, "ppb_layernorm_fwd"),
      named(OpClass::kCompute, 1, 3, "ppb_layernorm_stats"),  // overlaps: counted once
      named(OpClass::kCompute, 3, 7, "sm90_xmma_gemm"),
      named(OpClass::kOptimizer, 7, 9, "ppb_layernorm_fwd"),  // not compute
      named(OpClass::kCommunication, 0, 9, "ncclKernel_SendRecv"),
      named(OpClass::kCompute, 9, 9.5, "")};  // an action's memset
  ops.back().kind = OpKind::kMemset;
  std::map<std::string, double> by = family_device_seconds(ops);
  EXPECT_EQ(by.size(), kernel_families().size());  // every family, 0 when none ran
  EXPECT_DOUBLE_EQ(by.at("layernorm"), 3.0);
  EXPECT_DOUBLE_EQ(by.at("gemm"), 4.0);
  EXPECT_DOUBLE_EQ(by.at("attention"), 0.0);
  EXPECT_DOUBLE_EQ(by.at("other"), 0.5);
}

TEST(DeviceActivityClassify, NcclByNameMessagesByLaunch) {
  const Launch act = Launch::action(3);
  const Launch opt = Launch::optimizer(0);
  // NCCL kernels are communication wherever they were launched.
  EXPECT_EQ(
      classify(OpKind::kKernel, "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", &act),
      OpClass::kCommunication);
  EXPECT_EQ(
      classify(OpKind::kKernel, "void cub::ncclKernel_AllReduce_RING_LL_Sum_float()", nullptr),
      OpClass::kCommunication);
  EXPECT_TRUE(is_communication_kernel("nccl"));
  EXPECT_FALSE(is_communication_kernel("ppb_nccl_pack"));  // neither prefix nor ncclKernel
  EXPECT_FALSE(is_communication_kernel("NcclKernel"));     // case matters
  EXPECT_EQ(classify(OpKind::kKernel, "ppb_layernorm_fwd", &act), OpClass::kCompute);
  EXPECT_EQ(classify(OpKind::kMemset, "Memset (Device)", &act), OpClass::kCompute);
  EXPECT_EQ(classify(OpKind::kKernel, "ppb_sgd", &opt), OpClass::kOptimizer);
  EXPECT_EQ(classify(OpKind::kMemcpy, "Memcpy DtoH (Device -> Pinned)", &opt), OpClass::kOptimizer);
  // Outside every launch: copies stage messages; a memset zeroes a buffer
  // the pool hands out and a kernel is a library's: both "other".
  EXPECT_EQ(classify(OpKind::kMemcpy, "Memcpy DtoH (Device -> Pinned)", nullptr),
            OpClass::kCommunication);
  EXPECT_EQ(classify(OpKind::kMemset, "Memset (Device)", nullptr), OpClass::kOther);
  EXPECT_EQ(classify(OpKind::kKernel, "cublasLt_init", nullptr), OpClass::kOther);
}

TEST(DeviceActivityClock, MidpointSampleAndConstantOffset) {
  const ClockSample s = ClockSample::around(10.0, kT0, 10.000002);
  EXPECT_DOUBLE_EQ(s.steady_seconds, 10.000001);
  const ClockMap m(s, s);
  EXPECT_DOUBLE_EQ(m.drift_seconds(), 0.0);
  // 1.5 ms after the sample on the profiler clock is 1.5 ms after on steady,
  // exactly, although the realtime stamp is ~1.8e18 ns.
  EXPECT_NEAR(m.to_steady(kT0 + 1'500'000) - 10.000001, 0.0015, 1e-12);
  EXPECT_NEAR(m.to_steady(kT0 - 2'000'000) - 10.000001, -0.002, 1e-12);
}

TEST(DeviceActivityClock, InterpolatesADriftBetweenSamples) {
  // Over 1 s of profiler time the steady clock advanced 1 s + 10 us: the
  // offset grows by 10 us, linearly.
  const ClockMap m({100.0, kT0}, {101.00001, kT0 + 1'000'000'000});
  EXPECT_NEAR(m.drift_seconds(), 1e-5, 1e-12);
  EXPECT_NEAR(m.to_steady(kT0), 100.0, 1e-12);
  EXPECT_NEAR(m.to_steady(kT0 + 500'000'000) - 100.0, 0.5 + 5e-6, 1e-12);
  EXPECT_NEAR(m.to_steady(kT0 + 1'000'000'000) - 100.0, 1.00001, 1e-12);
  // Beyond the second sample: the same rate.
  EXPECT_NEAR(m.to_steady(kT0 + 2'000'000'000) - 100.0, 2.00002, 1e-12);
  EXPECT_DEATH(ClockMap({1.0, kT0 + 1}, {1.0, kT0}), "samples out of order");
}

TEST(DeviceActivityLog, SkipsZeroTimestampsCountsDroppedAndEmptiesOnTake) {
  ActivityLog log;
  log.add(kernel(kT0, kT0 + 10, 1, "a"));
  log.add(kernel(0, kT0 + 10, 2, "no start"));
  log.add(kernel(kT0, 0, 3, "no end"));
  log.add(kernel(kT0 + 10, kT0 + 5, 4, "ends before it starts"));
  log.add_dropped(3);
  log.add_dropped(2);
  log.correlate(1, 42);
  ActivityLog::Taken t = log.take();
  ASSERT_EQ(t.records.size(), 1u);
  EXPECT_EQ(t.records[0].name, "a");
  EXPECT_EQ(t.skipped, 3);
  EXPECT_EQ(t.dropped, 5);
  EXPECT_EQ(t.external.at(1), 42u);
  const ActivityLog::Taken again = log.take();
  EXPECT_TRUE(again.records.empty());
  EXPECT_EQ(again.dropped, 0);
  EXPECT_EQ(again.skipped, 0);
  EXPECT_TRUE(again.external.empty());
}

TEST(DeviceActivityLog, TakesRecordsAddedFromAnotherThread) {
  ActivityLog log;
  std::thread cupti([&log] {
    for (uint32_t i = 1; i <= 1000; ++i) log.add(kernel(kT0 + i, kT0 + i + 1, i, "k"));
  });
  size_t seen = 0;
  while (seen < 1000) seen += log.take().records.size();
  cupti.join();
  EXPECT_EQ(seen, 1000u);
}

TEST(DeviceActivityStep, AttributesAlignsAndSortsOutOfOrderRecords) {
  ActivityLog log;
  // Arrive out of order: the optimizer's kernel first, then B, then F.
  log.add(kernel(kT0 + 9'000'000, kT0 + 9'500'000, 30, "ppb_sgd"));
  log.add(kernel(kT0 + 4'000'000, kT0 + 7'000'000, 20, "ppb_matmul_bwd", 13));
  log.add(kernel(kT0 + 1'000'000, kT0 + 3'000'000, 10, "ppb_matmul_fwd"));
  RawRecord staging;
  staging.kind = OpKind::kMemcpy;
  staging.start_ns = kT0 + 3'000'000;
  staging.end_ns = kT0 + 3'500'000;
  staging.stream = 21;
  staging.correlation = 40;  // no external id: launched outside every action
  staging.name = "Memcpy DtoH (Device -> Pinned)";
  staging.bytes = 1 << 20;
  log.add(staging);
  log.add(kernel(kT0 + 7'000'000, kT0 + 8'000'000, 50, "ncclDevKernel_SendRecv"));
  log.add(kernel(kT0 + 8'000'000, kT0 + 8'100'000, 60, "ppb_unknown_launch"));
  log.correlate(10, 1);
  log.correlate(20, 2);
  log.correlate(30, 3);
  log.correlate(50, 2);   // NCCL inside an action is still communication
  log.correlate(60, 99);  // an external id nobody registered
  log.add_dropped(7);
  const std::map<uint64_t, Launch> launches = {
      {1, Launch::action(0)}, {2, Launch::action(1)}, {3, Launch::optimizer(0)}};
  // The profiler clock runs 2 ms behind steady + 50.0 s; the step started at
  // steady 50.0005 (origin): profiler kT0 + 1 ms -> 50.003 - 50.0005 = 2.5 ms.
  const ClockSample s{50.002, kT0};
  const DeviceStep step = build_device_step(log.take(), launches, ClockMap(s, s), 50.0005);
  ASSERT_EQ(step.ops.size(), 6u);
  EXPECT_EQ(step.dropped, 7);
  EXPECT_EQ(step.skipped, 0);
  for (size_t i = 1; i < step.ops.size(); ++i) EXPECT_LE(step.ops[i - 1].start, step.ops[i].start);
  const DeviceOp& f = step.ops[0];
  EXPECT_EQ(f.name, "ppb_matmul_fwd");
  EXPECT_NEAR(f.start, 0.0025, 1e-12);
  EXPECT_NEAR(f.end, 0.0045, 1e-12);
  EXPECT_EQ(f.op_class, OpClass::kCompute);
  EXPECT_EQ(f.action, 0);
  EXPECT_EQ(f.correlation, 10u);
  const DeviceOp& copy = step.ops[1];
  EXPECT_EQ(copy.kind, OpKind::kMemcpy);
  EXPECT_EQ(copy.op_class, OpClass::kCommunication);
  EXPECT_EQ(copy.action, -1);
  EXPECT_EQ(copy.bytes, 1 << 20);
  EXPECT_EQ(step.ops[2].action, 1);
  EXPECT_EQ(step.ops[2].stream, 13);
  EXPECT_EQ(step.ops[3].op_class, OpClass::kCommunication);  // nccl
  EXPECT_EQ(step.ops[3].action, 1);
  EXPECT_EQ(step.ops[4].op_class, OpClass::kOther);  // unknown external id
  EXPECT_EQ(step.ops[5].op_class, OpClass::kOptimizer);
  EXPECT_EQ(step.ops[5].action, -1);

  // Over [0, 12] ms: compute [2.5,4.5] + [5.5,8.5] = 5 ms; communication:
  // copy [4.5,5] + nccl [8.5,9.5] = 1.5 ms, no overlap; optimizer [10.5,11];
  // other [9.5,9.6]; the step time is 10 ms.
  const DeviceBusy b = device_busy(step.ops, 0, 0.012);
  EXPECT_NEAR(b.compute, 0.005, 1e-12);
  EXPECT_NEAR(b.communication, 0.0015, 1e-12);
  EXPECT_NEAR(b.overlap, 0.0, 1e-12);
  EXPECT_NEAR(b.optimizer, 0.0005, 1e-12);
  EXPECT_NEAR(b.busy, 0.005 + 0.0015 + 0.0005 + 0.0001, 1e-12);
  EXPECT_NEAR(device_bubble_ratio(b.compute, 0.010), 0.5, 1e-9);
  // Per action: F 2 ms; B 3 ms (its NCCL kernel [8.5,9.5] ms too: 4 ms).
  const std::vector<double> per = action_device_seconds(step.ops, 3);
  ASSERT_EQ(per.size(), 3u);
  EXPECT_NEAR(per[0], 0.002, 1e-12);
  EXPECT_NEAR(per[1], 0.004, 1e-12);
  EXPECT_EQ(per[2], 0.0);
}

TEST(DeviceActivityStep, ClockDriftFollowsTheSamples) {
  ActivityLog log;
  log.add(kernel(kT0 + 500'000'000, kT0 + 500'000'000 + 1'000'000, 1, "k"));
  // Steady ran 20 us faster over the second: the kernel at the middle is
  // shifted by 10 us.
  const ClockMap clock({10.0, kT0}, {11.00002, kT0 + 1'000'000'000});
  const DeviceStep step = build_device_step(log.take(), {}, clock, 10.0);
  ASSERT_EQ(step.ops.size(), 1u);
  EXPECT_NEAR(step.ops[0].start, 0.50001, 1e-12);
  EXPECT_NEAR(step.ops[0].end - step.ops[0].start, 0.001 * (1 + 2e-5), 1e-12);
  EXPECT_NEAR(step.clock_drift, 2e-5, 1e-12);
}

}  // namespace
}  // namespace ppb::device
