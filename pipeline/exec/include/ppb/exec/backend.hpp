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
// On the CPU, StreamBackend implements the streams with host threads
// (host_stream.hpp): cpu runs its actions on a worker thread; timed's compute
// stream is a clock (an action occupies it for its modelled time, no thread).
//
// Registered backends (one file + one line in backend_registry.cpp, STYLE
// rule 8):
//   cpu    real fp32 GPT training math on OpenBLAS (CpuBackend, backend_cpu.cpp)
//   timed  no computation: each action sleeps for its modelled time, real
//          messages of the modelled sizes cross the transport (TimedBackend,
//          backend_timed.cpp)
//   cuda   the cpu backend's model on a GPU: cuBLAS GEMMs, CUDA kernels,
//          fp32 or bf16 storage (src/cuda/, make_cuda_backend); registered in
//          every build, refused with the reason where no device is usable
//
// Example:
//   BackendConfig cfg{.spec = spec, .units = units, .parts = parts, .costs = costs,
//                     .stage = rank, .stages = P, .chunks = V, .microbatches = M};
//   std::unique_ptr<Backend> b = ppb::make_backend("cpu", cfg);
//   StreamTicket t = b->enqueue({ActionKind::kForward, 0, mb, in.data(), out.data()});
//   StreamTimes times;
//   while (!b->query(t, &times)) progress_communication();
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/exec/memory_space.hpp"
#include "ppb/exec/microbatch_ledger.hpp"
#include "ppb/pipeline/action.hpp"
#include "ppb/pipeline/backend_traits.hpp"
#include "ppb/pipeline/costs.hpp"
#include "ppb/pipeline/device.hpp"
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
/// high-water mark since the last reset_device_peak(), and the device
/// memory it holds outside the pool (cuBLAS handle and workspace).
struct DeviceMemoryFigures {
  int64_t pool_peak = -1;  ///< -1: the backend has no device
  int64_t outside_pool = 0;
};

/// Everything a backend may need; each backend reads the fields it uses.
struct BackendConfig {
  ModelSpec spec;                ///< cpu: the model
  std::vector<Unit> units;       ///< cpu: expand_units(spec)
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

  /// The placement `placement` names (looping when it is empty).
  Placement chunk_placement() const;
  /// The units chunk c of this stage computes: parts[v], v the placement's
  /// virtual stage of (stage, c). REQUIRES: parts holds stages * chunks ranges.
  UnitRange chunk_units(int c) const;
};

