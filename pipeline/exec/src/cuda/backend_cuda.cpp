// The `cuda` backend: Backend's contract on a GPU (backend.hpp describes the
// mapping). One CudaChunk per chunk; three non-blocking streams: compute
// (every action, enqueued from the executor's thread without waiting),
// copy (staging copies) and side (zeroing the executor's buffers). Tickets
// complete by events; action times come from events on the compute stream,
// anchored to the host clock at each step start (the stream is idle then).
//
// CUDA graphs (--cuda-graphs, GraphCache): each chunk's optimizer step is
// captured once and replayed every step. The actions (F, B, I, W) run
// eagerly in the first step, which sizes each chunk's static buffers
// (cuda_chunk.hpp); from the second step on each action's host bookkeeping
// runs on every call (the ledger, the tracker's counts, the placement of
// its buffers) and its device work is recorded: captured into a graph per
// (chunk, pass, micro-batch) the first time, replayed while every address
// it uses is the same, rebuilt when one moved, or run eagerly where it is
// not replay-safe (a buffer that did not fit the static region). NVTX
// ranges and CUPTI's external correlation wrap the enqueue, so they hold
// for graph launches too (CUPTI gives a graph's kernels the correlation id
// of its cudaGraphLaunch).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cuda/blas.hpp"
#include "cuda/cuda_chunk.hpp"
#include "cuda/device_plant.hpp"
#include "cuda/device_pool.hpp"
#include "cuda/graph_cache.hpp"
#include "ppb/exec/backend.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/pipeline/data_parallel.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/clock.hpp"
#include "ppb/profiling/log.hpp"

namespace ppb {
namespace {

using cuda::CudaChunk;
using cuda::Dtype;

Dtype dtype_of(const ModelSpec& spec) {
  if (spec.bytes_per_element == 4) return Dtype::kFp32;
  if (spec.bytes_per_element == 2) return Dtype::kBf16;
  throw UsageError("--dtype: the cuda backend stores fp32 or bf16 (bytes_per_element " +
                   std::to_string(spec.bytes_per_element) + ")");
}

size_t device_free_bytes() {
  size_t free_bytes = 0;
  size_t total = 0;
  PPB_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return free_bytes;
}

// Events recycled across actions: created once, reused after completion.
class EventPool {
 public:
  explicit EventPool(unsigned flags) : flags_(flags) {}
  ~EventPool() {
    for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
  }
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  cudaEvent_t take() {
    if (free_.empty()) {
      cudaEvent_t e = nullptr;
      PPB_CUDA_CHECK(cudaEventCreateWithFlags(&e, flags_));
      return e;
    }
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  }
  void give(cudaEvent_t e) { free_.push_back(e); }

 private:
  unsigned flags_;
  std::vector<cudaEvent_t> free_;
};

// True once `e` completed; false while pending; a failure ends the job.
bool event_done(cudaEvent_t e) {
  const cudaError_t rc = cudaEventQuery(e);
  if (rc == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not an error: keep it from the next launch check
    return false;
  }
  PPB_CUDA_CHECK(rc);
  return true;
}

cuda::GraphPass graph_pass(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return cuda::GraphPass::kForward;
    case ActionKind::kBackward:
      return cuda::GraphPass::kBackward;
    case ActionKind::kBackwardInput:
      return cuda::GraphPass::kBackwardInput;
    case ActionKind::kBackwardWeight:
      return cuda::GraphPass::kBackwardWeight;
    case ActionKind::kSync:
      break;
  }
  PPB_CHECK(false, "cuda backend: SYNC is not a compute action");
  return cuda::GraphPass::kForward;
}

// GraphOps by CUDA stream capture on one stream. Capture is thread-local:
// other threads' CUDA calls (transports, collectors) neither join nor break
// it. A refusal is reported, not fatal: the caller runs the work eagerly.
class StreamGraphOps final : public cuda::GraphOps {
 public:
  explicit StreamGraphOps(cudaStream_t stream) : stream_(stream) {}
  std::string begin_capture() override {
    return refused("cudaStreamBeginCapture",
                   cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  }
  cuda::GraphHandle end_capture(std::string* why) override {
    cudaGraph_t graph = nullptr;
    *why = refused("cudaStreamEndCapture", cudaStreamEndCapture(stream_, &graph));
    if (!why->empty()) return nullptr;
    cudaGraphExec_t exec = nullptr;
    *why = refused("cudaGraphInstantiateWithFlags", cudaGraphInstantiateWithFlags(&exec, graph, 0));
    (void)cudaGraphDestroy(graph);
    return why->empty() ? exec : nullptr;
  }
  void abort_capture() override {
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph != nullptr) {
      (void)cudaGraphDestroy(graph);
    }
    (void)cudaGetLastError();
  }
  void launch(cuda::GraphHandle graph) override {
    PPB_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), stream_));
  }
  void destroy(cuda::GraphHandle graph) override {
    (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
  }

 private:
  // "" for success, else "call: the runtime's error string" (cleared).
  static std::string refused(const char* call, cudaError_t rc) {
    if (rc == cudaSuccess) return "";
    (void)cudaGetLastError();
    return std::string(call) + ": " + cudaGetErrorString(rc);
  }
  cudaStream_t stream_;
};

