#include "run/metrics.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <tuple>

#include "ppb/pipeline/model.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/reports/stats.hpp"
#include "run/rank_record.hpp"

namespace ppb::run {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool is_compute(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
    case ActionKind::kBackwardWeight:
      return true;
    case ActionKind::kSync:
      return false;
  }
  return false;
}

double mean_of(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

}  // namespace

double compute_busy(const StageStep& stage) {
  double busy = 0;
  for (const ActionTiming& a : stage.actions) {
    if (is_compute(a.action.kind)) busy += a.end - a.start;
  }
  return busy;
}

double stage_bubble_ratio(const StageStep& stage, double total) {
  // A stage busy all step long may sum its actions a rounding above it.
  return total > 0 ? std::max(0.0, total - compute_busy(stage)) / total : 0;
}

double step_time(const StepMeasure& step) {
  PPB_CHECK(!step.empty(), "step_time of a step without stages");
  double t = 0;
  for (const StageStep& s : step) t = std::max(t, s.end);
  return t;
}

std::optional<DeviceFigures> device_figures(const StepMeasure& step, const std::string& profiler) {
  const bool any =
      std::any_of(step.begin(), step.end(), [](const StageStep& s) { return s.has_device; });
  if (!any) return std::nullopt;
  const double t = step_time(step);
  DeviceFigures d;
  d.profiler = profiler;
  for (const StageStep& s : step) {
    // A stage without records (its profiler off) has no figures: NaN, not 0.
    const auto figure = [&s](double x) { return s.has_device ? x : kNaN; };
    d.compute_seconds_per_stage.push_back(figure(s.device_busy.compute));
    d.communication_seconds_per_stage.push_back(figure(s.device_busy.communication));
    d.overlap_seconds_per_stage.push_back(figure(s.device_busy.overlap));
    d.busy_seconds_per_stage.push_back(figure(s.device_busy.busy));
    d.bubble_ratio_per_stage.push_back(
        figure(device::device_bubble_ratio(s.device_busy.compute, t)));
  }
  d.bubble_ratio = mean_of(d.bubble_ratio_per_stage);
  return d;
}