/// One stage's compute. Chunk indices are local (0..V-1); micro-batch ids are
/// global (0..M*batches-1). A backend copies what it keeps of an action's
/// buffers, and counts it in memory().
/// One thread (the executor's) calls it; actions run on the compute stream.
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

  /// This stage's tracker: parameters, gradients, activations, stash, and the
  /// executor's communication buffers.
  virtual MemoryTracker& memory() = 0;
  virtual const MemoryTracker& memory() const = 0;

  // Reading back for --check (BackendInfo::real_gradients). REQUIRES: the
  // actions of the chunk have completed (hooks between actions, or after
  // run_step). Backends without real math keep the defaults.

  /// The weight gradients of `chunk` accumulated since its last optimizer
  /// step, one vector per unit of the chunk's range in unit order, copied to
  /// host memory. Empty without real math.
  virtual std::vector<std::vector<float>> gradients(int /*chunk*/) const { return {}; }
  /// The loss of micro-batch `mb` computed by `chunk`. REQUIRES: `chunk` is
  /// the last virtual stage and its forward of `mb` ran. NaN without real
  /// math.
  virtual double loss(int /*chunk*/, int64_t /*mb*/) const {
    return std::numeric_limits<double>::quiet_NaN();
  }
  /// Weight stashing: the version of `chunk`'s weights (optimizer steps so
  /// far) and the version micro-batch `mb`'s forward used; -1 when the
  /// backend keeps no versions.
  virtual int weight_version(int /*chunk*/) const { return -1; }
  virtual int weight_version_of(int /*chunk*/, int64_t /*mb*/) const { return -1; }

  /// Data parallelism: the weight gradients of `chunk` as buffers in the
  /// backend's memory space, which the executor sums in place across the
  /// stage's replicas (Transport::iallreduce_sum) before the chunk's
  /// optimizer step. Valid for the backend's lifetime; written only by the
  /// chunk's B and W actions. Empty: nothing to reduce (the default).
  virtual std::vector<std::span<float>> gradient_buffers(int /*chunk*/) { return {}; }

  /// Wall seconds per modelled second of a backend that models time (timed);
  /// 0 for one that computes.
  virtual double time_scale() const { return 0; }

  /// Seconds of a fixed reference workload run now on this backend's
  /// compute resource, through the kernels its actions use; NaN for a
  /// backend whose action times do not depend on that resource (timed).
  /// `run` measures it after every timed step, so that the regression gate
  /// can tell a slower machine (a busy hypervisor, a throttled core) from
  /// slower code (metrics.speed_probe_seconds_per_stage).
  /// REQUIRES: the streams are idle.
  virtual double speed_probe() { return std::numeric_limits<double>::quiet_NaN(); }

  /// Seconds this stage's units ran since the last call, by kind (indexed
  /// by UnitKind, kUnitKinds entries) and pass; the call starts the sums
  /// again. Empty for a backend that does not time its units (timed, whose
  /// actions are modelled whole; cuda). `run` takes them after every timed
  /// step (metrics.theory.kind_seconds_per_stage), so that calibration can
  /// fit a factor per unit kind. REQUIRES: the streams are idle.
  virtual std::vector<UnitTime> take_kind_seconds() { return {}; }

  // Device backends (BackendInfo::traits.device). REQUIRES: the streams are idle.

  /// The device memory figures (pool_peak -1 without a device).
  virtual DeviceMemoryFigures device_memory() const { return {}; }
  /// Starts a new high-water window of the device pool (once per step).
  virtual void reset_device_peak() {}
  /// Empty while the backend is healthy. After a device allocation failed
  /// (out of memory), one line saying where, with the device's figures; the
  /// backend then skips the work of every later action (their tickets still
  /// complete, messages still flow with unspecified contents), so that the
  /// step ends on every rank and the run can record the combination as
  /// status `oom` and go on.
  virtual std::string out_of_memory() const { return {}; }
};

class HostStream;
class ClockStream;

/// A backend whose streams are host threads (HostStream): everything lives
/// in host memory (pinned host is host memory on the CPU), the compute
/// stream runs the synchronous action bodies below on its worker thread, the
/// copy stream runs memcpy. Subclasses implement the bodies.
class StreamBackend : public Backend {
 public:
  StreamBackend();
  ~StreamBackend() override;

  MemorySpace memory_space() const override { return MemorySpace::kHost; }
  TrackedBuffer allocate(int64_t bytes, MemorySpace space, MemCategory category) override;
  StreamTicket enqueue(const ActionCall& call) override;
  bool query(StreamTicket ticket, StreamTimes* times) override;
  bool wait(StreamTicket ticket, double seconds, StreamTimes* times) override;
  double stream_now() override;
  StreamTicket copy_async(std::byte* dst, const std::byte* src, int64_t bytes) override;
  bool copy_done(StreamTicket ticket) override;

  /// The action bodies, run on the compute stream's thread by enqueue();
  /// callable directly while the stream is idle (tests do).
  virtual void forward(int chunk, int64_t mb, const std::byte* in, std::byte* out) = 0;
  /// Full backward: input gradient into grad_in, weight gradients accumulated.
  virtual void backward(int chunk, int64_t mb, const std::byte* grad_out, std::byte* grad_in) = 0;
  /// Input-gradient half (zero-bubble I). REQUIRES: forward(chunk, mb) ran.
  virtual void backward_input(int chunk, int64_t mb, const std::byte* grad_out,
                              std::byte* grad_in) = 0;
  /// Weight-gradient half (zero-bubble W). REQUIRES: backward_input ran.
  virtual void backward_weight(int chunk, int64_t mb) = 0;

