// Kernels on the CPU: a grid runs block after block on the calling OS thread
// (a stream's worker); each thread of a block is a fiber, so that a thread
// reaching __syncthreads() yields and the block resumes past the barrier
// only once every thread has reached it. The fibers of a block size are
// made once per OS thread and reused for every block and launch.
#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "emu.hpp"

namespace ppb::cudaemu {
namespace {

namespace ctx = boost::context;

// A kernel thread's stack: the kernels keep a few scalars there.
constexpr size_t kStackBytes = size_t{64} << 10;

enum class State : uint8_t { kIdle, kRunning, kAtBarrier, kDone };

class Block {
 public:
  explicit Block(unsigned threads) : fibers_(threads), sinks_(threads), state_(threads) {
    for (unsigned i = 0; i < threads; ++i) {
      fibers_[i] = ctx::fiber(std::allocator_arg, ctx::protected_fixedsize_stack(kStackBytes),
                              [this, i](ctx::fiber&& sink) { return main(i, std::move(sink)); });
    }
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  ~Block() {
    quit_ = true;
    // Idle fibers wait at the end of main's loop: let each return. Fibers
    // abandoned at a barrier are unwound by their destructors.
    for (unsigned i = 0; i < fibers_.size(); ++i) {
      if (fibers_[i] && state_[i] != State::kAtBarrier) fibers_[i] = std::move(fibers_[i]).resume();
    }
  }

  unsigned size() const { return static_cast<unsigned>(fibers_.size()); }

  // One block of `thread`; "" or why its threads diverged at a barrier.
  std::string run(const std::function<void()>& thread, ThreadState& ts) {
    body_ = &thread;
    const dim3 dim = ts.block_dim;
    for (auto& s : state_) s = State::kRunning;
    for (;;) {
      unsigned at_barrier = 0;
      unsigned done = 0;
      for (unsigned i = 0; i < size(); ++i) {
        if (state_[i] == State::kDone) {
          ++done;
          continue;
        }
        state_[i] = State::kRunning;
        current_ = i;
        ts.thread_idx = {i % dim.x, (i / dim.x) % dim.y, i / (dim.x * dim.y)};
        fibers_[i] = std::move(fibers_[i]).resume();
        if (state_[i] == State::kAtBarrier) ++at_barrier;
        if (state_[i] == State::kDone) ++done;
      }
      if (done == size()) return {};
      if (done > 0) {
        return std::to_string(at_barrier) + " of the block's " + std::to_string(size()) +
               " threads wait at a __syncthreads() that " + std::to_string(done) +
               " threads never reach (they returned)";
      }
    }
  }

  // From the running fiber: wait at the barrier.
  void barrier() {
    const unsigned i = current_;
    state_[i] = State::kAtBarrier;
    ctx::fiber& sink = *sinks_[i];
    sink = std::move(sink).resume();
  }

 private:
  ctx::fiber main(unsigned i, ctx::fiber&& sink) {
    for (;;) {
      sinks_[i] = &sink;
      if (quit_) return std::move(sink);
      (*body_)();
      state_[i] = State::kDone;
      sink = std::move(sink).resume();
      sinks_[i] = &sink;
      if (quit_) return std::move(sink);
    }
  }

  std::vector<ctx::fiber> fibers_;
  std::vector<ctx::fiber*> sinks_;
  std::vector<State> state_;
  const std::function<void()>* body_ = nullptr;
  unsigned current_ = 0;
  bool quit_ = false;
};

thread_local ThreadState t_state;
thread_local Block* t_block = nullptr;  // the block running on this OS thread, if any
thread_local std::unique_ptr<Block> t_cached;

}  // namespace

ThreadState& thread_state() { return t_state; }

void syncthreads() {
  if (t_block == nullptr) {
    complain("__syncthreads() called outside a kernel");
    std::abort();
  }
  t_block->barrier();
}

std::string run_grid(dim3 grid, dim3 block, const std::function<void()>& thread) {
  const unsigned threads = block.x * block.y * block.z;
  if (!t_cached || t_cached->size() != threads) t_cached = std::make_unique<Block>(threads);
  ThreadState& ts = t_state;
  ts.block_dim = block;
  ts.grid_dim = grid;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        ts.block_idx = {x, y, z};
        t_block = t_cached.get();
        std::string why = t_cached->run(thread, ts);
        t_block = nullptr;
        if (!why.empty()) {
          t_cached.reset();  // its fibers hold the abandoned block
          return "block (" + std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z) +
                 "): " + why;
        }
      }
    }
  }
  ts = ThreadState{};
  return {};
}

}  // namespace ppb::cudaemu