double median(std::vector<double> values) {
  PPB_CHECK(!values.empty(), "median of nothing");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

StepFigures step_figures(const std::vector<StepMeasure>& steps, int64_t samples_per_step) {
  PPB_CHECK(!steps.empty(), "step_figures without steps");
  const std::size_t stages = steps.front().size();
  StepFigures out;
  StepTimeStats& st = out.step_time_seconds;
  for (const StepMeasure& step : steps) {
    PPB_CHECK(step.size() == stages, "steps with different stage counts");
    st.samples.push_back(step_time(step));
  }
  st.median = median(st.samples);
  st.min = *std::min_element(st.samples.begin(), st.samples.end());
  st.max = *std::max_element(st.samples.begin(), st.samples.end());
  out.median_step = 0;
  for (std::size_t i = 1; i < st.samples.size(); ++i) {
    if (std::fabs(st.samples[i] - st.median) < std::fabs(st.samples[out.median_step] - st.median)) {
      out.median_step = i;
    }
  }
  out.samples_per_second = st.median > 0 ? static_cast<double>(samples_per_step) / st.median : 0;

  // Bubbles of the median step (the step the timeline shows): one slow step
  // (a preempted rank on a busy machine) would otherwise shift them all.
  const StepMeasure& mid = steps[out.median_step];
  const double total_time = st.samples[out.median_step];
  for (std::size_t s = 0; s < stages; ++s) {
    const double busy = compute_busy(mid[s]);
    const double ratio = stage_bubble_ratio(mid[s], total_time);
    out.bubble_ratio.per_stage.push_back(ratio);
    out.bubble_overhead.per_stage.push_back(busy > 0 ? ratio * total_time / busy : 0);
  }
  out.bubble_ratio.measured = mean_of(out.bubble_ratio.per_stage);
  out.bubble_overhead.measured = mean_of(out.bubble_overhead.per_stage);
  out.bubble_ratio.theoretical = kNaN;
  out.bubble_overhead.theoretical = kNaN;

  for (const StageStep& s : steps[out.median_step]) {
    std::vector<TimelineEvent> row;
    row.reserve(s.actions.size());
    for (const ActionTiming& a : s.actions) {
      row.push_back({a.action.kind, a.action.microbatch, a.action.chunk, a.start, a.end});
    }
    out.timeline.push_back(std::move(row));
  }
  return out;
}

namespace {

/// Sums and counts per (virtual stage, kind).
struct KindSums {
  std::vector<double> sum;
  std::vector<int64_t> count;
  explicit KindSums(std::size_t n) : sum(n, 0.0), count(n, 0) {}
  void add(std::size_t i, double d) {
    sum[i] += d;
    ++count[i];
  }
  double mean(std::size_t i) const {
    return count[i] > 0 ? sum[i] / static_cast<double>(count[i]) : 0;
  }
  bool ran(std::size_t i) const { return count[i] > 0; }
};

}  // namespace

StageCosts measured_costs(const Schedule& schedule, const std::vector<StepMeasure>& steps,
                          const StageCosts& model, const LinkModel& link) {
  const int P = schedule.stages;
  const Placement place = placement_of(schedule);
  const std::size_t n = static_cast<std::size_t>(schedule.virtual_stages());
  KindSums f(n), b(n), in(n), w(n);
  for (const StepMeasure& step : steps) {
    for (int s = 0; s < P && s < static_cast<int>(step.size()); ++s) {
      for (const ActionTiming& a : step[static_cast<std::size_t>(s)].actions) {
        if (a.action.chunk < 0) continue;
        const std::size_t v = static_cast<std::size_t>(place.virtual_stage(s, a.action.chunk));
        if (v >= n) continue;
        const double d = a.end - a.start;
        switch (a.action.kind) {
          case ActionKind::kForward:
            f.add(v, d);
            break;
          case ActionKind::kBackward:
            b.add(v, d);
            break;
          case ActionKind::kBackwardInput:
            in.add(v, d);
            break;
          case ActionKind::kBackwardWeight:
            w.add(v, d);
            break;
          case ActionKind::kSync:
            break;
        }
      }
    }
  }
  StageCosts costs = model;
  costs.stages = P;
  costs.chunks_per_stage = schedule.chunks;
  costs.chunks.resize(n);
  for (std::size_t v = 0; v < n; ++v) {
    ChunkCost& c = costs.chunks[v];
    c.fwd = f.mean(v);
    if (in.ran(v) || w.ran(v)) {
      c.bwd_input = in.ran(v) ? in.mean(v) : b.mean(v);
      c.bwd_weight = w.mean(v);
    } else {
      c.bwd_input = b.mean(v);
      c.bwd_weight = 0;
    }
  }
  costs.link = link;
  return costs;
}

namespace {

// One transfer between two ranks, on the step's common time axis.
struct Transfer {
  int from = 0;
  int to = 0;
  double posted = 0;   // send posted on the sender
  double arrived = 0;  // receive seen complete on the receiver
  double start = 0;    // when the link was free for it: max(posted, the link's previous arrival)
  int64_t bytes = 0;
  bool waited = false;  // its consuming action waited for it
  double idle = 0;      // when waited: when the receiver's stream went idle (arrived - wait)
};

// The transfers of one step, each with the consuming action's wait.
std::vector<Transfer> step_transfers(const StepMeasure& step, const Placement& placement) {
  std::vector<Transfer> out;
  for (std::size_t r = 0; r < step.size(); ++r) {
    for (const CommTiming& recv : step[r].comms) {
      if (recv.send || recv.local) continue;
      const std::size_t sender = static_cast<std::size_t>(placement.stage_of(recv.from_virtual));
      if (sender >= step.size()) continue;
      const CommTiming* send = nullptr;
      for (const CommTiming& c : step[sender].comms) {
        if (c.send && !c.local && c.gradient == recv.gradient && c.microbatch == recv.microbatch &&
            c.from_virtual == recv.from_virtual && c.to_virtual == recv.to_virtual) {
          send = &c;
          break;
        }
      }
      if (send == nullptr) continue;
      Transfer t{static_cast<int>(sender),
                 static_cast<int>(r),
                 send->start,
                 recv.end,
                 send->start,
                 recv.bytes,
                 false};
      // The consuming action: F of the activation's micro-batch and chunk,
      // or B/I of the gradient's.
      const int chunk = placement.chunk_of(recv.to_virtual);
      for (const ActionTiming& a : step[r].actions) {
        const bool consumer = a.action.microbatch == recv.microbatch && a.action.chunk == chunk &&
                              (recv.gradient ? (a.action.kind == ActionKind::kBackward ||
                                                a.action.kind == ActionKind::kBackwardInput)
                                             : a.action.kind == ActionKind::kForward);
        if (consumer) {
          // The consumer's wait runs from the stream's last end to the
          // input's arrival, which is this receive's end.
          t.waited = a.wait > 0;
          t.idle = t.arrived - a.wait;
          break;
        }
      }
      out.push_back(t);
    }
  }
  // A link (ordered rank pair) carries one message after another, as the
  // simulator's links do: a message posted while the one before it was
  // still crossing starts when that one arrived. Without this the queueing
  // behind earlier messages would count as transfer time.
  std::sort(out.begin(), out.end(), [](const Transfer& a, const Transfer& b) {
    return std::tie(a.from, a.to, a.posted, a.arrived) <
           std::tie(b.from, b.to, b.posted, b.arrived);
  });
  double link_free = 0;  // the latest arrival so far on the current link
  for (std::size_t i = 0; i < out.size(); ++i) {
    const bool same_link = i > 0 && out[i - 1].from == out[i].from && out[i - 1].to == out[i].to;
    out[i].start = same_link ? std::max(out[i].posted, link_free) : out[i].posted;
    link_free = same_link ? std::max(link_free, out[i].arrived) : out[i].arrived;
  }
  return out;
}

// Fits transfer time = comm_time + bytes / bandwidth (see measured_link)
// and says what it used, over the transfers the receiver waited for.
//  - Between ranks of one host (`robust` false) a transfer's time runs from
//    the later of its start and the moment the receiving stream went idle
//    (its consumer's wait before the arrival), so at most that wait: a
//    message posted while the receiver computed moves only as the receiver
//    polls (shared memory and rendezvous need both ends). Counted from the
//    post, that stretch of the receiver's action was charged as link time
//    on every hop, where the receiver waited too: on 4 timed ranks with
//    balanced cuts (256 KiB to 1 MiB) the fitted link took 1.5-3x the
//    75-215 us such a hop takes, and interleaved-1f1b's 14 waited hops made
//    its simulated step 0.4-2.7% longer than the measured one. The
//    simulator still starts a transfer at the send: a hop posted while its
//    receiver computes arrives there before the receiver is done, where the
//    real one lands a short hop after, so the simulated step is now a
//    little short instead (0.2-0.7% there). Every such transfer is a
//    point: the typical transfer, shared-memory copies slowed by the ranks
//    sharing the cores included, which the simulator needs to predict the
//    step there.
//  - Between hosts (`robust` true) each size speaks through the lower
//    quartile of its transfers that did not queue behind an earlier one on
//    the link (with fewer than two such sizes, of every waited transfer):
//    delays on the way (a descheduled rank, a receiver that looked late)
//    only ever add time, and they pulled a line through every transfer to
//    0.66-0.77 of a link shaped to 1 Gbit/s while the machine was busy.
LinkModel fit_link(const std::vector<Transfer>& all, bool robust, MeasuredLinkFigures& fig) {
  std::map<int64_t, std::vector<double>> clean;  // bytes -> took
  std::map<int64_t, std::vector<double>> waited;
  double min_any = std::numeric_limits<double>::infinity();
  int messages = 0;
  for (const Transfer& t : all) {
    const double from = t.waited && !robust ? std::max(t.start, t.idle) : t.start;
    const double took = std::max(0.0, t.arrived - from);
    min_any = std::min(min_any, took);
    if (!t.waited) continue;
    ++messages;
    waited[t.bytes].push_back(took);
    if (t.start <= t.posted) clean[t.bytes].push_back(took);
  }
  for (const auto& [bytes, took] : waited) fig.sizes.push_back(bytes);
  fig.messages = messages;
  std::vector<double> xs;
  std::vector<double> ys;
  if (robust) {
    for (auto [bytes, took] : clean.size() >= 2 ? clean : waited) {
      std::sort(took.begin(), took.end());
      xs.push_back(static_cast<double>(bytes));
      ys.push_back(reports::quantile_sorted(took, 0.25));
    }
  } else {
    for (const auto& [bytes, took] : waited) {
      for (const double y : took) {
        xs.push_back(static_cast<double>(bytes));
        ys.push_back(y);
      }
    }
  }
  LinkModel link;
  if (ys.empty()) {
    link.comm_time = std::isfinite(min_any) ? min_any : 0.0;
  } else {
    link.comm_time = median(ys);
    const double n = static_cast<double>(xs.size());
    double mean_b = 0, mean_t = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      mean_b += xs[i] / n;
      mean_t += ys[i] / n;
    }
    double cov = 0, var = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      cov += (xs[i] - mean_b) * (ys[i] - mean_t);
      var += (xs[i] - mean_b) * (xs[i] - mean_b);
    }
    // One size has no slope, however the rounding of its mean leaves var.
    const bool sizes = std::any_of(xs.begin(), xs.end(), [&](double x) { return x != xs[0]; });
    if (sizes && var > 0 && cov > 0) {
      double slope = cov / var;
      double intercept = mean_t - slope * mean_b;
      if (intercept < 0) {  // through the origin instead
        double bt = 0, bb = 0;
        for (std::size_t i = 0; i < xs.size(); ++i) {
          bt += xs[i] * ys[i];
          bb += xs[i] * xs[i];
        }
        intercept = 0;
        slope = bt / bb;
      }
      link.comm_time = intercept;
      link.bandwidth = 1.0 / slope;
    }
  }
  fig.latency_seconds = link.comm_time;
  fig.bandwidth_bytes_per_second = link.bandwidth > 0 ? link.bandwidth : kNaN;
  return link;
}

}  // namespace