 protected:
  /// Subclasses call it first in their destructor: the worker must not run
  /// an action on a half-destroyed backend.
  void stop_streams();

 private:
  void run(const ActionCall& call);
  std::unique_ptr<HostStream> compute_;
  std::unique_ptr<HostStream> copy_;  // started on the first copy_async
};

/// The `cpu` backend: one CpuChunk (cpu_model.hpp) per chunk c over
/// parts[v], v the placement's virtual stage of (s, c), with loss_scale 1/M and weight stashing as
/// configured. Gradients, losses and weight versions read back through Backend.
class CpuChunk;
class CpuBackend final : public StreamBackend {
 public:
  /// REQUIRES: parts.size() == stages * chunks, units == expand_units(spec).
  explicit CpuBackend(const BackendConfig& config);
  ~CpuBackend() override;

  std::string_view name() const override { return "cpu"; }
  int chunks() const override { return static_cast<int>(chunks_.size()); }
  int64_t input_bytes(int chunk) const override;
  int64_t output_bytes(int chunk) const override;
  int64_t activation_bytes(int chunk) const override;
  void forward(int chunk, int64_t mb, const std::byte* in, std::byte* out) override;
  void backward(int chunk, int64_t mb, const std::byte* grad_out, std::byte* grad_in) override;
  void backward_input(int chunk, int64_t mb, const std::byte* grad_out,
                      std::byte* grad_in) override;
  void backward_weight(int chunk, int64_t mb) override;
  void optimizer_step(int chunk) override;
  MemoryTracker& memory() override { return memory_; }
  const MemoryTracker& memory() const override { return memory_; }
  std::vector<std::vector<float>> gradients(int chunk) const override;
  double loss(int chunk, int64_t mb) const override;
  int weight_version(int chunk) const override;
  int weight_version_of(int chunk, int64_t mb) const override;
  std::vector<std::span<float>> gradient_buffers(int chunk) override;
  /// Four single-threaded 256 x 256 x 256 SGEMMs through the kernels' gemm
  /// (about 134 MFLOP) on fixed operands, on the calling thread.
  double speed_probe() override;
  std::vector<UnitTime> take_kind_seconds() override;
  /// True when this rank may use more cores than OpenBLAS computes on:
  /// min(its affinity mask, the host's online cores / the ranks on the host)
  /// > OpenBLAS's threads.
  bool core_to_spare() const override { return core_to_spare_; }

  /// The model of local chunk c (its unit range, gradients, parameters, loss).
  CpuChunk& chunk(int c) { return *chunks_[static_cast<size_t>(c)]; }
  const CpuChunk& chunk(int c) const { return *chunks_[static_cast<size_t>(c)]; }
  /// Global unit range of local chunk c.
  UnitRange range(int c) const;

 private:
  MemoryTracker memory_;  // declared first: the chunks count into it until destroyed
  std::vector<std::unique_ptr<CpuChunk>> chunks_;
  std::vector<int64_t> activation_bytes_;
  float learning_rate_;
  double plant_factor_;                // BackendConfig::plant_factor
  std::vector<float> probe_operands_;  // speed_probe(): A, B and C, made on first use
  // The schedule's micro-batch -> the data's (BackendConfig::replica).
  int64_t data(int64_t mb) const;
  int microbatches_ = 1;
  int replica_ = 0;
  int replicas_ = 1;
  bool core_to_spare_ = true;
};

