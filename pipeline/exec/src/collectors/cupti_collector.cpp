// `--profile cupti`: what the device ran, from CUPTI's activity API, for a
// backend that launches CUDA work (with any other backend the device stays
// idle and the figures say so).
//
//   activity kinds  CONCURRENT_KERNEL (KERNEL would serialise every kernel),
//                   MEMCPY, MEMSET, EXTERNAL_CORRELATION, RUNTIME and DRIVER
//                   (CUPTI emits an external correlation record for each API
//                   call of an enabled API kind made while an id is pushed;
//                   cuBLAS launches its GEMM kernels through the driver API,
//                   cuLaunchKernel, so without DRIVER they carry no action's
//                   id: seen on an H200, CUDA 13.0. The API records
//                   themselves are dropped in the walk)
//   correlation     launch_begin/end push/pop a fresh id (CUSTOM0) around
//                   each action's enqueue, optimizer_begin/end around each
//                   optimizer step: every kernel, copy and memset launched
//                   there carries the id on whichever stream it runs; a
//                   CUDA graph's kernels come as per-kernel records (GRAPH_TRACE
//                   is not enabled) with its cudaGraphLaunch's correlation id,
//                   which the id pushed around the launch names
//   buffers         4 MB each (CUPTI recommends 1-10 MB), handed out and
//                   walked by the callbacks below; records lost because no
//                   buffer was free are counted (dropped_records) and warned
//                   about once
//   lifetime        enabled when the collector is made (before the --check
//                   step and the warm-up, whose records are read and thrown
//                   away: the first steps pay CUPTI's set-up); after each
//                   step the devices that ran work are synchronised, then
//                   cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)
//                   hands over every record of the step
//   names           kernels under their demangled names (CUPTI gives the
//                   mangled symbol; NCCL's are recognised by the readable one)
//   clock           CUPTI's timestamps (CLOCK_REALTIME) are paired with the
//                   steady clock at each step's begin and after its flush,
//                   and mapped through the two samples (ClockMap)
//
// Figures per step (docs/metrics.md, "Device activity"): the step's device
// operations (CollectedFigures::device: traces and metrics.device), and
//   step["records"], step["dropped_records"], step["skipped_records"]
//   step["clock_drift_seconds"]   drift between CUPTI's clock and steady
//   step["unattributed_kernels"]  kernels no action or optimizer step launched
//                                 (NCCL's excepted; warned about once)
//   step["kernel_seconds_<family>"]  device time of the step's compute
//                                 kernels of each family (device::kernel_family:
//                                 gemm, layernorm, attention, ...)
//   action["device_seconds"]      union of the device time of the action's
//                                 operations (NaN for SYNC)
//
// Unavailable (one warning, the run goes on): a build without CUPTI, no
// CUDA driver or device, or any CUPTI set-up error — chiefly
// CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39) when Nsight Systems,
// Nsight Compute or compute-sanitizer holds CUPTI,
// CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35), CUPTI_ERROR_NOT_INITIALIZED (15)
// and CUPTI_ERROR_UNKNOWN (999, no driver).
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "collectors/collectors.hpp"

#ifdef PPB_HAVE_CUPTI
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cxxabi.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <unordered_map>

#include "collectors/cupti_records.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/profiling/clock.hpp"
#include "ppb/profiling/device_activity.hpp"
#include "ppb/profiling/log.hpp"
#endif

