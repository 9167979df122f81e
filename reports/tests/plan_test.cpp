// The planner (plan.hpp): cluster descriptions and their errors, the ranking
// against the simulator and the memory model re-run by hand on the winner's
// configuration, the ring all-reduce, pruning that never changes the winner,
// and the advice when nothing fits.
#include "ppb/reports/plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ppb/pipeline/memory_model.hpp"
#include "ppb/pipeline/partition.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/simulator.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/reports/load.hpp"

namespace ppb::reports {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PlanCluster, FileFieldsAndFlagsAreNamed) {
  auto parse = [](const std::string& text) {
    return [text] { (void)parse_cluster(text, "c.json"); };
  };
  const std::string head = R"({"schema": "pipebench.cluster/1", )";
  EXPECT_NE(error_of(parse(head + R"("gpus": 0})")).find("c.json: field 'gpus'"),
            std::string::npos);
  EXPECT_NE(error_of(parse(head + R"("gpus": 8, "intra_node": {"bandwidth": -1}})"))
                .find("field 'intra_node.bandwidth': expected a number in [1e3, 1e16] (bytes/s)"),
            std::string::npos);
  EXPECT_NE(error_of(parse(head + R"("gpus": 8, "gpu_mem": 1})")).find("gpu_mem"),
            std::string::npos);
  EXPECT_NE(error_of(parse(R"({"schema": "x", "gpus": 8})")).find("field 'schema'"),
            std::string::npos);
  EXPECT_NE(error_of(parse("{")).find("c.json: not valid JSON"), std::string::npos);

  // The flags' limits hold for the file: finite but absurd figures are
  // refused where they are read.
  EXPECT_NE(error_of(parse(head + R"("gpus": 1e9})"))
                .find("field 'gpus': expected an integer in [1, 16777216]"),
            std::string::npos);
  EXPECT_NE(error_of(parse(head + R"("gpus": 8, "gpus_per_node": 16777217})"))
                .find("field 'gpus_per_node'"),
            std::string::npos);
  EXPECT_NE(error_of(parse(head + R"("gpus": 8, "inter_node": {"latency": 1e308}})"))
                .find("field 'inter_node.latency': expected a number in [0, 1] (seconds)"),
            std::string::npos);
  EXPECT_NE(error_of(parse(head + R"("gpus": 8, "peak_flops": 1e19})"))
                .find("field 'peak_flops': expected a number in [1e6, 1e18] (FLOP/s)"),
            std::string::npos);
  EXPECT_NE(error_of(parse(head + R"("gpus": 8, "gpu_memory_bytes": 1125899906842625})"))
                .find("field 'gpu_memory_bytes': expected an integer in [2^20, 2^50]"),
            std::string::npos);
  // What the file says wrong is the file's field, not a flag's (a flag
  // that replaces the field is named instead: cmd_plan sets *_named).
  const auto resolve = [](const std::string& text) {
    return [text] { (void)resolve_cluster(parse_cluster(text, "c.json"), 2); };
  };
  EXPECT_EQ(error_of(resolve(head + R"("gpus": 64, "device": "tpu"})")),
            "c.json: field 'device': unknown device 'tpu' (devices: cpu, a100, h100, h200)");
  EXPECT_EQ(error_of(resolve(head + R"("gpus": 64, "gpus_per_node": 7, "device": "h100"})")),
            "c.json: field 'gpus_per_node': 64 GPUs are not whole nodes of 7");

  ClusterInput in;
  in.gpus = 10;
  in.gpus_per_node = 4;
  in.device = "h100";
  EXPECT_NE(error_of([&] { (void)resolve_cluster(in, 2); }).find("--gpus-per-node"),
            std::string::npos);
  in.gpus_per_node = 0;
  in.device = "";
  EXPECT_NE(error_of([&] { (void)resolve_cluster(in, 2); }).find("--device"), std::string::npos);
  in.device = "tpu";
  EXPECT_NE(error_of([&] { (void)resolve_cluster(in, 2); }).find("--device"), std::string::npos);
}

TEST(PlanCluster, PresetFillsWhatTheDescriptionLeavesOut) {
  const ClusterInput in = parse_cluster(
      R"({"schema": "pipebench.cluster/1", "gpus": 16, "gpus_per_node": 8, "device": "h100",
          "inter_node": {"bandwidth": 2.5e10}})",
      "c.json");
  const ClusterSpec c = resolve_cluster(in, 2);
  EXPECT_EQ(c.gpus, 16);
  EXPECT_EQ(c.gpus_per_node, 8);
  EXPECT_EQ(c.gpu_memory_bytes, device_preset("h100", 2).memory_bytes);
  EXPECT_DOUBLE_EQ(c.intra_node.bandwidth, device_preset("h100", 2).link_bandwidth);
  EXPECT_DOUBLE_EQ(c.inter_node.bandwidth, 2.5e10);
  EXPECT_DOUBLE_EQ(c.inter_node.latency, 5e-6);
}

PlanOptions small_plan() {
  ClusterInput in;
  in.gpus = 4;
  in.gpus_per_node = 2;
  in.device = "cpu";
  in.gpu_memory_bytes = int64_t{1} << 30;
  PlanOptions o;
  o.model = parse_model_spec("gpt-tiny");
  o.cluster = resolve_cluster(in, o.model.bytes_per_element);
  o.global_batch = 16;
  o.micro_batch_sizes = {1, 2};
  o.memory.optimizer = OptimizerKind::kAdam;
  o.top = 5;
  return o;
}

// The model, its memory model and the preset device at `bytes` per element.
void set_storage(PlanOptions& o, int bytes) {
  o.model.bytes_per_element = bytes;
  o.memory.element_bytes = bytes;
  o.cluster.device = device_preset(o.cluster.device.name, bytes);
}

// `gpus` H200s (their preset's memory and links) for `model`.
PlanOptions h200_plan(int gpus, const char* model) {
  ClusterInput in;
  in.gpus = gpus;
  in.device = "h200";
  PlanOptions o;
  o.model = parse_model_spec(model);
  o.cluster = resolve_cluster(in, o.model.bytes_per_element);
  return o;
}

// A candidate of small_plan()'s cluster as the planner priced and cut it:
// the model at its micro-batch size, the device's unit times, and the
// partition options of its pipeline (4 GPUs, 2 per node: a pipeline of
// more than one stage spans nodes).
struct PricedCandidate {
  std::vector<Unit> units;
  std::vector<UnitTime> times;
  PartitionOptions popts;
};
PricedCandidate priced(const PlanOptions& o, const Candidate& c) {
  ModelSpec spec = o.model;
  spec.micro_batch_size = c.micro_batch_size;
  PricedCandidate p;
  p.units = expand_units(spec);
  p.times = unit_times(p.units, o.cluster.device);
  p.popts.link = c.stages > 1 ? o.cluster.inter_node : o.cluster.intra_node;
  p.popts.memory = o.memory;
  return p;
}

