// The emulator's CUDA runtime (libcudart.so.13): the part of the runtime API
// pipebench calls, with CUDA's semantics (emu.hpp says how each thing is
// modelled and what is checked). Environment: PPB_CUDAEMU_DEVICES (default
// 1) devices of PPB_CUDAEMU_MEMORY bytes each (default 8 GiB; a K, M or G
// suffix), fewer where CUDA_VISIBLE_DEVICES lists fewer (empty: none);
// PPB_CUDAEMU_LOSE_AFTER=N (default 0: never) loses the device at this
// process's N-th kernel launch, as a GPU that falls off the bus: that launch
// and every later call fail (cudaErrorLaunchFailure), said once on stderr.
#include <cuda_runtime_api.h>
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "emu.hpp"

namespace ppb::cudaemu {
namespace {

constexpr size_t kAlign = 256;  // cudaMalloc's alignment
// The most PPB_CUDAEMU_DEVICES and PPB_CUDAEMU_MEMORY may ask for: more
// devices than a node holds, more memory than any device (1 TiB), and far
// from where a device's byte counts would wrap around.
constexpr size_t kMaxDevices = 64;
constexpr size_t kMaxDeviceBytes = size_t{1} << 40;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string hex(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

// An emulator variable's value: a whole number with an optional K, M or G
// suffix (binary) of at most `most`, or `fallback` when unset. A value that
// is not one ends the process (exit 2) naming the variable: a mistyped
// capacity must not silently become another device, nor wrap around to one.
size_t env_count(const char* name, size_t fallback, bool suffixes, size_t most) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text, &end, 10);
  size_t scale = 1;
  if (suffixes && (*end == 'K' || *end == 'M' || *end == 'G')) {
    scale = size_t{1} << (*end == 'K' ? 10 : *end == 'M' ? 20 : 30);
    ++end;
  }
  const std::string value = std::string("'") + text + "'";
  if (errno != 0 || *text < '0' || *text > '9' || *end != '\0') {
    refuse_setting(std::string(name) + ": expected a whole number" +
                   (suffixes ? " of bytes with an optional K, M or G suffix" : "") + ", got " +
                   value);
  }
  if (v > most / scale) {
    refuse_setting(std::string(name) + ": at most " + std::to_string(most) +
                   (suffixes ? " bytes" : "") + ", got " + value);
  }
  return static_cast<size_t>(v) * scale;
}

// --- memory ------------------------------------------------------------------

struct Pool {
  int device = 0;
  uint64_t release_threshold = 0;
  uint64_t used = 0;
  uint64_t used_high = 0;
  uint64_t reserved = 0;
  uint64_t reserved_high = 0;
  int reuse[3] = {1, 1, 1};
};

struct Alloc {
  size_t bytes = 0;
  Space space = Space::kDevice;
  int device = 0;
  std::shared_ptr<Pool> pool;  // stream-ordered allocations
};

struct Device {
  size_t capacity = 0;
  size_t live = 0;  // device bytes allocated and not freed
  std::shared_ptr<Pool> default_pool;
  bool context = false;  // made (the device was used)
};

struct Stream;
struct Event;

// One operation a stream capture recorded: the work (its arguments bound by
// value at the call) and how activity describes it.
struct GraphNode {
  ActivityOp op;
  std::function<void()> work;
};
// A captured graph (cudaGraph_t) or an instantiated one (cudaGraphExec_t):
// its operations in stream order.
struct Graph {
  std::vector<GraphNode> nodes;
};

// Everything the runtime knows; one per process.
struct Runtime {
  std::mutex m;
  std::map<uintptr_t, Alloc> allocs;  // by base address
  std::vector<Device> devices;
  int visible = 0;
  std::set<Pool*> pools;
  std::unordered_map<Pool*, std::shared_ptr<Pool>> pool_handles;
  std::unordered_map<Stream*, std::shared_ptr<Stream>> streams;
  std::unordered_map<Event*, std::shared_ptr<Event>> events;
  std::unordered_map<Graph*, std::shared_ptr<Graph>> graphs;  // cudaGraph_t
  std::unordered_map<Graph*, std::shared_ptr<Graph>> execs;   // cudaGraphExec_t
  std::atomic<int> captures{0};                               // streams capturing now
  // Kernels: host stub -> device name; launch handle -> twin.
  std::unordered_map<const void*, std::string> functions;
  std::unordered_map<std::string, Twin> twins;
  std::atomic<bool> faulted{false};  // a kernel fault: every later call fails, as on a GPU
  size_t lose_after = 0;             // PPB_CUDAEMU_LOSE_AFTER (0: never)
  std::atomic<size_t> launches{0};
  std::atomic<const ActivityHooks*> hooks{nullptr};
  std::atomic<uint32_t> correlations{0};  // ids of the calls that issued work
  std::atomic<uint32_t> stream_ids{13};

  Runtime() {
    const auto n = static_cast<int>(env_count("PPB_CUDAEMU_DEVICES", 1, false, kMaxDevices));
    const size_t capacity = env_count("PPB_CUDAEMU_MEMORY", size_t{8} << 30, true, kMaxDeviceBytes);
    devices.resize(static_cast<size_t>(n));
    for (Device& d : devices) d.capacity = capacity;
    lose_after = env_count("PPB_CUDAEMU_LOSE_AFTER", 0, false, size_t{1} << 40);
    visible = n;
    if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES"); cvd != nullptr) {
      // Entries that name an emulated device, up to the first that does not
      // (the real runtime stops there too).
      int count = 0;
      std::string list = cvd;
      size_t start = 0;
      while (start <= list.size() && !list.empty()) {
        const size_t comma = list.find(',', start);
        const std::string item = list.substr(start, comma - start);
        char* end = nullptr;
        const long idx = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || idx < 0 || idx >= n) break;
        ++count;
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      visible = count;
    }
  }
};

Runtime& rt() {
  static auto* r = new Runtime();  // never destroyed: workers may outlive static destruction
  return *r;
}

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;

cudaError_t ok() { return rt().faulted ? fail(cudaErrorLaunchFailure) : cudaSuccess; }

bool valid_device(int d) { return d >= 0 && d < rt().visible; }

// The device's context is made by its first use; the activity hooks hear of
// it then (as CUPTI's resource callback does), outside the runtime's lock.
void use_device(int d) {
  if (!valid_device(d)) return;
  {
    std::lock_guard<std::mutex> lock(rt().m);
    Device& dev = rt().devices[static_cast<size_t>(d)];
    if (dev.context) return;
    dev.context = true;
  }
  if (const ActivityHooks* h = rt().hooks.load(); h != nullptr && h->context != nullptr) {
    h->context(d);
  }
}

// --- streams and events -------------------------------------------------------

struct Stream {
  unsigned flags = 0;
  int priority = 0;
  int device = 0;
  uint32_t id = 0;  // as activity records name it
  std::mutex m;
  std::condition_variable cv;  // work queued, or the queue drained
  std::deque<std::function<void()>> queue;
  uint64_t enqueued = 0;
  uint64_t completed = 0;
  bool stop = false;
  std::thread worker;
  // Stream capture: the graph being recorded (null when none), whether a
  // refused call invalidated it, its mode and the thread that began it.
  std::shared_ptr<Graph> capture;
  bool invalidated = false;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id capturer;

