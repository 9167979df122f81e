// Kernels on the CPU: a grid runs block after block on the calling OS thread
// (a stream's worker); each thread of a block is a fiber, so that a thread
// reaching __syncthreads() yields and the block resumes past the barrier
// only once every thread has reached it. The fibers of a block size are
// made once per OS thread and reused for every block and launch.
#include <algorithm>
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

enum class State : uint8_t { kRunning, kAtBarrier, kDone };

// The threads of one block shape, as fibers that hand over to each other
// directly: a thread reaching the barrier (or its end) resumes the next
// thread still running, and the last one resumes the scheduler, one switch
// per thread and barrier. slots_[i] holds the suspended fiber i, slots_[n]
// the suspended scheduler; whoever regains control stores the continuation
// of the context that resumed it (prev_) in that context's slot.
class Block {
 public:
  explicit Block(dim3 dim)
      : dim_(dim), slots_(count(dim) + 1), state_(count(dim), State::kDone), idx_(count(dim)) {
    for (unsigned i = 0; i < n(); ++i) {
      idx_[i] = {i % dim.x, (i / dim.x) % dim.y, i / (dim.x * dim.y)};
      slots_[i] = ctx::fiber(std::allocator_arg, ctx::protected_fixedsize_stack(kStackBytes),
                             [this, i](ctx::fiber&& from) { return main(i, std::move(from)); });
    }
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  ~Block() {
    quit_ = true;
    // Finished (or never started) fibers return from main when resumed;
    // those abandoned at a barrier are unwound by their slots' destructors.
    for (unsigned i = 0; i < n(); ++i) {
      if (slots_[i] && state_[i] != State::kAtBarrier) {
        prev_ = n();
        ctx::fiber back = std::move(slots_[i]).resume();
      }
    }
  }

  bool fits(dim3 dim) const { return dim.x == dim_.x && dim.y == dim_.y && dim.z == dim_.z; }

  // One block of `thread`; "" or why its threads diverged at a barrier.
  std::string run(const std::function<void()>& thread, ThreadState& ts) {
    body_ = &thread;
    ts_ = &ts;
    std::fill(state_.begin(), state_.end(), State::kRunning);
    for (;;) {
      // One pass: every running thread up to its next barrier or its end.
      const unsigned first = next_live(0);
      prev_ = n();
      enter(first);
      ctx::fiber back = std::move(slots_[first]).resume();
      slots_[prev_] = std::move(back);
      const auto done =
          static_cast<unsigned>(std::count(state_.begin(), state_.end(), State::kDone));
      if (done == n()) return {};
      if (done > 0) {
        return std::to_string(n() - done) + " of the block's " + std::to_string(n()) +
               " threads wait at a __syncthreads() that " + std::to_string(done) +
               " threads never reach (they returned)";
      }
      std::fill(state_.begin(), state_.end(), State::kRunning);  // all met: go on
    }
  }

  // From the running thread: wait at the barrier.
  void barrier() {
    const unsigned i = current_;
    state_[i] = State::kAtBarrier;
    switch_to(i, next_live(i + 1));
  }

 private:
  unsigned n() const { return static_cast<unsigned>(state_.size()); }
  static size_t count(dim3 d) { return size_t{d.x} * d.y * d.z; }
  // The first thread from `i` on still running this pass; n() (the
  // scheduler) when none is.
  unsigned next_live(unsigned i) const {
    while (i < n() && state_[i] == State::kDone) ++i;
    return i;
  }
  void enter(unsigned i) {
    current_ = i;
    ts_->thread_idx = idx_[i];
  }
  void switch_to(unsigned self, unsigned target) {
    prev_ = self;
    if (target < n()) enter(target);
    ctx::fiber back = std::move(slots_[target]).resume();
    slots_[prev_] = std::move(back);
  }
  ctx::fiber main(unsigned i, ctx::fiber&& from) {
    slots_[prev_] = std::move(from);
    for (;;) {
      if (quit_) return std::move(slots_[n()]);
      (*body_)();
      state_[i] = State::kDone;
      switch_to(i, next_live(i + 1));
    }
  }

  dim3 dim_;
  std::vector<ctx::fiber> slots_;
  std::vector<State> state_;
  std::vector<uint3> idx_;
  const std::function<void()>* body_ = nullptr;
  ThreadState* ts_ = nullptr;
  unsigned current_ = 0;
  unsigned prev_ = 0;
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
  if (!t_cached || !t_cached->fits(block)) t_cached = std::make_unique<Block>(block);
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
