// Exact orders against independent oracles written from the reference
// implementations' step logic (not from our generators):
//  * 1f1b vs DeepSpeed's TrainSchedule (deepspeed/runtime/pipe/schedule.py):
//    2(M+P-1) steps, each mapped to a micro-batch and forward/backward by the
//    parity of step and stage (_step_to_micro_batch and its four helpers).
//  * interleaved-1f1b vs Megatron-LM's forward_backward_pipelining_with_interleaving
//    (megatron/core/pipeline_parallel/schedules.py): get_schedule_table,
//    get_pp_rank_microbatches' warm-up count, get_model_chunk_id, and the
//    per-chunk FIFO of input tensors that decides which micro-batch a
//    backward consumes; its validity checks on M.
#include <gtest/gtest.h>

#include <deque>
#include <utility>
#include <vector>

#include "ppb/pipeline/schedule.hpp"
#include "schedule_test_util.hpp"

namespace ppb {
namespace {

// Python's floor division (the oracle's `//`), also for negative operands.
int floordiv(int a, int b) {
  int q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

bool is_even(int x) { return x % 2 == 0; }

// DeepSpeed TrainSchedule for one stage: the compute actions in step order.
std::vector<Action> deepspeed_train_schedule(int micro_batches, int stages, int stage_id) {
  std::vector<Action> out;
  const int total_steps = 2 * (micro_batches + stages - 1);
  for (int step_id = 0; step_id < total_steps; ++step_id) {
    int mb = 0;
    bool is_forward = false;
    if (is_even(step_id) && is_even(stage_id)) {  // _even_step_forward_id
      mb = floordiv(step_id, 2) - floordiv(stage_id, 2);
      is_forward = true;
    } else if (!is_even(step_id) && !is_even(stage_id)) {  // _odd_step_forward_id
      mb = floordiv(step_id - 1, 2) - floordiv(stage_id, 2);
      is_forward = true;
    } else if (is_even(step_id) && !is_even(stage_id)) {  // _even_step_backward_id
      mb = floordiv(step_id, 2) - stages + floordiv(stage_id + 1, 2);
      is_forward = false;
    } else {  // odd step, even stage: _odd_step_backward_id
      mb = floordiv(step_id - 1, 2) - stages + 1 + floordiv(stage_id, 2);
      is_forward = false;
    }
    if (mb >= 0 && mb < micro_batches) out.push_back(is_forward ? F(mb) : B(mb));
  }
  return out;
}

TEST(OneFOneBOracle, EqualsDeepSpeedTrainScheduleExactly) {
  for (int P = 1; P <= 16; ++P) {
    for (int M = 1; M <= 48; ++M) {
      ScheduleParams p;
      p.stages = P;
      p.microbatches = M;
      const Schedule s = generate_schedule("1f1b", p);
      for (int st = 0; st < P; ++st) {
        ASSERT_EQ(s.actions[static_cast<size_t>(st)], deepspeed_train_schedule(M, P, st))
            << "P=" << P << " M=" << M << " stage " << st
            << "\n ours: " << testing::list_text(s.actions[static_cast<size_t>(st)])
            << "\n deepspeed: " << testing::list_text(deepspeed_train_schedule(M, P, st));
      }
    }
  }
}

// Megatron-LM: does it accept (P, M) with microbatch_group_size_per_vp_stage = P?
bool megatron_accepts(int pp, int num_microbatches) {
  const int group = pp;
  if (group > num_microbatches || group < pp) return false;  // ValueError
  const int final_group = num_microbatches % group;
  return !(final_group > 0 && final_group < pp);  // RuntimeError otherwise
}

// Megatron-LM interleaved schedule of one rank, as compute actions.
std::vector<Action> megatron_interleaved(int pp, int rank, int num_microbatches,
                                         int num_model_chunks) {
  const int group = pp;
  // get_schedule_table
  std::vector<std::pair<int, int>> table;  // (microbatch_id, model_chunk_id)
  for (int min_mb = 0; min_mb < num_microbatches; min_mb += group) {
    const int end = (min_mb + group >= num_microbatches) ? num_microbatches : min_mb + group;
    for (int chunk = 0; chunk < num_model_chunks; ++chunk) {
      for (int mb = min_mb; mb < end; ++mb) table.emplace_back(mb, chunk);
    }
  }
  // get_pp_rank_microbatches
  const int total = num_microbatches * num_model_chunks;
  int warmup = (pp - rank - 1) * 2 + (num_model_chunks - 1) * group;
  if (warmup >= total) warmup = total;
  const int remaining = total - warmup;
  auto get_model_chunk_id = [&](int virtual_microbatch_id, bool forward) {
    int chunk = table[static_cast<size_t>(virtual_microbatch_id % total)].second;
    if (!forward) chunk = num_model_chunks - chunk - 1;
    return chunk;
  };
  // input_tensors[chunk] is a FIFO: forward appends, backward pops the oldest.
  std::vector<std::deque<int>> input_tensors(static_cast<size_t>(num_model_chunks));
  std::vector<Action> out;
  auto forward_step = [&](int k) {
    const int chunk = get_model_chunk_id(k, true);
    const int mb = table[static_cast<size_t>(k)].first;  // get_microbatch_id_in_model_chunk
    input_tensors[static_cast<size_t>(chunk)].push_back(mb);
    out.push_back(F(mb, chunk));
  };
  auto backward_step = [&](int k) {
    const int chunk = get_model_chunk_id(k, false);
    auto& q = input_tensors[static_cast<size_t>(chunk)];
    const int mb = q.front();
    q.pop_front();
    out.push_back(B(mb, chunk));
  };
  for (int k = 0; k < warmup; ++k) forward_step(k);
  for (int k = 0; k < remaining; ++k) {
    forward_step(k + warmup);
    backward_step(k);
  }
  for (int k = remaining; k < total; ++k) backward_step(k);
  return out;
}

TEST(InterleavedOracle, EqualsMegatronLmExactlyAndRejectsWhatItRejects) {
  int compared = 0;
  for (int P = 1; P <= 12; ++P) {
    for (int M = 1; M <= 48; ++M) {
      for (int V = 1; V <= 4; ++V) {
        ScheduleParams p;
        p.stages = P;
        p.microbatches = M;
        p.chunks = V;
        if (!megatron_accepts(P, M)) {
          EXPECT_THROW(generate_schedule("interleaved-1f1b", p), UsageError)
              << "P=" << P << " M=" << M;
          continue;
        }
        const Schedule s = generate_schedule("interleaved-1f1b", p);
        for (int st = 0; st < P; ++st) {
          const auto ref = megatron_interleaved(P, st, M, V);
          ASSERT_EQ(s.actions[static_cast<size_t>(st)], ref)
              << "P=" << P << " M=" << M << " V=" << V << " stage " << st
              << "\n ours: " << testing::list_text(s.actions[static_cast<size_t>(st)], true)
              << "\n megatron: " << testing::list_text(ref, true);
        }
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 300);
}

TEST(InterleavedOracle, KnownSmallCase) {
  // P=2, M=4, V=2; stage 0 warm-up (2-0-1)*2 + 1*2 = 4 forwards.
  ScheduleParams p;
  p.stages = 2;
  p.microbatches = 4;
  p.chunks = 2;
  const Schedule s = generate_schedule("interleaved-1f1b", p);
  EXPECT_EQ(testing::list_text(s.actions[0], true),
            "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  EXPECT_EQ(testing::list_text(s.actions[1], true),
            "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
}

}  // namespace
}  // namespace ppb