MeasuredLinks measured_links(const std::vector<StepMeasure>& steps, const Placement& placement,
                             const std::vector<int>& host_of_stage) {
  std::array<std::vector<Transfer>, 2> paths;  // 0: on one host, 1: between hosts
  for (const StepMeasure& step : steps) {
    for (const Transfer& t : step_transfers(step, placement)) {
      const auto n = host_of_stage.size();
      const auto f = static_cast<std::size_t>(t.from);
      const auto to = static_cast<std::size_t>(t.to);
      const bool network = f < n && to < n && host_of_stage[f] != host_of_stage[to];
      paths[network ? 1 : 0].push_back(t);
    }
  }
  MeasuredLinks out;
  const std::array<const char*, 2> names = {"host", "network"};
  const std::array<LinkModel*, 2> models = {&out.host, &out.network};
  for (std::size_t p = 0; p < paths.size(); ++p) {
    MeasuredLinkFigures fig;
    fig.path = names[p];
    *models[p] = fit_link(paths[p], /*robust=*/p == 1, fig);
    if (!paths[p].empty()) out.figures.push_back(std::move(fig));
  }
  return out;
}

LinkModel measured_link(const std::vector<StepMeasure>& steps, const Placement& placement) {
  return measured_links(steps, placement, {}).host;
}

