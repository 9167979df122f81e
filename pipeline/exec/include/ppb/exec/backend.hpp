// Backends: what one stage computes. A Backend holds the stage's chunks
// (chunk c of stage s is virtual stage v = c * P + s, i.e. partition part
// parts[v]) and runs their forward / backward / optimizer actions on buffers
// the executor hands in; it owns the stage's MemoryTracker, in which the
// executor also counts its communication buffers.
//
// Asynchronous actions. A backend has a compute stream: enqueue() appends an
// action and returns at once with a ticket; the action runs later, after
// every action enqueued before it; query() tests a ticket without blocking
// and, once the action completed, gives its start and end on the stream's
// own clock; wait() blocks for at most a given time (so the caller can go on
// progressing communication). The buffers of an enqueued action must stay
// valid and untouched until its ticket completed. A second stream, the copy
// stream, runs copy_async() copies in order, independently of compute.
//
// Memory spaces. The buffers actions read and write (received inputs and
// gradients, outputs in flight) are allocated by the backend, in its memory
// space (memory_space()), and counted in its tracker; a transport says which
// spaces it can move directly (Transport::can_access); where it cannot, the
// executor stages messages through pinned host buffers with copy_async().
//
// How a CUDA backend maps onto this contract:
//   compute stream      a cudaStream_t; enqueue() records a start event,
//                       launches the action's kernels, records an end event
//                       (cudaEventDefault, so elapsed times are available)
//   query(t, &times)    cudaEventQuery(end) == cudaSuccess; times from
//                       cudaEventElapsedTime against an event recorded by
//                       stream_now() and synchronised there, at a host time
//                       it notes (so stream times are host times)
//   wait(t, seconds)    cudaEventQuery in a loop with short sleeps, or a
//                       cudaEventBlockingSync event (no busy host core)
//   copy stream         a second cudaStream_t with cudaMemcpyAsync and events
//   memory_space()      kDevice; allocate(kDevice) comes from a stream-ordered
//                       pool (cudaMemPool), allocate(kPinnedHost) cudaHostAlloc
//   optimizer_step      enqueued on the compute stream, then synchronised
// On the CPU, StreamBackend (src/stream_backend.hpp) implements the streams
// with host threads (host_stream.hpp): cpu runs its actions on a worker
// thread; timed's compute stream is a clock (an action occupies it for its
// modelled time, no thread).
//
// Capabilities. Backend holds what the executor needs to run a step. What
// only some backends offer is an interface of its own, reached through an
// accessor that returns null where the backend lacks it, so a caller asks
// instead of reading a placeholder (NaN, -1, empty):
//   check()          CheckAccess: gradients, weights, losses, weight versions
//                    for --check
//   probes()         StepProbes: speed probe and seconds per unit kind
//   modelled_time()  ModelledTime: the time scale of slept actions
//   device()         DeviceAccess: device memory figures, out of memory
//
// Registered backends (their files + one line in backend_registry.cpp,
// STYLE rule 8); the classes are private to the library (src/):
//   cpu    real fp32 GPT training math on OpenBLAS (CpuBackend,
//          backend_cpu.hpp); check, probes
//   timed  no computation: each action sleeps for its modelled time, real
//          messages of the modelled sizes cross the transport (TimedBackend,
//          backend_timed.hpp); modelled_time
//   cuda   the cpu backend's model on a GPU: cuBLAS GEMMs, CUDA kernels,
//          fp32 or bf16 storage (src/cuda/, make_cuda_backend); registered in
//          every build, refused with the reason where no device is usable;
//          check, device
//
// Example:
//   BackendConfig cfg{.spec = spec, .units = units, .parts = parts, .costs = costs,
//                     .stage = rank, .stages = P, .chunks = V, .microbatches = M};
//   std::unique_ptr<Backend> b = ppb::make_backend("cpu", cfg);
//   StreamTicket t = b->enqueue({ActionKind::kForward, 0, mb, in.data(), out.data()});
//   StreamTimes times;
//   while (!b->query(t, &times)) progress_communication();
//   if (const CheckAccess* ck = b->check()) loss = ck->loss(0, mb);  // P = V = 1
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/exec/memory_space.hpp"
#include "ppb/pipeline/action.hpp"
#include "ppb/pipeline/backend_traits.hpp"
#include "ppb/pipeline/costs.hpp"
#include "ppb/pipeline/cuda_graphs.hpp"
#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/gemm_epilogues.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/profiling/memory.hpp"

