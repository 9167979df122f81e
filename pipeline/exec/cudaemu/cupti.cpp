// The CUDA emulator's CUPTI (libcupti.so.13): the activity API and the
// resource callback, as far as a profiler of pipebench's kind uses them, fed
// by the emulated runtime (emu.hpp's activity hooks). Every kernel, copy and
// memset a stream of the emulator runs becomes a CUPTI record with its
// stream, device, correlation id and start and end on CUPTI's clock
// (CLOCK_REALTIME); each runtime call that issued work becomes a RUNTIME
// record, and one EXTERNAL_CORRELATION record per external id kind pushed on
// the calling thread. Records go into the buffers the client's request
// callback hands out, in CUPTI's own layouts (cupti_activity.h), and come
// back through its completion callback: a buffer when it is full, the one in
// use at cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED). Records
// that find no buffer (the request callback gave none) are counted as
// dropped (cuptiActivityGetNumDroppedRecords with a null context).
//
// What it is not: a GPU's timeline. The times are those of the emulator's
// stream threads on the CPU. Kinds other than the six below are refused
// (CUPTI_ERROR_NOT_SUPPORTED, one stderr line naming the kind), and so are
// the callback domains other than the resource domain's context creation.
//
// One subscriber at a time, as CUPTI allows; PPB_CUDAEMU_CUPTI=held plays
// another tool holding CUPTI (cuptiSubscribe returns
// CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), for the tests of a
// profiler's fallback.
#include <cupti.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "collectors/cupti_records.hpp"
#include "emu.hpp"

