// The CUDA emulator's CUPTI as a profiler sees it (label emulated): this
// binary links NVIDIA's CUPTI and runtime, and ctest runs it with the
// emulator's folder first on LD_LIBRARY_PATH (each test in its own process,
// so each starts with a fresh CUPTI). Records of kernels, copies and memsets
// with their streams, correlation to runtime calls and external ids, times
// on cuptiGetTimestamp's clock, buffers handed back as they fill or at a
// forced flush, dropped records, one subscriber at a time, the context
// callback. Skips, saying why, when the process did not load the emulator.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cuda/kernels.hpp"
#include "emulated_label.hpp"

namespace ppb {
namespace {

constexpr const char* kEmulator = "pipebench CUDA emulator (CPU)";

bool on_emulator() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return std::string(prop.name) == kEmulator;
}

// What the completion callback read back, record by record (copied out, in
// delivery order), and how the buffers came.
struct Seen {
  std::mutex m;
  std::vector<CUpti_ActivityKernel10> kernels;
  std::vector<CUpti_ActivityMemcpy6> copies;
  std::vector<CUpti_ActivityMemset4> memsets;
  std::vector<CUpti_ActivityAPI> calls;                  // runtime API
  std::vector<CUpti_ActivityAPI> driver_calls;           // driver API
  std::map<uint32_t, std::map<int, uint64_t>> external;  // correlation -> kind -> id
  std::vector<std::string> names;                        // kernel names, read in the callback
  int buffers = 0;
  int walk_errors = 0;
  size_t buffer_bytes = size_t{1} << 20;  // what the request callback hands out (0: none)
};
Seen& seen() {
  static Seen s;
  return s;
}
void reset_seen() {
  std::lock_guard<std::mutex> lock(seen().m);
  seen().kernels.clear();
  seen().copies.clear();
  seen().memsets.clear();
  seen().calls.clear();
  seen().driver_calls.clear();
  seen().external.clear();
  seen().names.clear();
  seen().buffers = 0;
  seen().walk_errors = 0;
  seen().buffer_bytes = size_t{1} << 20;
}

void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  const size_t bytes = seen().buffer_bytes;
  *buffer = bytes == 0 ? nullptr : static_cast<uint8_t*>(std::aligned_alloc(8, bytes));
  *size = bytes;
  *max_records = 0;
}

void CUPTIAPI completed(CUcontext /*context*/, uint32_t /*stream*/, uint8_t* buffer,
                        size_t /*size*/, size_t valid) {
  std::lock_guard<std::mutex> lock(seen().m);
  ++seen().buffers;
  CUpti_Activity* a = nullptr;
  for (;;) {
    const CUptiResult r = cuptiActivityGetNextRecord(buffer, valid, &a);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (r != CUPTI_SUCCESS) {
      ++seen().walk_errors;
      break;
    }
    switch (a->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto& k = *reinterpret_cast<const CUpti_ActivityKernel10*>(a);
        seen().kernels.push_back(k);
        seen().names.emplace_back(k.name);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY:
        seen().copies.push_back(*reinterpret_cast<const CUpti_ActivityMemcpy6*>(a));
        break;
      case CUPTI_ACTIVITY_KIND_MEMSET:
        seen().memsets.push_back(*reinterpret_cast<const CUpti_ActivityMemset4*>(a));
        break;
      case CUPTI_ACTIVITY_KIND_RUNTIME:
        seen().calls.push_back(*reinterpret_cast<const CUpti_ActivityAPI*>(a));
        break;
      case CUPTI_ACTIVITY_KIND_DRIVER:
        seen().driver_calls.push_back(*reinterpret_cast<const CUpti_ActivityAPI*>(a));
        break;
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto& c = *reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(a);
        seen().external[c.correlationId][c.externalKind] = c.externalId;
        break;
      }
      default:
        ++seen().walk_errors;
    }
  }
  std::free(buffer);
}

constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME};

class CuptiEmu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!on_emulator()) {
      PPB_SKIP_UNLESS_EMULATED(
          "not running on the CUDA emulator (its folder is not first on "
          "LD_LIBRARY_PATH)");
    }
    reset_seen();
    ASSERT_EQ(cuptiActivityRegisterCallbacks(&requested, &completed), CUPTI_SUCCESS);
    for (const CUpti_ActivityKind k : kKinds) ASSERT_EQ(cuptiActivityEnable(k), CUPTI_SUCCESS);
    ASSERT_EQ(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (s_ != nullptr) {
      EXPECT_EQ(cudaStreamDestroy(s_), cudaSuccess);
    }
    flush();  // nothing of this test is left for the next
    for (const CUpti_ActivityKind k : kKinds) (void)cuptiActivityDisable(k);
  }
  static void flush() {
    ASSERT_EQ(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
  }
  cudaStream_t s_ = nullptr;
};