namespace ppb {

/// One action for a compute stream. `in` / `out` follow the byte counts of
/// Backend::input_bytes / output_bytes (F reads in, writes out; B and I read
/// the output gradient from `in` and write the input gradient to `out`; W
/// uses neither); null stands for a 0-byte tensor. SYNC is never enqueued.
struct ActionCall {
  ActionKind kind = ActionKind::kForward;
  int chunk = 0;
  int64_t microbatch = 0;
  const std::byte* in = nullptr;
  std::byte* out = nullptr;
};

/// A stream's completion marker: 1, 2, 3, ... per stream, in enqueue order.
using StreamTicket = uint64_t;

/// When a stream ran an item, in seconds on the stream's clock.
struct StreamTimes {
  double start = 0;
  double end = 0;
};

/// A device backend's memory besides its tracker: the stream-ordered pool's
/// high-water mark since the last DeviceAccess::reset_device_peak(), and
/// the device memory it holds outside the pool (cuBLAS handle and
/// workspace).
struct DeviceMemoryFigures {
  int64_t pool_peak = 0;
  int64_t outside_pool = 0;
};

/// Everything a backend may need; each backend reads the fields it uses.
struct BackendConfig {
  ModelSpec spec;           ///< cpu: the model
  std::vector<Unit> units;  ///< cpu: expand_units(spec)
  /// cuda: the attention's form (units were expanded with it; the run's
  /// choose_attention() picked it).
  Attention attention = Attention::kNaive;
  std::vector<UnitRange> parts;  ///< cpu: P*V ranges, indexed by virtual stage (model order)
  /// timed: per virtual stage, seconds of F / I / W (a B sleeps I + W), the
  /// bytes F sends (send_bytes; B/I send as many back), activation and
  /// parameter bytes (model_costs() of device.hpp builds it).
  StageCosts costs;
  int stage = 0;   ///< this rank's stage s, 0 <= s < stages
  int stages = 1;  ///< P
  int chunks = 1;  ///< V
  /// The schedule's placement (Schedule::placement): which virtual stage
  /// each chunk of this stage is; empty = looping (c * P + s).
  std::vector<int32_t> placement;
  int microbatches = 1;  ///< M: the cpu backend scales each micro-batch's loss gradient by 1/M
  /// cpu: PipeDream weight stashing (the `pipedream` schedule): a
  /// micro-batch's backward uses the weights its forward used.
  bool weight_stashing = false;
  uint64_t seed = 1234;         ///< cpu: parameters and synthetic data
  float learning_rate = 1e-3f;  ///< cpu: SGD
  /// timed: wall seconds per modelled second; 0 = default_time_scale(costs).
  double time_scale = 0;
  /// A slowdown planted to test the regression gate: this stage's actions
  /// take plant_factor times as long (timed: longer or shorter sleeps; cpu:
  /// extra real work after each action; cuda: a kernel after each action on
  /// its stream; so >= 1 for both). 1 = none.
  double plant_factor = 1;
  /// cuda: this rank among the ranks of its node (ppb::node_local) and how
  /// many there are; the node-local rank picks the GPU.
  int local_rank = 0;
  int local_ranks = 1;
  /// Data parallelism (data_parallel.hpp): this rank's replica and the
  /// number of replicas D. The schedule's micro-batch mb is the step's
  /// global micro-batch data_microbatch(mb, microbatches, replica,
  /// replicas): cpu draws its tokens for it and scales each loss gradient by
  /// 1/(D x M), so the sum the all-reduce forms is the global batch's mean
  /// gradient; timed keeps real gradient buffers for the all-reduce.
  int replica = 0;
  int replicas = 1;
  /// cuda: --cuda-graphs, capture work into CUDA graphs and replay them
  /// where the device can (DeviceAccess::graphs says what ran how).
  bool cuda_graphs = true;