  void start() {
    worker = std::thread([this] {
      for (;;) {
        std::function<void()> op;
        {
          std::unique_lock<std::mutex> lock(m);
          cv.wait(lock, [&] { return stop || !queue.empty(); });
          if (queue.empty()) return;
          op = std::move(queue.front());
          queue.pop_front();
        }
        op();
        {
          std::lock_guard<std::mutex> lock(m);
          ++completed;
        }
        cv.notify_all();
      }
    });
  }
  void push(std::function<void()> op) {
    {
      std::lock_guard<std::mutex> lock(m);
      queue.push_back(std::move(op));
      ++enqueued;
    }
    cv.notify_all();
  }
  // Waits until everything enqueued before this call has run.
  void drain() {
    std::unique_lock<std::mutex> lock(m);
    const uint64_t target = enqueued;
    cv.wait(lock, [&] { return completed >= target; });
  }
  bool idle() {
    std::lock_guard<std::mutex> lock(m);
    return completed == enqueued;
  }
  void finish() {
    {
      std::lock_guard<std::mutex> lock(m);
      stop = true;
    }
    cv.notify_all();
    if (worker.joinable()) worker.join();
  }
};

struct Event {
  unsigned flags = 0;
  std::mutex m;
  std::condition_variable cv;
  uint64_t recorded = 0;   // records asked for
  uint64_t completed = 0;  // records done
  double time = 0;         // when the latest completed record ran
  bool done() const { return completed >= recorded; }
};