class CudaBackend final : public Backend, public CheckAccess, public DeviceAccess {
 public:
  explicit CudaBackend(const BackendConfig& config);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  int chunks() const override { return static_cast<int>(chunks_.size()); }
  int64_t input_bytes(int c) const override { return chunk(c).input_bytes(); }
  int64_t output_bytes(int c) const override { return chunk(c).output_bytes(); }
  int64_t activation_bytes(int c) const override { return chunk(c).activation_bytes(); }
  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  TrackedBuffer allocate(int64_t bytes, MemorySpace space, MemCategory category) override;
  StreamTicket enqueue(const ActionCall& call) override;
  bool query(StreamTicket ticket, StreamTimes* times) override;
  bool wait(StreamTicket ticket, double seconds, StreamTimes* times) override;
  double stream_now() override;
  StreamTicket copy_async(std::byte* dst, const std::byte* src, int64_t bytes) override;
  bool copy_done(StreamTicket ticket) override;
  void optimizer_step(int c) override;
  MemoryTracker& memory() override { return memory_; }
  const MemoryTracker& memory() const override { return memory_; }
  std::vector<std::span<float>> gradient_buffers(int c) override {
    return chunk(c).gradient_buffers();
  }
  const CheckAccess* check() const override { return this; }
  DeviceAccess* device() override { return this; }

  // CheckAccess. After an out-of-memory the chunks' bookkeeping stopped:
  // answer "unknown".
  std::vector<std::vector<float>> gradients(int c) const override { return chunk(c).gradients(); }
  std::vector<std::vector<float>> weights(int c) const override { return chunk(c).weights(); }
  int64_t stale_compute_weights(int c) const override {
    return oom_.empty() ? chunk(c).stale_compute_weights() : 0;
  }
  double loss(int c, int64_t mb) const override {
    return oom_.empty() ? chunk(c).loss(data(mb)) : std::numeric_limits<double>::quiet_NaN();
  }
  int weight_version(int c) const override { return oom_.empty() ? chunk(c).weight_version() : -1; }
  int weight_version_of(int c, int64_t mb) const override {
    return oom_.empty() ? chunk(c).weight_version_of(data(mb)) : -1;
  }

  // DeviceAccess
  DeviceMemoryFigures device_memory() const override;
  void reset_device_peak() override { pool_->reset_high(); }
  std::string out_of_memory() const override { return oom_; }
  CudaGraphFigures graphs() const override;
  GemmEpilogueFigures gemm_epilogues() const override {
    return {blas_->epilogue_gemms(), blas_->epilogue_refusals(), blas_->first_epilogue_refusal()};
  }

 private:
  struct Pending {
    StreamTicket ticket = 0;
    cudaEvent_t start = nullptr;
    cudaEvent_t end = nullptr;
  };
  CudaChunk& chunk(int c) { return *chunks_.at(static_cast<size_t>(c)); }
  const CudaChunk& chunk(int c) const { return *chunks_.at(static_cast<size_t>(c)); }
  // The global micro-batch (its data) of the schedule's micro-batch mb.
  int64_t data(int64_t mb) const { return data_microbatch(mb, microbatches_, replica_, replicas_); }
  void run(const ActionCall& call);
  // run() recorded, then enqueued eagerly, captured or replayed. `begin`
  // enqueues the action's opening (its start event, the plant's mark) just
  // before its first device work: a recorded action's host bookkeeping
  // (placing its buffers, keying its graph) comes before its window, so an
  // idle device waiting on it counts as bubble, not as the action.
  void run_recorded(const ActionCall& call, const std::function<void()>& begin);
  void record_oom(const std::string& what);
  double stream_seconds(cudaEvent_t e) const;
  static void free_ready(void* context, std::byte* data);
  static void free_pinned(void* context, std::byte* data);