  /// The placement `placement` names (looping when it is empty).
  Placement chunk_placement() const;
  /// The units chunk c of this stage computes: parts[v], v the placement's
  /// virtual stage of (stage, c). REQUIRES: parts holds stages * chunks ranges.
  UnitRange chunk_units(int c) const;
};

class CheckAccess;
class StepProbes;
class ModelledTime;
class DeviceAccess;

/// One stage's compute: what the executor needs to run a step. Chunk
/// indices are local (0..V-1); micro-batch ids are global
/// (0..M*batches-1). A backend copies what it keeps of an action's buffers,
/// and counts it in memory(). One thread (the executor's) calls it; actions
/// run on the compute stream. What only some backends offer (--check's read
/// back, per-step probes, modelled time, a device) is a capability below,
/// reached through an accessor that returns null where the backend lacks it.
class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;
  virtual int chunks() const = 0;

  /// Bytes F of `chunk` receives (the previous virtual stage's output); B/I
  /// of `chunk` send as many back. 0 on virtual stage 0.
  virtual int64_t input_bytes(int chunk) const = 0;
  /// Bytes F of `chunk` sends; B/I of `chunk` receive as many. 0 on the last
  /// virtual stage.
  virtual int64_t output_bytes(int chunk) const = 0;
  /// Activation bytes one micro-batch keeps on `chunk` from its F to its last
  /// backward piece (exact: what the tracker counts; the memory guard
  /// predicts peaks with it).
  virtual int64_t activation_bytes(int chunk) const = 0;

  /// The space of the buffers actions read and write.
  virtual MemorySpace memory_space() const = 0;
  /// A zero-filled buffer of `bytes` in `space`, counted in memory() under
  /// `category` for its lifetime.
  virtual TrackedBuffer allocate(int64_t bytes, MemorySpace space, MemCategory category) = 0;

  /// Appends `call` to the compute stream; returns at once. REQUIRES: its
  /// buffers stay valid and untouched until query/wait reported completion.
  virtual StreamTicket enqueue(const ActionCall& call) = 0;
  /// True once the action of `ticket` completed (then *times, if not null,
  /// holds its start and end on the stream clock). Each ticket is reported
  /// complete once, in enqueue order. Rethrows what the action threw.
  virtual bool query(StreamTicket ticket, StreamTimes* times) = 0;
  /// Like query(), waiting up to `seconds` for the completion.
  virtual bool wait(StreamTicket ticket, double seconds, StreamTimes* times) = 0;
  /// The stream clock now (seconds); compares with StreamTimes. The stream
  /// clock is the host's steady clock (now_seconds()): a device backend maps
  /// its events onto it, and may re-anchor here while its stream is idle
  /// (the executor calls this at every step start).
  virtual double stream_now() = 0;
  /// False when a running action keeps every core this rank may use busy
  /// (the cpu backend with no core to spare): the executor then progresses
  /// messages only between actions, because waking its thread during one
  /// would take the action's core. True (the default) when actions run on a
  /// device or are modelled time, or the rank has a core to spare.
  virtual bool core_to_spare() const { return true; }

  /// Appends a copy of `bytes` from src to dst to the copy stream (staging
  /// between memory spaces); same rules as enqueue().
  virtual StreamTicket copy_async(std::byte* dst, const std::byte* src, int64_t bytes) = 0;
  /// True once the copy of `ticket` completed.
  virtual bool copy_done(StreamTicket ticket) = 0;

  /// SGD on `chunk` (params -= lr * grads; grads = 0), synchronously.
  /// REQUIRES: the compute stream is idle (every enqueued action completed).
  /// The executor calls it for every chunk once per batch (flush schedules)
  /// or after each backward of the chunk (pipedream).
  virtual void optimizer_step(int chunk) = 0;