// The winner's figures are the simulator's and the memory model's on its
// configuration, with a ring all-reduce of the largest stage's gradients.
TEST(Plan, RanksBySimulatedSamplesPerSecond) {
  const PlanOptions o = small_plan();
  const Plan plan = make_plan(o);
  ASSERT_FALSE(plan.ranked.empty());
  EXPECT_EQ(plan.capacity_bytes, static_cast<int64_t>(0.85 * (1 << 30)));
  for (size_t i = 1; i < plan.ranked.size(); ++i)
    EXPECT_GE(plan.ranked[i - 1].samples_per_second, plan.ranked[i].samples_per_second);
  for (const Candidate& c : plan.ranked) {
    EXPECT_TRUE(c.fits);
    EXPECT_EQ(c.stages * c.data_parallel, 4);
    EXPECT_EQ(int64_t{c.data_parallel} * c.micro_batch_size * c.microbatches, 16);
    EXPECT_LE(*std::max_element(c.peak_memory_bytes.begin(), c.peak_memory_bytes.end()),
              plan.capacity_bytes);
  }
  const Candidate& w = plan.ranked.front();
  EXPECT_EQ(w.why.rfind("fastest", 0), 0u) << w.why;

  const PricedCandidate pw = priced(o, w);
  const StageCosts costs =
      model_costs(pw.units, pw.times,
                  make_partition(w.partition, pw.units, pw.times, w.stages * w.chunks, pw.popts),
                  w.stages, w.chunks, pw.popts.link);
  ScheduleParams p = schedule_params(w);
  if (schedule_info(w.schedule).uses_times) set_pass_times(costs, p);
  const Schedule s = generate_schedule(w.schedule, p);
  const SimResult r = simulate(s, costs);
  EXPECT_DOUBLE_EQ(w.step_seconds, r.step_time);
  EXPECT_DOUBLE_EQ(w.bubble_ratio, r.bubble_ratio);
  MemoryModelOptions mo = o.memory;
  mo.data_parallel = w.data_parallel;
  const std::vector<PredictedMemory> mem = predict_memory(s, costs, mo);
  int64_t grads = 0;
  for (size_t st = 0; st < mem.size(); ++st) {
    EXPECT_EQ(w.peak_memory_bytes[st], mem[st].peak_bytes);
    grads = std::max(grads, mem[st].state.gradients);
  }
  const int d = w.data_parallel;
  const LinkModel ring = d <= 2 ? o.cluster.intra_node : o.cluster.inter_node;
  const double allreduce = d == 1
                               ? 0.0
                               : 2.0 * (d - 1) / d * static_cast<double>(grads) / ring.bandwidth +
                                     2.0 * (d - 1) * ring.latency;
  EXPECT_NEAR(w.allreduce_seconds, allreduce, 1e-12 + 1e-9 * allreduce);
  EXPECT_DOUBLE_EQ(w.samples_per_second, 16.0 / (r.step_time + w.allreduce_seconds));
}

// One GPU, one stage: the peak the memory model gives the single-stage
// candidate `w` when its units keep `attention`'s bytes.
int64_t single_stage_peak(const PlanOptions& o, const Candidate& w, Attention attention) {
  ModelSpec spec = o.model;
  spec.micro_batch_size = w.micro_batch_size;
  const std::vector<Unit> units = expand_units(spec, Kernels::kCuda, attention);
  const std::vector<UnitTime> times = unit_times(units, o.cluster.device);
  PartitionOptions popts;
  popts.link = o.cluster.intra_node;
  popts.memory = o.memory;
  const StageCosts costs = model_costs(
      units, times, make_partition(w.partition, units, times, 1, popts), 1, 1, popts.link);
  const Schedule s = generate_schedule(w.schedule, schedule_params(w));
  return predict_memory(s, costs, o.memory).front().peak_bytes;
}

// A plan prices the attention a run would pick on the cluster's device
// (`run --attention auto`): fused for bf16 on a GPU, whose attention keeps
// the softmax statistics, not the probabilities; naive, with the run's
// reason, for fp32 or on CPUs; --attention fused where it cannot run is a
// usage error naming the obstacle.
TEST(Plan, PricesTheAttentionARunWouldPick) {
  PlanOptions o = h200_plan(1, "gpt-tiny");
  set_storage(o, 2);
  o.memory.optimizer = OptimizerKind::kSgd;
  o.global_batch = 8;
  o.micro_batch_sizes = {2};
  o.schedules = {"1f1b"};
  const Plan fused = make_plan(o);
  EXPECT_EQ(fused.attention.attention, Attention::kFused);
  EXPECT_EQ(fused.attention.reason, "");
  o.attention = AttentionRequest::kNaive;
  const Plan naive = make_plan(o);
  EXPECT_EQ(naive.attention.attention, Attention::kNaive);
  EXPECT_EQ(naive.attention.reason, "--attention naive");
  ASSERT_FALSE(fused.ranked.empty());
  ASSERT_FALSE(naive.ranked.empty());
  const Candidate& f = fused.ranked.front();
  const Candidate& n = naive.ranked.front();
  EXPECT_EQ(f.peak_memory_bytes.front(), single_stage_peak(o, f, Attention::kFused));
  EXPECT_EQ(n.peak_memory_bytes.front(), single_stage_peak(o, n, Attention::kNaive));
  EXPECT_LT(f.peak_memory_bytes.front(), n.peak_memory_bytes.front());

  // fp32 on a GPU: the flash kernels, with the same saving.
  o.attention = AttentionRequest::kAuto;
  set_storage(o, 4);
  const Plan fp32 = make_plan(o);
  EXPECT_EQ(fp32.attention.attention, Attention::kFused);
  EXPECT_EQ(fp32.attention.reason, "");
  o.attention = AttentionRequest::kNaive;
  const Plan fp32_naive = make_plan(o);
  ASSERT_FALSE(fp32.ranked.empty());
  ASSERT_FALSE(fp32_naive.ranked.empty());
  EXPECT_LT(fp32.ranked.front().peak_memory_bytes.front(),
            fp32_naive.ranked.front().peak_memory_bytes.front());
  // A head dimension no fused kernel takes: naive, and fused refused.
  o.attention = AttentionRequest::kAuto;
  o.model = parse_model_spec("gpt:layers=2,hidden=512,heads=2,seq=64,vocab=512,mbs=2");
  o.model.bytes_per_element = 4;
  EXPECT_EQ(make_plan(o).attention.reason,
            "head dimension 256: the fp32 flash attention takes at most 128");
  o.attention = AttentionRequest::kFused;
  EXPECT_EQ(error_of([&] { (void)make_plan(o); }),
            "--attention fused: head dimension 256: the fp32 flash attention takes at most 128");

  PlanOptions cpu = small_plan();
  set_storage(cpu, 2);
  EXPECT_EQ(make_plan(cpu).attention.reason, "the cpu backend has no fused attention (cuda only)");
}

TEST(Plan, ACandidateCarriesEveryScheduleParameter) {
  // The six parameters a candidate or a result's config is given come back,
  // K and B included; the ones the planner does not search keep
  // ScheduleParams' values, so the planner generates what it did.
  const ScheduleParams given{
      .stages = 3, .microbatches = 6, .chunks = 2, .inflight = 2, .sync_warmup = 4, .batches = 5};
  Candidate c;
  copy_schedule_params(c, given);
  ResultConfig config;
  copy_schedule_params(config, given);
  for (const ScheduleParams& back : {schedule_params(c), schedule_params(config)}) {
    EXPECT_EQ(back.stages, 3);
    EXPECT_EQ(back.microbatches, 6);
    EXPECT_EQ(back.chunks, 2);
    EXPECT_EQ(back.inflight, 2);
    EXPECT_EQ(back.sync_warmup, 4);
    EXPECT_EQ(back.batches, 5);
  }
  EXPECT_EQ(schedule_params(Candidate{}).sync_warmup, ScheduleParams{}.sync_warmup);
  EXPECT_EQ(schedule_params(Candidate{}).batches, ScheduleParams{}.batches);
}

// Pruning skips only what cannot win: the winner is the one of the full search.
TEST(Plan, PruningKeepsTheWinner) {
  PlanOptions o = small_plan();
  o.top = 1;
  const Plan pruned = make_plan(o);
  o.top = 100000;
  const Plan full = make_plan(o);
  ASSERT_FALSE(pruned.ranked.empty());
  const Candidate& a = pruned.ranked.front();
  const Candidate& b = full.ranked.front();
  EXPECT_EQ(a.schedule, b.schedule);
  EXPECT_EQ(a.partition, b.partition);
  EXPECT_EQ(a.stages, b.stages);
  EXPECT_EQ(a.micro_batch_size, b.micro_batch_size);
  EXPECT_DOUBLE_EQ(a.samples_per_second, b.samples_per_second);
  EXPECT_LT(pruned.evaluated, full.evaluated);
  EXPECT_EQ(pruned.considered, full.considered);
}