bool is_null_stream(cudaStream_t s) {
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

std::shared_ptr<Stream> find_stream(cudaStream_t s) {
  std::lock_guard<std::mutex> lock(rt().m);
  const auto it = rt().streams.find(reinterpret_cast<Stream*>(s));
  return it == rt().streams.end() ? nullptr : it->second;
}

std::shared_ptr<Event> find_event(cudaEvent_t e) {
  std::lock_guard<std::mutex> lock(rt().m);
  const auto it = rt().events.find(reinterpret_cast<Event*>(e));
  return it == rt().events.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<Stream>> all_streams() {
  std::lock_guard<std::mutex> lock(rt().m);
  std::vector<std::shared_ptr<Stream>> out;
  for (auto& [k, s] : rt().streams) out.push_back(s);
  return out;
}

// Work enqueued on `stream` while it captures: recorded into its graph
// when `node` is given, else refused (the emulator cannot record it, or a
// capture forbids it), which invalidates the capture as CUDA does. Returns
// false when the stream is not capturing; else true with *rc the call's
// result.
bool captured(Stream& stream, GraphNode* node, cudaError_t* rc) {
  std::lock_guard<std::mutex> lock(stream.m);
  if (!stream.capture) return false;
  if (stream.invalidated) {
    *rc = fail(cudaErrorStreamCaptureInvalidated);
  } else if (node == nullptr) {
    stream.invalidated = true;
    *rc = fail(cudaErrorStreamCaptureUnsupported);
  } else {
    stream.capture->nodes.push_back(std::move(*node));
    *rc = cudaSuccess;
  }
  return true;
}
bool captured(cudaStream_t s, GraphNode* node, cudaError_t* rc) {
  if (is_null_stream(s)) return false;
  const auto stream = find_stream(s);
  return stream && captured(*stream, node, rc);
}

// A call that synchronises with the device (a legacy-stream operation,
// cudaDeviceSynchronize, cudaEventSynchronize) is unsafe while a capture
// whose mode forbids it is in progress: cudaStreamCaptureModeGlobal on any
// thread, ThreadLocal on the thread that began it. True when one is (each
// such capture is invalidated): the call must fail.
bool capture_forbids_sync() {
  if (rt().captures.load() == 0) return false;
  bool forbidden = false;
  for (auto& s : all_streams()) {
    std::lock_guard<std::mutex> lock(s->m);
    if (!s->capture || s->mode == cudaStreamCaptureModeRelaxed) continue;
    if (s->mode == cudaStreamCaptureModeGlobal || s->capturer == std::this_thread::get_id()) {
      s->invalidated = true;
      forbidden = true;
    }
  }
  return forbidden;
}

// The legacy default stream waits for the blocking streams' work.
void legacy_sync() {
  for (auto& s : all_streams()) {
    if ((s->flags & cudaStreamNonBlocking) == 0) s->drain();
  }
}

void trim_pools() {
  std::lock_guard<std::mutex> lock(rt().m);
  for (Pool* p : rt().pools) {
    p->reserved = std::max(p->used, std::min(p->reserved, p->release_threshold));
  }
}

// --- activity ------------------------------------------------------------------

uint64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// An operation's stream id and device, as activity records name them.
void stamp(cudaStream_t s, ActivityOp& op) {
  op.stream = kNullStreamId;
  op.device = t_device;
  if (!is_null_stream(s)) {
    if (const auto stream = find_stream(s)) {
      op.stream = stream->id;
      op.device = stream->device;
    }
  }
}

// Whether s is capturing now.
bool capturing(cudaStream_t s) {
  if (is_null_stream(s)) return false;
  const auto stream = find_stream(s);
  if (!stream) return false;
  std::lock_guard<std::mutex> lock(stream->m);
  return stream->capture != nullptr;
}

// Counts `kernels` launches toward PPB_CUDAEMU_LOSE_AFTER; true (the
// device lost: every later call fails) once the count reaches it.
bool lost_at_launch(size_t kernels) {
  if (rt().lose_after == 0 || kernels == 0) return false;
  if (rt().launches.fetch_add(kernels) + kernels < rt().lose_after) return false;
  if (!rt().faulted.exchange(true)) {
    complain("device " + std::to_string(t_device) + " lost at kernel launch " +
             std::to_string(rt().lose_after) + " (PPB_CUDAEMU_LOSE_AFTER): every later call fails");
  }
  return true;
}

// Runs `work` as the activity operation `op`: its start and end on the
// stream, then the op hook.
void run_reported(ActivityOp op, const ActivityHooks* h, const std::function<void()>& work) {
  op.start_ns = realtime_ns();
  work();
  op.end_ns = realtime_ns();
  if (h->op != nullptr) h->op(op);
}

// enqueue() for a call that issues device work: with activity hooks
// installed, the operation gets the call's correlation id, its stream's id
// and device, and its start and end on the stream; the call is reported
// once the work is enqueued.
// On a capturing stream the operation is recorded instead (graph_launch()
// issues it, under the launch's correlation id).
cudaError_t issue(cudaStream_t s, ActivityOp op, const char* function, std::function<void()> work) {
  if (rt().faulted) return fail(cudaErrorLaunchFailure);
  GraphNode node{op, std::move(work)};
  if (cudaError_t rc{}; captured(s, &node, &rc)) return rc;
  work = std::move(node.work);
  const ActivityHooks* h = rt().hooks.load();
  if (h == nullptr) return enqueue(s, std::move(work));
  const uint64_t called = realtime_ns();
  op.correlation = ++rt().correlations;
  stamp(s, op);
  const cudaError_t rc = enqueue(s, [op, h, work = std::move(work)] { run_reported(op, h, work); });
  if (h->api != nullptr) h->api(op.correlation, function, called, realtime_ns());
  return rc;
}

// Enqueues one launch of `graph` on s: its operations in their captured
// order, as one unit of s's work, each reported to the activity hooks under
// the launch's correlation id (CUPTI's per-kernel records of a graph).
cudaError_t graph_launch(const std::shared_ptr<Graph>& graph, cudaStream_t s) {
  if (rt().faulted) return fail(cudaErrorLaunchFailure);
  // A graph's kernels are kernel launches too (PPB_CUDAEMU_LOSE_AFTER).
  const auto kernels = static_cast<size_t>(
      std::count_if(graph->nodes.begin(), graph->nodes.end(),
                    [](const GraphNode& n) { return n.op.kind == ActivityOp::Kind::kKernel; }));
  if (lost_at_launch(kernels)) return fail(cudaErrorLaunchFailure);
  const ActivityHooks* h = rt().hooks.load();
  const uint64_t called = realtime_ns();
  ActivityOp where;
  where.correlation = h == nullptr ? 0 : ++rt().correlations;
  stamp(s, where);
  const cudaError_t rc = enqueue(s, [graph, h, where] {
    for (const GraphNode& node : graph->nodes) {
      if (h == nullptr) {
        node.work();
        continue;
      }
      ActivityOp op = node.op;
      op.correlation = where.correlation;
      op.stream = where.stream;
      op.device = where.device;
      run_reported(op, h, node.work);
    }
  });
  if (h != nullptr && h->api != nullptr) {
    h->api(where.correlation, "cudaGraphLaunch", called, realtime_ns());
  }
  return rc;
}

// --- memory helpers ------------------------------------------------------------

// The allocation holding p, or null. REQUIRES: rt().m held.
const std::pair<const uintptr_t, Alloc>* holder(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = rt().allocs.upper_bound(a);
  if (it == rt().allocs.begin()) return nullptr;
  --it;
  if (a >= it->first + std::max<size_t>(it->second.bytes, 1)) return nullptr;
  return &*it;
}

const char* space_name(Space s) {
  switch (s) {
    case Space::kDevice:
      return "device memory";
    case Space::kPinned:
      return "pinned host memory";
    case Space::kPageable:
      return "pageable host memory";
  }
  return "?";
}

// What an allocation of `bytes` takes of its device (at least one aligned unit).
size_t rounded(size_t bytes) { return (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign; }

cudaError_t allocate(void** out, size_t bytes, Space space, const std::shared_ptr<Pool>& pool) {
  if (out == nullptr) return fail(cudaErrorInvalidValue);
  const size_t size = rounded(bytes);
  const int dev = pool ? pool->device : t_device;
  if (space == Space::kDevice) use_device(dev);
  std::lock_guard<std::mutex> lock(rt().m);
  if (space == Space::kDevice) {
    if (!valid_device(dev)) return fail(cudaErrorNoDevice);
    Device& d = rt().devices[static_cast<size_t>(dev)];
    if (d.live + size > d.capacity) return fail(cudaErrorMemoryAllocation);
  }
  void* p = std::aligned_alloc(kAlign, size);
  if (p == nullptr) return fail(cudaErrorMemoryAllocation);
  rt().allocs[reinterpret_cast<uintptr_t>(p)] = Alloc{bytes, space, dev, pool};
  if (space == Space::kDevice) rt().devices[static_cast<size_t>(dev)].live += size;
  if (pool) {
    pool->used += bytes;
    pool->used_high = std::max(pool->used_high, pool->used);
    pool->reserved = std::max(pool->reserved, pool->used);
    pool->reserved_high = std::max(pool->reserved_high, pool->reserved);
  }
  *out = p;
  return cudaSuccess;
}

// Releases the allocation at base p. REQUIRES: it exists.
void release(void* p) {
  std::lock_guard<std::mutex> lock(rt().m);
  const auto it = rt().allocs.find(reinterpret_cast<uintptr_t>(p));
  const Alloc& a = it->second;
  if (a.space == Space::kDevice) {
    rt().devices[static_cast<size_t>(a.device)].live -= rounded(a.bytes);
  }
  if (a.pool) a.pool->used -= a.bytes;
  rt().allocs.erase(it);
  std::free(p);
}

// The allocation's space when p is its base; nullopt-like false otherwise.
bool base_of(const void* p, Space* space) {
  std::lock_guard<std::mutex> lock(rt().m);
  const auto it = rt().allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == rt().allocs.end()) return false;
  *space = it->second.space;
  return true;
}

void sync_everything() {
  for (auto& s : all_streams()) s->drain();
  trim_pools();
}

// A copy's source and destination checked against `kind`; "" or why not.
std::string check_copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, Space& ds,
                       Space& ss) {
  ds = space_of(dst);
  ss = space_of(src);
  const bool dst_dev = ds == Space::kDevice;
  const bool src_dev = ss == Space::kDevice;
  bool fits = true;
  switch (kind) {
    case cudaMemcpyHostToDevice:
      fits = dst_dev && !src_dev;
      break;
    case cudaMemcpyDeviceToHost:
      fits = !dst_dev && src_dev;
      break;
    case cudaMemcpyDeviceToDevice:
      fits = dst_dev && src_dev;
      break;
    case cudaMemcpyHostToHost:
      fits = !dst_dev && !src_dev;
      break;
    case cudaMemcpyDefault:
      break;
    default:
      return "unknown cudaMemcpyKind " + std::to_string(static_cast<int>(kind));
  }
  if (!fits) {
    static const char* const kKinds[] = {"cudaMemcpyHostToHost", "cudaMemcpyHostToDevice",
                                         "cudaMemcpyDeviceToHost", "cudaMemcpyDeviceToDevice"};
    return std::string(kKinds[static_cast<int>(kind)]) + " does not fit dst " + hex(dst) + " in " +
           space_name(ds) + " and src " + hex(src) + " in " + space_name(ss);
  }
  std::string why;
  if (ds != Space::kPageable && !within(dst, n, ds, &why)) return "dst: " + why;
  if (ss != Space::kPageable && !within(src, n, ss, &why)) return "src: " + why;
  return {};
}

cudaError_t copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s,
                 const char* call) {
  if (n == 0) return ok();
  if (dst == nullptr || src == nullptr) return fail(cudaErrorInvalidValue);
  Space ds{};
  Space ss{};
  if (const std::string why = check_copy(dst, src, n, kind, ds, ss); !why.empty()) {
    complain(std::string(call) + ": " + why);
    return fail(cudaErrorInvalidValue);
  }
  const bool src_pageable = ss == Space::kPageable;
  const bool dst_pageable = ds == Space::kPageable;
  // A graph cannot hold a copy from or to pageable memory (staged at the
  // call, or waited for by it).
  if (cudaError_t rc{}; (src_pageable || dst_pageable) && captured(s, nullptr, &rc)) return rc;
  ActivityOp op;
  op.kind = ActivityOp::Kind::kMemcpy;
  op.bytes = n;
  op.src = ss;
  op.dst = ds;
  const bool from_device = ss == Space::kDevice;
  const bool to_device = ds == Space::kDevice;
  op.copy = from_device ? (to_device ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                        : (to_device ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  if (src_pageable && !dst_pageable) {
    // From pageable memory: staged now, so the caller may reuse its buffer
    // when the call returns (CUDA's pageable-copy rule).
    auto staged = std::make_shared<std::vector<std::byte>>(static_cast<const std::byte*>(src),
                                                           static_cast<const std::byte*>(src) + n);
    return issue(s, op, call, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
  }
  const cudaError_t rc = issue(s, op, call, [dst, src, n] { std::memcpy(dst, src, n); });
  if (rc != cudaSuccess) return rc;
  if (dst_pageable && !is_null_stream(s)) {
    // Into pageable memory: the call returns once the copy is done.
    find_stream(s)->drain();
  }
  return ok();
}

cudaError_t set(void* p, int value, size_t n, cudaStream_t s, const char* call) {
  if (n == 0) return ok();
  std::string why;
  if (!within(p, n, Space::kDevice, &why)) {
    complain(std::string(call) + ": " + why);
    return fail(cudaErrorInvalidValue);
  }
  ActivityOp op;
  op.kind = ActivityOp::Kind::kMemset;
  op.bytes = n;
  op.dst = Space::kDevice;
  op.value = value;
  return issue(s, op, call, [p, value, n] { std::memset(p, value, n); });
}

cudaError_t create_stream(cudaStream_t* out, unsigned flags, int priority) {
  if (out == nullptr || (flags & ~unsigned{cudaStreamNonBlocking}) != 0) {
    return fail(cudaErrorInvalidValue);
  }
  auto s = std::make_shared<Stream>();
  s->flags = flags;
  s->priority = priority;
  s->device = t_device;
  s->id = rt().stream_ids++;
  s->start();
  use_device(t_device);
  std::lock_guard<std::mutex> lock(rt().m);
  rt().streams[s.get()] = s;
  *out = reinterpret_cast<cudaStream_t>(s.get());
  return cudaSuccess;
}

cudaError_t create_event(cudaEvent_t* out, unsigned flags) {
  if (out == nullptr || (flags & ~unsigned{cudaEventBlockingSync | cudaEventDisableTiming |
                                           cudaEventInterprocess}) != 0) {
    return fail(cudaErrorInvalidValue);
  }
  auto e = std::make_shared<Event>();
  e->flags = flags;
  std::lock_guard<std::mutex> lock(rt().m);
  rt().events[e.get()] = e;
  *out = reinterpret_cast<cudaEvent_t>(e.get());
  return cudaSuccess;
}

// "void ppb::cuda::device::ppb_gelu_fwd<float>(float const*, float*, long)"
// -> {"ppb_gelu_fwd<float>", "(float const*, float*, long)"}.
std::pair<std::string, std::string> split_kernel_name(const std::string& demangled) {
  const size_t paren = demangled.find('(');
  const std::string head = demangled.substr(0, paren);
  const std::string params = paren == std::string::npos ? "" : demangled.substr(paren);
  // The last "::" or ' ' outside template brackets starts the name.
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i < head.size(); ++i) {
    const char c = head[i];
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (depth == 0 && (c == ' ' || (c == ':' && i + 1 < head.size() && head[i + 1] == ':'))) {
      start = c == ' ' ? i + 1 : i + 2;
    }
  }
  return {head.substr(start), params};
}

std::string demangle(const char* mangled) {
  int status = 0;
  char* text = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  if (status != 0 || text == nullptr) return mangled;
  std::string out = text;
  std::free(text);
  return out;
}

// Shared memory a block may have: 48 KiB unless the kernel's
// cudaFuncAttributeMaxDynamicSharedMemorySize raised it, up to the opt-in
// limit (compute capability 9.0's, as the emulator reports 9.0).
constexpr size_t kDefaultShared = size_t{48} << 10;
constexpr size_t kOptinShared = 232448;

struct Kernel {
  std::string name;     // demangled
  std::string mangled;  // the device symbol, as CUPTI names the kernel
  const Twin* twin = nullptr;
  std::atomic<size_t> max_dynamic_shared{kDefaultShared};
};

cudaError_t launch(const Kernel* k, dim3 grid, dim3 block, void** args, size_t shared,
                   cudaStream_t s) {
  if (k == nullptr) return fail(cudaErrorInvalidDeviceFunction);
  if (rt().faulted) return fail(cudaErrorLaunchFailure);
  // Under capture it is recorded, and counted when its graph is launched.
  if (!capturing(s) && lost_at_launch(1)) return fail(cudaErrorLaunchFailure);
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 ||
      grid.y > 65535 || grid.z > 65535 || block.z > 64) {
    complain("launch of " + k->name + ": invalid configuration grid (" + std::to_string(grid.x) +
             "," + std::to_string(grid.y) + "," + std::to_string(grid.z) + ") block (" +
             std::to_string(block.x) + "," + std::to_string(block.y) + "," +
             std::to_string(block.z) + ")");
    return fail(cudaErrorInvalidConfiguration);
  }
  if (shared > k->max_dynamic_shared) {
    complain("launch of " + k->name + ": " + std::to_string(shared) +
             " bytes of dynamic shared memory, more than the kernel's limit of " +
             std::to_string(k->max_dynamic_shared.load()) +
             " (cudaFuncSetAttribute's cudaFuncAttributeMaxDynamicSharedMemorySize raises it)");
    return fail(cudaErrorInvalidValue);
  }
  if (k->twin == nullptr) {
    complain("launch of " + k->name +
             ": no CPU twin of this kernel (register it in the emulator's twins.cpp)");
    return fail(cudaErrorInvalidDeviceFunction);
  }
  std::string why;
  std::function<void()> body = k->twin->bind(args, &why);
  if (!body) {
    complain("launch of " + k->name + ": " + why);
    return fail(cudaErrorInvalidValue);
  }
  const std::string name = k->name;
  ActivityOp op;
  op.kind = ActivityOp::Kind::kKernel;
  op.name = k->mangled.c_str();  // k lives as long as the process
  op.grid = grid;
  op.block = block;
  return issue(s, op, "cudaLaunchKernel", [grid, block, shared, body = std::move(body), name] {
    if (rt().faulted) return;
    if (const std::string diverged = run_grid(grid, block, shared, body); !diverged.empty()) {
      complain("kernel " + name + ": " + diverged);
      rt().faulted = true;
    }
  });
}

Kernel* kernel_for(const void* host_stub) {
  static std::mutex m;
  static std::unordered_map<const void*, std::unique_ptr<Kernel>> kernels;
  std::lock_guard<std::mutex> lock(m);
  auto& slot = kernels[host_stub];
  if (!slot) {
    std::lock_guard<std::mutex> rlock(rt().m);
    const auto it = rt().functions.find(host_stub);
    if (it == rt().functions.end()) return nullptr;
    slot = std::make_unique<Kernel>();
    slot->mangled = it->second;
    slot->name = demangle(it->second.c_str());
    const auto [key, params] = split_kernel_name(slot->name);
    const auto tw = rt().twins.find(key);
    if (tw != rt().twins.end()) {
      if (tw->second.params != params) {
        complain("kernel " + slot->name + ": the CPU twin's parameters " + tw->second.params +
                 " differ from the device function's " + params);
      } else {
        slot->twin = &tw->second;
      }
    }
  }
  return slot.get();
}

thread_local struct {
  dim3 grid;
  dim3 block;
  size_t shared = 0;
  void* stream = nullptr;
} t_config;

}  // namespace

