// NVTX ranges in the `pipebench` domain (docs/instrumentation.md, "NVTX"),
// so that `nsys profile mpirun ... pipebench run` shows every
// forward, backward, send and receive of every micro-batch as a named range.
//
//  * Names are registered strings ("F s2 mb3", "B s2 mb3 c1",
//    "send act s2->s3 mb3"), registered once each and cached.
//  * One category per phase (Category below), named in the domain.
//  * The payload is the micro-batch id (int64), -1 where there is none.
//  * Outer ranges "step <k>" and "measure" let
//    `nsys profile --capture-range=nvtx -p measure@pipebench` capture only
//    the timed steps.
//
// Built when the NVTX3 headers are found (CUDA toolkit); otherwise, and when
// PPB_NVTX_DISABLE is defined, everything here compiles to nothing. NVTX costs
// a few nanoseconds per range when no tool is attached (no injection library
// loaded), so ranges stay on in measured runs; `--profile` only decides
// whether the executor emits them.
//
// Example:
//   ppb::nvtx::ScopedRange r("F s2 mb3", ppb::nvtx::Category::kForward, 3);
#pragma once

#include <cstdint>
#include <string_view>

namespace ppb::nvtx {

enum class Category : uint32_t {
  kForward = 1,
  kBackward = 2,
  kWgrad = 3,
  kSend = 4,
  kRecv = 5,
  kOptimizer = 6,
  kSync = 7,
  kStep = 8,
};

/// "forward", "backward", "wgrad", "send", "recv", "optimizer", "sync", "step".
const char* category_name(Category category);

/// True when NVTX support is compiled in.
bool compiled_in();

/// Creates the domain and names its categories. Idempotent, thread-safe;
/// push() calls it on first use.
void init();

/// Names the calling OS thread in the profiler ("rank 3 executor").
void name_this_thread(std::string_view name);

/// Pushes a range on the calling thread. Prefer ScopedRange.
void push(std::string_view message, Category category, int64_t payload = -1);
/// Pops the innermost range of the calling thread.
void pop();

/// Starts a range that need not nest and may end on any thread (a message
/// in flight while other actions run). Returns its id for end_range; 0 when
/// NVTX is not compiled in.
uint64_t start_range(std::string_view message, Category category, int64_t payload = -1);
/// Ends a range from start_range. end_range(0) does nothing.
void end_range(uint64_t id);

/// RAII range: pushed in the constructor, popped in the destructor. It can
/// be neither copied, moved nor allocated on the heap (nvtx3.hpp's rule), so
/// ranges always nest properly.
class ScopedRange {
 public:
  ScopedRange(std::string_view message, Category category, int64_t payload = -1) {
    push(message, category, payload);
  }
  ~ScopedRange() { pop(); }
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;
  ScopedRange(ScopedRange&&) = delete;
  ScopedRange& operator=(ScopedRange&&) = delete;
  static void* operator new(std::size_t) = delete;
  static void* operator new[](std::size_t) = delete;
};

}  // namespace ppb::nvtx
