// Kernels on the CPU: a grid runs block after block on the calling OS thread
// (a stream's worker); each thread of a block is a fiber, so that a thread
// reaching __syncthreads() yields and the block resumes past the barrier
// only once every thread has reached it. The fibers of a block size are
// made once per OS thread and reused for every block and launch. The warp
// collectives (shuffle, tensor-core mma) exchange their operands through a
// buffer of the block, each between two of the block's barriers.
#include <algorithm>
#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
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
thread_local std::vector<std::byte> t_shared;  // the running block's dynamic shared memory
// What the threads of the running block hand each other in a warp
// collective: kExchange floats per thread (a 3xTF32 row of 16 tiles).
constexpr size_t kExchange = 8 + 4 * 16;
thread_local std::vector<float> t_exchange;

void barrier(const char* what) {
  if (t_block == nullptr) {
    complain(std::string(what) + " called outside a kernel");
    std::abort();
  }
  t_block->barrier();
}

// The running thread's index in its block.
unsigned linear_thread() {
  const ThreadState& ts = t_state;
  return ts.thread_idx.x + ts.block_dim.x * (ts.thread_idx.y + ts.block_dim.y * ts.thread_idx.z);
}

float* exchange_slot(unsigned thread) { return t_exchange.data() + size_t{thread} * kExchange; }

// The value tf32 keeps of x: its low 13 mantissa bits dropped.
float tf32_bits(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  bits &= 0xffffe000u;
  std::memcpy(&x, &bits, sizeof bits);
  return x;
}

}  // namespace

ThreadState& thread_state() { return t_state; }

void syncthreads() { barrier("__syncthreads()"); }

void* dynamic_shared() {
  if (t_shared.empty()) {
    complain("a kernel read its dynamic shared memory, but its launch gave it none");
    std::abort();
  }
  return t_shared.data();
}

void syncwarp() { barrier("__syncwarp()"); }

float shfl_xor(float v, int lane_mask) {
  const unsigned i = linear_thread();
  *exchange_slot(i) = v;
  barrier("__shfl_xor_sync()");
  const unsigned partner = (i & ~31u) | ((i & 31u) ^ (static_cast<unsigned>(lane_mask) & 31u));
  const float out = *exchange_slot(partner);
  barrier("__shfl_xor_sync()");
  return out;
}

float tf32_round(float x) {
  if (!std::isfinite(x)) return x;
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  bits = (bits + 0x1000u) & 0xffffe000u;  // sign-magnitude: adding half rounds ties away
  std::memcpy(&x, &bits, sizeof bits);
  return x;
}

namespace {

// c += A * B over k in order, for the 16 x 8 x 8 tile of the running
// thread's warp whose operands its lanes put in their exchange slots, A at
// slot offset a_at and B at b_at. A(r, k) is element (r >= 8) + 2 (k >= 4)
// of lane 4 (r % 8) + k % 4; B(k, n) element (k >= 4) of lane 4 n + k % 4.
void accumulate(float* c, unsigned a_at, unsigned b_at) {
  const unsigned i = linear_thread();
  const unsigned warp = i & ~31u;
  const unsigned lane = i & 31u;
  const unsigned g = lane / 4;
  const unsigned t = lane % 4;
  const auto a = [&](unsigned r, unsigned k) {
    return tf32_bits(
        exchange_slot(warp + 4 * (r % 8) + k % 4)[a_at + (r >= 8 ? 1 : 0) + (k >= 4 ? 2 : 0)]);
  };
  const auto b = [&](unsigned k, unsigned n) {
    return tf32_bits(exchange_slot(warp + 4 * n + k % 4)[b_at + (k >= 4 ? 1 : 0)]);
  };
  for (unsigned q = 0; q < 4; ++q) {
    const unsigned r = g + (q >> 1) * 8;
    const unsigned n = 2 * t + (q & 1);
    float sum = c[q];
    for (unsigned k = 0; k < 8; ++k) sum += a(r, k) * b(k, n);
    c[q] = sum;
  }
}

}  // namespace

void mma_tf32_m16n8k8(float (&c)[4], const float (&a)[4], const float (&b)[2]) {
  float* mine = exchange_slot(linear_thread());
  std::copy(a, a + 4, mine);
  std::copy(b, b + 2, mine + 4);
  barrier("mma.sync");
  accumulate(c, 0, 4);
  barrier("mma.sync");  // every lane has read the operands
}

void mma_tf32x3_row_m16n8k8(float* c, int tiles, const float (&a_big)[4], const float (&a_small)[4],
                            const float* b_big, const float* b_small) {
  if (tiles < 1 || static_cast<size_t>(8 + 4 * tiles) > kExchange) {
    complain("mma_tf32x3_row_m16n8k8: " + std::to_string(tiles) + " tiles, at most " +
             std::to_string((kExchange - 8) / 4));
    std::abort();
  }
  // Slots: A big, A small, then per tile B big and B small.
  float* mine = exchange_slot(linear_thread());
  std::copy(a_big, a_big + 4, mine);
  std::copy(a_small, a_small + 4, mine + 4);
  for (ptrdiff_t n = 0; n < tiles; ++n) {
    std::copy(b_big + 2 * n, b_big + 2 * n + 2, mine + 8 + 4 * n);
    std::copy(b_small + 2 * n, b_small + 2 * n + 2, mine + 10 + 4 * n);
  }
  barrier("mma.sync");
  for (ptrdiff_t n = 0; n < tiles; ++n) {
    const auto b = static_cast<unsigned>(8 + 4 * n);
    accumulate(c + 4 * n, 4, b);      // small x big
    accumulate(c + 4 * n, 0, b + 2);  // big x small
    accumulate(c + 4 * n, 0, b);      // big x big
  }
  barrier("mma.sync");
}

std::string run_grid(dim3 grid, dim3 block, size_t shared, const std::function<void()>& thread) {
  if (!t_cached || !t_cached->fits(block)) t_cached = std::make_unique<Block>(block);
  t_exchange.assign(size_t{block.x} * block.y * block.z * kExchange, 0.0f);
  t_shared.assign(shared, std::byte{0xff});
  ThreadState& ts = t_state;
  ts.block_dim = block;
  ts.grid_dim = grid;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        ts.block_idx = {x, y, z};
        std::fill(t_shared.begin(), t_shared.end(), std::byte{0xff});
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
  t_shared.clear();
  return {};
}

}  // namespace ppb::cudaemu