  MemoryTracker memory_;  // first: every buffer below counts into it until destroyed
  cuda::DeviceBinding binding_;
  Dtype dtype_ = Dtype::kFp32;
  float learning_rate_ = 0;
  int microbatches_ = 1;
  int replica_ = 0;
  int replicas_ = 1;
  cudaStream_t compute_ = nullptr;
  cudaStream_t copy_ = nullptr;
  cudaStream_t side_ = nullptr;
  std::unique_ptr<cuda::DevicePool> pool_;
  int64_t outside_pool_ = 0;  // cuBLAS handle and workspace
  TrackedBuffer blas_workspace_;
  std::unique_ptr<cuda::Blas> blas_;
  std::vector<std::unique_ptr<CudaChunk>> chunks_;
  std::unique_ptr<cuda::DevicePlant> plant_;   // BackendConfig::plant_factor
  std::unique_ptr<StreamGraphOps> graph_ops_;  // on compute_
  std::unique_ptr<cuda::GraphCache> graphs_;   // BackendConfig::cuda_graphs
  EventPool timed_events_{cudaEventDefault};
  EventPool copy_events_{cudaEventDisableTiming};
  std::deque<Pending> pending_;                              // compute tickets not yet reported
  std::deque<std::pair<StreamTicket, cudaEvent_t>> copies_;  // copy tickets not yet reported
  StreamTicket issued_ = 0;
  StreamTicket copies_issued_ = 0;
  cudaEvent_t anchor_ = nullptr;  // stream clock origin, at host time anchor_host_
  double anchor_host_ = 0;
  std::string oom_;
};

CudaBackend::CudaBackend(const BackendConfig& config) {
  if (std::string why = cuda::unusable_reason(); !why.empty()) {
    throw UsageError("--backend cuda: " + why);
  }
  PPB_CHECK(static_cast<int>(config.parts.size()) == config.stages * config.chunks,
            "cuda backend: parts must hold stages * chunks ranges");
  PPB_CHECK(config.stage >= 0 && config.stage < config.stages, "cuda backend: stage out of range");
  PPB_CHECK(config.microbatches >= 1, "cuda backend: microbatches must be >= 1");
  PPB_CHECK(config.replicas >= 1 && config.replica >= 0 && config.replica < config.replicas,
            "cuda backend: replica out of range");
  dtype_ = dtype_of(config.spec);
  learning_rate_ = config.learning_rate;
  microbatches_ = config.microbatches;
  replica_ = config.replica;
  replicas_ = config.replicas;
  binding_ = cuda::bind_device(config.local_rank, config.local_ranks);
  PPB_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  PPB_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
  PPB_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  PPB_CUDA_CHECK(cudaEventCreateWithFlags(&anchor_, cudaEventDefault));
  pool_ = std::make_unique<cuda::DevicePool>(binding_.device, compute_, memory_);

  // Outside the pool: cuBLAS's handle (measured; approximate when other
  // processes allocate on the device at the same moment) and its workspace.
  const size_t before = device_free_bytes();
  void* ws = nullptr;
  PPB_CUDA_CHECK(cudaMalloc(&ws, static_cast<size_t>(cuda::kBlasWorkspaceBytes)));
  blas_workspace_ = TrackedBuffer(
      memory_, MemCategory::kWorkspace, cuda::kBlasWorkspaceBytes, static_cast<std::byte*>(ws),
      [](void*, std::byte* p) { (void)cudaFree(p); }, nullptr);
  blas_ =
      std::make_unique<cuda::Blas>(compute_, ws, static_cast<size_t>(cuda::kBlasWorkspaceBytes));
  outside_pool_ =
      std::max<int64_t>(static_cast<int64_t>(before) - static_cast<int64_t>(device_free_bytes()),
                        cuda::kBlasWorkspaceBytes);

  CpuModelOptions mo;
  mo.seed = config.seed;
  // The mean over the global batch: the all-reduce sums the replicas' parts.
  mo.loss_scale = 1.0f / static_cast<float>(config.microbatches * config.replicas);
  mo.weight_stashing = config.weight_stashing;
  graph_ops_ = std::make_unique<StreamGraphOps>(compute_);
  graphs_ = std::make_unique<cuda::GraphCache>(*graph_ops_, config.cuda_graphs);
  bool captures = config.cuda_graphs;
  if (captures) {
    // Whether this runtime captures at all: a refusal turns graphs off for
    // every action with the runtime's reason.
    if (std::string why = graph_ops_->begin_capture(); !why.empty()) {
      graphs_->disable(why);
      captures = false;
    } else {
      graph_ops_->abort_capture();
    }
  }
  cuda::ChunkContext ctx{compute_, pool_.get(), blas_.get(), dtype_};
  ctx.attention = config.attention;
  ctx.static_buffers = captures;
  for (int c = 0; c < config.chunks; ++c) {
    const UnitRange range = config.chunk_units(c);
    chunks_.push_back(std::make_unique<CudaChunk>(config.spec, config.units, range, ctx, mo));
  }
  plant_ = std::make_unique<cuda::DevicePlant>(config.plant_factor, compute_);
  (void)stream_now();
}

