// From what the ranks measured to the figures of a result file (docs/metrics.md,
// "Definitions"). Pure functions on gathered data: no MPI here, so the
// formulas are unit-tested on hand-made timelines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ppb/pipeline/action.hpp"
#include "ppb/pipeline/costs.hpp"
#include "ppb/pipeline/result.hpp"
#include "ppb/pipeline/simulator.hpp"
#include "ppb/profiling/device_activity.hpp"

namespace ppb::run {

/// One action as a rank ran it: seconds from the barrier that started the step.
struct ActionTiming {
  Action action;
  double start = 0;
  double end = 0;
  double wait = 0;  ///< seconds the action waited for its input before start
};

/// One message end as a rank saw it (send: posted .. completed; receive:
/// posted .. seen complete), seconds from the step's start.
struct CommTiming {
  bool send = false;
  bool gradient = false;  ///< false: activation (v -> v+1); true: gradient (v -> v-1)
  bool local = false;     ///< same-rank hand-over, no transport
  int64_t microbatch = 0;
  int from_virtual = 0;
  int to_virtual = 0;
  double start = 0;
  double end = 0;
  int64_t bytes = 0;
};

/// One gradient all-reduce (data parallelism) as a rank saw it: posted ..
/// seen complete, seconds from the step's start.
struct AllReduceTiming {
  int chunk = 0;
  int64_t bytes = 0;
  double start = 0;
  double end = 0;
};

/// What one stage did in one step.
struct StageStep {
  std::vector<ActionTiming> actions;  ///< in execution order, SYNC included
  std::vector<CommTiming> comms;
  /// End of the stage's last action or gradient all-reduce, seconds from
  /// the step's barrier (docs/metrics.md: the step's end on this rank).
  double end = 0;
  /// End of the stage's last action (= end without data parallelism).
  double actions_end = 0;
  std::vector<AllReduceTiming> allreduces;  ///< data parallelism only
  /// Device activity, when a device profiler (--profile cupti) ran: busy
  /// figures over the step on this rank, and the operations (seconds from
  /// the step's barrier, like the actions; kept only for --trace).
  bool has_device = false;
  device::DeviceBusy device_busy;
  std::vector<device::DeviceOp> device;
};

/// One step: one StageStep per stage (index = stage).
using StepMeasure = std::vector<StageStep>;

/// Compute busy time of a stage: summed durations of F/B/I/W (SYNC waits are
/// not compute).
double compute_busy(const StageStep& stage);

/// The stage's idle time over a step of `total` seconds, in [0, 1] (0 for
/// an empty step): its bubble ratio.
double stage_bubble_ratio(const StageStep& stage, double total);

/// Step time: max over stages of their end (docs/metrics.md). REQUIRES: non-empty.
double step_time(const StepMeasure& step);

/// The device figures of one step (docs/metrics.md, "Device activity"): per
/// stage the device busy figures and the device bubble (step time - device
/// compute busy) / step time. nullopt when no stage has device activity.
/// `profiler` names the collector that recorded it.
std::optional<DeviceFigures> device_figures(const StepMeasure& step, const std::string& profiler);

/// Median of the values (mean of the two middle ones for an even count).
/// REQUIRES: non-empty.
double median(std::vector<double> values);

/// The step figures over the timed steps.
struct StepFigures {
  StepTimeStats step_time_seconds;
  std::size_t median_step = 0;  ///< index of the step whose time is nearest the median
  double samples_per_second = 0;
  BubbleFigures bubble_ratio;     ///< theoretical left NaN (filled from theory)
  BubbleFigures bubble_overhead;  ///< theoretical left NaN
  Timeline timeline;              ///< the median step
};

/// samples/s = samples_per_step / median step time. Bubbles are those of
/// the median step (the step nearest the median, whose timeline the result
/// carries): per stage ratio = (step - compute busy) / step, overhead =
/// idle / busy; the run's figures are the means over stages. REQUIRES: steps non-empty, all with
/// the same stage count.
StepFigures step_figures(const std::vector<StepMeasure>& steps, int64_t samples_per_step);

/// Mean measured durations of each (stage, chunk, kind) over the steps, put
/// into a copy of `model` (which carries the partition's bytes): per
/// virtual stage fwd = mean F; for a chunk that ran I/W, bwd_input = mean I
/// and bwd_weight = mean W; for one that ran only B, bwd_input = mean B and
/// bwd_weight = 0 (the simulator times B as bwd_input + bwd_weight). A kind
/// that never ran keeps 0. The link is `link` (measured_link()).
StageCosts measured_costs(const Schedule& schedule, const std::vector<StepMeasure>& steps,
                          const StageCosts& model, const LinkModel& link);

/// The link as measured. A transfer's time is (receive seen complete on the
/// receiver) - (send posted on the sender), both on the step's common time
/// axis, taken from the messages whose consuming action waited for them (a
/// message that arrived while its receiver computed says nothing about its
/// duration). With two or more distinct message sizes the times are fitted
/// by least squares as comm_time + bytes / bandwidth (a cut inside a layer
/// sends up to 5x the bytes of one between layers); otherwise, or when the
/// fit is not physical (slope <= 0), comm_time = their median and the
/// bandwidth infinite. Without waited messages: comm_time = the minimum
/// over all messages; 0 without messages.
/// `placement` is the schedule's (placement_of). A link (ordered rank pair)
/// carries one message after another, as the simulator's do: a message
/// posted while the one before it on its link was still crossing counts
/// from that one's arrival, so queueing is not taken for transfer time.
/// Every transfer is on one link model (all ranks on one host).
LinkModel measured_link(const std::vector<StepMeasure>& steps, const Placement& placement);

/// The links of a run whose ranks may sit on several hosts: transfers
/// between stages on one host and transfers between hosts are fitted
/// apart, each as measured_link() fits, into `host` and `network`.
/// `figures` has one entry per path that carried transfers ("host" first).
struct MeasuredLinks {
  LinkModel host;
  LinkModel network;
  std::vector<MeasuredLinkFigures> figures;
};
/// host_of_stage: a host index per stage (empty: every stage on one host).
/// Example: host_of_stage {0, 0, 1, 1}: the transfers 1 <-> 2 are the
/// network's, 0 <-> 1 and 2 <-> 3 the host's.
MeasuredLinks measured_links(const std::vector<StepMeasure>& steps, const Placement& placement,
                             const std::vector<int>& host_of_stage);

/// Per stage mean F, B, I, W seconds over all chunks (NaN for a kind the
/// stage never ran): the result's theory.action_seconds.
std::vector<StageActionTimes> mean_action_seconds(int stages,
                                                  const std::vector<StepMeasure>& steps);

/// The simulator fed the measured costs: step time, bubble ratio and
/// overhead as means over stages (the normalisation of the measured ones),
/// peak in-flight and activation bytes per stage, and the predicted timeline.
struct TheoryOutcome {
  TheoryFigures figures;
  double bubble_ratio = 0;
  double bubble_overhead = 0;
  std::vector<double> ratio_per_stage;
  std::vector<double> overhead_per_stage;
  /// Data parallelism: the bubble ratio over the pipeline time (without the
  /// all-reduce's tail) and each stage's all-reduce seconds.
  double bubble_ratio_pipeline = 0;
  std::vector<double> allreduce_per_stage;
};
TheoryOutcome theory_figures(const Schedule& schedule, const StageCosts& costs);

/// Closed form (P-1)/(M+P-1) of GPipe and 1F1B with equal stages, for the
/// schedules whose registry entry says it applies (ScheduleInfo::
/// closed_form_bubble; with an in-flight limit only when N >= P:
/// closed_form_bubble_applies); NaN otherwise.
double closed_form_bubble_ratio(const std::string& schedule, int stages, int microbatches,
                                int inflight);

// --- data parallelism: W = P x D ranks as D pipelines --------------------
// A step of a data-parallel run holds the W ranks in replica-major order
// (index = replica x P + stage), whatever the job's rank order.

/// The D pipelines of one such step (each P stages). REQUIRES: the step's
/// size is a multiple of `stages`.
std::vector<StepMeasure> split_replicas(const StepMeasure& step, int stages);

/// A per-rank list (replica-major) as a per-stage one: the mean over the
/// replicas of each stage. REQUIRES: size a multiple of `stages`.
std::vector<double> fold_replicas(const std::vector<double>& per_rank, int stages);

/// The ring model fitted to one step's all-reduces (replica-major W ranks):
/// the k-th all-reduce of stage s is one collective of its D replicas, from
/// its last post to its last completion seen (on one host the ranks share a
/// clock). Its duration y is fitted by least squares as 2(D-1) x latency +
/// x / bandwidth with x = 2(D-1)/D x bytes; with one size, or a fit that is
/// not physical (slope <= 0 or a negative intercept), through the origin
/// (latency 0). bandwidth 0 (infinite) when nothing was reduced or no time
/// was measured. per_backward as `per_backward`.
AllReduceModel measured_allreduce(const StepMeasure& step, int stages, int replicas,
                                  bool per_backward);

/// The all-reduce figures of one step (replica-major W ranks): per stage,
/// means over the replicas of the summed all-reduce seconds, of their
/// overlap with the stage's compute actions, and the bytes; exposed
/// seconds = step time - pipeline time (max over ranks of actions_end); the
/// bubble ratio without the all-reduce over that pipeline time (measured;
/// theoretical left NaN). latency/bandwidth and the theory are left 0.
AllReduceFigures allreduce_figures(const StepMeasure& step, int stages);

/// One stage's memory as its tracker saw it.
struct StageMemory {
  int64_t peak_total = 0;
  int64_t peak_activations = 0;
  MemoryByCategory at_peak{};
  int64_t peak_rss = 0;
  int64_t device_peak = -1;  ///< device backends: max RankStep::device_peak_bytes; -1 without
};

/// Per stage peaks, as the result file lays them out.
PeakMemory peak_memory(const std::vector<StageMemory>& stages);

// --- from the gathered rank records (rank_record.hpp; index = rank, or
// replica-major under data parallelism) -------------------------------------

struct RankRecord;
struct RankStep;

/// The timed steps on one time axis per step: on one host every rank's
/// steady clock is the same clock, so each rank's times are shifted by its
/// step start minus the earliest start of that step (the barrier's exit);
/// across hosts the ranks' own step starts are the origin.
/// REQUIRES: ranks non-empty, all with the same number of steps.
std::vector<StepMeasure> align_steps(const std::vector<RankRecord>& ranks, bool one_host);

/// The collectors' figures of the step `median_step`, per rank (NaN for a
/// step figure a rank did not report): the result's metrics.collectors.
std::map<std::string, CollectorResult> collector_results(const std::vector<RankRecord>& ranks,
                                                         size_t median_step);

/// The host index of each stage (stage = rank) from the environment's
/// rank_hosts; empty when every rank is on one host.
std::vector<int> host_of_stage(const ResultEnvironment& env, int stages);

/// Per stage, the seconds one micro-batch spent in each unit kind in the
/// step `step` (the median one), by pass: the mean over the stage's
/// replicas (`ranks` replica-major), as the action times of that step are;
/// empty when the backend does not time its units. Kinds the stage does not
/// hold are left out.
std::vector<std::map<std::string, KindSeconds>> kind_seconds_per_stage(
    const std::vector<RankRecord>& ranks, int stages, size_t step, int microbatches);

/// Each rank's speed probe after each of its timed steps, index = rank
/// (add_data_parallel folds replicas into stages); empty when the backend
/// has none (every probe NaN).
std::vector<std::vector<double>> speed_probe_per_stage(const std::vector<RankRecord>& ranks);

/// Data parallelism's figures (`steps` hold the W ranks, replica-major):
/// each stage's busy seconds and speed probe per step as the mean over its
/// replicas, and the all-reduce figures of the median step beside the
/// simulator's (`model` is the ring model it was fed).
void add_data_parallel(const std::vector<StepMeasure>& steps, size_t median_step, int stages,
                       const AllReduceModel& model, const TheoryOutcome& theory, ResultMetrics& m);

/// One rank's peaks over its timed steps: the maxima of peak_bytes,
/// peak_activation_bytes and device_peak_bytes (at_peak and peak_rss left
/// as they are: the backend and the process know them).
StageMemory step_memory_peaks(const std::vector<RankStep>& steps);

/// Per stage, the memory of the replica with the highest peak (replicas
/// hold the same; replica 0's on a tie). REQUIRES: ranks replica-major.
std::vector<StageMemory> stage_memories(const std::vector<RankRecord>& ranks, int stages);

}  // namespace ppb::run