// --- emu.hpp ---------------------------------------------------------------------

Space space_of(const void* p) {
  std::lock_guard<std::mutex> lock(rt().m);
  const auto* h = holder(p);
  return h == nullptr ? Space::kPageable : h->second.space;
}

bool within(const void* p, size_t bytes, Space space, std::string* why) {
  if (bytes == 0) return true;
  std::lock_guard<std::mutex> lock(rt().m);
  const auto* h = holder(p);
  if (h == nullptr || h->second.space != space) {
    if (why != nullptr) *why = hex(p) + " is not in " + space_name(space);
    return false;
  }
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a + bytes > h->first + h->second.bytes) {
    if (why != nullptr) {
      *why = std::to_string(bytes) + " bytes from " + hex(p) + " run " +
             std::to_string(a + bytes - h->first - h->second.bytes) +
             " bytes past the end of its allocation of " + std::to_string(h->second.bytes) +
             " bytes at " +
             hex(reinterpret_cast<void*>(h->first));  // NOLINT(performance-no-int-to-ptr)
    }
    return false;
  }
  return true;
}

void complain(const std::string& what) {
  std::fprintf(stderr, "pipebench CUDA emulator: %s\n", what.c_str());
  std::fflush(stderr);
}

void refuse_setting(const std::string& what) {
  int rank = -1;
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* v = std::getenv(var); v != nullptr) {
      rank = std::atoi(v);
      break;
    }
  }
  if (rank <= 0) {
    complain(what);
    std::exit(2);
  }
  // Rank 0 meets the same value as it starts; the launcher ends the job
  // when the first rank exits, so the others wait for rank 0's line first.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::exit(2);
}