// One stage is no pipeline: every schedule runs it the same way, so the
// planner names it once, whichever schedule's search found it.
TEST(Plan, ASingleStageIsNoPipelineWhateverItsSchedule) {
  Candidate c;
  c.schedule = "zb-v";
  c.partition = "layer";
  c.stages = 1;
  c.microbatches = 4;
  c.chunks = 2;
  EXPECT_EQ(candidate_label(c), "no pipeline (P=1) M=4");
  EXPECT_EQ(shown_schedule(c), "no pipeline");
  c.schedule = "sync-1f1b";
  c.chunks = 1;
  EXPECT_EQ(candidate_label(c), "no pipeline (P=1) M=4");
  c.data_parallel = 2;
  EXPECT_EQ(candidate_label(c), "no pipeline (P=1) D=2 M=4");
  c.stages = 4;
  c.data_parallel = 1;
  c.microbatches = 8;
  c.inflight = 2;
  c.chunks = 2;
  EXPECT_EQ(candidate_label(c), "sync-1f1b x layer P=4 M=8 N=2 V=2");
  EXPECT_EQ(shown_schedule(c), "sync-1f1b");

  // On one GPU every candidate is a single stage: each shape is ranked
  // once, not once per schedule.
  PlanOptions o = small_plan();
  ClusterInput in;
  in.gpus = 1;
  in.device = "cpu";
  in.gpu_memory_bytes = int64_t{1} << 30;
  o.cluster = resolve_cluster(in, o.model.bytes_per_element);
  o.top = 100;
  const Plan plan = make_plan(o);
  ASSERT_FALSE(plan.ranked.empty());
  std::set<std::string> shapes;
  for (const Candidate& r : plan.ranked) {
    EXPECT_EQ(r.stages, 1);
    EXPECT_EQ(candidate_label(r).rfind("no pipeline (P=1)", 0), 0u) << candidate_label(r);
    EXPECT_TRUE(
        shapes.insert(candidate_label(r) + " mbs " + std::to_string(r.micro_batch_size)).second)
        << candidate_label(r) << " ranked twice (" << r.schedule << ")";
  }
}

// Partitions that cut the model into the same P x V parts are one run: it
// is listed once, under the first of them, with the others named in
// same_cut and in its why; a partition whose cut differs is not named.
TEST(Plan, PartitionsThatCutTheModelAlikeAreOneRun) {
  PlanOptions o = small_plan();
  o.top = 100;
  const Plan plan = make_plan(o);
  std::vector<Candidate> all = plan.ranked;
  all.insert(all.end(), plan.alternatives.begin(), plan.alternatives.end());
  const std::vector<std::string> names = {"layer", "operator", "balanced"};
  int shared = 0;
  for (const Candidate& c : all) {
    SCOPED_TRACE(candidate_label(c) + " mbs " + std::to_string(c.micro_batch_size));
    const PricedCandidate pc = priced(o, c);
    const int parts = c.stages * c.chunks;
    const std::vector<UnitRange> cut =
        make_partition(c.partition, pc.units, pc.times, parts, pc.popts);
    for (const std::string& name : names) {
      if (name == c.partition || partition_problem(name, pc.units, parts)) continue;
      const bool listed = std::find(c.same_cut.begin(), c.same_cut.end(), name) != c.same_cut.end();
      EXPECT_EQ(listed, make_partition(name, pc.units, pc.times, parts, pc.popts) == cut) << name;
    }
    if (c.stages > 1 && !c.same_cut.empty()) {
      ++shared;
      EXPECT_NE(c.why.find("cuts the model the same way (the same run)"), std::string::npos)
          << c.why;
    }
    // The run is not listed again under another of its names.
    for (const Candidate& d : plan.ranked) {
      const bool same_config = d.schedule == c.schedule && d.stages == c.stages &&
                               d.microbatches == c.microbatches &&
                               d.micro_batch_size == c.micro_batch_size && d.chunks == c.chunks &&
                               d.inflight == c.inflight;
      EXPECT_FALSE(same_config &&
                   std::find(c.same_cut.begin(), c.same_cut.end(), d.partition) != c.same_cut.end())
          << "listed again as " << candidate_label(d);
    }
  }
  EXPECT_GT(shared, 0) << "no two partitions cut alike here: the case is not exercised";
}

TEST(Plan, AlternativesSayWhyTheyLose) {
  const Plan plan = make_plan(small_plan());
  ASSERT_FALSE(plan.alternatives.empty());
  for (const Candidate& c : plan.alternatives) {
    const bool leads = std::any_of(plan.ranked.begin(), plan.ranked.end(), [&](const Candidate& r) {
      return shown_schedule(r) == shown_schedule(c);
    });
    EXPECT_FALSE(leads) << shown_schedule(c);
    if (c.fits) {
      EXPECT_NE(c.why.find("slower than the leader"), std::string::npos) << c.why;
      EXPECT_NE(c.why.find("bubble"), std::string::npos) << c.why;
    } else {
      EXPECT_NE(c.why.find("stage " + std::to_string(c.worst_stage) + " needs"), std::string::npos)
          << c.why;
    }
  }
}

// gpt-small in fp32 on 4 H200s, as `plan` searches it by default: no
// pipeline wins (the replicas' all-reduce costs less than any pipeline's
// bubble).
PlanOptions one_stage_leads() {
  PlanOptions o = h200_plan(4, "gpt-small");
  o.micro_batch_sizes = {1, 2, 4, 8};
  o.memory.optimizer = OptimizerKind::kAdam;
  return o;
}

// Pruning keeps the leaders where one stage leads too: every schedule's
// one-stage run is the same run, so it holds one place among the leaders
// the pruning measures against, not one per schedule (which pruned the
// runners-up: zb-h2 at 2067 samples/s lost its place to zb-v at 2018).
// Each schedule's best pipelined configuration is the full search's.
TEST(Plan, PruningKeepsTheLeadersWhereOneStageLeads) {
  PlanOptions o = one_stage_leads();
  o.top = 1000;
  const Plan full = make_plan(o);
  for (const int top : {2, 3, 5, 8}) {
    o.top = top;
    const Plan pruned = make_plan(o);
    ASSERT_EQ(pruned.ranked.size(), static_cast<size_t>(top));
    ASSERT_GE(full.ranked.size(), static_cast<size_t>(top));
    EXPECT_EQ(pruned.ranked[0].stages, 1);
    for (size_t i = 0; i < pruned.ranked.size(); ++i) {
      EXPECT_EQ(candidate_label(pruned.ranked[i]), candidate_label(full.ranked[i]))
          << "top " << top << ", rank " << i + 1;
      EXPECT_DOUBLE_EQ(pruned.ranked[i].samples_per_second, full.ranked[i].samples_per_second)
          << "top " << top << ", rank " << i + 1;
    }
    EXPECT_LT(pruned.evaluated, full.evaluated);
    for (const Candidate& alt : pruned.alternatives) {
      const auto best = std::find_if(
          full.ranked.begin(), full.ranked.end(),
          [&](const Candidate& c) { return shown_schedule(c) == shown_schedule(alt); });
      ASSERT_NE(best, full.ranked.end()) << shown_schedule(alt);
      EXPECT_DOUBLE_EQ(alt.samples_per_second, best->samples_per_second) << shown_schedule(alt);
    }
  }
}

// Where one stage wins (one_stage_leads), it leads as "no pipeline",
// uncut (one stage in V chunks is as fast, with more memory), and each
// schedule is listed by its best pipelined configuration, losing to "no
// pipeline": one stage runs no schedule, so a schedule's own one-stage run
// would only repeat the leader under another name.
TEST(Plan, WhereOneStageWinsEachScheduleIsListedPipelined) {
  PlanOptions o = one_stage_leads();
  o.top = 3;
  const Plan plan = make_plan(o);
  ASSERT_FALSE(plan.ranked.empty());
  const Candidate& lead = plan.ranked.front();
  ASSERT_EQ(lead.stages, 1) << candidate_label(lead);
  EXPECT_EQ(lead.chunks, 1) << candidate_label(lead) << " " << lead.schedule;
  std::set<std::string> listed;
  for (const Candidate& c : plan.alternatives) {
    EXPECT_TRUE(listed.insert(shown_schedule(c)).second) << shown_schedule(c) << " twice";
    EXPECT_GE(c.stages, 2) << c.schedule << ": " << candidate_label(c);
    if (c.fits) {
      EXPECT_NE(c.why.find("slower than the leader (no pipeline)"), std::string::npos) << c.why;
      EXPECT_LT(c.samples_per_second, lead.samples_per_second) << candidate_label(c);
    }
  }
  EXPECT_EQ(listed.count("no pipeline"), 0u);  // it leads
  // Every schedule once: among the leaders after it, or listed. The other
  // leaders that run one stage are other shapes (M, micro-batch size),
  // each once.
  std::set<std::pair<int, int>> one_stage{{lead.microbatches, lead.micro_batch_size}};
  for (size_t i = 1; i < plan.ranked.size(); ++i) {
    const Candidate& c = plan.ranked[i];
    if (c.stages == 1) {
      EXPECT_TRUE(one_stage.insert({c.microbatches, c.micro_batch_size}).second)
          << candidate_label(c);
      continue;
    }
    EXPECT_TRUE(listed.insert(c.schedule).second) << c.schedule;
  }
  EXPECT_EQ(listed.size(), schedule_list().size());
  for (size_t i = 1; i < plan.ranked.size(); ++i) {
    EXPECT_NE(plan.ranked[i].why.find("than the leader (no pipeline)"), std::string::npos)
        << plan.ranked[i].why;
  }
}