namespace ppb::collectors {

#ifndef PPB_HAVE_CUPTI

std::string cupti_unavailable() {
  return "this build has no CUPTI (built without the CUDA toolkit)";
}

std::unique_ptr<Collector> make_cupti(const CollectorContext& /*context*/) {
  throw CollectorUnavailable(cupti_unavailable());
}

#else

namespace {

using cupti::KernelRecord;
using cupti::MemcpyRecord;
using cupti::MemsetRecord;

constexpr size_t kBufferBytes = size_t{4} << 20;
constexpr size_t kBufferAlign = 8;  // ACTIVITY_RECORD_ALIGNMENT
constexpr CUpti_ExternalCorrelationKind kCorrelationKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

std::string cupti_error(CUptiResult r) {
  const char* text = nullptr;
  if (cuptiGetResultString(r, &text) != CUPTI_SUCCESS || text == nullptr) text = "?";
  std::string why = std::string(text) + " (" + std::to_string(static_cast<int>(r)) + ")";
  switch (r) {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return why + ": another tool holds CUPTI (Nsight Systems, Nsight Compute, compute-sanitizer)";
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
      return why + ": profiling needs privileges (NVreg_RestrictProfilingToAdminUsers)";
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_UNKNOWN:
      return why + ": no usable CUDA driver";
    default:
      return why;
  }
}

// Set-up calls: any failure switches the collector off (never the run).
void need(CUptiResult r, const char* call) {
  if (r != CUPTI_SUCCESS) throw CollectorUnavailable(std::string(call) + ": " + cupti_error(r));
}

const char* copy_direction(unsigned kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "PtoP";
    default:
      return "Unknown";
  }
}

const char* memory_kind(unsigned kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return "Pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return "Pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
      return "Device";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return "Managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
      return "Array";
    default:
      return "Unknown";
  }
}

// What the buffer callbacks (plain C functions, possibly on CUPTI's own
// thread) write into: the log of the collector that is on, and every device
// a context or a record was seen on (kept across collectors: a context made
// under an earlier combination is still there).
struct Sink {
  std::mutex walk;  // held while a buffer is walked and while `log` changes
  device::ActivityLog* log = nullptr;
  int64_t walk_errors = 0;
  std::unordered_map<std::string, std::string> names;  // mangled -> readable (under `walk`)
  std::mutex devices_mutex;
  std::set<uint32_t> devices;
};
Sink& sink() {
  static Sink s;
  return s;
}

void note_device(uint32_t device) {
  std::lock_guard lock(sink().devices_mutex);
  sink().devices.insert(device);
}

// CUPTI names kernels by their mangled symbol ("_Z22ncclDevKernel_SendRecv...");
// traces, HTA and the NCCL classification read the demangled one
// ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"). Called under
// Sink::walk; each name is demangled once.
const std::string& readable(const char* mangled) {
  auto [it, fresh] = sink().names.try_emplace(mangled != nullptr ? mangled : "?");
  if (fresh) {
    int status = 0;
    char* d = abi::__cxa_demangle(it->first.c_str(), nullptr, nullptr, &status);
    it->second = status == 0 && d != nullptr ? d : it->first;
    std::free(d);
  }
  return it->second;
}

device::RawRecord from_kernel(const KernelRecord& k) {
  device::RawRecord r;
  r.kind = device::OpKind::kKernel;
  r.start_ns = k.start;
  r.end_ns = k.end;
  r.device = k.deviceId;
  r.stream = k.streamId;
  r.correlation = k.correlationId;
  r.name = readable(k.name);
  return r;
}

device::RawRecord from_memcpy(const MemcpyRecord& m) {
  device::RawRecord r;
  r.kind = device::OpKind::kMemcpy;
  r.start_ns = m.start;
  r.end_ns = m.end;
  r.device = m.deviceId;
  r.stream = m.streamId;
  r.correlation = m.correlationId;
  r.name = std::string("Memcpy ") + copy_direction(m.copyKind) + " (" + memory_kind(m.srcKind) +
           " -> " + memory_kind(m.dstKind) + ")";
  r.bytes = static_cast<int64_t>(m.bytes);
  return r;
}