cudaError_t enqueue(cudaStream_t s, std::function<void()> op) {
  if (rt().faulted) return fail(cudaErrorLaunchFailure);
  if (is_null_stream(s)) {
    if (capture_forbids_sync()) return fail(cudaErrorStreamCaptureUnsupported);
    legacy_sync();
    op();
    return cudaSuccess;
  }
  const auto stream = find_stream(s);
  if (!stream) {
    complain("stream " + hex(s) + " does not exist (destroyed, or never created)");
    return fail(cudaErrorInvalidResourceHandle);
  }
  // Only issue()'s operations are recorded; anything else enqueued on a
  // capturing stream is refused.
  if (cudaError_t rc{}; captured(*stream, nullptr, &rc)) return rc;
  stream->push(std::move(op));
  return cudaSuccess;
}

cudaError_t enqueue_kernel(cudaStream_t s, const char* name, dim3 grid, dim3 block,
                           std::function<void()> op) {
  ActivityOp a;
  a.kind = ActivityOp::Kind::kKernel;
  a.name = name;
  a.grid = grid;
  a.block = block;
  return issue(s, a, "cuLaunchKernel", std::move(op));
}

cudaError_t fail(cudaError_t rc) {
  if (rc != cudaSuccess) t_last_error = rc;
  return rc;
}

void set_activity_hooks(const ActivityHooks* hooks) { rt().hooks = hooks; }

bool current_context_device(int* device) {
  const int d = t_device;
  if (!valid_device(d)) return false;
  std::lock_guard<std::mutex> lock(rt().m);
  if (!rt().devices[static_cast<size_t>(d)].context) return false;
  *device = d;
  return true;
}

uint64_t timestamp_ns() { return realtime_ns(); }

void register_twin(const std::string& name, Twin twin) {
  std::lock_guard<std::mutex> lock(rt().m);
  rt().twins[name] = std::move(twin);
}

}  // namespace ppb::cudaemu

using ppb::cudaemu::Space;
namespace emu = ppb::cudaemu;

// --- the runtime API ---------------------------------------------------------------

// The names and signatures are CUDA's ABI.
// NOLINTBEGIN(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,readability-identifier-naming)
extern "C" {

// Kernel registration and launch, as nvcc's generated host code calls them.
void** __cudaRegisterFatBinary(void* fat_cubin) {
  // A handle per module for the module's life (the process's): the device
  // code itself is never read, the twins stand in for it.
  return new void*(fat_cubin);  // NOLINT(cppcoreguidelines-owning-memory)
}
void __cudaRegisterFatBinaryEnd(void** /*handle*/) {}
void __cudaUnregisterFatBinary(void** /*handle*/) {}
void __cudaRegisterFunction(void** /*handle*/, const char* host_fun, char* device_fun,
                            const char* /*device_name*/, int /*thread_limit*/, uint3* /*tid*/,
                            uint3* /*bid*/, dim3* /*bdim*/, dim3* /*gdim*/, int* /*wsize*/) {
  std::lock_guard<std::mutex> lock(emu::rt().m);
  emu::rt().functions[host_fun] = device_fun;
}
void __cudaRegisterVar(void** /*handle*/, char* /*host_var*/, char* /*device_address*/,
                       const char* device_name, int /*ext*/, size_t /*size*/, int /*constant*/,
                       int /*global*/) {
  emu::complain(std::string("device variable ") + device_name + " is not emulated");
}
unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared, void* stream) {
  emu::t_config.grid = grid;
  emu::t_config.block = block;
  emu::t_config.shared = shared;
  emu::t_config.stream = stream;
  return 0;
}
cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shared, void* stream) {
  *grid = emu::t_config.grid;
  *block = emu::t_config.block;
  *shared = emu::t_config.shared;
  *static_cast<void**>(stream) = emu::t_config.stream;
  return cudaSuccess;
}
cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* host_stub) {
  const emu::Kernel* k = emu::kernel_for(host_stub);
  if (k == nullptr) return emu::fail(cudaErrorInvalidDeviceFunction);
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<emu::Kernel*>(k));
  return cudaSuccess;
}
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                               size_t shared, cudaStream_t stream) {
  return emu::launch(reinterpret_cast<const emu::Kernel*>(kernel), grid, block, args, shared,
                     stream);
}
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                                    size_t shared, cudaStream_t stream) {
  return __cudaLaunchKernel(kernel, grid, block, args, shared, stream);
}
cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args, size_t shared,
                             cudaStream_t stream) {
  return emu::launch(emu::kernel_for(func), grid, block, args, shared, stream);
}
cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  emu::Kernel* k = emu::kernel_for(func);
  if (k == nullptr) return emu::fail(cudaErrorInvalidDeviceFunction);
  switch (attr) {
    case cudaFuncAttributeMaxDynamicSharedMemorySize:
      if (value < 0 || static_cast<size_t>(value) > emu::kOptinShared) {
        emu::complain("cudaFuncSetAttribute: " + std::to_string(value) +
                      " bytes of dynamic shared memory for " + k->name +
                      ", more than the device's opt-in limit of " +
                      std::to_string(emu::kOptinShared));
        return emu::fail(cudaErrorInvalidValue);
      }
      k->max_dynamic_shared = static_cast<size_t>(value);
      return cudaSuccess;
    default:
      emu::complain("cudaFuncSetAttribute: attribute " + std::to_string(static_cast<int>(attr)) +
                    " is not emulated");
      return emu::fail(cudaErrorInvalidValue);
  }
}

// Errors.
cudaError_t cudaGetLastError() {
  const cudaError_t rc = emu::t_last_error;
  emu::t_last_error = cudaSuccess;
  return emu::rt().faulted ? cudaErrorLaunchFailure : rc;
}
cudaError_t cudaPeekAtLastError() {
  return emu::rt().faulted ? cudaErrorLaunchFailure : emu::t_last_error;
}
const char* cudaGetErrorName(cudaError_t rc) {
  switch (rc) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorInvalidDeviceFunction:
      return "cudaErrorInvalidDeviceFunction";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported:
      return "cudaErrorNotSupported";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureWrongThread:
      return "cudaErrorStreamCaptureWrongThread";
    case cudaErrorIllegalState:
      return "cudaErrorIllegalState";
    case cudaErrorInsufficientDriver:
      return "cudaErrorInsufficientDriver";
    default:
      return "cudaErrorUnknown";
  }
}
const char* cudaGetErrorString(cudaError_t rc) {
  switch (rc) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorInvalidDeviceFunction:
      return "invalid device function";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure (the emulator said why on stderr)";
    case cudaErrorNotSupported:
      return "operation not supported";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureWrongThread:
      return "attempt to terminate a thread-local capture sequence from another thread";
    case cudaErrorIllegalState:
      return "the operation is not permitted in the current state (stream capture)";
    default:
      return "unknown error";
  }
}

