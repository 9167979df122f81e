// dualpipe-v: DualPipeV, the V-shaped form of DeepSeek's DualPipe
// (DeepSeek-V3 technical report, arXiv 2412.19437; the order of
// deepseek-ai/DualPipe's DualPipeV and PyTorch's ScheduleDualPipeV). The
// model is in 2P chunks placed in a V (stage s holds virtual stages s and
// 2P-1-s); in the steady state each stage runs the forward of one chunk
// together with the full backward of the other as one overlapped unit
// (Action::overlap, PyTorch's OVERLAP_F_B), so that on a GPU the
// communication of one hides behind the computation of the other. The
// first and last backwards are split into I and W to fill the ramps.
//
// Per stage s of P, chunk 0 the way down and chunk 1 the way up, with
// micro-batch counters per (chunk, kind), a full B counting as I and W:
//   1  2(P-s-1) x F0
//   2  s+1 x (F0 F1)
//   3  P-s-1 x (I1, the oldest pending W, F1)
//   4  M-2P+s+1 x ((F0;B1) (F1;B0)); the last stage runs its first F0 and
//      B1 apart
//   5  P-s-1 x (B1 (F1;B0))
//   6  s+1 x (B1 B0), I instead of B from the middle one on (the second
//      half of the backwards is split)
//   7  P-s-1 x (the oldest pending W, B0 or I0)
//   8  s+1 x the oldest pending W
// REQUIRES M >= 2P (a UsageError names --microbatches otherwise).
#include <deque>
#include <string>
#include <utility>

#include "generators.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::schedule_detail {
namespace {

// One stage's list under construction.
class DualPipeStage {
 public:
  explicit DualPipeStage(std::vector<Action>& out) : out_(out) {}

  void forward(int chunk) { out_.push_back(F(f_[chunk]++, chunk)); }
  // A full backward (B) or its input half (I, whose W waits in the queue).
  void backward(int chunk, bool split) {
    const int mb = b_[chunk]++;
    if (split) {
      out_.push_back(I(mb, chunk));
      pending_w_.emplace_back(mb, chunk);
    } else {
      out_.push_back(B(mb, chunk));
    }
  }
  // F of `f_chunk` and a full B of `b_chunk` as one unit.
  void overlapped(int f_chunk, int b_chunk) {
    forward(f_chunk);
    out_.back().overlap = true;
    backward(b_chunk, false);
  }
  void weight_if_pending() {
    if (pending_w_.empty()) return;
    const auto [mb, chunk] = pending_w_.front();
    pending_w_.pop_front();
    out_.push_back(W(mb, chunk));
  }

 private:
  std::vector<Action>& out_;
  int f_[2] = {0, 0};
  int b_[2] = {0, 0};
  std::deque<std::pair<int, int>> pending_w_;  // (mb, chunk) of I without W yet
};

}  // namespace

std::optional<std::string> dualpipe_v_problem(const ScheduleParams& p, std::string_view /*name*/) {
  if (p.microbatches >= 2 * p.stages) return std::nullopt;
  return "--microbatches: dualpipe-v needs at least 2 x stages = " + std::to_string(2 * p.stages) +
         " micro-batches, got " + std::to_string(p.microbatches);
}

Schedule generate_dualpipe_v(const ScheduleParams& p) {
  const int P = p.stages;
  const int M = p.microbatches;
  ScheduleParams q = p;
  q.chunks = 2;
  Schedule s = make_schedule("dualpipe-v", q);
  s.placement = v_shape_placement(P);
  for (int r = 0; r < P; ++r) {
    auto& list = s.actions[static_cast<size_t>(r)];
    list.reserve(static_cast<size_t>(6 * M));
    DualPipeStage st(list);
    for (int k = 0; k < 2 * (P - r - 1); ++k) st.forward(0);
    for (int k = 0; k < r + 1; ++k) {
      st.forward(0);
      st.forward(1);
    }
    for (int k = 0; k < P - r - 1; ++k) {
      st.backward(1, true);
      st.weight_if_pending();
      st.forward(1);
    }
    for (int k = 0; k < M - 2 * P + r + 1; ++k) {
      if (k == 0 && r == P - 1) {
        // Apart, so that the last stage's first backward does not wait.
        st.forward(0);
        st.backward(1, false);
      } else {
        st.overlapped(0, 1);
      }
      st.overlapped(1, 0);
    }
    for (int k = 0; k < P - r - 1; ++k) {
      st.backward(1, false);
      st.overlapped(1, 0);
    }
    bool split = false;
    for (int k = 0; k < r + 1; ++k) {
      if (k == (r + 1) / 2 && r % 2 == 1) split = true;
      st.backward(1, split);
      if (k == (r + 1) / 2 && r % 2 == 0) split = true;
      st.backward(0, split);
    }
    for (int k = 0; k < P - r - 1; ++k) {
      st.weight_if_pending();
      st.backward(0, split);
    }
    for (int k = 0; k < r + 1; ++k) st.weight_if_pending();
  }
  return s;
}

}  // namespace ppb::schedule_detail