  /// Data parallelism: the weight gradients of `chunk` as buffers in the
  /// backend's memory space, which the executor sums in place across the
  /// stage's replicas (Transport::iallreduce_sum) before the chunk's
  /// optimizer step. Valid for the backend's lifetime; written only by the
  /// chunk's B and W actions. Empty: nothing to reduce (a chunk without
  /// weights; the timed backend with one replica).
  virtual std::vector<std::span<float>> gradient_buffers(int chunk) = 0;

  /// This stage's tracker: parameters, gradients, activations, stash, and the
  /// executor's communication buffers.
  virtual MemoryTracker& memory() = 0;
  virtual const MemoryTracker& memory() const = 0;

  // Capabilities: each accessor returns the backend itself seen through the
  // interface, valid for the backend's lifetime, or null where the backend
  // lacks it. A backend offers the same ones whatever its configuration, in
  // line with its registry entry (BackendInfo). The interfaces' destructors
  // are protected: a backend is deleted as a Backend.

  /// Reading back for --check; offered exactly where
  /// BackendInfo::real_gradients (cpu, cuda).
  virtual const CheckAccess* check() const { return nullptr; }
  /// The figures `run` takes after every timed step (cpu).
  virtual StepProbes* probes() { return nullptr; }
  /// Actions modelled, not computed; offered exactly where
  /// BackendInfo::modelled_time (timed).
  virtual const ModelledTime* modelled_time() const { return nullptr; }
  /// A device's memory and its out-of-memory state; offered exactly where
  /// BackendInfo::traits.device (cuda).
  virtual DeviceAccess* device() { return nullptr; }
};

/// What --check reads back from a backend with real math. REQUIRES: the
/// actions of the chunk have completed (hooks between actions, or after
/// run_step).
class CheckAccess {
 public:
  /// The weight gradients of `chunk` accumulated since its last optimizer
  /// step, one vector per unit of the chunk's range in unit order, copied to
  /// host memory.
  virtual std::vector<std::vector<float>> gradients(int chunk) const = 0;
  /// The fp32 master weights of `chunk`: the live weights optimizer_step()
  /// updates (never a weight-stash copy), one vector per unit of the
  /// chunk's range in unit order as gradients(), copied to host memory.
  virtual std::vector<std::vector<float>> weights(int chunk) const = 0;
  /// Elements of the weights `chunk`'s kernels read that are not its fp32
  /// master rounded to the storage dtype: with bf16 storage, the bf16
  /// compute copy every optimizer step refreshes from the master (compared
  /// on the backend, through the conversion the refresh uses); 0 where the
  /// kernels read the master itself (fp32, cpu), and once a device backend
  /// ran out of memory.
  virtual int64_t stale_compute_weights(int chunk) const = 0;
  /// The loss of micro-batch `mb` computed by `chunk`. REQUIRES: `chunk` is
  /// the last virtual stage and its forward of `mb` ran. NaN once a device
  /// backend ran out of memory (DeviceAccess::out_of_memory).
  virtual double loss(int chunk, int64_t mb) const = 0;
  /// Weight stashing: the version of `chunk`'s weights (optimizer steps so
  /// far) and the version micro-batch `mb`'s forward used; -1 once a device
  /// backend ran out of memory.
  virtual int weight_version(int chunk) const = 0;
  virtual int weight_version_of(int chunk, int64_t mb) const = 0;

 protected:
  ~CheckAccess() = default;
};

/// What `run` measures on a backend after every timed step besides the step
/// itself, so that the regression gate and calibration can explain its
/// time. REQUIRES: the streams are idle.
class StepProbes {
 public:
  /// Seconds of a fixed reference workload run now on this backend's
  /// compute resource, through the kernels its actions use, so that the
  /// regression gate can tell a slower machine (a busy hypervisor, a
  /// throttled core) from slower code (metrics.speed_probe_seconds_per_stage).
  virtual double speed_probe() = 0;
  /// Seconds this stage's units ran since the last call, by kind (indexed
  /// by UnitKind, kUnitKinds entries) and pass; the call starts the sums
  /// again (metrics.theory.kind_seconds_per_stage), so that calibration can
  /// fit a factor per unit kind.
  virtual std::vector<UnitTime> take_kind_seconds() = 0;

