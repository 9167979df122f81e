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
//  * zb-v and dualpipe-v vs PyTorch's ScheduleZBVZeroBubble and
//    ScheduleDualPipeV (torch/distributed/pipelining/schedules.py,
//    _calculate_single_rank_operations): counters per (stage index, kind),
//    the pending-W queue, the phases' counts; compared as PyTorch's own
//    action strings through our CSV writer, and the DualPipeV order against
//    PyTorch's regression artifact (dualpipev_4rank_10mb.csv).
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/schedule_io.hpp"
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

// PyTorch's stage -> rank style "v": rank r holds stages r and 2P-1-r.
std::pair<int, int> v_stages(int ranks, int rank) { return {rank, 2 * ranks - 1 - rank}; }

// PyTorch's action string: "<stage><type><mb>".
std::string act(int stage, const char* type, int mb) {
  return std::to_string(stage) + type + std::to_string(mb);
}

// ScheduleZBVZeroBubble._calculate_single_rank_operations, its None slots dropped.
std::vector<std::string> pytorch_zbv(int ranks, int microbatches, int rank) {
  const int n_micro = std::max(2 * ranks - 1, microbatches);
  std::vector<std::string> ops;
  const auto [s0, s1] = v_stages(ranks, rank);
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  auto keep = [&](int stage, const char* type, int mb) {
    if (mb < microbatches) ops.push_back(act(stage, type, mb));
  };
  for (int k = 0; k < 2 * (ranks - rank) - 1; ++k) keep(s0, "F", f0++);
  for (int k = 0; k < rank; ++k) {
    keep(s1, "F", f1++);
    keep(s0, "F", f0++);
  }
  for (int k = 0; k < ranks - rank; ++k) {
    keep(s1, "F", f1++);
    keep(s1, "I", b1);
    keep(s1, "W", b1++);
  }
  while (f1 < f0 || f0 < n_micro) {
    if (f0 < n_micro) keep(s0, "F", f0++);
    keep(s0, "I", b0);
    keep(s0, "W", b0++);
    keep(s1, "F", f1++);
    keep(s1, "I", b1);
    keep(s1, "W", b1++);
  }
  int w0 = b0, w1 = b1;
  for (int k = 0; k < rank; ++k) {
    keep(s0, "I", b0++);
    keep(s1, "I", b1++);
  }
  for (int k = 0; k < ranks - rank; ++k) {
    keep(s0, "I", b0++);
    keep(s0, "W", w0++);
  }
  while (w1 < b1) keep(s1, "W", w1++);
  while (w0 < b0) keep(s0, "W", w0++);
  return ops;
}