TEST(Plan, NothingFitsSaysWhatWould) {
  PlanOptions o = small_plan();
  o.cluster.gpu_memory_bytes = 1 << 20;
  const Plan plan = make_plan(o);
  EXPECT_TRUE(plan.ranked.empty());
  EXPECT_NE(plan.advice.find("nothing fits"), std::string::npos) << plan.advice;
  EXPECT_NE(plan.advice.find("would fit with GPUs of"), std::string::npos) << plan.advice;
  EXPECT_NE(plan.advice.find("--optimizer sgd"), std::string::npos) << plan.advice;
}

// No configuration left: the advice names what left them out.
TEST(Plan, AGlobalBatchOfTooManyMicroBatchesIsNamed) {
  PlanOptions o = small_plan();
  o.global_batch = int64_t{1} << 40;
  const Plan plan = make_plan(o);
  EXPECT_TRUE(plan.ranked.empty());
  EXPECT_NE(plan.advice.find("--global-batch 1099511627776 needs more than 1048576 micro-batches"),
            std::string::npos)
      << plan.advice;
  o.global_batch = 7;  // D x mbs is 2, 4 or 8: 7 is a multiple of none
  o.micro_batch_sizes = {2};
  const Plan odd = make_plan(o);
  EXPECT_NE(odd.advice.find("--global-batch 7 is not a multiple of D x micro-batch size"),
            std::string::npos)
      << odd.advice;
}

// The search's size is checked before it starts; each limit is named.
TEST(Plan, RefusesASearchBeyondItsLimits) {
  PlanOptions o = small_plan();
  ClusterInput in;
  in.gpus = 720720;
  in.gpus_per_node = 8;
  in.device = "h100";
  o.cluster = resolve_cluster(in, 4);
  o.model = parse_model_spec("gpt-7b");
  o.global_batch = 1441440;
  EXPECT_NE(error_of([&] { (void)make_plan(o); }).find("compute slots (P x M x V) in all"),
            std::string::npos);
  in.gpus = 4096;
  in.gpus_per_node = 0;
  o.cluster = resolve_cluster(in, 4);
  o.model = parse_model_spec("gpt:layers=16384,hidden=64,heads=2,seq=16,vocab=64");
  o.global_batch = 0;
  EXPECT_NE(error_of([&] { (void)make_plan(o); }).find("--partition balanced: cutting the model's"),
            std::string::npos);
}

TEST(Plan, RefusesABadGuard) {
  PlanOptions o = small_plan();
  o.memory_guard = 1.5;
  EXPECT_NE(error_of([&] { (void)make_plan(o); }).find("--memory-guard"), std::string::npos);
}

// A calibration file is held to its own 16 MiB, though the same path could
// have been a result file (256 MiB).
TEST(PlanCalibration, AFileAboveItsLimitIsRefused) {
  const std::string path = ::testing::TempDir() + "plan_test_big_calibration.json";
  {
    std::ofstream f(path);
    f << R"({"schema": "pipebench.calibration/1", "device": "cpu")"
      << std::string(size_t{20} << 20, ' ') << "}";
  }
  EXPECT_EQ(error_of([&] { (void)calibration_from({path}, "cpu"); }),
            path + ": calibration file larger than 16 MiB (the limit for this input)");
  std::remove(path.c_str());
}

// A calibration file named among result folders is refused by name, not
// left out without a word (it is taken alone).
TEST(PlanCalibration, ACalibrationFileAmongResultsIsRefused) {
  const std::string path = ::testing::TempDir() + "plan_test_mixed_calibration.json";
  std::ofstream(path) << R"({"schema": "pipebench.calibration/1", "device": "h200"})";
  EXPECT_EQ(error_of([&] {
              (void)calibration_from({PPB_REPORTS_H200_DATA, path}, "h200");
            }),
            "--calibration: " + path +
                " is not a result; it takes one pipebench.calibration/1 file alone, or result "
                "files and folders");
  std::remove(path.c_str());
}

// ---- calibration and --validate on synthetic measurements -----------------

// A timed-backend result of gpt-tiny on the cpu device whose measured action
// times are the roofline's x 2 (forward) and x 3 (backward) in modelled
// seconds, run at time scale 0.5 over a 10 us, 1 GB/s link; its samples/s
// and memory are what the simulator and the memory model give for that (the
// pool as a run holds it: expected_peak_bytes).
// gpt-tiny at micro-batch size 2 cut by `operator`, over MPI.
ResultConfig tiny_config(const std::string& schedule, int stages, int microbatches,
                         const std::string& backend) {
  ResultConfig c;
  c.schedule = schedule;
  c.partition = "operator";
  c.stages = stages;
  c.microbatches = microbatches;
  c.micro_batch_size = 2;
  c.chunks = 1;
  c.model = "gpt-tiny";
  c.backend = backend;
  c.transport = "mpi";
  return c;
}

ResultEntry synthetic_result(const std::string& schedule, int stages, int microbatches) {
  Result r;
  ResultConfig& c = r.config;
  c = tiny_config(schedule, stages, microbatches, "timed");
  c.device = "cpu";
  c.time_scale = 0.5;
  const ModelSpec spec = parse_model_spec(c.model);
  const std::vector<Unit> units = expand_units(spec);
  const std::vector<UnitTime> times = unit_times(units, device_preset("cpu", 4));
  PartitionOptions popts;
  popts.link = device_preset("cpu", 4).link();
  const std::vector<UnitRange> parts = make_partition("operator", units, times, stages, popts);
  c.unit_ranges = format_partition(parts);
  const StageCosts model = model_costs(units, times, parts, stages, 1, popts.link);
  ScheduleParams p;
  p.stages = stages;
  p.microbatches = microbatches;
  const Schedule s = generate_schedule(schedule, p);
  std::vector<UnitTime> scaled = times;
  for (UnitTime& t : scaled) {
    t.fwd *= 2.0 * 0.5;
    t.bwd_input *= 3.0 * 0.5;
    t.bwd_weight *= 3.0 * 0.5;
  }
  LinkModel link;
  link.latency = 1e-5;
  link.bandwidth = 1e9;
  const SimResult sim = simulate(s, model_costs(units, scaled, parts, stages, 1, link));
  ResultMetrics m;
  m.samples_per_second = 2.0 * microbatches / sim.step_time;
  TheoryFigures t;
  std::vector<int64_t> sizes;  // the sizes its messages had, as a run records them
  for (size_t v = 0; v + 1 < model.chunks.size(); ++v) sizes.push_back(model.chunks[v].send_bytes);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  const bool one_size = sizes.size() == 1;  // then a run records the median time, no slope
  t.links = {MeasuredLinkFigures{"host", one_size ? link.transfer_time(sizes[0]) : link.latency,
                                 one_size ? std::nan("") : link.bandwidth, 8 * microbatches,
                                 sizes}};
  const bool split = schedule_info(schedule).splits_backward;
  for (const ChunkCost& cc : model.chunks) {
    StageActionTimes a;
    a.fwd = cc.fwd * 2.0 * 0.5;
    a.bwd = split ? std::nan("") : (cc.bwd_input + cc.bwd_weight) * 3.0 * 0.5;
    a.bwd_input = split ? cc.bwd_input * 3.0 * 0.5 : std::nan("");
    a.bwd_weight = split ? cc.bwd_weight * 3.0 * 0.5 : std::nan("");
    t.action_seconds.push_back(a);
  }
  m.theory = t;
  for (const PredictedMemory& sm : predict_memory(s, model))
    m.peak_memory_bytes.per_stage.push_back(sm.expected_peak_bytes);
  r.metrics = m;
  return make_entry(schedule + "_P" + std::to_string(stages) + "_M" + std::to_string(microbatches),
                    r);
}