 protected:
  ~StepProbes() = default;
};

/// A backend whose actions take modelled time (slept), not computed time.
class ModelledTime {
 public:
  /// Wall seconds per modelled second (> 0).
  virtual double time_scale() const = 0;

 protected:
  ~ModelledTime() = default;
};

/// A backend that computes on a device. REQUIRES: the streams are idle.
class DeviceAccess {
 public:
  /// The device memory it holds (DeviceMemoryFigures).
  virtual DeviceMemoryFigures device_memory() const = 0;
  /// Starts a new high-water window of the device pool (once per step).
  virtual void reset_device_peak() = 0;
  /// Empty while the backend is healthy. After a device allocation failed
  /// (out of memory), one line saying where, with the device's figures; the
  /// backend then skips the work of every later action (their tickets still
  /// complete, messages still flow with unspecified contents), so that the
  /// step ends on every rank and the run can record the combination as
  /// status `oom` and go on.
  virtual std::string out_of_memory() const = 0;
  /// What ran from CUDA graphs and what eagerly since the backend was made.
  virtual CudaGraphFigures graphs() const = 0;
  /// The GEMMs that ran with a cuBLASLt epilogue and those cuBLASLt refused
  /// since the backend was made, with the first refusal's reason.
  virtual GemmEpilogueFigures gemm_epilogues() const = 0;

 protected:
  ~DeviceAccess() = default;
};

/// A registered backend, for `pipebench list` and error messages: its row of
/// the core's backend traits, extended with what running it takes.
struct BackendInfo {
  std::string name;
  std::string help;  ///< one line
  /// Computes real gradients and losses, which --check compares
  /// (Backend::check(): CheckAccess).
  bool real_gradients = false;
  /// Action times are modelled (slept), not computed on the host CPU: more
  /// ranks than cores do not take turns computing, and --plant can also
  /// plant a speed-up (factor < 1) (Backend::modelled_time(): ModelledTime).
  bool modelled_time = false;
  /// Accepts --dtype bf16 (bf16 storage of activations, messages and the
  /// weights the kernels read; ModelSpec::bytes_per_element 2).
  bool bf16 = false;
  /// --check passes when the loss and every gradient agree with the fp32
  /// single-process reference to this relative error (max_relative_error),
  /// per storage dtype. Where the values come from: docs/metrics.md.
  double check_tolerance_fp32 = 1e-4;
  double check_tolerance_bf16 = 0;  ///< only meaningful with bf16
  /// What the planner, the memory model and the report know of it (its row
  /// of backend_traits_list, found by name when the registry is read): with
  /// traits.device it computes on a GPU, device memory figures
  /// (device_per_stage) and out of memory as status `oom`
  /// (Backend::device(): DeviceAccess).
  BackendTraits traits = {};
  /// Why the backend cannot run in this process, "" when it can (null: it
  /// always can). Checked by `run` on every rank before anything starts.
  std::string (*unusable)() = nullptr;
};

/// The --check tolerance of `info` for elements of `bytes_per_element`
/// bytes (4: fp32, 2: bf16).
double check_tolerance(const BackendInfo& info, int bytes_per_element);
/// Every registered backend ("cpu", "timed", "cuda"), each with its traits.
const std::vector<BackendInfo>& backend_list();

/// The registry entry of the backend called `name`. Throws UsageError as
/// make_backend does.
const BackendInfo& backend_info(std::string_view name);

/// Makes the backend called `name`. Throws
/// UsageError("--backend: unknown backend 'x' (backends: cpu, timed, cuda)").
std::unique_ptr<Backend> make_backend(std::string_view name, const BackendConfig& config);

/// The `cuda` backend (src/cuda/backend_cuda.cpp). Binds the device of
/// config.local_rank (ppb::cuda::bind_device). Throws
/// UsageError("--backend cuda: <why>") where no device is usable (and in a
/// build without CUDA), and cuda::OutOfMemory when its weights do not fit.
std::unique_ptr<Backend> make_cuda_backend(const BackendConfig& config);

}  // namespace ppb