TEST_F(CuptiEmu, EachOperationIsRecordedOnItsStreamWithItsCallAndExternalId) {
  constexpr size_t kBytes = 4096;
  void* d = nullptr;
  void* pinned = nullptr;
  ASSERT_EQ(cudaMalloc(&d, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&pinned, kBytes), cudaSuccess);
  uint64_t t0 = 0;
  ASSERT_EQ(cuptiGetTimestamp(&t0), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 42),
            CUPTI_SUCCESS);
  ASSERT_EQ(cudaMemsetAsync(d, 0, kBytes, s_), cudaSuccess);
  uint64_t popped = 0;
  ASSERT_EQ(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &popped),
            CUPTI_SUCCESS);
  EXPECT_EQ(popped, 42u);
  ASSERT_EQ(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 43),
            CUPTI_SUCCESS);
  cuda::gelu_fwd(cuda::Dtype::kFp32, d, d, kBytes / 4, s_);
  ASSERT_EQ(cudaMemcpyAsync(pinned, d, kBytes, cudaMemcpyDeviceToHost, s_), cudaSuccess);
  ASSERT_EQ(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, nullptr),
            CUPTI_SUCCESS);
  // Nothing pushed any more: no external record for this one.
  ASSERT_EQ(cudaMemsetAsync(d, 1, 64, s_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  uint64_t t1 = 0;
  ASSERT_EQ(cuptiGetTimestamp(&t1), CUPTI_SUCCESS);
  flush();

  std::lock_guard<std::mutex> lock(seen().m);
  EXPECT_EQ(seen().walk_errors, 0);
  ASSERT_EQ(seen().memsets.size(), 2u);
  ASSERT_EQ(seen().kernels.size(), 1u);
  ASSERT_EQ(seen().copies.size(), 1u);
  ASSERT_EQ(seen().calls.size(), 4u);
  const CUpti_ActivityMemset4& set = seen().memsets[0];
  const CUpti_ActivityKernel10& k = seen().kernels[0];
  const CUpti_ActivityMemcpy6& copy = seen().copies[0];
  const CUpti_ActivityMemset4& last = seen().memsets[1];

  EXPECT_EQ(set.bytes, kBytes);
  EXPECT_EQ(set.memoryKind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(last.bytes, 64u);
  EXPECT_EQ(last.value, 1u);
  EXPECT_EQ(k.kind, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  // CUPTI names a kernel by its mangled device symbol.
  EXPECT_EQ(seen().names[0].rfind("_Z", 0), 0u) << seen().names[0];
  EXPECT_NE(seen().names[0].find("ppb_gelu_fwd"), std::string::npos) << seen().names[0];
  EXPECT_GT(static_cast<int64_t>(k.gridX) * k.blockX, 0);
  EXPECT_EQ(copy.copyKind, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH);
  EXPECT_EQ(copy.srcKind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(copy.dstKind, CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
  EXPECT_EQ(copy.bytes, kBytes);

  // One created stream (not the legacy stream's 7), device 0, stream order,
  // every time inside the test's own window on cuptiGetTimestamp's clock.
  for (const uint32_t stream : {set.streamId, k.streamId, copy.streamId, last.streamId}) {
    EXPECT_EQ(stream, set.streamId);
  }
  EXPECT_NE(set.streamId, 7u);
  EXPECT_EQ(k.deviceId, 0u);
  const uint64_t times[] = {t0,         set.start, set.end,    k.start,  k.end,
                            copy.start, copy.end,  last.start, last.end, t1};
  for (size_t i = 1; i < std::size(times); ++i) EXPECT_LE(times[i - 1], times[i]) << i;
  EXPECT_GT(k.end, k.start);

  // Correlation: each operation to the call that issued it, and the calls
  // made while an id was pushed to that id.
  const uint32_t ids[] = {set.correlationId, k.correlationId, copy.correlationId,
                          last.correlationId};
  const CUpti_CallbackId cbids[] = {CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
                                    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                                    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
                                    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(seen().calls[i].correlationId, ids[i]) << i;
    EXPECT_EQ(seen().calls[i].cbid, cbids[i]) << i;
    if (i > 0) {
      EXPECT_NE(ids[i], ids[i - 1]);
    }
  }
  const int custom0 = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  EXPECT_EQ(seen().external.at(set.correlationId).at(custom0), 42u);
  EXPECT_EQ(seen().external.at(k.correlationId).at(custom0), 43u);
  EXPECT_EQ(seen().external.at(copy.correlationId).at(custom0), 43u);
  EXPECT_EQ(seen().external.count(last.correlationId), 0u);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

TEST_F(CuptiEmu, FullBuffersComeBackAsTheyFillAndRecordsWithoutABufferAreDropped) {
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 256), cudaSuccess);
  {
    std::lock_guard<std::mutex> lock(seen().m);
    seen().buffer_bytes = 3 * sizeof(CUpti_ActivityMemset4);  // room for 3 memset records
  }
  ASSERT_EQ(sizeof(CUpti_ActivityMemset4) % 8, 0u);
  ASSERT_EQ(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(cudaMemsetAsync(d, i, 256, s_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  {
    std::lock_guard<std::mutex> lock(seen().m);
    EXPECT_EQ(seen().buffers, 3);  // the 4th, with one record, is still in use
    EXPECT_EQ(seen().memsets.size(), 9u);
  }
  flush();
  {
    std::lock_guard<std::mutex> lock(seen().m);
    EXPECT_EQ(seen().buffers, 4);
    ASSERT_EQ(seen().memsets.size(), 10u);
    for (size_t i = 0; i < 10; ++i) EXPECT_EQ(seen().memsets[i].value, i);
    seen().buffer_bytes = 0;  // no buffer: what comes is dropped
  }
  size_t dropped = 99;
  ASSERT_EQ(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), CUPTI_SUCCESS);
  EXPECT_EQ(dropped, 0u);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(cudaMemsetAsync(d, i, 256, s_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  flush();
  ASSERT_EQ(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), CUPTI_SUCCESS);
  EXPECT_EQ(dropped, 5u);
  ASSERT_EQ(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), CUPTI_SUCCESS);
  EXPECT_EQ(dropped, 0u) << "the count is of the records dropped since the last call";
  std::lock_guard<std::mutex> lock(seen().m);
  EXPECT_EQ(seen().memsets.size(), 10u);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST_F(CuptiEmu, ExternalIdsArePerThreadAndAnEmptyQueueSaysSo) {
  uint64_t id = 0;
  EXPECT_EQ(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id),
            CUPTI_ERROR_QUEUE_EMPTY);
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 256), cudaSuccess);
  ASSERT_EQ(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 7),
            CUPTI_SUCCESS);
  // Issued on another thread while this one has an id pushed: not its.
  std::thread other([&] { ASSERT_EQ(cudaMemsetAsync(d, 0, 256, s_), cudaSuccess); });
  other.join();
  ASSERT_EQ(cudaMemsetAsync(d, 1, 256, s_), cudaSuccess);
  ASSERT_EQ(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id),
            CUPTI_SUCCESS);
  ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  flush();
  std::lock_guard<std::mutex> lock(seen().m);
  ASSERT_EQ(seen().memsets.size(), 2u);
  EXPECT_EQ(seen().external.count(seen().memsets[0].correlationId), 0u);
  EXPECT_EQ(seen()
                .external.at(seen().memsets[1].correlationId)
                .at(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0),
            7u);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

// cuBLAS launches its GEMM kernels through the driver API (cuLaunchKernel):
// CUPTI ties them to a pushed external id only while DRIVER records are
// enabled (seen on an H200 with CUDA 13.0: with RUNTIME alone, cuBLAS's GEMM
// kernels carried no action's id). The emulator behaves the same way.
TEST_F(CuptiEmu, ACublasGemmIsADriverCallTiedToThePushedIdOnlyWithDriverRecords) {
  constexpr int n = 8;
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 3 * n * n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d, 0, 3 * n * n * sizeof(float), s_), cudaSuccess);
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetStream(h, s_), CUBLAS_STATUS_SUCCESS);
  const float one = 1.0f, zero = 0.0f;
  auto gemm = [&](uint64_t id) {
    ASSERT_EQ(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id),
              CUPTI_SUCCESS);
    ASSERT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, d, CUDA_R_32F, n, d + n * n,
                           CUDA_R_32F, n, &zero, d + 2 * n * n, CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    uint64_t popped = 0;
    ASSERT_EQ(
        cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &popped),
        CUPTI_SUCCESS);
  };
  gemm(5);  // RUNTIME enabled, DRIVER not (the fixture's kinds)
  ASSERT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER), CUPTI_SUCCESS);
  gemm(6);
  ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  flush();
  EXPECT_EQ(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER), CUPTI_SUCCESS);
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaFree(d), cudaSuccess);

  std::lock_guard<std::mutex> lock(seen().m);
  ASSERT_EQ(seen().kernels.size(), 2u);
  const uint32_t first = seen().kernels[0].correlationId;
  const uint32_t second = seen().kernels[1].correlationId;
  EXPECT_EQ(seen().external.count(first), 0u);
  EXPECT_EQ(seen().external.at(second).at(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0), 6u);
  ASSERT_EQ(seen().driver_calls.size(), 1u);
  EXPECT_EQ(seen().driver_calls[0].correlationId, second);
  EXPECT_EQ(seen().driver_calls[0].cbid, CUpti_CallbackId{CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel});
  for (const CUpti_ActivityAPI& c : seen().calls) {  // no runtime record of the GEMMs
    EXPECT_NE(c.correlationId, first);
    EXPECT_NE(c.correlationId, second);
  }
}