// Devices.
cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return emu::fail(cudaErrorInvalidValue);
  *count = emu::rt().visible;
  return *count == 0 ? emu::fail(cudaErrorNoDevice) : cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (!emu::valid_device(device)) return emu::fail(cudaErrorInvalidDevice);
  emu::t_device = device;
  emu::use_device(device);  // CUDA 12 and later make the context here
  return emu::ok();
}
cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return emu::fail(cudaErrorInvalidValue);
  if (emu::rt().visible == 0) return emu::fail(cudaErrorNoDevice);
  *device = emu::t_device;
  return cudaSuccess;
}
// Every pair of distinct emulated devices can reach each other (one host
// memory); enabling access twice is CUDA's error.
cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  if (can == nullptr) return emu::fail(cudaErrorInvalidValue);
  if (!emu::valid_device(device) || !emu::valid_device(peer))
    return emu::fail(cudaErrorInvalidDevice);
  *can = device != peer ? 1 : 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  if (flags != 0) return emu::fail(cudaErrorInvalidValue);
  if (!emu::valid_device(peer) || peer == emu::t_device) return emu::fail(cudaErrorInvalidDevice);
  static std::mutex mu;
  static std::set<std::pair<int, int>> enabled;
  const std::lock_guard<std::mutex> lock(mu);
  if (!enabled.insert({emu::t_device, peer}).second)
    return emu::fail(cudaErrorPeerAccessAlreadyEnabled);
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return emu::fail(cudaErrorInvalidValue);
  if (!emu::valid_device(device)) return emu::fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "pipebench CUDA emulator (CPU)");
  prop->totalGlobalMem = emu::rt().devices[static_cast<size_t>(device)].capacity;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 1;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->sharedMemPerBlock = emu::kDefaultShared;
  prop->sharedMemPerBlockOptin = emu::kOptinShared;
  prop->unifiedAddressing = 1;
  prop->concurrentKernels = 1;
  prop->pciBusID = device + 1;
  prop->memoryPoolsSupported = 1;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr) return emu::fail(cudaErrorInvalidValue);
  if (!emu::valid_device(device)) return emu::fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrComputeCapabilityMajor:
      *value = 9;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor:
      *value = 0;
      return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
      *value = 1;
      return cudaSuccess;
    case cudaDevAttrWarpSize:
      *value = 32;
      return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock:
      *value = 1024;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(emu::kOptinShared);
      return cudaSuccess;
    case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrConcurrentKernels:
    case cudaDevAttrMemoryPoolsSupported:
      *value = 1;
      return cudaSuccess;
    default:
      emu::complain("cudaDeviceGetAttribute: attribute " + std::to_string(static_cast<int>(attr)) +
                    " is not emulated");
      return emu::fail(cudaErrorInvalidValue);
  }
}
cudaError_t cudaDeviceGetPCIBusId(char* bus, int len, int device) {
  if (bus == nullptr || len <= 0) return emu::fail(cudaErrorInvalidValue);
  if (!emu::valid_device(device)) return emu::fail(cudaErrorInvalidDevice);
  std::snprintf(bus, static_cast<size_t>(len), "0000:%02x:00.0", device + 1);
  return cudaSuccess;
}
cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least != nullptr) *least = 0;
  if (greatest != nullptr) *greatest = -5;
  return emu::ok();
}
cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return emu::fail(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return emu::fail(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  if (emu::capture_forbids_sync()) return emu::fail(cudaErrorStreamCaptureUnsupported);
  emu::sync_everything();
  return emu::ok();
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  if (free_bytes == nullptr || total == nullptr) return emu::fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(emu::rt().m);
  if (!emu::valid_device(emu::t_device)) return emu::fail(cudaErrorNoDevice);
  const emu::Device& d = emu::rt().devices[static_cast<size_t>(emu::t_device)];
  size_t held = d.live;  // pools keep what they reserved beyond their use
  for (emu::Pool* p : emu::rt().pools) {
    if (p->device == emu::t_device && p->reserved > p->used) held += p->reserved - p->used;
  }
  *total = d.capacity;
  *free_bytes = held >= d.capacity ? 0 : d.capacity - held;
  return cudaSuccess;
}

// Memory. Allocating and freeing (other than stream-ordered) are among the
// calls CUDA calls potentially unsafe during a capture: refused, and the
// capture invalidated, as for a synchronising call.
cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (emu::capture_forbids_sync()) return emu::fail(cudaErrorStreamCaptureUnsupported);
  return emu::allocate(p, bytes, Space::kDevice, nullptr);
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  if (emu::capture_forbids_sync()) return emu::fail(cudaErrorStreamCaptureUnsupported);
  return emu::allocate(p, bytes, Space::kPinned, nullptr);
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned /*flags*/) {
  if (emu::capture_forbids_sync()) return emu::fail(cudaErrorStreamCaptureUnsupported);
  return emu::allocate(p, bytes, Space::kPinned, nullptr);
}
cudaError_t cudaFree(void* p) {
  if (emu::capture_forbids_sync()) return emu::fail(cudaErrorStreamCaptureUnsupported);
  if (p == nullptr) return emu::ok();
  Space space{};
  if (!emu::base_of(p, &space) || space != Space::kDevice) {
    emu::complain("cudaFree(" + emu::hex(p) + "): not a device allocation");
    return emu::fail(cudaErrorInvalidValue);
  }
  emu::sync_everything();  // cudaFree synchronises the device
  emu::release(p);
  return emu::ok();
}
cudaError_t cudaFreeHost(void* p) {
  if (emu::capture_forbids_sync()) return emu::fail(cudaErrorStreamCaptureUnsupported);
  if (p == nullptr) return emu::ok();
  Space space{};
  if (!emu::base_of(p, &space) || space != Space::kPinned) {
    emu::complain("cudaFreeHost(" + emu::hex(p) + "): not a pinned host allocation");
    return emu::fail(cudaErrorInvalidValue);
  }
  emu::release(p);
  return emu::ok();
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  return emu::copy(dst, src, n, kind, nullptr, "cudaMemcpy");
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t s) {
  return emu::copy(dst, src, n, kind, s, "cudaMemcpyAsync");
}
cudaError_t cudaMemset(void* p, int value, size_t n) {
  return emu::set(p, value, n, nullptr, "cudaMemset");
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t s) {
  return emu::set(p, value, n, s, "cudaMemsetAsync");
}

// Stream-ordered memory.
cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props) {
  if (pool == nullptr || props == nullptr || props->location.type != cudaMemLocationTypeDevice ||
      props->allocType != cudaMemAllocationTypePinned) {
    return emu::fail(cudaErrorInvalidValue);
  }
  if (!emu::valid_device(props->location.id)) return emu::fail(cudaErrorInvalidDevice);
  auto p = std::make_shared<emu::Pool>();
  p->device = props->location.id;
  std::lock_guard<std::mutex> lock(emu::rt().m);
  emu::rt().pools.insert(p.get());
  emu::rt().pool_handles[p.get()] = p;
  *pool = reinterpret_cast<cudaMemPool_t>(p.get());
  return cudaSuccess;
}
cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  std::lock_guard<std::mutex> lock(emu::rt().m);
  auto* p = reinterpret_cast<emu::Pool*>(pool);
  if (emu::rt().pool_handles.erase(p) == 0) return emu::fail(cudaErrorInvalidValue);
  emu::rt().pools.erase(p);  // outstanding allocations keep it alive
  return cudaSuccess;
}
}  // extern "C"
// NOLINTEND(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,readability-identifier-naming)