TEST(PlanValidate, FitsTheFactorsAndTheLinkExactly) {
  const std::vector<ResultEntry> results = {synthetic_result("1f1b", 4, 8),
                                            synthetic_result("gpipe", 2, 4),
                                            synthetic_result("zb-h1", 4, 8)};
  std::vector<const ResultEntry*> all;
  for (const ResultEntry& e : results) all.push_back(&e);
  const PassCalibration cal = fit_calibration(all);
  EXPECT_EQ(cal.results, 3);
  EXPECT_NEAR(cal.forward, 2.0, 1e-12);
  EXPECT_NEAR(cal.backward, 3.0, 1e-12);
  EXPECT_NEAR(cal.link.latency, 1e-5, 1e-12);
  EXPECT_NEAR(cal.link.bandwidth, 1e9, 1e9 * 1e-9);
}

// The link is one line through every result's transfers: a run whose
// messages had one size adds its point (its median time), runs of several
// sizes their line read at those sizes. Here the runs' own fits disagree
// (a busy host), and the pooled line is the least-squares line through
// their points, weighted by messages; a flat one keeps the mean time.
TEST(PlanValidate, TheLinkIsOneLineThroughEveryRunsTransfers) {
  std::vector<ResultEntry> results = {synthetic_result("1f1b", 4, 8),
                                      synthetic_result("gpipe", 4, 8)};
  const int64_t kib = 1024;
  // 700 us at 512 KiB alone; 200 us + 1 B/ns at 1 and 2 MiB.
  results[0].result.metrics->theory->links = {
      MeasuredLinkFigures{"host", 700e-6, std::nan(""), 10, {512 * kib}}};
  results[1].result.metrics->theory->links = {
      MeasuredLinkFigures{"host", 200e-6, 1e9, 20, {1024 * kib, 2048 * kib}}};
  // Points (x in bytes, y in s, weight): (512K, 700us, 10), (1M, 200us +
  // 1048576 ns, 10), (2M, 200us + 2097152 ns, 10): the line through them.
  const double x[3] = {512.0 * kib, 1024.0 * kib, 2048.0 * kib};
  const double y[3] = {700e-6, 200e-6 + x[1] / 1e9, 200e-6 + x[2] / 1e9};
  const double mx = (x[0] + x[1] + x[2]) / 3, my = (y[0] + y[1] + y[2]) / 3;
  double sxy = 0, sxx = 0;
  for (int i = 0; i < 3; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
  }
  const double slope = sxy / sxx;
  std::vector<const ResultEntry*> both = {&results[0], &results[1]};
  const PassCalibration cal = fit_calibration(both);
  EXPECT_NEAR(cal.link.bandwidth, 1.0 / slope, 1e-6 / slope);
  EXPECT_NEAR(cal.link.latency, my - slope * mx, 1e-12);
  EXPECT_GT(cal.link.latency, 150e-6);  // neither run's own intercept
  // One size overall: no slope, the weighted mean time.
  results[1].result.metrics->theory->links = {
      MeasuredLinkFigures{"host", 300e-6, std::nan(""), 30, {512 * kib}}};
  const PassCalibration flat = fit_calibration(both);
  EXPECT_EQ(flat.link.bandwidth, 0);  // infinite
  EXPECT_NEAR(flat.link.latency, (10 * 700e-6 + 30 * 300e-6) / 40, 1e-12);
  // A network link is not calibrated from.
  results[1].result.metrics->theory->links[0].path = "network";
  EXPECT_NEAR(fit_calibration(both).link.latency, 700e-6, 1e-12);
}

// Results whose backend timed its units (theory.kind_seconds) fit a factor
// per unit kind and pass: here every kind's units ran at the roofline x its
// own factor (qkv x 4 forward, attention x 5 backward, the rest x 2 / x 3)
// and the actions took what their units took, so the fit recovers them
// exactly; the kinds then scale each unit. Actions slower than their units
// (work besides them) scale every kind of that pass alike.
TEST(PlanValidate, UnitTimesByKindFitAFactorPerKind) {
  std::vector<ResultEntry> results = {synthetic_result("1f1b", 4, 8),
                                      synthetic_result("gpipe", 2, 4)};
  auto factor = [](UnitKind k) {
    return UnitTime{k == UnitKind::kQkv ? 4.0 : 2.0, k == UnitKind::kAttention ? 5.0 : 3.0,
                    k == UnitKind::kAttention ? 5.0 : 3.0};
  };
  for (ResultEntry& e : results) {
    const ResultConfig& c = e.result.config;
    const std::vector<Unit> units = expand_units(parse_model_spec(c.model));
    const std::vector<UnitTime> times = unit_times(units, device_preset("cpu", 4));
    const std::vector<UnitRange> parts =
        make_partition("manual:" + c.unit_ranges, units, times, c.stages);
    std::vector<std::map<std::string, KindSeconds>>& ks = e.result.metrics->theory->kind_seconds;
    for (int s = 0; s < c.stages; ++s) {
      std::map<std::string, KindSeconds>& stage = ks.emplace_back();
      const UnitRange& part = parts[static_cast<size_t>(s)];
      for (int u = part.begin; u < part.end; ++u) {
        const Unit& unit = units[static_cast<size_t>(u)];
        const UnitTime f = factor(unit.kind);
        KindSeconds& k = stage[unit_kind_name(unit.kind)];  // time scale 0.5
        k.fwd += times[static_cast<size_t>(u)].fwd * f.fwd * 0.5;
        k.bwd_input += times[static_cast<size_t>(u)].bwd_input * f.bwd_input * 0.5;
        k.bwd_weight += times[static_cast<size_t>(u)].bwd_weight * f.bwd_weight * 0.5;
      }
      StageActionTimes& a = e.result.metrics->theory->action_seconds[static_cast<size_t>(s)];
      a.fwd = 0;
      a.bwd = 0;
      for (const auto& [kind, k] : stage) {
        a.fwd += k.fwd;
        a.bwd += k.bwd_input + k.bwd_weight;
      }
    }
  }
  std::vector<const ResultEntry*> both = {&results[0], &results[1]};
  const PassCalibration cal = fit_calibration(both);
  for (int k = 0; k < kUnitKinds; ++k) {
    const auto kind = static_cast<UnitKind>(k);
    const UnitTime got = cal.factors(unit_kind_name(kind));
    const UnitTime want = factor(kind);
    SCOPED_TRACE(unit_kind_name(kind));
    EXPECT_NEAR(got.fwd, want.fwd, 1e-9);
    // The embedding has no input gradient and attention no weights: their
    // pass keeps the overall backward factor (3 here).
    EXPECT_NEAR(got.bwd_input, kind == UnitKind::kEmbedding ? cal.backward : want.bwd_input, 1e-9);
    EXPECT_NEAR(got.bwd_weight, kind == UnitKind::kAttention ? cal.backward : want.bwd_weight,
                1e-9);
  }
  // As a calibration of the planner: every kind at its factor x the scale.
  const Calibration kinds = kind_calibration(cal, "cpu", 0.5);
  EXPECT_NEAR(kinds.kind_scale.at("qkv").fwd, 2.0, 1e-9);
  EXPECT_NEAR(kinds.kind_scale.at("fc2").fwd, 1.0, 1e-9);
  // Forward actions 10% slower than their units: every forward factor x 1.1.
  for (ResultEntry& e : results) {
    for (StageActionTimes& a : e.result.metrics->theory->action_seconds) a.fwd *= 1.1;
  }
  const PassCalibration slower = fit_calibration(both);
  EXPECT_NEAR(slower.factors("qkv").fwd, 4.4, 1e-9);
  EXPECT_NEAR(slower.factors("fc2").fwd, 2.2, 1e-9);
  EXPECT_NEAR(slower.factors("qkv").bwd_input, 3.0, 1e-9);
}