// Without the fixture: nothing has touched the device before the subscriber.
struct ContextSeen {
  std::vector<uint32_t> devices;
  int calls = 0;
};
void CUPTIAPI on_resource(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data) {
  auto* s = static_cast<ContextSeen*>(user);
  ++s->calls;
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || cbid != CUPTI_CBID_RESOURCE_CONTEXT_CREATED) return;
  uint32_t device = 99;
  if (cuptiGetDeviceId(static_cast<const CUpti_ResourceData*>(data)->context, &device) ==
      CUPTI_SUCCESS) {
    s->devices.push_back(device);
  }
}

// Needs a process in which no context was made yet (ctest runs each test alone).
TEST(CuptiEmuSubscriber, OneAtATimeAndTheFirstUseOfADeviceIsCalledBack) {
  // cudaGetDeviceCount makes no context.
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || !on_emulator()) {
    PPB_SKIP_UNLESS_EMULATED(
        "not running on the CUDA emulator (its folder is not first on "
        "LD_LIBRARY_PATH)");
  }
  ContextSeen cs;
  CUpti_SubscriberHandle a = nullptr;
  CUpti_SubscriberHandle b = nullptr;
  ASSERT_EQ(cuptiSubscribe(&a, &on_resource, &cs), CUPTI_SUCCESS);
  EXPECT_EQ(cuptiSubscribe(&b, &on_resource, &cs), CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  ASSERT_EQ(
      cuptiEnableCallback(1, a, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED),
      CUPTI_SUCCESS);
  // No context yet: no current context's device either (CUPTI's NULL).
  uint32_t current = 99;
  EXPECT_NE(cuptiGetDeviceId(nullptr, &current), CUPTI_SUCCESS);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 256), cudaSuccess);  // the same context: no second call
  EXPECT_EQ(cs.devices, std::vector<uint32_t>{0});
  ASSERT_EQ(cuptiGetDeviceId(nullptr, &current), CUPTI_SUCCESS);
  EXPECT_EQ(current, 0U);
  EXPECT_EQ(cs.calls, 1);
  ASSERT_EQ(cuptiUnsubscribe(a), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiSubscribe(&b, &on_resource, &cs), CUPTI_SUCCESS) << "free again once unsubscribed";
  EXPECT_EQ(cuptiUnsubscribe(b), CUPTI_SUCCESS);
  const char* text = nullptr;
  ASSERT_EQ(cuptiGetResultString(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, &text),
            CUPTI_SUCCESS);
  EXPECT_STREQ(text, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED");
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST(CuptiEmuSubscriber, AKindThatIsNotEmulatedIsRefused) {
  if (!on_emulator()) PPB_SKIP_UNLESS_EMULATED("not running on the CUDA emulator");
  EXPECT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_PC_SAMPLING), CUPTI_ERROR_NOT_SUPPORTED);
}

}  // namespace
}  // namespace ppb
