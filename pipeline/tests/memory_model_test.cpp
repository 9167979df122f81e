// The memory model (memory_model.hpp) on synthetic schedules with exact
// answers: the state per optimizer and precision, the in-flight peaks of
// the standard schedules, PipeDream's stash, the communication buffers of
// the message plan, and the one rule the simulator and the partitions share.
#include "ppb/pipeline/memory_model.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/pipeline/partition.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/simulator.hpp"

namespace ppb {
namespace {

StageCosts sized_costs(int stages, int chunks, int64_t act, int64_t params, int64_t send) {
  StageCosts c = uniform_costs(stages, chunks, 1, 1, 1, 0);
  for (ChunkCost& cc : c.chunks) {
    cc.activation_bytes = act;
    cc.param_bytes = params;
    cc.send_bytes = send;
  }
  c.has_bytes = true;
  return c;
}

Schedule make(const std::string& name, int p, int m, int v = 1, int n = 0, int batches = 1) {
  ScheduleParams sp;
  sp.stages = p;
  sp.microbatches = m;
  sp.chunks = v;
  sp.inflight = n;
  sp.batches = batches;
  return generate_schedule(name, sp);
}

TEST(MemoryModel, ParameterStatePerOptimizerAndPrecision) {
  MemoryModelOptions o;
  ParameterState s = parameter_state(400, o);
  EXPECT_EQ(s.parameters, 400);
  EXPECT_EQ(s.gradients, 400);
  EXPECT_EQ(s.optimizer_state, 0);
  o.optimizer = OptimizerKind::kAdam;
  s = parameter_state(400, o);  // 100 fp32 parameters: two fp32 moments
  EXPECT_EQ(s.optimizer_state, 800);
  EXPECT_EQ(s.total(), 1600);
  o.element_bytes = 2;  // 200 bf16 parameters: fp32 gradients, master and moments
  s = parameter_state(400, o);
  EXPECT_EQ(s.parameters, 400);
  EXPECT_EQ(s.gradients, 800);
  EXPECT_EQ(s.optimizer_state, 800 + 1600);
  EXPECT_STREQ(optimizer_name(parse_optimizer("adam", "--optimizer")), "adam");
  EXPECT_THROW(parse_optimizer("lamb", "--optimizer"), UsageError);
}

// 1F1B keeps min(P - s, M) micro-batches on stage s, GPipe M, sync-1F1B 1.
TEST(MemoryModel, InFlightPeaksOfTheStandardSchedules) {
  const int P = 4, M = 8;
  const int64_t act = 1000;
  for (const auto& [name, want] : std::vector<std::pair<std::string, std::vector<int>>>{
           {"1f1b", {4, 3, 2, 1}}, {"gpipe", {8, 8, 8, 8}}, {"sync-1f1b", {1, 1, 1, 1}}}) {
    const std::vector<PredictedMemory> m =
        predict_memory(make(name, P, M), sized_costs(P, 1, act, 0, 0));
    for (int s = 0; s < P; ++s) {
      EXPECT_EQ(m[static_cast<size_t>(s)].peak_inflight, want[static_cast<size_t>(s)])
          << name << " stage " << s;
      EXPECT_EQ(m[static_cast<size_t>(s)].activations, want[static_cast<size_t>(s)] * act)
          << name << " stage " << s;
    }
  }
  // async-1f1b with N = 2: stage 0 holds 2.
  EXPECT_EQ(
      predict_memory(make("async-1f1b", P, M, 1, 2), sized_costs(P, 1, act, 0, 0))[0].activations,
      2 * act);
}

// A backend's resident memory (the cuda backend's cuBLAS workspace) adds to
// every stage's bound and expected peak, and to nothing else.
TEST(MemoryModel, ResidentBytesAddToEveryStagesPeak) {
  EXPECT_EQ(backend_resident_bytes("cuda"), int64_t{32} << 20);
  EXPECT_EQ(backend_resident_bytes("cpu"), 0);
  EXPECT_EQ(backend_resident_bytes("timed"), 0);
  const Schedule s = make("1f1b", 4, 8);
  const StageCosts c = sized_costs(4, 1, 1000, 300, 50);
  MemoryModelOptions with;
  with.resident_bytes = 12345;
  const std::vector<PredictedMemory> base = predict_memory(s, c, {});
  const std::vector<PredictedMemory> more = predict_memory(s, c, with);
  for (size_t i = 0; i < base.size(); ++i) {
    EXPECT_EQ(more[i].resident, 12345);
    EXPECT_EQ(more[i].peak_bytes - base[i].peak_bytes, 12345) << "stage " << i;
    EXPECT_EQ(more[i].expected_peak_bytes - base[i].expected_peak_bytes, 12345) << "stage " << i;
    EXPECT_EQ(more[i].activations, base[i].activations);
    EXPECT_EQ(more[i].state.total(), base[i].state.total());
  }
}

// Activations stay until the W of a split backward: a hand-built list.
TEST(MemoryModel, ActivationsStayUntilTheWeightGradient) {
  Schedule s;
  s.stages = 1;
  s.microbatches = 3;
  s.chunks = 2;
  s.actions = {{F(0, 0), F(1, 0), F(0, 1), I(0, 1), B(0, 0), W(0, 1), F(2, 0), B(1, 0), B(2, 0)}};
  const ListPeaks p = list_peaks(s, 0, {10, 100});
  EXPECT_EQ(p.activations, 120);  // after F(0, c1): 10 + 10 + 100
  EXPECT_EQ(p.peak_inflight, 3);
  EXPECT_EQ(p.weight_stash, 0);
}

// A split backward: I peaks while it keeps output gradients and frees
// activations, then the pair keeps what W reads until W. zb-h1's last stage
// of 2 runs F0 I0 F1 I1 W0 F2 I2 W1 W2: with 100 held from F, 130 at I's
// peak and 60 after it, the peak is I1's (60 + 130), not 2 x 100.
TEST(MemoryModel, ASplitBackwardPeaksDuringIAndKeepsWhatWReads) {
  const Schedule s = make("zb-h1", 2, 3);
  ActivationProfile p;
  p.held = 100;
  p.input_peak = 130;
  p.after_input = 60;
  EXPECT_EQ(list_peaks(s, 1, {p}).activations, 190);
  EXPECT_EQ(list_peaks(s, 1, {100}).activations, 200);  // a flat profile
  p.after_input = 100;
  EXPECT_EQ(list_peaks(s, 1, {p}).activations, 230);  // I1 on top of an unchanged I0
}

// The chunk's profile from its units (model.hpp's table), in I's order,
// last unit first: attn_out keeps its output gradient, then attention
// frees its activations; in the other order the gradients pile up.
TEST(MemoryModel, ChunkProfilesFollowTheUnitsInBackwardOrder) {
  const ModelSpec spec = parse_model_spec("gpt:layers=1,hidden=64,heads=2,seq=16,vocab=100,mbs=2");
  const std::vector<Unit> units = expand_units(spec);
  ASSERT_EQ(units[3].kind, UnitKind::kAttention);
  ASSERT_EQ(units[4].kind, UnitKind::kAttnOut);
  ASSERT_EQ(units[5].kind, UnitKind::kLayerNorm2);
  const int64_t th = spec.tokens() * spec.hidden * spec.bytes_per_element;
  EXPECT_EQ(units[3].split_kept_bytes, 0);
  EXPECT_EQ(units[4].split_kept_bytes, units[4].activation_bytes + th);
  EXPECT_EQ(units[6].split_kept_bytes, units[6].activation_bytes);  // fc1_gelu: in place
  const std::vector<UnitTime> times = unit_times(units, device_preset("cpu", 4));
  const auto n = static_cast<int>(units.size());
  const StageCosts a = model_costs(units, times, {{0, 3}, {3, 5}, {5, n}}, 3, 1, {});
  const ChunkCost& attn = a.chunks[1];  // attention, attn_out
  EXPECT_EQ(attn.activation_bytes, units[3].activation_bytes + units[4].activation_bytes);
  EXPECT_EQ(attn.peak_during_input(), attn.activation_bytes + th);
  EXPECT_EQ(attn.kept_after_input(), units[4].activation_bytes + th);
  const StageCosts b = model_costs(units, times, {{0, 4}, {4, 6}, {6, n}}, 3, 1, {});
  const ChunkCost& out_ln = b.chunks[1];  // attn_out, ln2: two gradients kept
  EXPECT_EQ(out_ln.peak_during_input(), out_ln.activation_bytes + 2 * th);
  EXPECT_EQ(out_ln.kept_after_input(), out_ln.activation_bytes + 2 * th);
}

// PipeDream (one optimizer step per backward): on stage 0 the P warm-up
// forwards use version 0, and before the last of their backwards P - 1
// older versions are in use: P - 1 stashed copies.
TEST(MemoryModel, PipedreamStashesOlderVersions) {
  for (int P : {2, 4, 8}) {
    const Schedule s = make("pipedream", P, P, 1, 0, 2);
    const int64_t params = 1 << 20;
    const std::vector<PredictedMemory> m = predict_memory(s, sized_costs(P, 1, 0, params, 0));
    EXPECT_EQ(m[0].weight_stash, (P - 1) * params) << "P=" << P;
    // The last stage runs F and B back to back: never an older version in use.
    EXPECT_EQ(m[static_cast<size_t>(P - 1)].weight_stash, 0) << "P=" << P;
  }
  // Without stashing in the registry entry nothing is stashed.
  EXPECT_EQ(predict_memory(make("1f1b", 4, 8), sized_costs(4, 1, 0, 1 << 20, 0))[0].weight_stash,
            0);
}

// Communication buffers: per link into or out of the stage
// min(messages, window + queue depth) of its largest message.
TEST(MemoryModel, CommunicationBuffersFollowTheMessagePlan) {
  const int64_t send = 4096, params = 1000, act = 100;
  const std::vector<PredictedMemory> m =
      predict_memory(make("1f1b", 2, 8), sized_costs(2, 1, act, params, send));
  // P = 2: one link each way, 8 messages each, 4 + 2 buffers each.
  EXPECT_EQ(m[0].comm_buffers, 12 * send);
  EXPECT_EQ(m[1].comm_buffers, 12 * send);
  EXPECT_EQ(m[0].peak_bytes, 2 * params + 2 * act + 12 * send);
  EXPECT_EQ(m[1].peak_bytes, 2 * params + 1 * act + 12 * send);
  EXPECT_EQ(worst_stage(m), 0);
  // M = 2: fewer messages than the window.
  const std::vector<PredictedMemory> small =
      predict_memory(make("1f1b", 2, 2), sized_costs(2, 1, act, params, send));
  EXPECT_EQ(small[0].comm_buffers, 4 * send);
  // A narrower window, and the data-parallel all-reduce's buffer.
  MemoryModelOptions o;
  o.recv_window = 1;
  o.data_parallel = 4;
  o.allreduce_buffer_bytes = 7;
  EXPECT_EQ(
      predict_memory(make("1f1b", 2, 8), sized_costs(2, 1, act, params, send), o)[0].comm_buffers,
      6 * send + 7);
  // The end stages of a longer pipeline have one neighbour, the middle two.
  const std::vector<PredictedMemory> four =
      predict_memory(make("1f1b", 4, 8), sized_costs(4, 1, act, params, send));
  EXPECT_EQ(four[0].comm_buffers, 12 * send);
  EXPECT_EQ(four[1].comm_buffers, 24 * send);
}

// The pool as a run holds it, replayed by hand for 1f1b on 2 stages (window
// 4, two actions on the stream). Stage 0 runs F0 F1 B0 F2 B1 F3 B2 ...: with
// F(k+1) and B(k) queued it holds their output and input, F(k)'s pending
// send and the 4 gradients posted ahead: 7. Stage 1 (F0 B0 F1 B1 ...): F's
// input, B's output, the previous B's pending send and 4 posted: 7. With
// M = 4 fewer messages are left to post: 6 and 5.
TEST(MemoryModel, ExpectedCommunicationBuffersReplayTheExecutor) {
  const int64_t send = 4096, params = 1000, act = 100;
  const std::vector<PredictedMemory> m =
      predict_memory(make("1f1b", 2, 8), sized_costs(2, 1, act, params, send));
  EXPECT_EQ(m[0].expected_comm_buffers, 7 * send);
  EXPECT_EQ(m[1].expected_comm_buffers, 7 * send);
  EXPECT_EQ(m[0].expected_peak_bytes, 2 * params + 2 * act + 7 * send);
  const std::vector<PredictedMemory> four =
      predict_memory(make("1f1b", 2, 4), sized_costs(2, 1, act, params, send));
  EXPECT_EQ(four[0].expected_comm_buffers, 6 * send);
  EXPECT_EQ(four[1].expected_comm_buffers, 5 * send);
  // One action on the stream: one input or output fewer at each moment.
  MemoryModelOptions o;
  o.queue_depth = 1;
  const std::vector<PredictedMemory> one =
      predict_memory(make("1f1b", 2, 8), sized_costs(2, 1, act, params, send), o);
  EXPECT_EQ(one[0].expected_comm_buffers, 6 * send);
  // Never above the bound, on every schedule.
  for (const ScheduleInfo& info : schedule_list()) {
    SCOPED_TRACE(info.name);
    const int v = info.fixed_chunks > 0 ? info.fixed_chunks : (info.uses_chunks ? 2 : 1);
    const std::vector<PredictedMemory> all = predict_memory(
        make(info.name, 4, 8, v, 0, info.no_flush ? 2 : 1), sized_costs(4, v, act, params, send));
    for (const PredictedMemory& st : all) {
      EXPECT_GT(st.expected_comm_buffers, 0);
      EXPECT_LE(st.expected_comm_buffers, st.comm_buffers);
      EXPECT_LE(st.expected_peak_bytes, st.peak_bytes);
    }
  }
}

// Workspace on top of the activations: F0 F1 B0 B1 with 100 bytes held per
// micro-batch, 30 of workspace in F and 50 in B peaks in B0 (200 + 50).
TEST(MemoryModel, TheRunningActionsWorkspaceAddsToTheActivations) {
  Schedule s;
  s.stages = 1;
  s.microbatches = 2;
  s.actions = {{F(0, 0), F(1, 0), B(0, 0), B(1, 0)}};
  ActivationProfile p(100);
  p.forward_workspace = 30;
  p.backward_workspace = 50;
  const ListPeaks peaks = list_peaks(s, 0, {p});
  EXPECT_EQ(peaks.activations, 200);
  EXPECT_EQ(peaks.workspace, 50);
  EXPECT_EQ(peaks.with_workspace, 250);
  p.forward_workspace = 70;  // now F1's: 200 + 70
  EXPECT_EQ(list_peaks(s, 0, {p}).with_workspace, 270);
}

// A chunk's workspace from its units, walked as the cpu backend runs them:
// for [attention, attn_out], F writes attention's output straight into
// attn_out's kept input (no workspace), while B and I hold the gradient
// between them (its main part, T h e: the residual's gradient travels by
// pointer), attention's backward also its s x s scratch.
TEST(MemoryModel, ChunkWorkspaceWalksTheUnitsAsTheBackendRunsThem) {
  const ModelSpec spec = parse_model_spec("gpt:layers=1,hidden=64,heads=2,seq=16,vocab=100,mbs=2");
  const std::vector<Unit> units = expand_units(spec);
  const int64_t th = spec.tokens() * spec.hidden * spec.bytes_per_element;
  const int64_t scores = int64_t{4} * spec.seq * spec.seq;
  ASSERT_EQ(units[3].boundary_bytes, 2 * th);
  EXPECT_EQ(units[3].backward_scratch_bytes, scores);
  EXPECT_EQ(units[0].forward_scratch_bytes, 4 * spec.tokens());
  const std::vector<UnitTime> times = unit_times(units, device_preset("cpu", 4));
  const auto n = static_cast<int>(units.size());
  const StageCosts a = model_costs(units, times, {{0, 3}, {3, 5}, {5, n}}, 3, 1, {});
  const ChunkCost& attn = a.chunks[1];
  EXPECT_EQ(attn.forward_workspace_bytes, 0);
  EXPECT_EQ(attn.backward_workspace_bytes, th + scores);
  // I: attention's scratch while attn_out's output gradient is kept, on top
  // of I's activation peak.
  EXPECT_EQ(attn.input_workspace_bytes, th + scores);
  // [ln1 .. ln2]: attn_out's output gradient is the residual's gradient, held
  // from attn_out down to ln1. At attention: qkv's gradient (3 T h e), its
  // own (T h e), the residual's (T h e) and its scratch.
  ASSERT_EQ(units[5].kind, UnitKind::kLayerNorm2);
  EXPECT_EQ(units[1].residual_bytes, th);
  EXPECT_EQ(units[4].residual_bytes, 0);
  const StageCosts l = model_costs(units, times, {{0, 1}, {1, 6}, {6, n}}, 3, 1, {});
  EXPECT_EQ(l.chunks[1].backward_workspace_bytes, 5 * th + scores);
  // A chunk of one unit has no boundary inside it: only scratch.
  const StageCosts b = model_costs(units, times, {{0, 1}, {1, n - 1}, {n - 1, n}}, 3, 1, {});
  EXPECT_EQ(b.chunks[0].forward_workspace_bytes, 4 * spec.tokens());
  EXPECT_EQ(b.chunks[0].backward_workspace_bytes, 0);
  EXPECT_EQ(b.chunks[2].forward_workspace_bytes, 8 * spec.tokens());
  EXPECT_EQ(b.chunks[2].backward_workspace_bytes, 8 * spec.tokens());
  // [final_norm, head]: the head's input is already in its kept activations
  // when it runs (final_norm wrote it there), so F holds only its scratch.
  const StageCosts d = model_costs(units, times, {{0, n - 2}, {n - 2, n}}, 2, 1, {});
  EXPECT_EQ(d.chunks[1].forward_workspace_bytes, 8 * spec.tokens());
}

// The cuda backend's kernels hold other scratch (model.hpp's second table):
// every head's dS at once, LayerNorm statistics in the backward passes, the
// column reductions' partials (one fp32 per column and tile of
// kCudaColumnRows rows) and the embedding's token rows in W; the chunk walk
// is the same.
TEST(MemoryModel, CudaKernelsHoldTheirOwnScratch) {
  EXPECT_EQ(kernels_for("cuda", "cpu"), Kernels::kCuda);
  EXPECT_EQ(kernels_for("timed", "h100"), Kernels::kCuda);
  EXPECT_EQ(kernels_for("timed", "cpu"), Kernels::kCpu);
  EXPECT_EQ(kernels_for("cpu", "h100"), Kernels::kCpu);
  EXPECT_EQ(kernels_for("", "a100"), Kernels::kCuda);
  ModelSpec spec = parse_model_spec("gpt:layers=1,hidden=64,heads=2,seq=16,vocab=100,mbs=2");
  spec.bytes_per_element = 2;
  const std::vector<Unit> units = expand_units(spec, Kernels::kCuda);
  const int64_t t = spec.tokens();
  ASSERT_EQ(units[1].kind, UnitKind::kLayerNorm1);
  ASSERT_EQ(units[3].kind, UnitKind::kAttention);
  ASSERT_LE(t, kCudaColumnRows);                    // one tile of rows
  EXPECT_EQ(units[0].forward_scratch_bytes, 0);     // token ids live in its activations
  EXPECT_EQ(units[0].weight_scratch_bytes, 8 * t);  // the rows of each token, in order
  EXPECT_EQ(units[1].forward_scratch_bytes, 0);     // one pass, statistics in registers
  EXPECT_EQ(units[1].backward_scratch_bytes, 8 * t);
  EXPECT_EQ(units[1].weight_scratch_bytes,
            8 * t + int64_t{4} * 2 * 64);                // + gamma's, beta's partials
  EXPECT_EQ(units[2].weight_scratch_bytes, 4 * 3 * 64);  // qkv's bias: 3h
  EXPECT_EQ(units[4].weight_scratch_bytes, 4 * 64);      // attn_out's bias: h
  ASSERT_EQ(units[7].kind, UnitKind::kFc2);
  EXPECT_EQ(units[7].weight_scratch_bytes, 4 * 64);
  EXPECT_EQ(units[3].backward_scratch_bytes, int64_t{2} * 16 * 16 * 2);  // a s s e
  EXPECT_EQ(units.back().forward_scratch_bytes, 12 * t);
  EXPECT_EQ(units.back().backward_scratch_bytes, 4 * t);
  const std::vector<UnitTime> times = unit_times(units, device_preset("h100", 2));
  const auto n = static_cast<int>(units.size());
  const StageCosts c = model_costs(units, times, {{0, 1}, {1, 2}, {2, n}}, 3, 1, {});
  const ChunkCost& ln = c.chunks[1];  // ln1 alone: no boundary inside
  EXPECT_EQ(ln.forward_workspace_bytes, 0);
  EXPECT_EQ(ln.backward_workspace_bytes,
            8 * t + int64_t{4} * 2 * 64);  // B: I's statistics, then W's
  EXPECT_EQ(ln.weight_workspace_bytes, 8 * t + int64_t{4} * 2 * 64);
  EXPECT_EQ(c.chunks[0].weight_workspace_bytes, 8 * t);  // the embedding alone
  // 130 rows: two tiles, the second of 2 rows.
  ModelSpec odd = spec;
  odd.seq = 65;
  const std::vector<Unit> odd_units = expand_units(odd, Kernels::kCuda);
  ASSERT_EQ(odd.tokens(), 130);
  ASSERT_EQ(odd_units[6].kind, UnitKind::kFc1Gelu);
  EXPECT_EQ(odd_units[6].weight_scratch_bytes, 4 * 2 * 4 * 64);  // 2 tiles of f = 4h
  // The cpu kernels' W holds nothing.
  const std::vector<Unit> cpu = expand_units(spec);
  EXPECT_EQ(
      model_costs(cpu, times, {{0, 1}, {1, 2}, {2, n}}, 3, 1, {}).chunks[1].weight_workspace_bytes,
      0);
  // A W that holds workspace adds it on top of what the stage holds.
  Schedule s;
  s.stages = 1;
  s.microbatches = 1;
  s.actions = {{F(0, 0), I(0, 0), W(0, 0)}};
  ActivationProfile p(100);
  p.after_input = 60;
  p.weight_workspace = 70;
  EXPECT_EQ(list_peaks(s, 0, {p}).with_workspace, 130);  // W: 60 + 70 > F's 100
}

// The simulator's activation peaks are the memory model's, on every schedule.
TEST(MemoryModel, TheSimulatorReportsTheModelsActivationPeaks) {
  for (const ScheduleInfo& info : schedule_list()) {
    const int P = 4;
    const int V = info.fixed_chunks > 0 ? info.fixed_chunks : (info.uses_chunks ? 2 : 1);
    const Schedule s = make(info.name, P, 2 * P, V, 0, info.no_flush ? 2 : 1);
    StageCosts c = sized_costs(P, V, 0, 0, 0);
    for (size_t v = 0; v < c.chunks.size(); ++v)
      c.chunks[v].activation_bytes = 1000 * static_cast<int64_t>(v + 1);
    const SimResult r = simulate(s, c);
    const std::vector<PredictedMemory> m = predict_memory(s, c);
    for (int st = 0; st < P; ++st) {
      EXPECT_EQ(r.stages[static_cast<size_t>(st)].peak_activation_bytes,
                m[static_cast<size_t>(st)].activations)
          << info.name << " stage " << st;
      EXPECT_EQ(r.stages[static_cast<size_t>(st)].peak_inflight,
                m[static_cast<size_t>(st)].peak_inflight)
          << info.name << " stage " << st;
    }
  }
}

// The partitions' memory cap counts the same state: Adam makes a part
// heavier by 8 bytes per fp32 parameter.
TEST(MemoryModel, PartitionCapCountsTheOptimizerState) {
  const std::vector<Unit> units = expand_units(parse_model_spec("gpt-tiny"));
  const UnitRange r{0, 5};
  int64_t params = 0, acts = 0;
  for (int i = r.begin; i < r.end; ++i) {
    params += units[static_cast<size_t>(i)].param_bytes;
    acts += units[static_cast<size_t>(i)].activation_bytes;
  }
  EXPECT_EQ(part_memory_bytes(units, r, 3), 2 * params + 3 * acts);
  MemoryModelOptions adam;
  adam.optimizer = OptimizerKind::kAdam;
  EXPECT_EQ(part_memory_bytes(units, r, 3, adam), 4 * params + 3 * acts);
}

TEST(MemoryModel, RefusesCostsOfAnotherShape) {
  EXPECT_THROW(predict_memory(make("1f1b", 4, 8), sized_costs(2, 1, 1, 1, 1)), UsageError);
}

}  // namespace
}  // namespace ppb