// ScheduleDualPipeV._calculate_single_rank_operations.
std::vector<std::string> pytorch_dualpipev(int ranks, int microbatches, int rank) {
  std::vector<std::string> actions;
  std::map<std::pair<int, char>, int> counters;  // (stage, I/W/F) -> next mb
  std::deque<std::pair<int, int>> weight_queue;
  const auto [s0, s1] = v_stages(ranks, rank);
  auto full_backward_counts = [&](int stage) {
    ++counters[{stage, 'I'}];
    ++counters[{stage, 'W'}];
  };
  auto add = [&](int stage, char type) {
    const char key = type == 'B' ? 'I' : type;
    const int mb = counters[{stage, key}];
    actions.push_back(act(stage, std::string(1, type).c_str(), mb));
    if (type == 'B') {
      full_backward_counts(stage);
    } else {
      if (type == 'I') weight_queue.emplace_back(stage, mb);
      counters[{stage, key}] = mb + 1;
    }
  };
  auto overlap = [&](int fwd, int bwd) {
    const int fmb = counters[{fwd, 'F'}];
    const int bmb = counters[{bwd, 'I'}];
    actions.push_back("(" + act(fwd, "F", fmb) + ";" + act(bwd, "B", bmb) + ")OVERLAP_F_B");
    counters[{fwd, 'F'}] = fmb + 1;
    full_backward_counts(bwd);
  };
  auto weight = [&] {
    if (weight_queue.empty()) return;
    const auto [stage, mb] = weight_queue.front();
    weight_queue.pop_front();
    actions.push_back(act(stage, "W", mb));
    ++counters[{stage, 'W'}];
  };
  for (int k = 0; k < (ranks - rank - 1) * 2; ++k) add(s0, 'F');
  for (int k = 0; k < rank + 1; ++k) {
    add(s0, 'F');
    add(s1, 'F');
  }
  for (int k = 0; k < ranks - rank - 1; ++k) {
    add(s1, 'I');
    weight();
    add(s1, 'F');
  }
  for (int i = 0; i < microbatches - ranks * 2 + rank + 1; ++i) {
    if (i == 0 && rank == ranks - 1) {
      add(s0, 'F');
      add(s1, 'B');
    } else {
      overlap(s0, s1);
    }
    overlap(s1, s0);
  }
  for (int k = 0; k < ranks - rank - 1; ++k) {
    add(s1, 'B');
    overlap(s1, s0);
  }
  const int step6 = rank + 1;
  bool zb = false;
  for (int i = 0; i < step6; ++i) {
    if (i == step6 / 2 && rank % 2 == 1) zb = true;
    add(s1, zb ? 'I' : 'B');
    if (i == step6 / 2 && rank % 2 == 0) zb = true;
    add(s0, zb ? 'I' : 'B');
  }
  for (int k = 0; k < ranks - rank - 1; ++k) {
    weight();
    add(s0, zb ? 'I' : 'B');
  }
  for (int k = 0; k < rank + 1; ++k) weight();
  return actions;
}

// Our schedule as PyTorch's CSV cells, per rank.
std::vector<std::vector<std::string>> csv_cells(const Schedule& s) {
  std::vector<std::vector<std::string>> rows;
  const std::string csv = schedule_to_csv(s);
  size_t pos = 0;
  while (pos < csv.size()) {
    const size_t eol = csv.find('\n', pos);
    const std::string line = csv.substr(pos, eol - pos);
    pos = eol + 1;
    auto& row = rows.emplace_back();
    for (size_t at = 0; at <= line.size();) {
      const size_t comma = std::min(line.find(',', at), line.size());
      if (comma > at) row.push_back(line.substr(at, comma - at));
      at = comma + 1;
    }
  }
  return rows;
}