std::vector<StageActionTimes> mean_action_seconds(int stages,
                                                  const std::vector<StepMeasure>& steps) {
  std::vector<StageActionTimes> out;
  for (int s = 0; s < stages; ++s) {
    KindSums k(4);
    for (const StepMeasure& step : steps) {
      if (s >= static_cast<int>(step.size())) continue;
      for (const ActionTiming& a : step[static_cast<std::size_t>(s)].actions) {
        const double d = a.end - a.start;
        switch (a.action.kind) {
          case ActionKind::kForward:
            k.add(0, d);
            break;
          case ActionKind::kBackward:
            k.add(1, d);
            break;
          case ActionKind::kBackwardInput:
            k.add(2, d);
            break;
          case ActionKind::kBackwardWeight:
            k.add(3, d);
            break;
          case ActionKind::kSync:
            break;
        }
      }
    }
    auto value = [&](std::size_t i) { return k.ran(i) ? k.mean(i) : kNaN; };
    out.push_back({value(0), value(1), value(2), value(3)});
  }
  return out;
}

TheoryOutcome theory_figures(const Schedule& schedule, const StageCosts& costs) {
  const SimResult sim = simulate(schedule, costs);
  const Placement place = placement_of(schedule);
  TheoryOutcome out;
  TheoryFigures& t = out.figures;
  t.step_time_seconds = sim.step_time;
  for (std::size_t s = 0; s < sim.stages.size(); ++s) {
    const SimStage& st = sim.stages[s];
    t.peak_inflight_per_stage.push_back(st.peak_inflight);
    t.peak_activation_bytes_per_stage.push_back(st.peak_activation_bytes);
    int64_t per_mb = 0;
    for (int c = 0; c < costs.chunks_per_stage; ++c)
      per_mb += costs.at(place, static_cast<int>(s), c).activation_bytes;
    t.activation_bytes_per_microbatch.push_back(per_mb);
    out.ratio_per_stage.push_back(sim.step_time > 0 ? st.idle / sim.step_time : 0);
    out.overhead_per_stage.push_back(st.busy > 0 ? st.idle / st.busy : 0);
    std::vector<TimelineEvent> row;
    for (const SimEvent& e : st.events) {
      row.push_back({e.action.kind, e.action.microbatch, e.action.chunk, e.start, e.end});
    }
    t.timeline.push_back(std::move(row));
  }
  out.bubble_ratio = mean_of(out.ratio_per_stage);
  out.bubble_overhead = mean_of(out.overhead_per_stage);
  out.bubble_ratio_pipeline = sim.bubble_ratio_pipeline;
  for (const SimStage& st : sim.stages) out.allreduce_per_stage.push_back(st.allreduce);
  return out;
}