// Repeated measurements of a combination (several nights) are one row: the
// median of their samples/s, predicted from the other combinations.
TEST(PlanValidate, RepeatsOfACombinationAreItsMedian) {
  std::vector<ResultEntry> results = {synthetic_result("gpipe", 4, 8),
                                      synthetic_result("zb-h1", 4, 8)};
  for (const double f : {1.0, 0.9, 1.2}) {  // three nights of 1f1b: median x1.0
    ResultEntry night = synthetic_result("1f1b", 4, 8);
    night.result.metrics->samples_per_second *= f;
    night.source += "_x" + std::to_string(f);
    results.push_back(night);
  }
  const Validation v = validate_plan(results);
  ASSERT_EQ(v.rows.size(), 3u);
  int merged = 0;
  for (const ValidationRow& r : v.rows) {
    if (r.config.schedule != "1f1b") {
      EXPECT_EQ(r.measurements, 1);
      continue;
    }
    ++merged;
    EXPECT_EQ(r.measurements, 3);
    EXPECT_NEAR(r.samples_error, 0, 1e-9) << "the median night is the model's";
  }
  EXPECT_EQ(merged, 1);
}

// A measurement timed on a busy host (metrics.foreign_cpu above 20%) is
// marked and warned of; a merged row by its busiest night; none at or
// under the line, or where the share was not recorded.
TEST(PlanValidate, MeasurementsOfABusyHostAreMarkedAndWarnedOf) {
  std::vector<ResultEntry> results = {synthetic_result("gpipe", 4, 8),
                                      synthetic_result("zb-h1", 4, 8)};
  EXPECT_TRUE(validate_plan(results).warnings.empty());
  results[0].result.metrics->foreign_cpu = kBusyHostCpuShare;  // at the line: quiet
  for (const double busy : {0.05, 0.47}) {  // two nights of 1f1b, one of them busy
    ResultEntry night = synthetic_result("1f1b", 4, 8);
    night.result.metrics->foreign_cpu = busy;
    night.source += "_busy" + std::to_string(busy);
    results.push_back(night);
  }
  const Validation v = validate_plan(results);
  ASSERT_EQ(v.rows.size(), 3u);
  for (const ValidationRow& r : v.rows) {
    const bool one_f_one_b = r.config.schedule == "1f1b";
    EXPECT_EQ(measured_on_busy_host(r), one_f_one_b) << r.source;
    if (one_f_one_b) {
      EXPECT_EQ(r.measurements, 2);
      EXPECT_DOUBLE_EQ(r.foreign_cpu, 0.47);
    } else if (r.config.schedule == "zb-h1") {
      EXPECT_TRUE(std::isnan(r.foreign_cpu)) << "not recorded";
    } else {
      EXPECT_DOUBLE_EQ(r.foreign_cpu, kBusyHostCpuShare);
    }
  }
  ASSERT_EQ(v.warnings.size(), 1u);
  EXPECT_EQ(v.warnings[0].rfind("2 of 4 measurements (rows marked *) were timed while other "
                                "processes used more than 20% of the host's CPU (up to 47%; "
                                "metrics.foreign_cpu)",
                                0),
            0u)
      << v.warnings[0];
}

// A result that measured no samples/s is skipped, saying so; one that
// measured no peak (0) has no memory error, and none in the mean.
TEST(PlanValidate, NothingMeasuredIsNoError) {
  std::vector<ResultEntry> results = {synthetic_result("1f1b", 4, 8),
                                      synthetic_result("gpipe", 4, 8),
                                      synthetic_result("zb-h1", 4, 8)};
  results[1].result.metrics->samples_per_second = 0;
  for (int64_t& b : results[2].result.metrics->peak_memory_bytes.per_stage) b = 0;
  const Validation v = validate_plan(results);
  ASSERT_EQ(v.skipped.size(), 1u);
  EXPECT_NE(v.skipped[0].find(": no samples/s measured (0)"), std::string::npos) << v.skipped[0];
  ASSERT_EQ(v.rows.size(), 2u);
  EXPECT_TRUE(std::isnan(v.rows[1].memory_error)) << v.rows[1].source;
  EXPECT_EQ(v.mean_abs_memory_error, std::fabs(v.rows[0].memory_error));
}

// Leave-one-out on measurements the model explains exactly: every error 0.
TEST(PlanValidate, PredictsEachCombinationFromTheOthers) {
  std::vector<ResultEntry> results = {
      synthetic_result("1f1b", 4, 8), synthetic_result("gpipe", 4, 8),
      synthetic_result("zb-h1", 4, 8), synthetic_result("1f1b", 2, 4)};
  // A result of another setup (device) is alone: skipped, with why.
  ResultEntry other = synthetic_result("gpipe", 2, 4);
  other.result.config.model = "gpt:layers=8,hidden=128,heads=4,seq=64,vocab=512,mbs=2";
  other.source = "other.json";
  results.push_back(other);
  const Validation v = validate_plan(results);
  ASSERT_EQ(v.rows.size(), 4u);
  for (const ValidationRow& r : v.rows) {
    EXPECT_NEAR(r.samples_error, 0, 1e-9) << r.source;
    EXPECT_EQ(r.memory_error, 0) << r.source;
    EXPECT_EQ(r.calibrated_on, 3) << r.source;
  }
  EXPECT_NEAR(v.mean_abs_samples_error, 0, 1e-9);
  ASSERT_EQ(v.skipped.size(), 1u);
  EXPECT_NE(v.skipped[0].find("other.json: alone in its setup"), std::string::npos) << v.skipped[0];

  // A measurement 10% slower than the model shows as a -10% error... of
  // that combination only (the others calibrate it).
  results.pop_back();
  results[0].result.metrics->samples_per_second /= 1.1;
  const Validation slow = validate_plan(results);
  EXPECT_NEAR(slow.rows[0].samples_error, 0.1, 1e-9);
}

// Ranks that took turns on one GPU are not a pipeline of devices: neither
// predicted nor calibrated on, and one line per sharing says why.
TEST(PlanValidate, RanksSharingAGpuAreRefusedWithTheReason) {
  std::vector<ResultEntry> results = {synthetic_result("1f1b", 4, 8),
                                      synthetic_result("gpipe", 4, 8),
                                      synthetic_result("zb-h1", 4, 8)};
  for (const char* schedule : {"1f1b", "gpipe"}) {
    ResultEntry shared = synthetic_result(schedule, 2, 4);
    shared.result.environment.ranks_per_gpu = 2;
    shared.result.metrics->samples_per_second *= 3;  // would spoil the calibration
    shared.source += "_shared";
    results.push_back(shared);
  }
  const Validation v = validate_plan(results);
  // The shared runs calibrate only each other: the three others' speeds are
  // predicted as before, the shared ones' peaks but not their speeds.
  ASSERT_EQ(v.rows.size(), 5u);
  int timed = 0;
  for (const ValidationRow& r : v.rows) {
    const bool shared = r.source.ends_with("_shared");
    EXPECT_EQ(r.calibrated_on, shared ? 1 : 2) << r.source;
    if (shared) {
      EXPECT_TRUE(std::isnan(r.samples_error)) << r.source;
      EXPECT_TRUE(std::isnan(r.predicted_samples_per_second)) << r.source;
    } else {
      EXPECT_NEAR(r.samples_error, 0, 1e-9) << r.source;
      ++timed;
    }
    EXPECT_GT(r.predicted_peak_bytes, 0) << r.source;
  }
  EXPECT_EQ(timed, 3);
  EXPECT_NEAR(v.mean_abs_samples_error, 0, 1e-9);  // over the three predicted only
  ASSERT_EQ(v.refused.size(), 1u);
  EXPECT_EQ(v.refused[0],
            "2 results: samples/s not predicted (peak memory is): " + shared_gpu_refusal(2));
  EXPECT_NE(v.refused[0].find("2 ranks shared one GPU (environment.ranks_per_gpu)"),
            std::string::npos);
  EXPECT_TRUE(v.skipped.empty());
}

// The recorded H200 night (tests/data/h200): two ranks took turns on its
// one GPU in every result, so no speed is predicted, for that reason, but
// every peak is (the memory model within 2% on a GPU).
TEST(PlanValidate, RecordedH200ResultsOfASharedGpuAreRefused) {
  const Validation v =
      validate_plan(load_results({PPB_REPORTS_H200_DATA}, false, {}, true).results);
  ASSERT_EQ(v.rows.size(), 5u);
  for (const ValidationRow& r : v.rows) {
    EXPECT_TRUE(std::isnan(r.samples_error)) << r.source;
    EXPECT_LT(std::fabs(r.memory_error), 0.02) << r.source;  // the memory model holds on a GPU
  }
  EXPECT_TRUE(std::isnan(v.mean_abs_samples_error));
  EXPECT_TRUE(v.skipped.empty());
  EXPECT_EQ(v.refused, std::vector<std::string>{"5 results: samples/s not predicted (peak memory "
                                                "is): " +
                                                shared_gpu_refusal(2)});
}