CudaBackend::~CudaBackend() {
  // Everything enqueued finishes before the memory it uses goes back.
  (void)cudaStreamSynchronize(compute_);
  (void)cudaStreamSynchronize(copy_);
  graphs_.reset();  // no launch of its graphs is pending now
  chunks_.clear();
  blas_.reset();
  plant_.reset();
  (void)cudaStreamSynchronize(compute_);
  blas_workspace_ = TrackedBuffer();
  for (const Pending& p : pending_) {
    (void)cudaEventDestroy(p.start);
    (void)cudaEventDestroy(p.end);
  }
  for (const auto& c : copies_) (void)cudaEventDestroy(c.second);
  // The executor's buffers went back stream-ordered on side_: the pool
  // releases its memory only once they are freed.
  (void)cudaStreamSynchronize(side_);
  pool_.reset();
  if (anchor_ != nullptr) (void)cudaEventDestroy(anchor_);
  for (cudaStream_t s : {compute_, copy_, side_}) {
    if (s != nullptr) (void)cudaStreamDestroy(s);
  }
}

void CudaBackend::record_oom(const std::string& what) {
  if (!oom_.empty()) return;
  oom_ = what + "; tracked " + std::to_string(memory_.current_total()) + " bytes on this stage";
  log::warn("%s: skipping the rest of the step's device work", oom_.c_str());
}

void CudaBackend::free_ready(void* context, std::byte* data) {
  // The executor's buffers travel between streams and the host's libraries:
  // free them only once both streams are idle.
  auto* self = static_cast<CudaBackend*>(context);
  PPB_CUDA_CHECK(cudaStreamSynchronize(self->compute_));
  PPB_CUDA_CHECK(cudaStreamSynchronize(self->copy_));
  PPB_CUDA_CHECK(cudaFreeAsync(data, self->side_));
}

void CudaBackend::free_pinned(void* context, std::byte* data) {
  auto* self = static_cast<CudaBackend*>(context);
  PPB_CUDA_CHECK(cudaStreamSynchronize(self->copy_));
  PPB_CUDA_CHECK(cudaFreeHost(data));
}

TrackedBuffer CudaBackend::allocate(int64_t bytes, MemorySpace space, MemCategory category) {
  if (bytes == 0 || space == MemorySpace::kHost) return TrackedBuffer(memory_, category, bytes);
  if (space == MemorySpace::kPinnedHost) {
    void* p = nullptr;
    try {
      PPB_CUDA_CHECK(cudaHostAlloc(&p, static_cast<size_t>(bytes), cudaHostAllocDefault));
    } catch (const cuda::OutOfMemory& e) {
      // Host memory that cannot be pinned (a locked-memory limit, a full
      // host): the step goes on without device work, as after a device
      // allocation failed, and pageable memory carries the staged messages.
      record_oom(e.what());
      return TrackedBuffer(memory_, category, bytes);
    }
    std::memset(p, 0, static_cast<size_t>(bytes));
    return TrackedBuffer(memory_, category, bytes, static_cast<std::byte*>(p), &free_pinned, this);
  }
  if (oom_.empty()) {
    try {
      return TrackedBuffer(memory_, category, bytes, pool_->ready(bytes, side_), &free_ready, this);
    } catch (const cuda::OutOfMemory& e) {
      record_oom(e.what());
    }
  }
  // Out of memory: the step goes on without device work (out_of_memory());
  // pinned host memory, which a device transport's kernels (NCCL) can
  // reach, stands in for the buffer so that messages still flow.
  void* p = nullptr;
  if (cudaHostAlloc(&p, static_cast<size_t>(bytes), cudaHostAllocDefault) == cudaSuccess) {
    std::memset(p, 0, static_cast<size_t>(bytes));
    return TrackedBuffer(memory_, category, bytes, static_cast<std::byte*>(p), &free_pinned, this);
  }
  (void)cudaGetLastError();
  return TrackedBuffer(memory_, category, bytes);
}