std::vector<StepMeasure> split_replicas(const StepMeasure& step, int stages) {
  PPB_CHECK(stages >= 1 && step.size() % static_cast<size_t>(stages) == 0,
            "split_replicas: the step's ranks are not a multiple of the stages");
  std::vector<StepMeasure> out;
  for (size_t first = 0; first < step.size(); first += static_cast<size_t>(stages)) {
    out.emplace_back(step.begin() + static_cast<std::ptrdiff_t>(first),
                     step.begin() + static_cast<std::ptrdiff_t>(first) + stages);
  }
  return out;
}

std::vector<double> fold_replicas(const std::vector<double>& per_rank, int stages) {
  PPB_CHECK(stages >= 1 && per_rank.size() % static_cast<size_t>(stages) == 0,
            "fold_replicas: the ranks are not a multiple of the stages");
  const size_t p = static_cast<size_t>(stages);
  const double d = static_cast<double>(per_rank.size()) / static_cast<double>(p);
  std::vector<double> out(p, 0.0);
  for (size_t r = 0; r < per_rank.size(); ++r) out[r % p] += per_rank[r] / d;
  return out;
}

AllReduceModel measured_allreduce(const StepMeasure& step, int stages, int replicas,
                                  bool per_backward) {
  AllReduceModel model;
  model.replicas = replicas;
  model.per_backward = per_backward;
  if (replicas <= 1) return model;
  const std::vector<StepMeasure> pipes = split_replicas(step, stages);
  const double d = replicas;
  std::vector<double> xs, ys;  // x = 2(D-1)/D x bytes, y = seconds
  for (int s = 0; s < stages; ++s) {
    const auto n = pipes.front()[static_cast<size_t>(s)].allreduces.size();
    for (size_t k = 0; k < n; ++k) {
      double start = 0, end = 0;
      int64_t bytes = 0;
      for (const StepMeasure& pipe : pipes) {
        const auto& rs = pipe[static_cast<size_t>(s)].allreduces;
        if (k >= rs.size()) continue;
        start = std::max(start, rs[k].start);
        end = std::max(end, rs[k].end);
        bytes = rs[k].bytes;
      }
      xs.push_back(2.0 * (d - 1.0) / d * static_cast<double>(bytes));
      ys.push_back(std::max(0.0, end - start));
    }
  }
  double sx = 0, sy = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    sx += xs[i];
    sy += ys[i];
  }
  if (xs.empty() || sx <= 0 || sy <= 0) return model;
  const double n = static_cast<double>(xs.size());
  const double mx = sx / n, my = sy / n;
  double cov = 0, var = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    cov += (xs[i] - mx) * (ys[i] - my);
    var += (xs[i] - mx) * (xs[i] - mx);
  }
  if (var > 0 && cov > 0 && my - cov / var * mx >= 0) {
    const double slope = cov / var;
    model.latency = (my - slope * mx) / (2.0 * (d - 1.0));
    model.bandwidth = 1.0 / slope;
    return model;
  }
  double xy = 0, xx = 0;  // through the origin
  for (size_t i = 0; i < xs.size(); ++i) {
    xy += xs[i] * ys[i];
    xx += xs[i] * xs[i];
  }
  model.bandwidth = xy > 0 ? xx / xy : 0.0;
  return model;
}

