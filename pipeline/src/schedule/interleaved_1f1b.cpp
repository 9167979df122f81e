// interleaved-1f1b: Megatron-LM's forward_backward_pipelining_with_interleaving
// with V model chunks per stage (--chunks V) and micro-batch group size P.
//
// Megatron's schedule table lists, group by group of P micro-batches, every
// chunk's forwards: (mb g..g+P-1, chunk 0), (mb g..g+P-1, chunk 1), ... The
// k-th forward of a stage is table[k]; the k-th backward is table[k] with the
// chunk mirrored (V-1-chunk). Stage s runs (P-s-1)*2 + (V-1)*P warm-up
// forwards (all V*M when that is more: the all-warm-up case, e.g. M == P),
// then forward/backward pairs, then the remaining backwards.
//
// Valid M: Megatron requires P <= group size <= M and the last group to be
// empty or at least P micro-batches; with group size P that is "M is a
// multiple of P". Other M are rejected, as Megatron rejects them.
// V = 1 is accepted and runs the same code path (Megatron's interleaved
// function with one chunk): warm-up 2(P-s-1), so more in flight than 1f1b.
#include <algorithm>
#include <string>
#include <vector>

#include "generators.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::schedule_detail {

std::optional<std::string> interleaved_1f1b_problem(const ScheduleParams& p,
                                                    std::string_view /*name*/) {
  if (p.microbatches % p.stages == 0) return std::nullopt;
  return "--microbatches: interleaved-1f1b runs micro-batches in groups of P (Megatron-LM), so M "
         "must be "
         "a multiple of --stages " +
         std::to_string(p.stages) + "; got " + std::to_string(p.microbatches);
}

Schedule generate_interleaved_1f1b(const ScheduleParams& p) {
  const int P = p.stages;
  const int M = p.microbatches;
  const int V = p.chunks;
  // Megatron's schedule table: (micro-batch, chunk) of the k-th forward.
  const int total = M * V;
  std::vector<Action> table;
  table.reserve(static_cast<size_t>(total));
  for (int group = 0; group < M; group += P) {
    for (int c = 0; c < V; ++c) {
      for (int mb = group; mb < group + P; ++mb) table.push_back(F(mb, c));
    }
  }
  Schedule s = make_schedule("interleaved-1f1b", p);
  for (int st = 0; st < P; ++st) {
    auto& list = s.actions[static_cast<size_t>(st)];
    list.reserve(static_cast<size_t>(2 * total));
    const int warmup = std::min((P - st - 1) * 2 + (V - 1) * P, total);
    auto backward = [&](int k) {
      const Action& t = table[static_cast<size_t>(k)];
      return B(t.microbatch, V - 1 - t.chunk);
    };
    for (int k = 0; k < warmup; ++k) list.push_back(table[static_cast<size_t>(k)]);
    for (int k = 0; k < total - warmup; ++k) {
      list.push_back(table[static_cast<size_t>(warmup + k)]);
      list.push_back(backward(k));
    }
    for (int k = total - warmup; k < total; ++k) list.push_back(backward(k));
  }
  return s;
}

}  // namespace ppb::schedule_detail