namespace ppb::cudaemu {
namespace {
std::shared_ptr<Pool> find_pool(cudaMemPool_t pool) {
  std::lock_guard<std::mutex> lock(rt().m);
  const auto it = rt().pool_handles.find(reinterpret_cast<Pool*>(pool));
  return it == rt().pool_handles.end() ? nullptr : it->second;
}
}  // namespace
}  // namespace ppb::cudaemu

// The names and signatures are CUDA's ABI.
// NOLINTBEGIN(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,readability-identifier-naming)
extern "C" {
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  const auto p = emu::find_pool(pool);
  if (!p || value == nullptr) return emu::fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(emu::rt().m);
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold:
      p->release_threshold = *static_cast<uint64_t*>(value);
      return cudaSuccess;
    case cudaMemPoolAttrUsedMemHigh:
    case cudaMemPoolAttrReservedMemHigh:
      if (*static_cast<uint64_t*>(value) != 0) return emu::fail(cudaErrorInvalidValue);
      if (attr == cudaMemPoolAttrUsedMemHigh) p->used_high = p->used;
      if (attr == cudaMemPoolAttrReservedMemHigh) p->reserved_high = p->reserved;
      return cudaSuccess;
    case cudaMemPoolReuseFollowEventDependencies:
    case cudaMemPoolReuseAllowOpportunistic:
    case cudaMemPoolReuseAllowInternalDependencies:
      p->reuse[static_cast<int>(attr) - 1] = *static_cast<int*>(value);
      return cudaSuccess;
    default:
      return emu::fail(cudaErrorInvalidValue);
  }
}
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  const auto p = emu::find_pool(pool);
  if (!p || value == nullptr) return emu::fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(emu::rt().m);
  auto* out = static_cast<uint64_t*>(value);
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold:
      *out = p->release_threshold;
      return cudaSuccess;
    case cudaMemPoolAttrReservedMemCurrent:
      *out = p->reserved;
      return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh:
      *out = p->reserved_high;
      return cudaSuccess;
    case cudaMemPoolAttrUsedMemCurrent:
      *out = p->used;
      return cudaSuccess;
    case cudaMemPoolAttrUsedMemHigh:
      *out = p->used_high;
      return cudaSuccess;
    case cudaMemPoolReuseFollowEventDependencies:
    case cudaMemPoolReuseAllowOpportunistic:
    case cudaMemPoolReuseAllowInternalDependencies:
      *static_cast<int*>(value) = p->reuse[static_cast<int>(attr) - 1];
      return cudaSuccess;
    default:
      return emu::fail(cudaErrorInvalidValue);
  }
}
cudaError_t cudaMallocFromPoolAsync(void** p, size_t bytes, cudaMemPool_t pool, cudaStream_t s) {
  const auto mp = emu::find_pool(pool);
  if (!mp) return emu::fail(cudaErrorInvalidValue);
  if (!emu::is_null_stream(s) && !emu::find_stream(s)) {
    return emu::fail(cudaErrorInvalidResourceHandle);
  }
  // No graph memory nodes: a capture cannot hold an allocation.
  if (cudaError_t rc{}; emu::captured(s, nullptr, &rc)) return rc;
  return emu::allocate(p, bytes, Space::kDevice, mp);
}
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t s) {
  std::shared_ptr<emu::Pool> pool;
  {
    std::lock_guard<std::mutex> lock(emu::rt().m);
    if (!emu::valid_device(emu::t_device)) return emu::fail(cudaErrorNoDevice);
    auto& d = emu::rt().devices[static_cast<size_t>(emu::t_device)];
    if (!d.default_pool) {
      d.default_pool = std::make_shared<emu::Pool>();
      d.default_pool->device = emu::t_device;
      emu::rt().pools.insert(d.default_pool.get());
    }
    pool = d.default_pool;
  }
  if (!emu::is_null_stream(s) && !emu::find_stream(s)) {
    return emu::fail(cudaErrorInvalidResourceHandle);
  }
  if (cudaError_t rc{}; emu::captured(s, nullptr, &rc)) return rc;
  return emu::allocate(p, bytes, Space::kDevice, pool);
}
cudaError_t cudaFreeAsync(void* p, cudaStream_t s) {
  if (p == nullptr) return emu::ok();
  Space space{};
  if (!emu::base_of(p, &space) || space != Space::kDevice) {
    emu::complain("cudaFreeAsync(" + emu::hex(p) + "): not a device allocation");
    return emu::fail(cudaErrorInvalidValue);
  }
  return emu::enqueue(s, [p] { emu::release(p); });
}