device::RawRecord from_memset(const MemsetRecord& m) {
  device::RawRecord r;
  r.kind = device::OpKind::kMemset;
  r.start_ns = m.start;
  r.end_ns = m.end;
  r.device = m.deviceId;
  r.stream = m.streamId;
  r.correlation = m.correlationId;
  r.name = std::string("Memset (") + memory_kind(m.memoryKind) + ")";
  r.bytes = static_cast<int64_t>(m.bytes);
  return r;
}

// One record of a completed buffer into the log (runtime records and kinds
// not enabled here are passed over).
void walk_record(const CUpti_Activity* a, device::ActivityLog& log) {
  device::RawRecord r;
  switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      r = from_kernel(*reinterpret_cast<const KernelRecord*>(a));
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      r = from_memcpy(*reinterpret_cast<const MemcpyRecord*>(a));
      break;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      r = from_memset(*reinterpret_cast<const MemsetRecord*>(a));
      break;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* c = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(a);
      if (c->externalKind == kCorrelationKind) log.correlate(c->correlationId, c->externalId);
      return;
    }
    default:
      return;
  }
  note_device(r.device);
  log.add(std::move(r));
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t /*size*/,
                               size_t valid) {
  {
    std::lock_guard lock(sink().walk);
    // Without a collector on (after it was destroyed) the records go.
    if (device::ActivityLog* log = sink().log; log != nullptr) {
      // A buffer of one context and stream (CUPTI's per-context buffers)
      // counts its own dropped records; the global buffer's (context null)
      // are asked for after each flush.
      size_t dropped = 0;
      if (context != nullptr &&
          cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS &&
          dropped > 0)
        log->add_dropped(dropped);
      CUpti_Activity* a = nullptr;
      for (;;) {
        const CUptiResult r = cuptiActivityGetNextRecord(buffer, valid, &a);
        if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
        if (r != CUPTI_SUCCESS) {
          ++sink().walk_errors;
          break;
        }
        walk_record(a, *log);
      }
    }
  }
  std::free(buffer);
}

// A context made while the collector listens: its device will be synchronised.
void CUPTIAPI on_resource(void* /*user*/, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                          const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || id != CUPTI_CBID_RESOURCE_CONTEXT_CREATED) return;
  const auto* rd = static_cast<const CUpti_ResourceData*>(data);
  uint32_t device = 0;
  if (cuptiGetDeviceId(rd->context, &device) == CUPTI_SUCCESS) note_device(device);
}

// One steady/CUPTI pairing: the tightest of three reads.
device::ClockSample clock_sample() {
  device::ClockSample best;
  double width = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 3; ++i) {
    const double before = now_seconds();
    uint64_t ts = 0;
    if (cuptiGetTimestamp(&ts) != CUPTI_SUCCESS) continue;
    const double after = now_seconds();
    if (after - before < width) {
      width = after - before;
      best = device::ClockSample::around(before, ts, after);
    }
  }
  return best;
}

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET,
                                         CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                         CUPTI_ACTIVITY_KIND_RUNTIME,
                                         CUPTI_ACTIVITY_KIND_DRIVER};