// A cuda result of gpt-tiny on one H200 per stage whose truth is known:
// each kernel family ran at `kEfficiency` of the h200 roofline (a unit's
// GEMM share in "gemm", the rest in its own family) and every action's
// window held `kLaunch` seconds besides its kernels. Its CUPTI figures
// (kernel seconds per family, device seconds per action), action times
// and samples/s are what that gives.
const std::map<std::string, double> kEfficiency = {{"gemm", 0.8},          {"attention", 0.5},
                                                   {"layernorm", 0.3},     {"gelu", 0.4},
                                                   {"cross_entropy", 0.6}, {"embedding", 0.25}};
constexpr double kLaunch = 14e-6;

// The truth's factor on one unit's pass (roofline time x it = measured).
double true_factor(UnitKind kind, double gemm_share) {
  return gemm_share / kEfficiency.at("gemm") +
         (1 - gemm_share) / kEfficiency.at(kernel_family_of(kind));
}

// A fused attention (fused) runs its scores and context products in its
// own kernels: all of its time is in "attention".
ResultEntry cuda_result(const std::string& schedule, int stages, int microbatches,
                        bool fused = false) {
  Result r;
  ResultConfig& c = r.config;
  c = tiny_config(schedule, stages, microbatches, "cuda");
  if (fused) c.attention = "fused";
  r.environment.gpus.assign(static_cast<size_t>(stages), "NVIDIA H200");
  r.environment.ranks = stages;
  r.environment.ranks_per_gpu = 1;
  const DeviceSpec h200 = device_preset("h200", 4);  // tiny_config: fp32
  const std::vector<Unit> units = expand_units(parse_model_spec(c.model), Kernels::kCuda,
                                               fused ? Attention::kFused : Attention::kNaive);
  const std::vector<UnitTime> times = unit_times(units, h200);
  const std::vector<UnitRange> parts = make_partition("operator", units, times, stages);
  c.unit_ranges = format_partition(parts);
  std::vector<UnitTime> real = times;
  ResultMetrics m;
  CollectorResult& cupti = m.collectors["cupti"];
  for (const auto& [family, eff] : kEfficiency)
    cupti.step["kernel_seconds_" + family].assign(static_cast<size_t>(stages), 0.0);
  cupti.step["kernel_seconds_other"].assign(static_cast<size_t>(stages), 0.0);
  for (int s = 0; s < stages; ++s) {
    for (int u = parts[static_cast<size_t>(s)].begin; u < parts[static_cast<size_t>(s)].end; ++u) {
      const Unit& unit = units[static_cast<size_t>(u)];
      const UnitTime& t = times[static_cast<size_t>(u)];
      const UnitTime g =
          fused && unit.kind == UnitKind::kAttention ? UnitTime{0, 0, 0} : gemm_shares(unit, h200);
      const auto step = [&](double UnitTime::*pass, double share) {
        const double mb = microbatches * t.*pass;  // every micro-batch's pass, one step
        cupti.step["kernel_seconds_gemm"][static_cast<size_t>(s)] +=
            mb * share / kEfficiency.at("gemm");
        cupti.step["kernel_seconds_" + std::string(kernel_family_of(unit.kind))]
                  [static_cast<size_t>(s)] +=
            mb * (1 - share) / kEfficiency.at(kernel_family_of(unit.kind));
        real[static_cast<size_t>(u)].*pass = t.*pass * true_factor(unit.kind, share);
      };
      step(&UnitTime::fwd, g.fwd);
      step(&UnitTime::bwd_input, g.bwd_input);
      step(&UnitTime::bwd_weight, g.bwd_weight);
    }
  }
  StageCosts costs = model_costs(units, real, parts, stages, 1, h200.link());
  costs.action_seconds = kLaunch;
  ScheduleParams p;
  p.stages = stages;
  p.microbatches = microbatches;
  const Schedule sched = generate_schedule(schedule, p);
  const SimResult sim = simulate(sched, costs);
  m.samples_per_second = 2.0 * microbatches / sim.step_time;
  // The median step's timeline and each action's device seconds beside it.
  r.timeline.resize(static_cast<size_t>(stages));
  cupti.action["device_seconds"].resize(static_cast<size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    const ChunkCost& cc = costs.chunks[static_cast<size_t>(s)];
    for (const Action& a : sched.actions[static_cast<size_t>(s)]) {
      if (a.kind == ActionKind::kSync) continue;
      const double busy = a.kind == ActionKind::kForward         ? cc.fwd
                          : a.kind == ActionKind::kBackward      ? cc.bwd_input + cc.bwd_weight
                          : a.kind == ActionKind::kBackwardInput ? cc.bwd_input
                                                                 : cc.bwd_weight;
      r.timeline[static_cast<size_t>(s)].push_back({a.kind, a.microbatch, 0, 0.0, busy + kLaunch});
      cupti.action["device_seconds"][static_cast<size_t>(s)].push_back(busy);
    }
  }
  m.theory.emplace();
  for (const ChunkCost& cc : costs.chunks) {
    m.theory->action_seconds.push_back(
        {cc.fwd + kLaunch, cc.bwd_input + cc.bwd_weight + kLaunch, std::nan(""), std::nan("")});
  }
  m.device.emplace();
  m.device->profiler = "cupti";
  m.peak_memory_bytes.per_stage.assign(static_cast<size_t>(stages), 1);
  r.metrics = m;
  return make_entry("cuda_" + schedule + "_P" + std::to_string(stages) + "_M" +
                        std::to_string(microbatches) + (fused ? "_fused" : ""),
                    r);
}

// The fit recovers the truth: each kind's factor is its units' GEMM and
// elementwise shares at their families' efficiencies, the launch cost per
// action is the one the windows held, and the method says so.
TEST(PlanValidate, CuptiKernelTimesFitEachUnitKindAndTheLaunchCost) {
  const std::vector<ResultEntry> results = {cuda_result("1f1b", 4, 8), cuda_result("gpipe", 2, 4),
                                            cuda_result("zb-h1", 4, 8)};
  std::vector<const ResultEntry*> all;
  for (const ResultEntry& e : results) all.push_back(&e);
  ASSERT_TRUE(has_cupti_figures(results[0].result));
  // Kernel seconds all zero measured nothing: no CUPTI figures, and a fit
  // per pass on the roofline, never one labelled CUPTI's.
  ResultEntry blank = results[0];
  for (auto& [figure, per_stage] : blank.result.metrics->collectors.at("cupti").step) {
    if (figure.starts_with("kernel_seconds_")) std::fill(per_stage.begin(), per_stage.end(), 0.0);
  }
  EXPECT_FALSE(has_cupti_figures(blank.result));
  const std::string method = fit_calibration({&blank}).method;
  EXPECT_EQ(method.rfind("per pass on the roofline", 0), 0u) << method;
  EXPECT_NE(method.find(": not from CUPTI (1 of 1 without its kernel times"), std::string::npos)
      << method;
  const PassCalibration cal = fit_calibration(all);
  const DeviceSpec h200 = device_preset("h200", 4);  // tiny_config: fp32
  const std::vector<Unit> units = expand_units(parse_model_spec("gpt-tiny"), Kernels::kCuda);
  std::set<std::string> seen;
  for (const Unit& u : units) {
    const std::string kind = unit_kind_name(u.kind);
    if (!seen.insert(kind).second) continue;
    const UnitTime g = gemm_shares(u, h200);
    const UnitTime f = cal.factors(kind);
    EXPECT_NEAR(f.fwd, true_factor(u.kind, g.fwd), 1e-6 * f.fwd) << kind;
    if (u.bwd_input_flops > 0) {
      EXPECT_NEAR(f.bwd_input, true_factor(u.kind, g.bwd_input), 1e-6 * f.bwd_input) << kind;
    }
    if (u.bwd_weight_flops > 0) {
      EXPECT_NEAR(f.bwd_weight, true_factor(u.kind, g.bwd_weight), 1e-6 * f.bwd_weight) << kind;
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kUnitKinds));
  EXPECT_NEAR(cal.launch, kLaunch, 1e-12);
  EXPECT_NE(cal.method.find("per unit kind from CUPTI on 3 results (achieved / roofline): "
                            "embedding 0.25, ln1 0.3"),
            std::string::npos)
      << cal.method;
  EXPECT_NE(cal.method.find("; launch 14 us per action"), std::string::npos) << cal.method;
  // The planner takes both, and a calibration file keeps the launch cost.
  const Calibration kinds = kind_calibration(cal, "h200");
  EXPECT_EQ(kinds.summary, cal.method);
  EXPECT_NEAR(parse_calibration(calibration_to_json(kinds), "c.json").launch_seconds, kLaunch,
              1e-18);
  // The report's planner line names it too (the setup of the most
  // results: the two of 4 GPUs).
  const std::string line = which_schedule_for_this_machine(all);
  EXPECT_NE(line.find("4 x NVIDIA H200, 131 GiB each, the h200 roofline, calibrated on 2 "
                      "results: per unit kind from CUPTI on 2 results"),
            std::string::npos)
      << line;
}