namespace ppb::cudaemu {
namespace {

using cupti::KernelRecord;
using cupti::MemcpyRecord;
using cupti::MemsetRecord;

constexpr size_t kRecordAlign = 8;  // ACTIVITY_RECORD_ALIGNMENT
constexpr size_t kKinds = CUPTI_ACTIVITY_KIND_COUNT;
constexpr size_t kExternalKinds = CUPTI_EXTERNAL_CORRELATION_KIND_SIZE;

constexpr size_t aligned(size_t bytes) {
  return (bytes + kRecordAlign - 1) / kRecordAlign * kRecordAlign;
}

// A record's size in a buffer by its kind; 0 for a kind this CUPTI never writes.
size_t record_size(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return aligned(sizeof(KernelRecord));
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return aligned(sizeof(MemcpyRecord));
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return aligned(sizeof(MemsetRecord));
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return aligned(sizeof(CUpti_ActivityAPI));
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return aligned(sizeof(CUpti_ActivityExternalCorrelation));
    default:
      return 0;
  }
}

// A device's context, as CUPTI hands it out: an opaque handle per device.
CUcontext context_of(int device) {
  // NOLINTNEXTLINE(performance-no-int-to-ptr): a handle, never dereferenced
  return reinterpret_cast<CUcontext>(static_cast<uintptr_t>(device + 1) << 4);
}

struct Cupti {
  std::mutex m;
  bool subscribed = false;
  CUpti_CallbackFunc callback = nullptr;
  void* user = nullptr;
  bool context_callback = false;  // RESOURCE / CONTEXT_CREATED enabled
  std::array<bool, kKinds> enabled{};
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  // The buffer in use: records are appended until the next does not fit.
  uint8_t* buffer = nullptr;
  size_t size = 0;
  size_t used = 0;
  size_t dropped = 0;           // since the last cuptiActivityGetNumDroppedRecords
  std::set<std::string> names;  // kernel names the records point at (never freed)
};
Cupti& state() {
  static auto* c = new Cupti();  // never destroyed: stream workers may outlive exit
  return *c;
}

thread_local std::array<std::vector<uint64_t>, kExternalKinds> t_external;

bool enabled(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(state().m);
  return state().enabled[kind];
}

// A buffer to hand back, outside the lock.
struct Full {
  uint8_t* buffer = nullptr;
  size_t size = 0;
  size_t used = 0;
};

void deliver(const Full& f) {
  if (f.buffer == nullptr) return;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  {
    std::lock_guard<std::mutex> lock(state().m);
    complete = state().complete;
  }
  if (complete != nullptr) complete(nullptr, 0, f.buffer, f.size, f.used);
}

// Appends one record (its first member is its kind) to the buffer in use.
template <class Record>
void append(const Record& r) {
  const size_t bytes = aligned(sizeof(Record));
  std::vector<Full> back;  // handed back outside the lock
  {
    std::lock_guard<std::mutex> lock(state().m);
    Cupti& c = state();
    if (c.buffer != nullptr && c.used + bytes > c.size) {
      back.push_back({c.buffer, c.size, c.used});
      c.buffer = nullptr;
    }
    if (c.buffer == nullptr && c.request != nullptr) {
      size_t max_records = 0;
      c.request(&c.buffer, &c.size, &max_records);
      c.used = 0;
      if (c.buffer != nullptr && c.size < bytes) {
        back.push_back({c.buffer, c.size, 0});  // too small for any record: back, empty
        c.buffer = nullptr;
      }
    }
    if (c.buffer == nullptr) {
      ++c.dropped;
    } else {
      std::memcpy(c.buffer + c.used, &r, sizeof(Record));
      c.used += bytes;
    }
  }
  for (const Full& f : back) deliver(f);
}

const char* kernel_name(const char* name) {
  std::lock_guard<std::mutex> lock(state().m);
  return state().names.emplace(name != nullptr ? name : "?").first->c_str();
}

uint8_t memory_kind(Space s) {
  switch (s) {
    case Space::kDevice:
      return CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    case Space::kPinned:
      return CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    case Space::kPageable:
      return CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  }
  return CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN;
}

uint8_t copy_kind(cudaMemcpyKind k) {
  switch (k) {
    case cudaMemcpyHostToDevice:
      return CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    case cudaMemcpyDeviceToHost:
      return CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    case cudaMemcpyDeviceToDevice:
      return CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    case cudaMemcpyHostToHost:
      return CUPTI_ACTIVITY_MEMCPY_KIND_HTOH;
    default:
      return CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN;
  }
}

CUpti_CallbackId runtime_cbid(const char* function) {
  const std::string f = function;
  if (f == "cudaLaunchKernel") return CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  if (f == "cudaMemcpy") return CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020;
  if (f == "cudaMemcpyAsync") return CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020;
  if (f == "cudaMemset") return CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020;
  if (f == "cudaMemsetAsync") return CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020;
  if (f == "cudaGraphLaunch") return CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000;
  return CUPTI_RUNTIME_TRACE_CBID_INVALID;
}

// The driver API calls the emulator makes (cuBLAS's launches); INVALID for a
// runtime call.
CUpti_CallbackId driver_cbid(const char* function) {
  if (std::strcmp(function, "cuLaunchKernel") == 0) return CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
  return CUPTI_DRIVER_TRACE_CBID_INVALID;
}

// --- the runtime's hooks ----------------------------------------------------------

// As CUPTI does: a call is recorded, and tied to the pushed external ids,
// only when its API kind (RUNTIME or DRIVER) is enabled.
void on_api(uint32_t correlation, const char* function, uint64_t start_ns, uint64_t end_ns) {
  const CUpti_CallbackId driver = driver_cbid(function);
  const CUpti_ActivityKind api = driver != CUPTI_DRIVER_TRACE_CBID_INVALID
                                     ? CUPTI_ACTIVITY_KIND_DRIVER
                                     : CUPTI_ACTIVITY_KIND_RUNTIME;
  if (!enabled(api)) return;
  if (enabled(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) {
    for (size_t k = 0; k < kExternalKinds; ++k) {
      if (t_external[k].empty()) continue;
      CUpti_ActivityExternalCorrelation r{};
      r.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
      r.externalKind = static_cast<CUpti_ExternalCorrelationKind>(k);
      r.externalId = t_external[k].back();
      r.correlationId = correlation;
      append(r);
    }
  }
  {
    CUpti_ActivityAPI r{};
    r.kind = api;
    r.cbid = api == CUPTI_ACTIVITY_KIND_DRIVER ? driver : runtime_cbid(function);
    r.start = start_ns;
    r.end = end_ns;
    r.processId = static_cast<uint32_t>(getpid());
    r.threadId = static_cast<uint32_t>(gettid());
    r.correlationId = correlation;
    append(r);
  }
}

void on_op(const ActivityOp& op) {
  const auto device = static_cast<uint32_t>(op.device);
  const auto context = static_cast<uint32_t>(op.device + 1);
  switch (op.kind) {
    case ActivityOp::Kind::kKernel: {
      const bool concurrent = enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      if (!concurrent && !enabled(CUPTI_ACTIVITY_KIND_KERNEL)) return;
      KernelRecord r{};
      r.kind = concurrent ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL : CUPTI_ACTIVITY_KIND_KERNEL;
      r.start = op.start_ns;
      r.end = op.end_ns;
      r.completed = op.end_ns;
      r.deviceId = device;
      r.contextId = context;
      r.streamId = op.stream;
      r.gridX = static_cast<int32_t>(op.grid.x);
      r.gridY = static_cast<int32_t>(op.grid.y);
      r.gridZ = static_cast<int32_t>(op.grid.z);
      r.blockX = static_cast<int32_t>(op.block.x);
      r.blockY = static_cast<int32_t>(op.block.y);
      r.blockZ = static_cast<int32_t>(op.block.z);
      r.correlationId = op.correlation;
      r.name = kernel_name(op.name);
      append(r);
      return;
    }
    case ActivityOp::Kind::kMemcpy: {
      if (!enabled(CUPTI_ACTIVITY_KIND_MEMCPY)) return;
      MemcpyRecord r{};
      r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
      r.copyKind = copy_kind(op.copy);
      r.srcKind = memory_kind(op.src);
      r.dstKind = memory_kind(op.dst);
      r.bytes = op.bytes;
      r.start = op.start_ns;
      r.end = op.end_ns;
      r.deviceId = device;
      r.contextId = context;
      r.streamId = op.stream;
      r.correlationId = op.correlation;
      append(r);
      return;
    }
    case ActivityOp::Kind::kMemset: {
      if (!enabled(CUPTI_ACTIVITY_KIND_MEMSET)) return;
      MemsetRecord r{};
      r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
      r.value = static_cast<uint32_t>(op.value);
      r.bytes = op.bytes;
      r.start = op.start_ns;
      r.end = op.end_ns;
      r.deviceId = device;
      r.contextId = context;
      r.streamId = op.stream;
      r.correlationId = op.correlation;
      r.memoryKind = memory_kind(op.dst);
      append(r);
      return;
    }
  }
}

void on_context(int device) {
  CUpti_CallbackFunc callback = nullptr;
  void* user = nullptr;
  {
    std::lock_guard<std::mutex> lock(state().m);
    if (!state().subscribed || !state().context_callback) return;
    callback = state().callback;
    user = state().user;
  }
  if (callback == nullptr) return;
  CUpti_ResourceData data{};
  data.context = context_of(device);
  callback(user, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, &data);
}

const ActivityHooks kHooks{&on_api, &on_op, &on_context};

// The hooks are in place while anything listens. REQUIRES: state().m held.
void update_hooks_locked() {
  bool any = state().subscribed;
  for (const bool e : state().enabled) any = any || e;
  set_activity_hooks(any ? &kHooks : nullptr);
}

bool held_by_another_tool() {
  const char* v = std::getenv("PPB_CUDAEMU_CUPTI");
  if (v == nullptr || *v == '\0') return false;
  if (std::string(v) == "held") return true;
  refuse_setting(std::string("PPB_CUDAEMU_CUPTI: expected \"held\" or nothing, not \"") + v + "\"");
}

const char* kind_name(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
      return "KERNEL";
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return "CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return "MEMSET";
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      return "RUNTIME";
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return "DRIVER";
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return "EXTERNAL_CORRELATION";
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace ppb::cudaemu

namespace emu = ppb::cudaemu;

// The names and signatures are CUPTI's ABI.
// NOLINTBEGIN(readability-identifier-naming)
extern "C" {

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  if (str == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  switch (result) {
#define PPB_CUPTI_RESULT(name) \
  case name:                   \
    *str = #name;              \
    return CUPTI_SUCCESS;
    PPB_CUPTI_RESULT(CUPTI_SUCCESS)
    PPB_CUPTI_RESULT(CUPTI_ERROR_INVALID_PARAMETER)
    PPB_CUPTI_RESULT(CUPTI_ERROR_INVALID_CONTEXT)
    PPB_CUPTI_RESULT(CUPTI_ERROR_MAX_LIMIT_REACHED)
    PPB_CUPTI_RESULT(CUPTI_ERROR_NOT_INITIALIZED)
    PPB_CUPTI_RESULT(CUPTI_ERROR_QUEUE_EMPTY)
    PPB_CUPTI_RESULT(CUPTI_ERROR_INVALID_KIND)
    PPB_CUPTI_RESULT(CUPTI_ERROR_NOT_SUPPORTED)
    PPB_CUPTI_RESULT(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
    PPB_CUPTI_RESULT(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    PPB_CUPTI_RESULT(CUPTI_ERROR_UNKNOWN)
#undef PPB_CUPTI_RESULT
    default:
      *str = nullptr;
      return CUPTI_ERROR_INVALID_PARAMETER;
  }
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  if (timestamp == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *timestamp = emu::timestamp_ns();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetDeviceId(CUcontext context, uint32_t* deviceId) {
  if (deviceId == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (context == nullptr) {  // the calling thread's current context
    int device = 0;
    if (!emu::current_context_device(&device)) return CUPTI_ERROR_INVALID_DEVICE;
    *deviceId = static_cast<uint32_t>(device);
    return CUPTI_SUCCESS;
  }
  const auto handle = reinterpret_cast<uintptr_t>(context);
  if (handle == 0 || (handle & 0xF) != 0) return CUPTI_ERROR_INVALID_CONTEXT;
  *deviceId = static_cast<uint32_t>((handle >> 4) - 1);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                    void* userdata) {
  if (subscriber == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (emu::held_by_another_tool()) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  std::lock_guard<std::mutex> lock(emu::state().m);
  if (emu::state().subscribed) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  emu::state().subscribed = true;
  emu::state().callback = callback;
  emu::state().user = userdata;
  emu::state().context_callback = false;
  // NOLINTNEXTLINE(performance-no-int-to-ptr): a handle, never dereferenced
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(uintptr_t{0x5b});
  emu::update_hooks_locked();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  std::lock_guard<std::mutex> lock(emu::state().m);
  if (!emu::state().subscribed || subscriber == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  emu::state().subscribed = false;
  emu::state().callback = nullptr;
  emu::state().context_callback = false;
  emu::update_hooks_locked();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  std::lock_guard<std::mutex> lock(emu::state().m);
  if (!emu::state().subscribed || subscriber == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || cbid != CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
    emu::complain("cuptiEnableCallback: only the resource domain's context creation is emulated");
    return CUPTI_ERROR_NOT_SUPPORTED;
  }
  emu::state().context_callback = enable != 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                               CUpti_BuffersCallbackCompleteFunc funcBufferCompleted) {
  if (funcBufferRequested == nullptr || funcBufferCompleted == nullptr) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  std::lock_guard<std::mutex> lock(emu::state().m);
  emu::state().request = funcBufferRequested;
  emu::state().complete = funcBufferCompleted;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  if (emu::kind_name(kind) == nullptr) {
    emu::complain("cuptiActivityEnable: activity kind " + std::to_string(static_cast<int>(kind)) +
                  " is not emulated");
    return CUPTI_ERROR_NOT_SUPPORTED;
  }
  std::lock_guard<std::mutex> lock(emu::state().m);
  emu::state().enabled[kind] = true;
  emu::update_hooks_locked();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  if (emu::kind_name(kind) == nullptr) return CUPTI_ERROR_NOT_SUPPORTED;
  std::lock_guard<std::mutex> lock(emu::state().m);
  emu::state().enabled[kind] = false;
  emu::update_hooks_locked();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                            uint64_t id) {
  if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind >= emu::kExternalKinds) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  emu::t_external[kind].push_back(id);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                           uint64_t* lastId) {
  if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind >= emu::kExternalKinds) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  auto& stack = emu::t_external[kind];
  if (stack.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (lastId != nullptr) *lastId = stack.back();
  stack.pop_back();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t validBufferSizeBytes,
                                                CUpti_Activity** record) {
  if (buffer == nullptr || record == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  size_t at = 0;
  if (*record != nullptr) {
    const auto* current = reinterpret_cast<const uint8_t*>(*record);
    if (current < buffer || current >= buffer + validBufferSizeBytes) {
      return CUPTI_ERROR_INVALID_PARAMETER;
    }
    const size_t size = emu::record_size((*record)->kind);
    if (size == 0) return CUPTI_ERROR_INVALID_KIND;
    at = static_cast<size_t>(current - buffer) + size;
  }
  if (at + sizeof(CUpti_Activity) > validBufferSizeBytes) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  auto* next = reinterpret_cast<CUpti_Activity*>(buffer + at);
  const size_t size = emu::record_size(next->kind);
  if (size == 0 || at + size > validBufferSizeBytes) return CUPTI_ERROR_INVALID_KIND;
  *record = next;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  // Full buffers were handed back as they filled; a forced flush also hands
  // back the one in use.
  if ((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == 0) return CUPTI_SUCCESS;
  emu::Full f;
  {
    std::lock_guard<std::mutex> lock(emu::state().m);
    emu::Cupti& c = emu::state();
    if (c.buffer != nullptr) f = {c.buffer, c.size, c.used};
    c.buffer = nullptr;
  }
  emu::deliver(f);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t /*streamId*/,
                                                       size_t* dropped) {
  if (dropped == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(emu::state().m);
  // Only the global buffer holds records (completion callbacks name no context).
  *dropped = context == nullptr ? std::exchange(emu::state().dropped, 0) : 0;
  return CUPTI_SUCCESS;
}

}  // extern "C"
// NOLINTEND(readability-identifier-naming)