TEST(ZbvOracle, EqualsPyTorchScheduleZbvZeroBubbleExactly) {
  int compared = 0;
  for (int P = 1; P <= 8; ++P) {
    for (int M = 1; M <= 32; ++M) {
      ScheduleParams p;
      p.stages = P;
      p.microbatches = M;
      const Schedule s = generate_schedule("zb-v", p);
      const auto rows = csv_cells(s);
      ASSERT_EQ(rows.size(), static_cast<size_t>(P));
      for (int r = 0; r < P; ++r)
        ASSERT_EQ(rows[static_cast<size_t>(r)], pytorch_zbv(P, M, r))
            << "P=" << P << " M=" << M << " rank " << r;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 8 * 32);
}

TEST(DualPipeVOracle, EqualsPyTorchScheduleDualPipeVExactly) {
  int compared = 0;
  for (int P = 1; P <= 8; ++P) {
    for (int M = 2 * P; M <= 2 * P + 24; ++M) {
      ScheduleParams p;
      p.stages = P;
      p.microbatches = M;
      const Schedule s = generate_schedule("dualpipe-v", p);
      const auto rows = csv_cells(s);
      ASSERT_EQ(rows.size(), static_cast<size_t>(P));
      for (int r = 0; r < P; ++r) {
        ASSERT_EQ(rows[static_cast<size_t>(r)], pytorch_dualpipev(P, M, r))
            << "P=" << P << " M=" << M << " rank " << r;
      }
      ++compared;
    }
  }
  EXPECT_EQ(compared, 8 * 25);
}

TEST(DualPipeVOracle, FourRanksTenMicrobatchesIsPyTorchsRegressionArtifact) {
  // test/distributed/pipelining/artifacts/dualpipev_4rank_10mb.csv
  const std::string artifact =
      "0F0,0F1,0F2,0F3,0F4,0F5,0F6,7F0,7I0,7W0,7F1,7I1,7W1,7F2,7I2,7W2,7F3,(0F7;7B3)OVERLAP_F_B,"
      "(7F4;0B0)OVERLAP_F_B,(0F8;7B4)OVERLAP_F_B,(7F5;0B1)OVERLAP_F_B,(0F9;7B5)OVERLAP_F_B,"
      "(7F6;0B2)OVERLAP_F_B,7B6,(7F7;0B3)OVERLAP_F_B,7B7,(7F8;0B4)OVERLAP_F_B,7B8,"
      "(7F9;0B5)OVERLAP_F_B,7B9,0I6,0W6,0I7,0W7,0I8,0W8,0I9,0W9\n"
      "1F0,1F1,1F2,1F3,1F4,6F0,1F5,6F1,6I0,6W0,6F2,6I1,6W1,6F3,(1F6;6B2)OVERLAP_F_B,"
      "(6F4;1B0)OVERLAP_F_B,(1F7;6B3)OVERLAP_F_B,(6F5;1B1)OVERLAP_F_B,(1F8;6B4)OVERLAP_F_B,"
      "(6F6;1B2)OVERLAP_F_B,(1F9;6B5)OVERLAP_F_B,(6F7;1B3)OVERLAP_F_B,6B6,(6F8;1B4)OVERLAP_F_B,"
      "6B7,(6F9;1B5)OVERLAP_F_B,6B8,1B6,6I9,1I7,6W9,1I8,1W7,1I9,1W8,1W9\n"
      "2F0,2F1,2F2,5F0,2F3,5F1,2F4,5F2,5I0,5W0,5F3,(2F5;5B1)OVERLAP_F_B,(5F4;2B0)OVERLAP_F_B,"
      "(2F6;5B2)OVERLAP_F_B,(5F5;2B1)OVERLAP_F_B,(2F7;5B3)OVERLAP_F_B,(5F6;2B2)OVERLAP_F_B,"
      "(2F8;5B4)OVERLAP_F_B,(5F7;2B3)OVERLAP_F_B,(2F9;5B5)OVERLAP_F_B,(5F8;2B4)OVERLAP_F_B,5B6,"
      "(5F9;2B5)OVERLAP_F_B,5B7,2B6,5B8,2I7,5I9,2I8,2W7,2I9,5W9,2W8,2W9\n"
      "3F0,4F0,3F1,4F1,3F2,4F2,3F3,4F3,3F4,4B0,(4F4;3B0)OVERLAP_F_B,(3F5;4B1)OVERLAP_F_B,"
      "(4F5;3B1)OVERLAP_F_B,(3F6;4B2)OVERLAP_F_B,(4F6;3B2)OVERLAP_F_B,(3F7;4B3)OVERLAP_F_B,"
      "(4F7;3B3)OVERLAP_F_B,(3F8;4B4)OVERLAP_F_B,(4F8;3B4)OVERLAP_F_B,(3F9;4B5)OVERLAP_F_B,"
      "(4F9;3B5)OVERLAP_F_B,4B6,3B6,4B7,3B7,4I8,3I8,4I9,3I9,4W8,3W8,4W9,3W9\n";
  ScheduleParams p;
  p.stages = 4;
  p.microbatches = 10;
  const Schedule s = generate_schedule("dualpipe-v", p);
  EXPECT_EQ(schedule_to_csv(s), artifact);
  // And back: the artifact reads as the same schedule (placement inferred).
  const Schedule back = schedule_from_csv(artifact, "dualpipev_4rank_10mb.csv");
  EXPECT_EQ(back.actions, s.actions);
  EXPECT_EQ(back.placement, s.placement);
  EXPECT_EQ(back.chunks, 2);
}

}  // namespace
}  // namespace ppb