namespace {

/// Length of [a, b] covered by the stage's compute actions (which never
/// overlap one another on one stage).
double compute_overlap(const StageStep& stage, double a, double b) {
  double covered = 0;
  for (const ActionTiming& t : stage.actions) {
    if (!is_compute(t.action.kind)) continue;
    covered += std::max(0.0, std::min(b, t.end) - std::max(a, t.start));
  }
  return covered;
}

}  // namespace

AllReduceFigures allreduce_figures(const StepMeasure& step, int stages) {
  AllReduceFigures f;
  std::vector<double> seconds, overlap, pipeline_ratio;
  std::vector<double> bytes;
  double pipeline = 0;
  for (const StageStep& s : step) pipeline = std::max(pipeline, s.actions_end);
  const double total = step_time(step);
  for (const StageStep& s : step) {
    double sec = 0, ov = 0, by = 0;
    for (const AllReduceTiming& r : s.allreduces) {
      sec += r.end - r.start;
      ov += compute_overlap(s, r.start, r.end);
      by += static_cast<double>(r.bytes);
    }
    seconds.push_back(sec);
    overlap.push_back(ov);
    bytes.push_back(by);
    pipeline_ratio.push_back(pipeline > 0 ? (pipeline - compute_busy(s)) / pipeline : 0.0);
  }
  f.seconds_per_stage = fold_replicas(seconds, stages);
  f.overlap_seconds_per_stage = fold_replicas(overlap, stages);
  for (double b : fold_replicas(bytes, stages)) f.bytes_per_stage.push_back(std::llround(b));
  f.seconds = mean_of(f.seconds_per_stage);
  f.exposed_seconds = std::max(0.0, total - pipeline);
  f.bubble_ratio_pipeline.per_stage = fold_replicas(pipeline_ratio, stages);
  f.bubble_ratio_pipeline.measured = mean_of(f.bubble_ratio_pipeline.per_stage);
  f.bubble_ratio_pipeline.theoretical = kNaN;
  return f;
}