void CudaBackend::run(const ActionCall& call) {
  CudaChunk& c = chunk(call.chunk);
  switch (call.kind) {
    case ActionKind::kForward:
      c.forward(data(call.microbatch), call.in, call.out);
      return;
    case ActionKind::kBackward:
      c.backward(data(call.microbatch), call.in, call.out);
      return;
    case ActionKind::kBackwardInput:
      c.backward_input(data(call.microbatch), call.in, call.out);
      return;
    case ActionKind::kBackwardWeight:
      c.backward_weight(data(call.microbatch));
      return;
    case ActionKind::kSync:
      break;
  }
  PPB_CHECK(false, "cuda backend: SYNC is not a compute action");
}

void CudaBackend::run_recorded(const ActionCall& call, const std::function<void()>& begin) {
  CudaChunk& c = chunk(call.chunk);
  if (!c.static_buffers()) {
    // Eager: the host's work and the launches interleave.
    begin();
    const auto enqueue = [&] { run(call); };
    (void)(c.sizing() ? graphs_->run_sizing(enqueue)
                      : graphs_->run_eager(c.not_static_reason(), enqueue));
    return;
  }
  // In and out through the chunk's staged boundaries (cuda_chunk.hpp).
  const bool backward = call.kind != ActionKind::kForward;
  const int64_t in_bytes = backward ? c.output_bytes() : c.input_bytes();
  const int64_t out_bytes = backward ? c.input_bytes() : c.output_bytes();
  ActionCall staged = call;
  if (call.in != nullptr) staged.in = c.staged_in();
  if (call.out != nullptr) staged.out = c.staged_out();
  // The pool buffers the action dropped are freed after its work, however
  // it ends.
  struct ReleaseDeferred {
    CudaChunk& chunk;
    ~ReleaseDeferred() { chunk.release_deferred(); }
  } release{c};
  c.begin_recording();
  cuda::RecordedWork work;
  try {
    run(staged);
    work = c.end_recording();
  } catch (...) {
    (void)c.end_recording();  // nothing of it was enqueued
    throw;
  }
  const auto enqueue = [&] { work.enqueue(); };
  // Identified by the micro-batch: its kept activations, tokens and loss
  // are its own. The weights' addresses are in the pointers (a stashed
  // version lives elsewhere); their values are read at each launch.
  const cuda::GraphKey key{call.chunk, graph_pass(call.kind), call.microbatch,
                           std::move(work.pointers)};
  // A capture (or rebuild) is host work: done before the action's window
  // opens, so that neither its time nor a plant's spin counts it.
  if (work.eager_reason.empty()) (void)graphs_->prepare(key, enqueue);
  begin();
  if (call.in != nullptr && in_bytes > 0) {
    PPB_CUDA_CHECK(cudaMemcpyAsync(c.staged_in(), call.in, static_cast<size_t>(in_bytes),
                                   cudaMemcpyDeviceToDevice, compute_));
  }
  if (!work.eager_reason.empty()) {
    (void)graphs_->run_eager(work.eager_reason, enqueue);
  } else {
    (void)graphs_->run(key, enqueue);
  }
  if (call.out != nullptr && out_bytes > 0) {
    PPB_CUDA_CHECK(cudaMemcpyAsync(call.out, staged.out, static_cast<size_t>(out_bytes),
                                   cudaMemcpyDeviceToDevice, compute_));
  }
}

