// The CUDA emulator's internals, shared by its runtime (libcudart.so.13),
// its cuBLAS (libcublas.so.13) and the CPU twins of the cuda backend's
// kernels. The emulator runs the very binaries a CUDA build makes on a
// machine without a GPU: put its folder first on LD_LIBRARY_PATH and the
// process loads these libraries in place of NVIDIA's. Device memory is host
// memory the emulator allocates and registers, a stream is a worker thread
// running its operations in order, an event is a completion mark, a
// kernel runs on its stream's worker, block after block, each thread of a
// block a fiber (Boost.Context) so that __syncthreads() is a real barrier,
// and a CUDA graph is the list of operations a stream capture recorded,
// run in that order on the stream it is launched on.
//
// It checks what a GPU would only fault on, and says so on stderr, naming
// the call: a device range outside every allocation (copies, memsets, GEMM
// operands), a kernel argument that is not device-accessible memory, a
// copy whose kind contradicts its pointers, a __syncthreads() that not
// every thread of the block reaches, a handle used after it was destroyed.
// It measures nothing a user should read as a GPU figure: the device it
// reports is named "pipebench CUDA emulator (CPU)".
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace ppb::cudaemu {

/// Where a pointer points, as the emulator's registry knows it.
enum class Space : uint8_t { kDevice, kPinned, kPageable };

/// The space of the allocation holding p (kPageable when p is in none).
Space space_of(const void* p);
/// True when [p, p + bytes) lies inside one allocation of `space` (always
/// for bytes == 0). With `why`, says otherwise in words.
bool within(const void* p, size_t bytes, Space space, std::string* why = nullptr);

/// Prints "pipebench CUDA emulator: <what>" on stderr (one line).
void complain(const std::string& what);

/// A PPB_CUDAEMU_* variable this process cannot run with: complains and
/// ends the process with exit code 2. Every rank of a job reads the same
/// variables, so only the launcher's rank 0 (or a process outside a
/// launcher) says so; the other ranks end quietly.
[[noreturn]] void refuse_setting(const std::string& what);

/// Runs `op` on stream s in stream order (s may be a null/legacy stream:
/// then it runs now, on the caller). cudaErrorInvalidResourceHandle for a
/// stream that does not exist.
cudaError_t enqueue(cudaStream_t s, std::function<void()> op);

/// Like enqueue(), for a kernel another library of the emulator runs (cuBLAS's
/// GEMMs): the activity hooks see it as a kernel named `name` (a string that
/// lives as long as the process), issued by a cuLaunchKernel: a driver API
/// call, as NVIDIA's cuBLAS launches its GEMM kernels.
cudaError_t enqueue_kernel(cudaStream_t s, const char* name, dim3 grid, dim3 block,
                           std::function<void()> op);

/// Records `rc` as the calling thread's last error (cudaGetLastError) when
/// it is not cudaSuccess, and returns it.
cudaError_t fail(cudaError_t rc);

// --- kernels ---------------------------------------------------------------

/// What a kernel's thread sees as threadIdx, blockIdx, blockDim, gridDim.
struct ThreadState {
  uint3 thread_idx{0, 0, 0};
  uint3 block_idx{0, 0, 0};
  dim3 block_dim{1, 1, 1};
  dim3 grid_dim{1, 1, 1};
};
/// The running kernel thread's state (the calling OS thread's when none).
ThreadState& thread_state();
/// __syncthreads(): suspends this kernel thread until every thread of its
/// block has reached the barrier.
void syncthreads();

/// The running block's dynamic shared memory (the launch's `shared`
/// bytes; filled with 0xff bytes, NaN as floats, before each block, so
/// that a read of what no thread wrote shows).
void* dynamic_shared();

/// Warp collectives. The emulator's warp barrier is the block's: every
/// thread of the block must reach each call, as for __syncthreads() (a
/// block that diverges at one is reported like one at __syncthreads()).
/// __syncwarp().
void syncwarp();
/// __shfl_xor_sync(full mask, v, lane_mask): v of lane (this lane ^ lane_mask).
float shfl_xor(float v, int lane_mask);
/// cvt.rna.tf32.f32: the nearest tf32 of x (10 mantissa bits, ties away
/// from zero), as a float; infinities and NaNs unchanged.
float tf32_round(float x);
/// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 with c as both the
/// accumulator and the result: c += A * B over the warp, each thread
/// holding the PTX ISA's fragment elements (g = lane / 4, t = lane % 4):
/// a = {A(g,t), A(g+8,t), A(g,t+4), A(g+8,t+4)}, b = {B(t,g), B(t+4,g)},
/// c = {C(g,2t), C(g,2t+1), C(g+8,2t), C(g+8,2t+1)}. The operands are read
/// as tf32 (their low 13 mantissa bits dropped), products summed in fp32
/// in k order.
void mma_tf32_m16n8k8(float (&c)[4], const float (&a)[4], const float (&b)[2]);
/// A row of `tiles` 3xTF32 steps (1 to 16) sharing one A, in one exchange:
/// c[4n .. 4n + 4) takes the step with B fragments b_big[2n .. 2n + 2) and
/// b_small[2n .. 2n + 2): c += a_small * b_big, then c += a_big * b_small,
/// then c += a_big * b_big, as three mma_tf32_m16n8k8 calls would.
void mma_tf32x3_row_m16n8k8(float* c, int tiles, const float (&a_big)[4], const float (&a_small)[4],
                            const float* b_big, const float* b_small);

/// Runs `thread` once per thread of the grid, block after block, on the
/// calling OS thread, each block with `shared` bytes of dynamic shared
/// memory. Returns "" or, when a block's threads diverged at a barrier, why
/// (the block's remaining work is abandoned).
std::string run_grid(dim3 grid, dim3 block, size_t shared, const std::function<void()>& thread);

/// The CPU twin of one kernel: binds a launch's argument array (copies the
/// values) into a callable run by every thread; "" in *why, or why the
/// arguments cannot run (a pointer that is not device-accessible).
struct Twin {
  std::string params;  ///< "(float const*, float*, long)": the signature's parameter list
  std::function<std::function<void()>(void** args, std::string* why)> bind;
};
/// Registers the twin of the kernel whose name (without namespaces or
/// parameters) is `name`, e.g. "ppb_gelu_fwd<float>".
void register_twin(const std::string& name, Twin twin);

// --- activity: what the emulated CUPTI (libcupti.so.13) sees ----------------

/// One operation a stream ran, as CUPTI's activity records describe it.
struct ActivityOp {
  enum class Kind : uint8_t { kKernel, kMemcpy, kMemset };
  Kind kind = Kind::kKernel;
  const char* name =
      nullptr;  ///< kernels: the device symbol, mangled (lives as long as the process)
  int device = 0;
  uint32_t stream = 0;       ///< the stream's id (kNullStreamId for the legacy stream)
  uint32_t correlation = 0;  ///< the runtime call that issued it
  uint64_t start_ns = 0;     ///< timestamp_ns() when it began on its stream
  uint64_t end_ns = 0;
  uint64_t bytes = 0;                                ///< copies and memsets
  cudaMemcpyKind copy = cudaMemcpyDeviceToDevice;    ///< copies: the direction
  Space src = Space::kDevice, dst = Space::kDevice;  ///< copies (dst alone for memsets)
  int value = 0;                                     ///< memsets
  dim3 grid, block;                                  ///< kernels
};
/// The id activity gives the legacy (null) stream; created streams count from 13.
constexpr uint32_t kNullStreamId = 7;

/// What the emulated CUPTI listens to. Each hook may be called on any thread.
struct ActivityHooks {
  /// A runtime or driver call that issues device work, on the calling
  /// thread, after the work was enqueued: its correlation id (as its
  /// operation carries it), its name ("cudaLaunchKernel", "cuLaunchKernel")
  /// and when it began and ended.
  void (*api)(uint32_t correlation, const char* function, uint64_t start_ns,
              uint64_t end_ns) = nullptr;
  /// An operation ended, on the thread that ran it (its stream's worker).
  void (*op)(const ActivityOp& op) = nullptr;
  /// A device's context was made (the process's first use of the device).
  void (*context)(int device) = nullptr;
};
/// Installs the hooks (nullptr: none). `hooks` must outlive the process.
void set_activity_hooks(const ActivityHooks* hooks);
/// The calling thread's current context (cuptiGetDeviceId(NULL)): true
/// with its device where the thread's current device (cudaSetDevice's,
/// default 0) has had its context made (its first use in the process),
/// false where it has none yet. Unlike CUDA, a thread that made no call yet
/// finds device 0's context current where it exists (CUDA makes it current
/// at the thread's first runtime call).
bool current_context_device(int* device);
/// The clock of activity records: CLOCK_REALTIME in nanoseconds (CUPTI's).
uint64_t timestamp_ns();

}  // namespace ppb::cudaemu