// Results that ran the fused attention: its kernels (cuDNN's, the flash
// kernels) hold its products too, so the fit takes the attention's whole
// time at the attention family's efficiency, and the GEMMs' factor is the
// other units' alone; every kind's factor is the truth again.
TEST(PlanValidate, CuptiFitTakesAFusedAttentionWhollyInItsOwnKernels) {
  const std::vector<ResultEntry> results = {cuda_result("1f1b", 4, 8, true),
                                            cuda_result("gpipe", 2, 4, true)};
  std::vector<const ResultEntry*> all;
  for (const ResultEntry& e : results) all.push_back(&e);
  const PassCalibration cal = fit_calibration(all);
  const DeviceSpec h200 = device_preset("h200", 4);  // tiny_config: fp32
  std::set<std::string> seen;
  for (const Unit& u :
       expand_units(parse_model_spec("gpt-tiny"), Kernels::kCuda, Attention::kFused)) {
    const std::string kind = unit_kind_name(u.kind);
    if (!seen.insert(kind).second) continue;
    const UnitTime g = u.kind == UnitKind::kAttention ? UnitTime{0, 0, 0} : gemm_shares(u, h200);
    const UnitTime f = cal.factors(kind);
    EXPECT_NEAR(f.fwd, true_factor(u.kind, g.fwd), 1e-6 * f.fwd) << kind;
    if (u.bwd_input_flops > 0) {
      EXPECT_NEAR(f.bwd_input, true_factor(u.kind, g.bwd_input), 1e-6 * f.bwd_input) << kind;
    }
  }
  const UnitTime attention = cal.factors("attention");
  EXPECT_NEAR(attention.fwd, 1 / kEfficiency.at("attention"), 1e-6 * attention.fwd);
  EXPECT_NEAR(attention.bwd_input, 1 / kEfficiency.at("attention"), 1e-6 * attention.bwd_input);
}

// Leave-one-out on results the CUPTI model explains: every combination
// within 5% (here exactly); without CUPTI's figures the per-pass fit, said
// in one line.
TEST(PlanValidate, CuptiCalibrationPredictsEachCombinationFromTheOthers) {
  std::vector<ResultEntry> results = {cuda_result("1f1b", 4, 8), cuda_result("gpipe", 4, 8),
                                      cuda_result("zb-h1", 4, 8), cuda_result("1f1b", 4, 4)};
  const Validation v = validate_plan(results);
  ASSERT_EQ(v.rows.size(), 4u) << (v.skipped.empty() ? "" : v.skipped[0]);
  for (const ValidationRow& r : v.rows) EXPECT_LT(std::fabs(r.samples_error), 1e-6) << r.source;
  ASSERT_EQ(v.calibrations.size(), 1u);
  EXPECT_NE(v.calibrations[0].find("per unit kind from CUPTI on 4 results"), std::string::npos)
      << v.calibrations[0];
  for (ResultEntry& e : results) e.result.metrics->collectors.clear();
  const Validation old = validate_plan(results);
  ASSERT_EQ(old.calibrations.size(), 1u);
  EXPECT_NE(old.calibrations[0].find("per pass on the roofline (forward x"), std::string::npos);
  EXPECT_NE(old.calibrations[0].find(": not from CUPTI (4 of 4 without its kernel times"),
            std::string::npos)
      << old.calibrations[0];
}

// A result that ran the fused attention is re-priced with its units: the
// attention keeps the statistics, not the probabilities (older files, and
// naive runs, keep the probabilities).
TEST(PlanValidate, AFusedRunIsRepricedWithTheFusedAttentionsBytes) {
  Result r = load_results({PPB_REPORTS_H200_DATA}, false, {}, true).results.front().result;
  ASSERT_EQ(r.config.backend, "cuda");
  r.config.dtype = "bf16";
  const Repriced naive = reprice(r);
  r.config.attention = "fused";
  const Repriced fused = reprice(r);
  const ModelSpec& spec = fused.spec;
  const int64_t t = spec.tokens();
  const int64_t bas = int64_t{spec.micro_batch_size} * spec.heads * spec.seq;
  int64_t drop = 0;
  for (size_t i = 0; i < fused.units.size(); ++i) {
    if (fused.units[i].kind != UnitKind::kAttention) continue;
    EXPECT_EQ(fused.units[i].activation_bytes, 4 * t * spec.hidden * 2 + 4 * bas);
    drop += naive.units[i].activation_bytes - fused.units[i].activation_bytes;
  }
  EXPECT_GT(drop, 0);
  int64_t naive_sum = 0;
  int64_t fused_sum = 0;
  for (const ChunkCost& c : naive.costs.chunks) naive_sum += c.activation_bytes;
  for (const ChunkCost& c : fused.costs.chunks) fused_sum += c.activation_bytes;
  EXPECT_EQ(naive_sum - fused_sum, drop);
}

// The report's planner line prices the attention the results ran, not the
// one a run would pick there: the recorded H200 night (each rank on a GPU
// of its own here) in bf16 that ran naive is planned with the
// probabilities kept, and the same night that ran fused is planned lower.
TEST(PlanValidate, ThePlannerLinePricesTheAttentionTheResultsRan) {
  const auto peak_of = [](const char* attention) {
    LoadedResults loaded = load_results({PPB_REPORTS_H200_DATA}, false);
    std::vector<const ResultEntry*> small;
    for (ResultEntry& e : loaded.results) {
      e.result.environment.ranks_per_gpu = 1;
      e.result.config.dtype = "bf16";
      e.result.config.attention = attention;
      if (e.result.config.model == "gpt-small") small.push_back(&e);
    }
    const std::string line = which_schedule_for_this_machine(small);
    const size_t of = line.find(" of 112 GiB).");
    EXPECT_NE(of, std::string::npos) << line;
    const size_t peak = line.rfind("peaks at ", of);
    EXPECT_NE(peak, std::string::npos) << line;
    return of == std::string::npos || peak == std::string::npos
               ? std::string()
               : line.substr(peak + 9, of - peak - 9);
  };
  const std::string naive = peak_of("naive");  // "1.23 GiB"
  const std::string fused = peak_of("fused");
  ASSERT_FALSE(naive.empty());
  ASSERT_FALSE(fused.empty());
  ASSERT_EQ(naive.substr(naive.find(' ')), fused.substr(fused.find(' '))) << naive << " " << fused;
  EXPECT_GT(std::stod(naive), std::stod(fused)) << naive << " vs " << fused;
}

TEST(PlanDevice, AGpuStandsForThePresetItsNameNames) {
  EXPECT_EQ(gpu_preset("NVIDIA H200"), "h200");
  EXPECT_EQ(gpu_preset("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(gpu_preset("NVIDIA A100-SXM4-80GB"), "a100");
  EXPECT_EQ(gpu_preset("pipebench CUDA emulator (CPU)"), "");  // no roofline of its own
  EXPECT_EQ(gpu_preset("Tesla V100-SXM2-16GB"), "");
  Result r;
  r.config.device = "";
  EXPECT_EQ(roofline_device(r), "cpu");
  r.environment.gpus = {"pipebench CUDA emulator (CPU)"};
  EXPECT_EQ(roofline_device(r), "cpu");  // its --device
  r.environment.gpus = {"NVIDIA H200", "NVIDIA H200"};
  EXPECT_EQ(roofline_device(r), "h200");
}

}  // namespace
}  // namespace ppb::reports