StreamTicket CudaBackend::enqueue(const ActionCall& call) {
  Pending p{++issued_, timed_events_.take(), timed_events_.take()};
  bool begun = false;
  const auto begin = [&] {
    PPB_CUDA_CHECK(cudaEventRecord(p.start, compute_));
    begun = true;
    plant_->before_action();
  };
  if (oom_.empty()) {
    try {
      run_recorded(call, begin);
      plant_->after_action();
    } catch (const cuda::OutOfMemory& e) {
      record_oom(e.what());
    }
  }
  if (!begun) PPB_CUDA_CHECK(cudaEventRecord(p.start, compute_));
  PPB_CUDA_CHECK(cudaEventRecord(p.end, compute_));
  pending_.push_back(p);
  return p.ticket;
}

double CudaBackend::stream_seconds(cudaEvent_t e) const {
  float ms = 0;
  PPB_CUDA_CHECK(cudaEventElapsedTime(&ms, anchor_, e));
  return anchor_host_ + static_cast<double>(ms) * 1e-3;
}

bool CudaBackend::query(StreamTicket ticket, StreamTimes* times) {
  const auto it = std::find_if(pending_.begin(), pending_.end(),
                               [&](const Pending& p) { return p.ticket == ticket; });
  PPB_CHECK(it != pending_.end(), "cuda backend: query of an unknown or reported ticket");
  if (!event_done(it->end)) return false;
  if (times != nullptr) *times = {stream_seconds(it->start), stream_seconds(it->end)};
  timed_events_.give(it->start);
  timed_events_.give(it->end);
  pending_.erase(it);
  return true;
}

bool CudaBackend::wait(StreamTicket ticket, double seconds, StreamTimes* times) {
  const double deadline = now_seconds() + seconds;
  while (!query(ticket, times)) {
    if (now_seconds() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return true;
}

// The stream clock is the host clock at the last anchor plus the event time
// since it. Re-anchored whenever no action is pending (each step starts so),
// which keeps cudaEventElapsedTime's float milliseconds short and the two
// clocks from drifting apart.
double CudaBackend::stream_now() {
  if (pending_.empty()) {
    PPB_CUDA_CHECK(cudaEventRecord(anchor_, compute_));
    PPB_CUDA_CHECK(cudaEventSynchronize(anchor_));
    anchor_host_ = now_seconds();
    return anchor_host_;
  }
  return now_seconds();
}

StreamTicket CudaBackend::copy_async(std::byte* dst, const std::byte* src, int64_t bytes) {
  if (bytes > 0 && oom_.empty()) {
    PPB_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDefault, copy_));
  }
  cudaEvent_t done = copy_events_.take();
  PPB_CUDA_CHECK(cudaEventRecord(done, copy_));
  copies_.emplace_back(++copies_issued_, done);
  return copies_issued_;
}

bool CudaBackend::copy_done(StreamTicket ticket) {
  const auto it = std::find_if(copies_.begin(), copies_.end(),
                               [&](const auto& c) { return c.first == ticket; });
  PPB_CHECK(it != copies_.end(), "cuda backend: copy_done of an unknown or reported ticket");
  if (!event_done(it->second)) return false;
  copy_events_.give(it->second);
  copies_.erase(it);
  return true;
}

void CudaBackend::optimizer_step(int c) {
  if (oom_.empty()) {
    try {
      // The update reads and writes the chunk's weight and gradient buffers
      // (fixed for its life; the learning rate is fixed for the backend's):
      // the gradients' addresses key its graph.
      cuda::GraphKey key;
      key.chunk = c;
      key.pass = cuda::GraphPass::kSgd;
      for (const std::span<float> g : chunk(c).gradient_buffers()) key.pointers.push_back(g.data());
      chunk(c).sgd_step(learning_rate_, [&](const std::function<void()>& update) {
        (void)graphs_->run(key, update);
      });
    } catch (const cuda::OutOfMemory& e) {  // a weight stash that does not fit
      record_oom(e.what());
    }
  }
  PPB_CUDA_CHECK(cudaStreamSynchronize(compute_));
  // The first step sized the chunk's static buffers: from the next on its
  // actions are recorded (once; the stream is idle here).
  if (oom_.empty()) chunk(c).make_static_buffers();
}

CudaGraphFigures CudaBackend::graphs() const {
  const cuda::GraphCounts& n = graphs_->counts();
  return {n.captured, n.replayed, n.rebuilt, n.eager, graphs_->eager_reason()};
}

DeviceMemoryFigures CudaBackend::device_memory() const {
  return {pool_->used_high(), outside_pool_};
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const BackendConfig& config) {
  return std::make_unique<CudaBackend>(config);
}

}  // namespace ppb
