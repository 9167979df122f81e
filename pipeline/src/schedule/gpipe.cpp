// gpipe (GPipe; document 003 P6): every forward, then every backward.
//
// Backwards run in micro-batch order 0..M-1 (as PyTorch pipelining's
// ScheduleGPipe), not in reverse: with equal costs the timing is the same
// either way, and FIFO order lets the executor keep one queue discipline for
// every schedule (the gradient of the oldest micro-batch arrives first).
#include "generators.hpp"

namespace ppb::schedule_detail {

Schedule generate_gpipe(const ScheduleParams& p) {
  Schedule s = make_schedule("gpipe", p);
  for (auto& list : s.actions) {
    list.reserve(static_cast<size_t>(2 * p.microbatches));
    for (int mb = 0; mb < p.microbatches; ++mb) list.push_back(F(mb));
    for (int mb = 0; mb < p.microbatches; ++mb) list.push_back(B(mb));
  }
  return s;
}

}  // namespace ppb::schedule_detail