// Streams.
cudaError_t cudaStreamCreate(cudaStream_t* s) { return emu::create_stream(s, 0, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  return emu::create_stream(s, flags, 0);
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned flags, int priority) {
  return emu::create_stream(s, flags, priority);
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  std::shared_ptr<emu::Stream> stream;
  {
    std::lock_guard<std::mutex> lock(emu::rt().m);
    const auto it = emu::rt().streams.find(reinterpret_cast<emu::Stream*>(s));
    if (it == emu::rt().streams.end()) {
      emu::complain("cudaStreamDestroy(" + emu::hex(s) + "): no such stream");
      return emu::fail(cudaErrorInvalidResourceHandle);
    }
    stream = it->second;
    emu::rt().streams.erase(it);
  }
  {
    std::lock_guard<std::mutex> lock(stream->m);
    if (stream->capture) --emu::rt().captures;  // a capture in progress ends with it
    stream->capture.reset();
  }
  stream->finish();  // its work completes first, as CUDA lets it
  return emu::ok();
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (emu::is_null_stream(s)) {
    emu::legacy_sync();
  } else {
    const auto stream = emu::find_stream(s);
    if (!stream) return emu::fail(cudaErrorInvalidResourceHandle);
    if (cudaError_t rc{}; emu::captured(*stream, nullptr, &rc)) return rc;
    stream->drain();
  }
  emu::trim_pools();
  return emu::ok();
}
cudaError_t cudaStreamQuery(cudaStream_t s) {
  if (emu::is_null_stream(s)) return emu::ok();
  const auto stream = emu::find_stream(s);
  if (!stream) return emu::fail(cudaErrorInvalidResourceHandle);
  if (cudaError_t rc{}; emu::captured(*stream, nullptr, &rc)) return rc;
  if (emu::rt().faulted) return emu::fail(cudaErrorLaunchFailure);
  return stream->idle() ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned /*flags*/) {
  const auto event = emu::find_event(e);
  if (!event) return emu::fail(cudaErrorInvalidResourceHandle);
  uint64_t target = 0;
  {
    std::lock_guard<std::mutex> lock(event->m);
    target = event->recorded;
  }
  return emu::enqueue(s, [event, target] {
    std::unique_lock<std::mutex> lock(event->m);
    event->cv.wait(lock, [&] { return event->completed >= target; });
  });
}

// Stream capture and graphs. A capturing stream records the operations
// issued on it (kernel launches with their arguments bound by value,
// cudaMemcpyAsync between device or pinned memory, cudaMemsetAsync) instead
// of running them; a graph launch runs them on its stream, in order, as one
// unit of the stream's work. What the emulator cannot record (events, host
// functions, stream-ordered allocation, pageable copies, a graph launch) and
// what a capture forbids (synchronising with its stream, or a legacy-stream
// or device-wide synchronisation under the Global or ThreadLocal mode) fail
// with cudaErrorStreamCaptureUnsupported and invalidate the capture: later
// work on the stream fails with cudaErrorStreamCaptureInvalidated, and
// cudaStreamEndCapture returns no graph.
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed) {
    return emu::fail(cudaErrorInvalidValue);
  }
  if (emu::is_null_stream(s)) return emu::fail(cudaErrorStreamCaptureUnsupported);
  const auto stream = emu::find_stream(s);
  if (!stream) return emu::fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(stream->m);
  if (stream->capture) return emu::fail(cudaErrorIllegalState);
  stream->capture = std::make_shared<emu::Graph>();
  stream->invalidated = false;
  stream->mode = mode;
  stream->capturer = std::this_thread::get_id();
  ++emu::rt().captures;
  return emu::ok();
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  if (graph == nullptr) return emu::fail(cudaErrorInvalidValue);
  *graph = nullptr;
  if (emu::is_null_stream(s)) return emu::fail(cudaErrorIllegalState);
  const auto stream = emu::find_stream(s);
  if (!stream) return emu::fail(cudaErrorInvalidResourceHandle);
  std::shared_ptr<emu::Graph> g;
  {
    std::lock_guard<std::mutex> lock(stream->m);
    if (!stream->capture) return emu::fail(cudaErrorIllegalState);
    if (stream->mode != cudaStreamCaptureModeRelaxed &&
        stream->capturer != std::this_thread::get_id()) {
      return emu::fail(cudaErrorStreamCaptureWrongThread);
    }
    g = std::move(stream->capture);
    stream->capture.reset();
    --emu::rt().captures;
    if (stream->invalidated) return emu::fail(cudaErrorStreamCaptureInvalidated);
  }
  std::lock_guard<std::mutex> lock(emu::rt().m);
  emu::rt().graphs[g.get()] = g;
  *graph = reinterpret_cast<cudaGraph_t>(g.get());
  return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
  if (status == nullptr) return emu::fail(cudaErrorInvalidValue);
  *status = cudaStreamCaptureStatusNone;
  if (emu::is_null_stream(s)) return emu::ok();
  const auto stream = emu::find_stream(s);
  if (!stream) return emu::fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(stream->m);
  if (stream->capture) {
    *status =
        stream->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  }
  return emu::ok();
}
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                          unsigned long long flags) {  // NOLINT(google-runtime-int)
  if (exec == nullptr || flags != 0) return emu::fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(emu::rt().m);
  const auto it = emu::rt().graphs.find(reinterpret_cast<emu::Graph*>(graph));
  if (it == emu::rt().graphs.end()) return emu::fail(cudaErrorInvalidResourceHandle);
  auto e = std::make_shared<emu::Graph>(*it->second);  // the exec outlives its graph
  emu::rt().execs[e.get()] = e;
  *exec = reinterpret_cast<cudaGraphExec_t>(e.get());
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags) {  // NOLINT(google-runtime-int)
  return cudaGraphInstantiateWithFlags(exec, graph, flags);
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  std::shared_ptr<emu::Graph> e;
  {
    std::lock_guard<std::mutex> lock(emu::rt().m);
    const auto it = emu::rt().execs.find(reinterpret_cast<emu::Graph*>(exec));
    if (it == emu::rt().execs.end()) return emu::fail(cudaErrorInvalidResourceHandle);
    e = it->second;
  }
  return emu::graph_launch(e, s);
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  std::lock_guard<std::mutex> lock(emu::rt().m);
  if (emu::rt().execs.erase(reinterpret_cast<emu::Graph*>(exec)) == 0) {
    return emu::fail(cudaErrorInvalidResourceHandle);
  }
  return cudaSuccess;  // a pending launch keeps it alive until it ran
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  std::lock_guard<std::mutex> lock(emu::rt().m);
  if (emu::rt().graphs.erase(reinterpret_cast<emu::Graph*>(graph)) == 0) {
    return emu::fail(cudaErrorInvalidResourceHandle);
  }
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* user_data) {
  if (fn == nullptr) return emu::fail(cudaErrorInvalidValue);
  return emu::enqueue(s, [fn, user_data] { fn(user_data); });
}

// Events.
cudaError_t cudaEventCreate(cudaEvent_t* e) { return emu::create_event(e, 0); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  return emu::create_event(e, flags);
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  std::lock_guard<std::mutex> lock(emu::rt().m);
  if (emu::rt().events.erase(reinterpret_cast<emu::Event*>(e)) == 0) {
    emu::complain("cudaEventDestroy(" + emu::hex(e) + "): no such event");
    return emu::fail(cudaErrorInvalidResourceHandle);
  }
  return cudaSuccess;  // a pending record keeps it alive until it runs
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  const auto event = emu::find_event(e);
  if (!event) {
    emu::complain("cudaEventRecord(" + emu::hex(e) + "): no such event");
    return emu::fail(cudaErrorInvalidResourceHandle);
  }
  // No event nodes: refused before the record is counted.
  if (cudaError_t rc{}; emu::captured(s, nullptr, &rc)) return rc;
  uint64_t gen = 0;
  {
    std::lock_guard<std::mutex> lock(event->m);
    gen = ++event->recorded;
  }
  return emu::enqueue(s, [event, gen] {
    {
      std::lock_guard<std::mutex> lock(event->m);
      event->completed = std::max(event->completed, gen);
      event->time = emu::now_seconds();
    }
    event->cv.notify_all();
  });
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  const auto event = emu::find_event(e);
  if (!event) return emu::fail(cudaErrorInvalidResourceHandle);
  if (emu::rt().faulted) return emu::fail(cudaErrorLaunchFailure);
  std::lock_guard<std::mutex> lock(event->m);
  return event->done() ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  const auto event = emu::find_event(e);
  if (!event) return emu::fail(cudaErrorInvalidResourceHandle);
  if (emu::capture_forbids_sync()) return emu::fail(cudaErrorStreamCaptureUnsupported);
  {
    std::unique_lock<std::mutex> lock(event->m);
    const uint64_t target = event->recorded;
    event->cv.wait(lock, [&] { return event->completed >= target; });
  }
  emu::trim_pools();
  return emu::ok();
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  const auto a = emu::find_event(start);
  const auto b = emu::find_event(end);
  if (ms == nullptr || !a || !b) return emu::fail(cudaErrorInvalidResourceHandle);
  if (((a->flags | b->flags) & cudaEventDisableTiming) != 0) {
    return emu::fail(cudaErrorInvalidResourceHandle);
  }
  std::unique_lock<std::mutex> la(a->m);
  std::unique_lock<std::mutex> lb;
  if (b != a) lb = std::unique_lock<std::mutex>(b->m);
  if (a->recorded == 0 || b->recorded == 0) return emu::fail(cudaErrorInvalidResourceHandle);
  if (!a->done() || !b->done()) return emu::fail(cudaErrorNotReady);
  *ms = static_cast<float>((b->time - a->time) * 1e3);
  return cudaSuccess;
}

}  // extern "C"
// NOLINTEND(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,readability-identifier-naming)