class CuptiCollector final : public Collector {
 public:
  explicit CuptiCollector(bool device_backend) : device_backend_(device_backend) {
    need(cuptiSubscribe(&subscriber_, &on_resource, nullptr), "cuptiSubscribe");
    try {
      need(cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE,
                               CUPTI_CBID_RESOURCE_CONTEXT_CREATED),
           "cuptiEnableCallback");
      need(cuptiActivityRegisterCallbacks(&buffer_requested, &buffer_completed),
           "cuptiActivityRegisterCallbacks");
      {
        std::lock_guard lock(sink().walk);
        sink().log = &log_;
      }
      for (const CUpti_ActivityKind k : kKinds) {
        need(cuptiActivityEnable(k), "cuptiActivityEnable");
        ++enabled_;
      }
    } catch (const CollectorUnavailable&) {
      shut_down();
      throw;
    }
  }
  ~CuptiCollector() override { shut_down(); }
  CuptiCollector(const CuptiCollector&) = delete;
  CuptiCollector& operator=(const CuptiCollector&) = delete;

  std::string_view name() const override { return "cupti"; }

  void step_begin(int /*step*/) override {
    launches_.clear();
    begin_ = clock_sample();
  }

  void launch_begin(int /*stage*/, const Action& action) override { push(Tag{false, action, 0}); }
  void launch_end(int /*stage*/, const Action& /*action*/) override { pop(); }
  void optimizer_begin(int chunk) override { push(Tag{true, Action{}, chunk}); }
  void optimizer_end(int /*chunk*/) override { pop(); }

  void finish_step(const StepRecord& record, CollectedFigures& out) override {
    synchronize_devices();
    const CUptiResult flushed = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0)
      log_.add_dropped(dropped);
    device::ClockSample end = clock_sample();
    if (end.device_ns < begin_.device_ns) end = begin_;  // a failed read: no drift
    const device::ClockMap clock(begin_, end);
    device::DeviceStep step =
        device::build_device_step(log_.take(), resolve(record), clock, record.origin);
    warn_about(step, flushed);

    std::vector<double> per_action = device::action_device_seconds(step.ops, record.actions.size());
    for (size_t i = 0; i < record.actions.size(); ++i) {
      if (record.actions[i].action.kind == ActionKind::kSync)
        per_action[i] = std::numeric_limits<double>::quiet_NaN();
    }
    out.action["device_seconds"] = std::move(per_action);
    out.step["records"] = static_cast<double>(step.ops.size());
    out.step["dropped_records"] = static_cast<double>(step.dropped);
    out.step["skipped_records"] = static_cast<double>(step.skipped);
    out.step["clock_drift_seconds"] = step.clock_drift;
    out.step["unattributed_kernels"] = static_cast<double>(unattributed(step));
    for (const auto& [family, seconds] : device::family_device_seconds(step.ops))
      out.step["kernel_seconds_" + family] = seconds;
    out.device = std::move(step);
  }

 private:
  // What an external id was pushed for.
  struct Tag {
    bool optimizer = false;
    Action action;
    int chunk = 0;
  };

  void push(const Tag& tag) {
    const uint64_t id = ++next_id_;
    launches_.emplace(id, tag);
    if (cuptiActivityPushExternalCorrelationId(kCorrelationKind, id) != CUPTI_SUCCESS)
      ++hook_errors_;
  }
  void pop() {
    uint64_t id = 0;
    if (cuptiActivityPopExternalCorrelationId(kCorrelationKind, &id) != CUPTI_SUCCESS)
      ++hook_errors_;
  }

  // This step's ids -> launches, actions found in the record by kind,
  // micro-batch and chunk (unique within a step; SYNC never launches).
  std::map<uint64_t, device::Launch> resolve(const StepRecord& record) const {
    std::map<std::tuple<int, int32_t, int32_t>, int> index;
    for (size_t i = 0; i < record.actions.size(); ++i) {
      const Action& a = record.actions[i].action;
      index.emplace(std::make_tuple(static_cast<int>(a.kind), a.microbatch, a.chunk),
                    static_cast<int>(i));
    }
    std::map<uint64_t, device::Launch> out;
    for (const auto& [id, tag] : launches_) {
      if (tag.optimizer) {
        out.emplace(id, device::Launch::optimizer(tag.chunk));
        continue;
      }
      const Action& a = tag.action;
      auto it = index.find(std::make_tuple(static_cast<int>(a.kind), a.microbatch, a.chunk));
      out.emplace(id, device::Launch::action(it == index.end() ? -1 : it->second));
    }
    return out;
  }

  // Every device that ran work, so that the flush finds all of it complete
  // (cuptiActivityFlushAll does not synchronise). The executor has seen
  // every action complete already; copies and NCCL kernels may still run.
  // The devices are those whose context was made while a collector listened
  // or that a record named, and the current context's, which may have been
  // made before any collector (a trial build of cuDNN's attention) and have
  // had no record flushed yet. Asked only of a device backend's rank: at a
  // step's end its context is the current one, so this makes no context
  // (where none is current, CUPTI might answer as cudaGetDevice does,
  // device 0, and the synchronisation would make one there).
  void synchronize_devices() const {
    std::set<uint32_t> devices;
    {
      std::lock_guard lock(sink().devices_mutex);
      devices = sink().devices;
    }
    if (uint32_t current = 0;
        device_backend_ && cuptiGetDeviceId(nullptr, &current) == CUPTI_SUCCESS)
      devices.insert(current);
    if (devices.empty()) return;
    int current = 0;
    if (cudaGetDevice(&current) != cudaSuccess) return;
    for (const uint32_t d : devices) {
      if (cudaSetDevice(static_cast<int>(d)) == cudaSuccess) (void)cudaDeviceSynchronize();
    }
    (void)cudaSetDevice(current);
  }

  // Kernels that carried no id of this step's launches: launched outside
  // Backend::enqueue() on the executor's thread (a backend that launches from
  // another thread defeats the per-thread correlation ids).
  static int64_t unattributed(const device::DeviceStep& step) {
    int64_t n = 0;
    for (const device::DeviceOp& op : step.ops)
      n += op.kind == device::OpKind::kKernel && op.op_class == device::OpClass::kOther ? 1 : 0;
    return n;
  }

  void warn_about(const device::DeviceStep& step, CUptiResult flushed) {
    if (const int64_t n = unattributed(step); n > 0) {
      log::warn_once("cupti:unattributed",
                     "--profile cupti: " + std::to_string(n) +
                         " kernels of a step carried no action's id (launched outside the "
                         "executor's enqueue or on another thread); they count as busy, not "
                         "compute");
    }
    if (flushed != CUPTI_SUCCESS) {
      log::warn_once("cupti:flush", "--profile cupti: cuptiActivityFlushAll: " +
                                        cupti_error(flushed) + "; device figures may be short");
    }
    if (step.dropped > 0) {
      log::warn_once("cupti:dropped", "--profile cupti: CUPTI dropped " +
                                          std::to_string(step.dropped) +
                                          " records (no free buffer); device figures of that "
                                          "step are short");
    }
    if (hook_errors_ > 0) {
      log::warn_once("cupti:correlation",
                     "--profile cupti: pushing or popping the correlation id failed " +
                         std::to_string(hook_errors_) + " times; some kernels are unattributed");
    }
  }

  void shut_down() {
    if (enabled_ > 0) (void)cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (int i = enabled_ - 1; i >= 0; --i)
      (void)cuptiActivityDisable(kKinds[static_cast<size_t>(i)]);
    enabled_ = 0;
    {
      std::lock_guard lock(sink().walk);
      if (sink().log == &log_) sink().log = nullptr;
    }
    if (subscriber_ != nullptr) (void)cuptiUnsubscribe(subscriber_);
    subscriber_ = nullptr;
  }

  bool device_backend_;  // CollectorContext::device_backend
  CUpti_SubscriberHandle subscriber_ = nullptr;
  int enabled_ = 0;  // kinds of kKinds enabled, in order
  device::ActivityLog log_;
  device::ClockSample begin_;
  uint64_t next_id_ = 0;  // external ids: unique for the process's collector
  std::map<uint64_t, Tag> launches_;
  int64_t hook_errors_ = 0;
};

}  // namespace

// CUPTI records a device's activity: usable wherever a device is, and for
// the reason the backends give where none is.
std::string cupti_unavailable() { return cuda::unusable_reason(); }

std::unique_ptr<Collector> make_cupti(const CollectorContext& context) {
  return std::make_unique<CuptiCollector>(context.device_backend);
}

#endif  // PPB_HAVE_CUPTI

}  // namespace ppb::collectors
