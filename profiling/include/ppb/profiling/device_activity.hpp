// Device activity: the kernels, copies and memsets a device profiler (CUPTI)
// recorded, and the figures pipebench computes from them (docs/metrics.md,
// "Device activity"). Pure host-side code, no CUDA or CUPTI: the CUPTI
// collector (pipeline/exec/src/collectors/cupti_collector.cpp) walks CUPTI's
// buffers into RawRecords and correlation pairs; the tests feed synthetic ones.
//
// The life of one step's records:
//   ActivityLog::add / correlate / add_dropped   (from the buffer walk; any thread)
//   -> ActivityLog::take()                        (after the step, once flushed)
//   -> build_device_step(taken, launches, clock, origin)
//        skips what cannot be placed, maps the profiler clock onto the steady
//        clock, attributes each operation to the action (or optimizer step)
//        whose launch it came from, classifies it
//   -> device_busy(ops, 0, end) and device_bubble_ratio(compute, step time).
//
// Classification (OpClass), in this order:
//   communication  a kernel whose name matches `^nccl` or `.*ncclKernel.*`
//                  (NCCL kernels spin while they wait for a peer: counting
//                  them as compute would hide the bubble); a memcpy or memset
//                  no action or optimizer step launched (message staging)
//   compute        anything launched inside an F, B, I or W action
//   optimizer      anything launched inside an optimizer step
//   other          the rest (a kernel launched outside every action)
//
// Example:
//   ppb::device::ActivityLog log;
//   log.add({.kind = OpKind::kKernel, .start_ns = t0, .end_ns = t1, .stream = 7,
//            .correlation = 12, .name = "ppb_gelu_fwd"});
//   log.correlate(12, /*external_id=*/3);
//   const ClockMap clock(begin_sample, end_sample);
//   DeviceStep step = build_device_step(log.take(), {{3, Launch::action(0)}}, clock, origin);
//   DeviceBusy b = device_busy(step.ops, 0.0, step_end);
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace ppb::device {

enum class OpKind : uint8_t { kKernel, kMemcpy, kMemset };
/// What an operation counts as (see the header comment).
enum class OpClass : uint8_t { kCompute, kCommunication, kOptimizer, kOther };

/// "kernel", "memcpy", "memset".
const char* op_kind_name(OpKind kind);
/// "compute", "communication", "optimizer", "other".
const char* op_class_name(OpClass c);

/// One record as the profiler delivered it; times are nanoseconds of the
/// profiler's clock (CUPTI: CLOCK_REALTIME by default). 0 = not recorded.
struct RawRecord {
  OpKind kind = OpKind::kKernel;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t device = 0;
  uint32_t stream = 0;       ///< the profiler's stream id
  uint32_t correlation = 0;  ///< id of the API call that launched it
  /// Kernel: its name; memcpy: "Memcpy DtoH (Device -> Pinned)"; memset:
  /// "Memset (Device)" (the names Holistic Trace Analysis recognises).
  std::string name;
  int64_t bytes = 0;  ///< memcpy, memset: bytes moved or set; kernel: 0
};

/// Who launched a group of operations: the id pushed around the launch
/// (CUPTI external correlation) names one of these.
struct Launch {
  enum class Kind : uint8_t { kAction, kOptimizer };
  Kind kind = Kind::kAction;
  /// kAction: index of the action in the step's record (StepRecord::
  /// actions, list order), -1 when unknown; kOptimizer: the chunk.
  int index = -1;
  static Launch action(int index) { return {Kind::kAction, index}; }
  static Launch optimizer(int chunk) { return {Kind::kOptimizer, chunk}; }
};

/// Maps the profiler's clock onto pipebench's steady clock (now_seconds()).
/// Each sample pairs a profiler timestamp with the steady time read around it
/// (the midpoint of a steady read before and one after); between two samples
/// the offset is interpolated linearly, so a slow drift of one clock against
/// the other (NTP slewing CLOCK_REALTIME) is followed; outside them it is
/// extrapolated from the nearer one.
struct ClockSample {
  double steady_seconds = 0;  ///< now_seconds() at the profiler read
  uint64_t device_ns = 0;     ///< the profiler's timestamp
  /// The midpoint pairing of `before` (steady), `device_ns`, `after` (steady).
  static ClockSample around(double before, uint64_t device_ns, double after);
};

class ClockMap {
 public:
  /// REQUIRES: second.device_ns >= first.device_ns (PPB_CHECK). One sample
  /// twice is a constant offset.
  ClockMap(ClockSample first, ClockSample second);
  /// Steady seconds of profiler timestamp `ns`.
  double to_steady(uint64_t ns) const;
  /// Offset change from the first sample to the second, seconds (steady minus
  /// profiler): how far the clocks drifted apart in between.
  double drift_seconds() const;

 private:
  ClockSample a_;
  ClockSample b_;
  double slope_ = 0;  // offset change per profiler second
};

/// One device operation on the step clock: seconds from the step's start.
struct DeviceOp {
  OpKind kind = OpKind::kKernel;
  OpClass op_class = OpClass::kOther;
  double start = 0;
  double end = 0;
  int64_t stream = 0;
  uint32_t device = 0;
  uint32_t correlation = 0;  ///< the profiler's launch correlation id
  /// Index of the launching action in the step's action list; -1 for the
  /// optimizer, for messages and for anything not launched by an action.
  int action = -1;
  std::string name;
  int64_t bytes = 0;

  friend bool operator==(const DeviceOp&, const DeviceOp&) = default;
};

/// Busy time of one stage's device over a window, seconds. Each figure is
/// the length of a union of intervals (operations on different streams that
/// overlap count once).
struct DeviceBusy {
  double compute = 0;        ///< union of compute operations
  double communication = 0;  ///< union of communication operations
  double overlap = 0;        ///< time both compute and communication ran
  double optimizer = 0;      ///< union of optimizer operations
  double busy = 0;           ///< union of every operation

  friend bool operator==(const DeviceBusy&, const DeviceBusy&) = default;
};

/// One step's device activity on one rank.
struct DeviceStep {
  std::vector<DeviceOp> ops;  ///< by start time
  /// Records the profiler lost (buffers full) since the previous step.
  int64_t dropped = 0;
  /// Records skipped: a zero timestamp (the profiler did not time it) or an
  /// end before the start.
  int64_t skipped = 0;
  double clock_drift = 0;  ///< ClockMap::drift_seconds() of this step

  friend bool operator==(const DeviceStep&, const DeviceStep&) = default;
};

/// True for NCCL's kernels: a name matching `^nccl` or `.*ncclKernel.*`.
bool is_communication_kernel(std::string_view name);

/// The class of an operation of `kind` called `name`, launched by `launch`
/// (null: launched outside every pushed id).
OpClass classify(OpKind kind, std::string_view name, const Launch* launch);

/// Collects the records of a buffer walk. Thread-safe: CUPTI may hand over a
/// completed buffer on its own thread while the executor's thread takes.
class ActivityLog {
 public:
  /// Keeps `r`, or counts it as skipped when a timestamp is 0 or end < start.
  void add(RawRecord r);
  /// The launch API call `correlation` ran with external id `external_id`
  /// pushed (CUPTI: an external correlation record).
  void correlate(uint32_t correlation, uint64_t external_id);
  /// `n` records were lost (cuptiActivityGetNumDroppedRecords).
  void add_dropped(uint64_t n);

  struct Taken {
    std::vector<RawRecord> records;
    std::map<uint32_t, uint64_t> external;  ///< correlation -> external id
    int64_t dropped = 0;
    int64_t skipped = 0;
  };
  /// Everything collected since the last take(); the log is empty after.
  Taken take();

 private:
  std::mutex mutex_;
  Taken now_;
};

/// One step's operations: each record of `taken` mapped through `clock` to
/// seconds from `origin` (steady seconds at the step's start), attributed
/// through its external id to a launch of `launches` (none: unattributed)
/// and classified; sorted by start. dropped, skipped and the clock drift are
/// carried over.
DeviceStep build_device_step(const ActivityLog::Taken& taken,
                             const std::map<uint64_t, Launch>& launches, const ClockMap& clock,
                             double origin);

/// Busy figures of `ops` clipped to [from, to]. REQUIRES: from <= to.
DeviceBusy device_busy(const std::vector<DeviceOp>& ops, double from, double to);

/// Per action (index 0..actions-1 of the step's list): the union of the
/// device time of the operations it launched, seconds (0 for an action that
/// launched nothing).
std::vector<double> action_device_seconds(const std::vector<DeviceOp>& ops, size_t actions);

/// The kernel families a step's compute time is split into, in this order:
/// pipebench's own kernels by what they compute, a library's GEMMs, and the
/// rest ("other").
const std::vector<std::string>& kernel_families();

/// The family of a kernel by its (demangled) name: a name holding "gemm"
/// (cuBLAS's and CUTLASS's GEMMs, splitKreduce with them) is "gemm";
/// pipebench's `ppb_<what>` kernels by their stem: "layernorm"
/// (ppb_layernorm_*), "attention" (ppb_attention_*), "gelu", "embedding",
/// "cross_entropy" (ppb_cross_entropy_*, ppb_loss_sum), "column_reduce"
/// (ppb_column_*: LayerNorm and bias weight gradients), "convert" (ppb_to_*);
/// anything else "other".
/// Example: kernel_family("void ppb::device::ppb_layernorm_fwd<float>(...)") == "layernorm".
std::string kernel_family(std::string_view name);

/// Per kernel family (every one of kernel_families(), 0 when none ran): the
/// union of the device time of the compute kernels of that family, seconds;
/// an action's copies and memsets count as "other". The families' sum is
/// at least the compute union (more where families overlapped).
std::map<std::string, double> family_device_seconds(const std::vector<DeviceOp>& ops);

/// The device-side bubble ratio of a stage: (step - compute busy) / step,
/// the host bubble's definition with the device's compute busy time
/// (docs/metrics.md). 0 when step <= 0.
double device_bubble_ratio(double compute_seconds, double step_seconds);

}  // namespace ppb::device