/// The `timed` backend: no computation. Its compute stream is a clock: an
/// enqueued action occupies it for its modelled time x time_scale, from its
/// enqueue or the previous action's end, whichever is later, and the
/// executor's thread waits by sleeping to that end. Called directly, each
/// action sleeps until an absolute deadline (clock_nanosleep(TIMER_ABSTIME) with
/// PR_SET_TIMERSLACK lowered to 1 ns) of call time + modelled seconds x time_scale; F sleeps fwd, I
/// bwd_input, W bwd_weight, B both. Messages have the modelled sizes and are
/// real (the executor sends them). Memory is COUNT-ONLY: parameters,
/// gradients (param_bytes each) and each in-flight micro-batch's activation
/// bytes are entered in the tracker without allocating them, so a gpt-7b
/// stage can be modelled on a laptop; the executor's communication buffers
/// stay real allocations. With weight_stashing (pipedream) the stash is
/// counted as CpuChunk keeps it (the same MicrobatchLedger): one copy of the
/// chunk's param_bytes per older weight version an in-flight micro-batch
/// still uses (MemCategory::kWeightStash); optimizer_step(c) starts a new
/// version.
class TimedBackend final : public StreamBackend {
 public:
  /// REQUIRES: config.costs has stages * chunks entries with costs >= 0.
  explicit TimedBackend(const BackendConfig& config);
  ~TimedBackend() override;

  std::string_view name() const override { return "timed"; }
  int chunks() const override { return chunks_; }
  int64_t input_bytes(int chunk) const override;
  int64_t output_bytes(int chunk) const override;
  int64_t activation_bytes(int chunk) const override;
  void forward(int chunk, int64_t mb, const std::byte* in, std::byte* out) override;
  void backward(int chunk, int64_t mb, const std::byte* grad_out, std::byte* grad_in) override;
  void backward_input(int chunk, int64_t mb, const std::byte* grad_out,
                      std::byte* grad_in) override;
  void backward_weight(int chunk, int64_t mb) override;
  void optimizer_step(int chunk) override;
  MemoryTracker& memory() override { return memory_; }
  const MemoryTracker& memory() const override { return memory_; }
  StreamTicket enqueue(const ActionCall& call) override;
  bool query(StreamTicket ticket, StreamTimes* times) override;
  bool wait(StreamTicket ticket, double seconds, StreamTimes* times) override;

  /// Wall seconds slept per modelled second.
  double time_scale() const override { return time_scale_; }
  /// With replicas > 1: one real buffer of the chunk's param_bytes, the
  /// stand-in for its count-only gradients that the all-reduce moves (not
  /// counted again: the gradients are counted as kGradients).
  std::vector<std::span<float>> gradient_buffers(int chunk) override;

 private:
  const ChunkCost& cost(int chunk) const;
  // Counts what the action holds and releases; returns its modelled seconds.
  double account(const ActionCall& call);
  std::unique_ptr<ClockStream> clock_;
  void sleep_for_model_seconds(double seconds);

  MemoryTracker memory_;
  StageCosts costs_;
  Placement placement_;
  int stage_ = 0;
  int chunks_ = 1;
  double time_scale_ = 1;
  double plant_factor_ = 1;  // BackendConfig::plant_factor: scales every sleep
  int64_t counted_params_ = 0;
  // Count-only bytes in memory_ (no allocation), released on destruction.
  TrackedBuffer counted(MemCategory category, int64_t bytes);
  // Per chunk: the in-flight micro-batches (each holding its counted
  // activation bytes), their pass order and their weight versions, kept as
  // CpuChunk keeps them for real (stashes: one counted param_bytes each).
  std::vector<MicrobatchLedger<TrackedBuffer>> ledgers_;
  std::vector<std::vector<float>> allreduce_buffers_;  // per chunk, replicas > 1 only
};

/// A registered backend, for `pipebench list` and error messages: its row of
/// the core's backend traits, extended with what running it takes.
struct BackendInfo {
  std::string name;
  std::string help;             ///< one line
  bool real_gradients = false;  ///< computes real gradients and losses (--check compares them)
  /// Action times are modelled (slept), not computed on the host CPU: more
  /// ranks than cores do not take turns computing, and --plant can also
  /// plant a speed-up (factor < 1).
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
  /// (Backend::device_memory, out_of_memory).
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