double closed_form_bubble_ratio(const std::string& schedule, int stages, int microbatches,
                                int inflight) {
  if (!closed_form_bubble_applies(schedule, stages, inflight)) return kNaN;
  return static_cast<double>(stages - 1) / static_cast<double>(microbatches + stages - 1);
}

PeakMemory peak_memory(const std::vector<StageMemory>& stages) {
  PeakMemory out;
  for (const StageMemory& s : stages) {
    out.per_stage.push_back(s.peak_total);
    out.activations_per_stage.push_back(s.peak_activations);
    out.by_category.push_back(s.at_peak);
    out.peak_rss_per_stage.push_back(s.peak_rss);
    if (s.device_peak >= 0) out.device_per_stage.push_back(s.device_peak);
  }
  // All stages or none (a partial list would misalign with the stages).
  if (out.device_per_stage.size() != stages.size()) out.device_per_stage.clear();
  return out;
}

// --- from the gathered rank records ----------------------------------------

std::vector<StepMeasure> align_steps(const std::vector<RankRecord>& ranks, bool one_host) {
  std::vector<StepMeasure> steps;
  const size_t n = ranks.front().steps.size();
  for (size_t k = 0; k < n; ++k) {
    double origin = std::numeric_limits<double>::infinity();
    for (const RankRecord& r : ranks) origin = std::min(origin, r.steps[k].origin);
    StepMeasure step;
    for (const RankRecord& r : ranks) {
      StageStep s = r.steps[k].step;
      const double shift = one_host ? r.steps[k].origin - origin : 0.0;
      s.end += shift;
      s.actions_end += shift;
      for (AllReduceTiming& a : s.allreduces) {
        a.start += shift;
        a.end += shift;
      }
      for (ActionTiming& a : s.actions) {
        a.start += shift;
        a.end += shift;
      }
      for (CommTiming& c : s.comms) {
        c.start += shift;
        c.end += shift;
      }
      for (device::DeviceOp& d : s.device) {
        d.start += shift;
        d.end += shift;
      }
      step.push_back(std::move(s));
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

std::map<std::string, CollectorResult> collector_results(const std::vector<RankRecord>& ranks,
                                                         size_t median_step) {
  std::map<std::string, CollectorResult> out;
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (const auto& [name, figures] : ranks[r].steps[median_step].collectors) {
      CollectorResult& cr = out[name];
      for (const auto& [figure, value] : figures.step) {
        auto& v = cr.step[figure];
        v.resize(ranks.size(), kNaN);
        v[r] = value;
      }
      for (const auto& [figure, values] : figures.action) {
        auto& v = cr.action[figure];
        v.resize(ranks.size());
        v[r] = values;
      }
    }
  }
  return out;
}

std::vector<int> host_of_stage(const ResultEnvironment& env, int stages) {
  if (env.hosts.size() < 2 || static_cast<int>(env.rank_hosts.size()) != stages) return {};
  std::vector<int> out;
  for (const std::string& h : env.rank_hosts) {
    out.push_back(
        static_cast<int>(std::find(env.hosts.begin(), env.hosts.end(), h) - env.hosts.begin()));
  }
  return out;
}

std::vector<std::map<std::string, KindSeconds>> kind_seconds_per_stage(
    const std::vector<RankRecord>& ranks, int stages, size_t step, int microbatches) {
  const auto p = static_cast<size_t>(stages);
  if (ranks.empty() || ranks.size() % p != 0) return {};
  std::vector<std::vector<UnitTime>> sums(p, std::vector<UnitTime>(kUnitKinds));
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::vector<RankStep>& steps = ranks[r].steps;
    if (step >= steps.size() || steps[step].kind_seconds.size() != sums[r % p].size()) return {};
    for (size_t k = 0; k < sums[r % p].size(); ++k) {
      UnitTime& sum = sums[r % p][k];
      const UnitTime& spent = steps[step].kind_seconds[k];
      sum.fwd += spent.fwd;
      sum.bwd_input += spent.bwd_input;
      sum.bwd_weight += spent.bwd_weight;
    }
  }
  const size_t replicas = ranks.size() / p;
  const double per_mb = static_cast<double>(std::max(microbatches, 1)) *
                        static_cast<double>(replicas);  // micro-batches of every replica
  std::vector<std::map<std::string, KindSeconds>> out(p);
  for (size_t s = 0; s < p; ++s) {
    for (size_t k = 0; k < sums[s].size(); ++k) {
      const UnitTime& spent = sums[s][k];
      if (spent.total() <= 0) continue;
      out[s][unit_kind_name(static_cast<UnitKind>(k))] = {
          spent.fwd / per_mb, spent.bwd_input / per_mb, spent.bwd_weight / per_mb};
    }
  }
  return out;
}

std::vector<std::vector<double>> speed_probe_per_stage(const std::vector<RankRecord>& ranks) {
  std::vector<std::vector<double>> out;
  bool any = false;
  for (const RankRecord& r : ranks) {
    std::vector<double>& mine = out.emplace_back();
    for (const RankStep& s : r.steps) {
      mine.push_back(s.probe_seconds);
      any = any || std::isfinite(s.probe_seconds);
    }
  }
  if (!any) out.clear();
  return out;
}

void add_data_parallel(const std::vector<StepMeasure>& steps, size_t median_step, int stages,
                       const AllReduceModel& model, const TheoryOutcome& theory, ResultMetrics& m) {
  // [rank][step] -> [stage][step], each the mean over the stage's replicas.
  const auto fold = [&](const std::vector<std::vector<double>>& per_rank_steps) {
    std::vector<std::vector<double>> folded(static_cast<size_t>(stages));
    for (size_t k = 0; k < steps.size(); ++k) {
      std::vector<double> per_rank;
      for (const std::vector<double>& rank_steps : per_rank_steps)
        per_rank.push_back(rank_steps[k]);
      const std::vector<double> per_stage = fold_replicas(per_rank, stages);
      for (size_t st = 0; st < per_stage.size(); ++st) folded[st].push_back(per_stage[st]);
    }
    return folded;
  };
  m.busy_seconds_per_stage = fold(m.busy_seconds_per_stage);
  if (!m.speed_probe_seconds_per_stage.empty())
    m.speed_probe_seconds_per_stage = fold(m.speed_probe_seconds_per_stage);
  AllReduceFigures a = allreduce_figures(steps[median_step], stages);
  a.latency = model.latency;
  a.bandwidth = model.bandwidth;
  a.theoretical_seconds_per_stage = theory.allreduce_per_stage;
  a.bubble_ratio_pipeline.theoretical = theory.bubble_ratio_pipeline;
  m.allreduce = a;
}

StageMemory step_memory_peaks(const std::vector<RankStep>& steps) {
  StageMemory memory;
  for (const RankStep& s : steps) {
    memory.peak_total = std::max(memory.peak_total, s.peak_bytes);
    memory.peak_activations = std::max(memory.peak_activations, s.peak_activation_bytes);
    memory.device_peak = std::max(memory.device_peak, s.device_peak_bytes);
  }
  return memory;
}

std::vector<StageMemory> stage_memories(const std::vector<RankRecord>& ranks, int stages) {
  std::vector<StageMemory> mems(static_cast<size_t>(stages));
  for (size_t r = 0; r < ranks.size(); ++r) {
    StageMemory& s = mems[r % static_cast<size_t>(stages)];
    if (r < static_cast<size_t>(stages) || ranks[r].memory.peak_total > s.peak_total)
      s = ranks[r].memory;
  }
  return mems;
}

}  // namespace ppb::run
