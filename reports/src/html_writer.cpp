// The HTML report: one self-contained page (inline CSS and SVG, no script),
// verdict first, then the evidence. Reads the ReportModel only.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "ppb/pipeline/schedule.hpp"
#include "ppb/reports/fast_paths.hpp"
#include "ppb/reports/format.hpp"
#include "ppb/reports/report_model.hpp"
#include "ppb/reports/stats.hpp"
#include "ppb/reports/writers.hpp"
#include "svg.hpp"

namespace ppb::reports {

namespace {

constexpr const char* kCss = R"css(
body { font-family: Helvetica, Arial, sans-serif; margin: 24px auto; max-width: 1240px; color: #222; line-height: 1.4; padding: 0 16px; }
h1 { font-size: 26px; margin-bottom: 4px; }
h2 { font-size: 20px; border-bottom: 2px solid #4e79a7; padding-bottom: 3px; margin-top: 34px; }
h3 { font-size: 16px; margin-top: 22px; }
.meta { color: #555; font-size: 13px; }
.verdict { background: #f3f7fb; border-left: 6px solid #4e79a7; padding: 12px 16px; margin: 12px 0; font-size: 15px; }
.verdict.fail { border-left-color: #e15759; background: #fdf3f3; }
.verdict ul { margin: 0; padding-left: 18px; }
.verdict li { margin: 3px 0; }
table { border-collapse: collapse; margin: 10px 0; font-size: 12.5px; width: 100%; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #eef1f5; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.badge { display: inline-block; padding: 1px 7px; border-radius: 9px; font-size: 12px; font-weight: bold; white-space: nowrap; }
.consistent, .pass { background: #dff0d8; color: #2b6b2b; }
.inconsistent, .regressed, .error, .fell-back { background: #f8d7da; color: #8a1f28; }
.not-measurable, .new, .missing, .oom, .invalid, .excluded { background: #eee; color: #555; }
.improved { background: #d6e9f8; color: #1f4e79; }
.undecidable { background: #fff3cd; color: #7a5b00; }
.trend svg { margin: 0 8px 8px 0; }
.ok { background: #dff0d8; color: #2b6b2b; }
.why { color: #666; font-size: 11.5px; }
.pair { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-start; margin-bottom: 10px; }
figure { margin: 8px 0; break-inside: avoid; page-break-inside: avoid; }
figcaption { font-size: 12px; color: #444; margin-top: 2px; }
svg.chart { max-width: 100%; height: auto; border: 1px solid #e3e3e3; }
.note { font-size: 12.5px; color: #444; }
@media print {
  body { max-width: none; margin: 0; }
  h2 { break-after: avoid; page-break-after: avoid; }
  table, figure, .verdict { break-inside: avoid; page-break-inside: avoid; }
}
)css";

std::string esc(const std::string& s) { return xml_escape(s); }

std::string badge(const std::string& text, const std::string& cls) {
  return "<span class=\"badge " + cls + "\">" + esc(text) + "</span>";
}

std::string verdict_class(Verdict v) {
  switch (v) {
    case Verdict::kConsistent:
      return "consistent";
    case Verdict::kInconsistent:
      return "inconsistent";
    case Verdict::kNotMeasurable:
      return "not-measurable";
  }
  return "";
}

std::string td_num(const std::string& s) { return "<td class=\"num\">" + esc(s) + "</td>"; }
std::string td(const std::string& s) { return "<td>" + esc(s) + "</td>"; }

double mean_a(const ResultEntry& e) {
  if (!e.result.metrics || !e.result.metrics->theory) return std::nan("");
  const auto& a = e.result.metrics->theory->activation_bytes_per_microbatch;
  if (a.empty()) return std::nan("");
  return std::accumulate(a.begin(), a.end(), 0.0) / static_cast<double>(a.size());
}

// Predicted activation bytes per stage: the schedule's own count x one
// micro-batch's bytes (theory), -1 when unknown.
std::vector<double> predicted_activations(const ResultEntry& e) {
  std::vector<double> out;
  if (!e.result.metrics || !e.result.metrics->theory) return out;
  const TheoryFigures& t = *e.result.metrics->theory;
  if (!t.peak_activation_bytes_per_stage.empty()) {
    for (int64_t x : t.peak_activation_bytes_per_stage) out.push_back(static_cast<double>(x));
  } else if (t.peak_inflight_per_stage.size() == t.activation_bytes_per_microbatch.size()) {
    for (size_t s = 0; s < t.peak_inflight_per_stage.size(); ++s) {
      out.push_back(static_cast<double>(t.peak_inflight_per_stage[s]) *
                    static_cast<double>(t.activation_bytes_per_microbatch[s]));
    }
  }
  return out;
}

std::string schedule_formula(const ResultConfig& c) {
  const ScheduleInfo* info = find_schedule_info(c.schedule);
  return info != nullptr ? info->inflight_formula : kInflightCounted;
}

void section_throughput(std::ostringstream& h, const GroupView& g) {
  h << "<h3>Throughput: " << esc(g.work) << "</h3>\n";
  std::vector<svg::Bar> bars;
  std::vector<svg::LegendItem> legend;
  for (const ResultEntry* e : g.entries) {
    const auto v = metric_value(*e, "samples_per_second");
    if (!v) continue;
    bars.push_back({e->label, *v, svg::schedule_colour(e->result.config.schedule),
                    format_number(*v) + " samples/s"});
    if (std::none_of(legend.begin(), legend.end(), [&](const svg::LegendItem& l) {
          return l.label == e->result.config.schedule;
        })) {
      legend.push_back(
          {e->result.config.schedule, svg::schedule_colour(e->result.config.schedule)});
    }
  }
  if (!bars.empty()) {
    h << "<figure>"
      << svg::bar_chart("Samples per second (median step, " + g.work + "), higher is better", bars,
                        "samples/s", legend)
      << "<figcaption>samples/s = micro-batch size x M x batches (PipeDream's steps of several "
         "batches; 1 otherwise) x D (data-parallel replicas) / median step time over the timed "
         "iterations.</figcaption></figure>\n";
  }
  h << "<table><tr><th>schedule</th><th>partition</th><th>P</th><th>M</th><th>N</th><th>V</"
       "th><th>status</th>"
       "<th>samples/s</th><th>step median (ms)</th><th>min-max (ms)</th><th>peak / "
       "stage</th><th>check</th></tr>\n";
  for (const ResultEntry* e : g.entries) {
    const ResultConfig& c = e->result.config;
    h << "<tr>" << td(c.schedule) << td(c.partition) << td_num(stages_text(c))
      << td_num(std::to_string(c.microbatches))
      << td_num(c.inflight > 0 ? std::to_string(c.inflight) : "-")
      << td_num(std::to_string(c.chunks));
    const std::string st = result_status_name(e->result.status);
    h << "<td>" << badge(st, st)
      << (e->result.error.empty() ? "" : " <span class=\"why\">" + esc(e->result.error) + "</span>")
      << "</td>";
    if (e->result.status != ResultStatus::kOk || !e->result.metrics) {
      h << "<td colspan=\"5\"></td></tr>\n";
      continue;
    }
    const ResultMetrics& m = *e->result.metrics;
    const auto peak = metric_value(*e, "peak_memory");
    h << td_num(format_number(m.samples_per_second))
      << td_num(format_number(m.step_time_seconds.median * 1e3))
      << td_num(format_number(m.step_time_seconds.min * 1e3) + "-" +
                format_number(m.step_time_seconds.max * 1e3))
      << td_num(peak ? format_bytes(*peak) : "n/a");
    if (m.check) {
      h << "<td>" << badge(m.check->passed ? "pass" : "FAIL", m.check->passed ? "pass" : "error")
        << " " << esc(format_number(m.check->max_rel_error))
        << (m.check->update_rel_error ? ", update " + esc(format_number(*m.check->update_rel_error))
                                      : std::string())
        << (m.check->steps.value_or(1) > 1 ? " over " + std::to_string(*m.check->steps) + " steps"
                                           : "")
        << "</td>";
    } else {
      h << "<td>-</td>";
    }
    h << "</tr>\n";
  }
  h << "</table>\n";
}

// One column group per showcased combination: each stage's peak by category.
std::vector<svg::ColumnGroup> memory_columns(const GroupView& g, bool& any_marker) {
  std::vector<svg::ColumnGroup> groups;
  for (const ResultEntry* e : g.showcase) {
    if (!e->result.metrics) continue;
    const PeakMemory& pm = e->result.metrics->peak_memory_bytes;
    svg::ColumnGroup cg;
    cg.label = e->result.config.schedule;
    const std::vector<double> pred = predicted_activations(*e);
    for (size_t s = 0; s < pm.per_stage.size(); ++s) {
      svg::Column col;
      col.label = "s" + std::to_string(s);
      col.segments.assign(kNumMemCategories, 0.0);
      if (s < pm.by_category.size()) {
        for (int k = 0; k < kNumMemCategories; ++k)
          col.segments[static_cast<size_t>(k)] =
              static_cast<double>(pm.by_category[s][static_cast<size_t>(k)]);
      } else {
        // Without the split, activations and "the rest" (shown as workspace).
        const double act = s < pm.activations_per_stage.size()
                               ? static_cast<double>(pm.activations_per_stage[s])
                               : 0;
        col.segments[0] = act;
        col.segments[6] = std::max(0.0, static_cast<double>(pm.per_stage[s]) - act);
      }
      if (s < pred.size()) {
        col.marker = pred[s];
        any_marker = true;
      }
      cg.columns.push_back(std::move(col));
    }
    groups.push_back(std::move(cg));
  }
  return groups;
}

// The memory table: measured activations against the documents' formulas.
// The largest of a per-stage figure, as text ("n/a" when there is none).
std::string max_bytes(const std::vector<int64_t>& per_stage) {
  if (per_stage.empty()) return "n/a";
  return format_bytes(static_cast<double>(*std::max_element(per_stage.begin(), per_stage.end())));
}

void memory_table(std::ostringstream& h, const GroupView& g) {
  const bool device = std::any_of(g.entries.begin(), g.entries.end(), [](const ResultEntry* e) {
    return e->result.metrics && !e->result.metrics->peak_memory_bytes.device_per_stage.empty();
  });
  h << "<table><tr><th>combination</th><th>a (one micro-batch, mean/stage)</th><th>measured "
       "activations (sum)</th>"
       "<th>M x P</th><th>M x (P+N-1)</th><th>schedule's formula</th><th>formula bytes "
       "(sum)</th><th>measured / formula</th>"
       "<th>peak tracked (max stage)</th>"
    << (device ? "<th>peak on the device (max stage)</th>" : "")
    << "<th>peak RSS (max)</th></tr>\n";
  for (const ResultEntry* e : g.entries) {
    if (e->result.status != ResultStatus::kOk || !e->result.metrics) continue;
    const ResultConfig& c = e->result.config;
    const double a = mean_a(*e);
    const auto act = metric_value(*e, "activations_sum");
    const PeakMemory& peaks = e->result.metrics->peak_memory_bytes;
    const std::vector<double> pred = predicted_activations(*e);
    const double pred_sum =
        pred.empty() ? std::nan("") : std::accumulate(pred.begin(), pred.end(), 0.0);
    const int n = c.inflight > 0 ? c.inflight : c.stages;
    const auto& rss = e->result.metrics->peak_memory_bytes.peak_rss_per_stage;
    h << "<tr>" << td(e->label) << td_num(format_bytes(a))
      << td_num(act ? format_bytes(*act) : "n/a") << td_num(format_bytes(a * c.stages))
      << td_num(format_bytes(a * (c.stages + n - 1))) << td(schedule_formula(c))
      << td_num(format_bytes(pred_sum))
      << td_num(act && pred_sum > 0 ? format_fixed(*act / pred_sum, 3) : "n/a")
      << td_num(max_bytes(peaks.per_stage));
    if (device) {
      h << td_num(max_bytes(peaks.device_per_stage) +
                  (peaks.device_profiler.empty() || peaks.device_per_stage.empty()
                       ? ""
                       : " (" + peaks.device_profiler + " attached)"));
    }
    h << td_num(max_bytes(rss)) << "</tr>\n";
  }
  h << "</table>\n";
}

void section_memory(std::ostringstream& h, const GroupView& g) {
  h << "<h3>Memory per stage: " << esc(g.work) << "</h3>\n";
  std::string profiled;
  for (const ResultEntry* e : g.entries) {
    if (e->result.metrics && !e->result.metrics->peak_memory_bytes.device_profiler.empty())
      profiled += (profiled.empty() ? "" : ", ") + e->label;
  }
  if (!profiled.empty()) {
    h << "<p class=\"note\">Measured with a device profiler attached (its buffers take device "
         "memory; quote peaks from a run without it): "
      << esc(profiled) << ".</p>\n";
  }
  std::vector<svg::LegendItem> cats;
  for (int i = 0; i < kNumMemCategories; ++i) {
    cats.push_back(
        {std::string(mem_category_name(static_cast<MemCategory>(i))), svg::category_colour(i)});
  }
  bool any_marker = false;
  const std::vector<svg::ColumnGroup> groups = memory_columns(g, any_marker);
  if (!groups.empty()) {
    h << "<figure>"
      << svg::stacked_columns(
             "Peak tracked memory per stage by category (" + g.showcase_label + ")", groups, cats,
             any_marker ? "activations predicted: schedule's in-flight count x one micro-batch"
                        : "")
      << "<figcaption>Each column is one stage at its tracked peak, split into the allocator's "
         "categories; the black tick is "
         "the activation bytes the schedule's formula predicts for that "
         "stage.</figcaption></figure>\n";
  }
  h << "<p class=\"note\">The documents' formulas count activations summed over stages with M = "
       "one micro-batch's "
       "activations on a stage (here the mean over stages, a) : sync 1F1B <b>M x P</b>, async 1F1B "
       "<b>M x (P+N-1)</b>. "
       "The standard per-stage counts: GPipe M, 1F1B min(P-s, M), sync-1F1B 1, interleaved and "
       "zero-bubble from their "
       "schedules.</p>\n";
  memory_table(h, g);
}

void section_bubbles(std::ostringstream& h, const GroupView& g) {
  h << "<h3>Bubbles, measured against theory: " << esc(g.work) << "</h3>\n";
  h << "<p class=\"note\"><b>bubble ratio</b> = idle / step time per stage, mean over stages; "
       "theory for GPipe and 1F1B with "
       "equal stages (P-1)/(M+P-1). <b>bubble overhead</b> = idle / busy (Megatron-LM's "
       "normalisation), (P-1)/M for the same "
       "case (the closed forms are given only for the schedules they describe: \"-\" "
       "elsewhere). \"theory\" is the simulator run on the same schedule with the run's measured "
       "mean "
       "action times. Device-side "
       "bubbles come from CUPTI records (--profile cupti): the next section when results carry "
       "them.</p>\n";
  std::vector<svg::PairGroup> pg;
  for (const ResultEntry* e : g.showcase) {
    if (!e->result.metrics) continue;
    const ResultMetrics& m = *e->result.metrics;
    pg.push_back({e->result.config.schedule,
                  {m.bubble_ratio.measured, m.bubble_ratio.theoretical, m.bubble_overhead.measured,
                   m.bubble_overhead.theoretical}});
  }
  if (!pg.empty()) {
    h << "<figure>"
      << svg::grouped_bars("Bubble per schedule (" + g.showcase_label + ")", pg,
                           {{"ratio measured (idle/step)", "#4e79a7"},
                            {"ratio theory", "#a0cbe8"},
                            {"overhead measured (idle/busy)", "#e15759"},
                            {"overhead theory", "#ff9d9a"}},
                           "fraction")
      << "</figure>\n";
  }
  h << "<table><tr><th>combination</th><th>ratio measured</th><th>ratio "
       "theory</th><th>(P-1)/(M+P-1)</th>"
       "<th>overhead measured</th><th>overhead theory</th><th>(P-1)/M</th><th>per-stage "
       "ratio</th></tr>\n";
  for (const ResultEntry* e : g.entries) {
    if (e->result.status != ResultStatus::kOk || !e->result.metrics) continue;
    const ResultMetrics& m = *e->result.metrics;
    const ResultConfig& c = e->result.config;
    const double p = c.stages;
    const double mb = c.microbatches;
    // The closed forms only where they apply ("-" elsewhere: interleaved,
    // zero-bubble, sync-1f1b, an in-flight limit below P, ...).
    const bool closed = closed_form_bubble_applies(c.schedule, c.stages, c.inflight);
    std::string per;
    for (double x : m.bubble_ratio.per_stage) per += (per.empty() ? "" : " ") + format_fixed(x, 2);
    h << "<tr>" << td(e->label) << td_num(format_fixed(m.bubble_ratio.measured, 3))
      << td_num(format_fixed(m.bubble_ratio.theoretical, 3))
      << td_num(closed ? format_fixed((p - 1) / (mb + p - 1), 3) : "-")
      << td_num(format_fixed(m.bubble_overhead.measured, 3))
      << td_num(format_fixed(m.bubble_overhead.theoretical, 3))
      << td_num(closed ? format_fixed((p - 1) / mb, 3) : "-") << td(per) << "</tr>\n";
  }
  h << "</table>\n";
}

// What the devices did (metrics.device), beside the host-side bubble; only
// when some result of the group carries it.
void section_device(std::ostringstream& h, const GroupView& g) {
  const std::vector<const ResultEntry*> rows = device_entries(g);
  if (rows.empty()) return;
  h << "<h3>Device activity, the device bubble beside the host bubble: " << esc(g.work)
    << "</h3>\n";
  h << "<p class=\"note\">From the device's own records of the median step (CUPTI). "
       "<b>device bubble</b> = (step time - time the stage's compute kernels ran) / step time; "
       "the host bubble counts each action from its start to its end event. NCCL kernels and "
       "message copies are <b>communication</b>; <b>overlap</b> = compute and communication at "
       "once. Times are means over stages.</p>\n";
  h << "<table><tr><th>combination</th><th>host bubble</th><th>device bubble</th>"
       "<th>compute (ms)</th><th>communication (ms)</th><th>overlap (ms)</th>"
       "<th>per-stage device bubble</th></tr>\n";
  for (const ResultEntry* e : rows) {
    const ResultMetrics& m = *e->result.metrics;
    const DeviceFigures& d = *m.device;
    std::string per;
    for (double x : d.bubble_ratio_per_stage) per += (per.empty() ? "" : " ") + format_fixed(x, 2);
    h << "<tr>" << td(e->label) << td_num(format_fixed(m.bubble_ratio.measured, 3))
      << td_num(format_fixed(d.bubble_ratio, 3))
      << td_num(format_fixed(1e3 * mean_finite(d.compute_seconds_per_stage), 3))
      << td_num(format_fixed(1e3 * mean_finite(d.communication_seconds_per_stage), 3))
      << td_num(format_fixed(1e3 * mean_finite(d.overlap_seconds_per_stage), 3)) << td(per)
      << "</tr>\n";
  }
  h << "</table>\n";
}

// Whether a device backend's work took its fast paths, and why not where
// it fell back (fast_paths.hpp); only when the group has such results.
void section_fast_paths(std::ostringstream& h, const GroupView& g) {
  const std::vector<const ResultEntry*> rows = fast_path_entries(g);
  if (rows.empty()) return;
  h << "<h3>Fast paths: " << esc(g.work) << "</h3>\n";
  h << "<p class=\"note\"><b>attention</b>: the fused attention (cuDNN's in bf16, pipebench's "
       "flash kernels in "
       "fp32) or the naive kernels; "
       "<b>CUDA graphs</b>: the units of work of every step and rank, captured, replayed, rebuilt "
       "or eager; <b>GEMM epilogues</b>: GEMMs with their bias, GeLU or bias gradient fused by "
       "cuBLASLt, and those it refused. A fallback is work that ran the slow way, with why.</p>\n";
  h << "<table><tr><th>combination</th><th>attention</th><th>CUDA graphs</th>"
       "<th>GEMM epilogues</th></tr>\n";
  for (const ResultEntry* e : rows) {
    h << "<tr>" << td(e->label);
    for (const FastPath& p : fast_paths(e->result)) {
      h << "<td>"
        << (p.outcome == FastPathOutcome::kFellBack ? badge("fell back", "fell-back") + " " : "")
        << esc(p.text) << "</td>";
    }
    h << "</tr>\n";
  }
  h << "</table>\n";
}

// The gradient all-reduce of data-parallel runs (metrics.allreduce) beside
// the simulator's ring model; only when some result of the group has one.
void section_allreduce(std::ostringstream& h, const GroupView& g) {
  const std::vector<const ResultEntry*> rows = allreduce_entries(g);
  if (rows.empty()) return;
  h << "<h3>Data parallelism, the gradient all-reduce: " << esc(g.work) << "</h3>\n";
  h << "<p class=\"note\">Each stage's gradients are summed across its D replicas after the "
       "batch's last backward of each chunk. Per stage, means over stages: the all-reduce time "
       "measured (posted to complete) and as the simulator's ring model <b>2(D-1) x latency + "
       "2(D-1)/D x bytes / bandwidth</b> predicts it; its <b>overlap</b> with the stage's "
       "compute; <b>exposed</b> = step time - pipeline time. <b>bubble with</b> the all-reduce "
       "is over the whole step, <b>without</b> over the pipeline time (end of the last "
       "action).</p>\n";
  h << "<table><tr><th>combination</th><th>P x D</th><th>all-reduce (ms)</th><th>theory "
       "(ms)</th><th>overlap (ms)</th><th>exposed (ms)</th><th>bubble with (theory)</th>"
       "<th>bubble without (theory)</th></tr>\n";
  for (const ResultEntry* e : rows) {
    const ResultMetrics& m = *e->result.metrics;
    const AllReduceFigures& a = *m.allreduce;
    h << "<tr>" << td(e->label) << td_num(stages_text(e->result.config))
      << td_num(format_fixed(1e3 * a.seconds, 3))
      << td_num(format_fixed(1e3 * mean_finite(a.theoretical_seconds_per_stage), 3))
      << td_num(format_fixed(1e3 * mean_finite(a.overlap_seconds_per_stage), 3))
      << td_num(format_fixed(1e3 * a.exposed_seconds, 3))
      << td_num(format_fixed(m.bubble_ratio.measured, 3) + " (" +
                format_fixed(m.bubble_ratio.theoretical, 3) + ")")
      << td_num(format_fixed(a.bubble_ratio_pipeline.measured, 3) + " (" +
                format_fixed(a.bubble_ratio_pipeline.theoretical, 3) + ")")
      << "</tr>\n";
  }
  h << "</table>\n";
}

double timeline_end(const Timeline& t) {
  double end = 0;
  for (const auto& stage : t) {
    for (const TimelineEvent& e : stage) end = std::max(end, e.end);
  }
  return end;
}

void section_gantt(std::ostringstream& h, const GroupView& g) {
  h << "<h3>Pipeline pictures, measured median step beside the prediction: " << esc(g.work)
    << "</h3>\n";
  if (g.gantt.empty()) {
    h << "<p class=\"note\">No result of this group carries a timeline.</p>\n";
    return;
  }
  h << "<p class=\"note\">" << esc(g.showcase_label)
    << ". One row per stage, time left to right, blocks labelled with the micro-batch (and .chunk "
       "with V &gt; 1), idle grey. "
       "Left: the measured median step. Right: the prediction on the same time axis.</p>\n";
  h << "<figure>";
  {
    std::ostringstream legend_svg;
    const auto items = svg::gantt_legend();
    legend_svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"760\" "
                  "height=\"26\" viewBox=\"0 0 760 26\" "
                  "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\"><title>Gantt "
                  "legend</title>";
    double x = 8;
    for (const auto& it : items) {
      legend_svg << "<rect x=\"" << x << "\" y=\"7\" width=\"14\" height=\"12\" fill=\""
                 << it.colour << "\" stroke=\"#555\" stroke-width=\"0.5\"/><text x=\"" << x + 19
                 << "\" y=\"17\">" << esc(it.label) << "</text>";
      x += 30 + 7.0 * static_cast<double>(it.label.size());
    }
    legend_svg << "</svg>";
    h << legend_svg.str();
  }
  h << "</figure>\n";
  for (const GanttPair& p : g.gantt) {
    const ResultEntry& e = *p.entry;
    const double measured_end = timeline_end(e.result.timeline);
    const double predicted_end = timeline_end(p.predicted);
    const double t_max = std::max(measured_end, predicted_end) * 1.02;
    h << "<figure><div class=\"pair\">"
      << svg::gantt(
             e.result.config.schedule + " measured (" + format_number(measured_end * 1e3) + " ms)",
             e.result.timeline, t_max, e.result.config.chunks);
    if (!p.predicted.empty()) {
      h << svg::gantt(
          e.result.config.schedule + " predicted (" + format_number(predicted_end * 1e3) + " ms)",
          p.predicted, t_max, e.result.config.chunks);
    }
    h << "</div><figcaption>" << esc(e.label) << ", " << esc(g.work)
      << ". Prediction: " << esc(p.predicted_source) << ".</figcaption></figure>\n";
  }
}

void section_claims(std::ostringstream& h, const ReportModel& m, const GroupView& g) {
  h << "<h2>The documents' claims: " << esc(group_title(g))
    << "</h2>\n<p class=\"note\">Reference: " << esc(m.reference.source) << ". "
    << (m.setup_matches
            ? "The setup was declared to match the documents': absolute figures are checked."
            : "Ratios, orders and formulas are checked on this setup; the documents' absolute "
              "figures (their "
              "hardware and model are unknown) only with --reference-setup.")
    << " Comparisons pair results of one machine, build and work, same setup.</p>\n";
  h << "<table><tr><th>id</th><th>document</th><th>claim</th><th>documented</th><th>check</"
       "th><th>measured</th><th>verdict</th></tr>\n";
  for (const ClaimRow& c : g.claims) {
    const size_t rows = std::max<size_t>(1, c.checks.size());
    for (size_t i = 0; i < rows; ++i) {
      h << "<tr>";
      if (i == 0) {
        const std::string span = " rowspan=\"" + std::to_string(rows) + "\"";
        h << "<td" << span << "><b>" << esc(c.id) << "</b><br>"
          << badge(verdict_name(c.verdict), verdict_class(c.verdict)) << "</td>"
          << "<td" << span << ">" << esc(c.document) << "</td>"
          << "<td" << span << "><b>" << esc(c.title) << "</b><br><span class=\"why\">"
          << esc(c.statement) << "</span></td>"
          << "<td" << span << ">" << esc(c.documented) << "</td>";
      }
      if (i < c.checks.size()) {
        const CheckOutcome& o = c.checks[i];
        h << "<td>" << esc(o.description) << "<br><span class=\"why\">" << esc(o.documented)
          << "</span></td>"
          << "<td>" << esc(o.measured.empty() ? "-" : o.measured) << "</td>"
          << "<td>" << badge(verdict_name(o.verdict), verdict_class(o.verdict))
          << (o.why.empty() ? "" : "<br><span class=\"why\">" + esc(o.why) + "</span>") << "</td>";
      } else {
        h << "<td></td><td></td><td></td>";
      }
      h << "</tr>\n";
    }
  }
  h << "</table>\n";
}

// The trend of one combination: samples/s, peak memory and bubble ratio over
// the nights, with the noise band the gate used and the step it found.
std::string trend_charts(const RegressionRow& row) {
  if (row.trend.size() < 2 || row.metrics.size() < 3) return "";
  auto series = [&](auto median, auto low, auto high, const MetricVerdict& v) {
    svg::TrendSeries t;
    for (const TrendPoint& p : row.trend) {
      t.nights.push_back(p.night);
      t.median.push_back(median(p));
      t.low.push_back(low(p));
      t.high.push_back(high(p));
    }
    const double half = v.relative ? v.band * v.reference : v.band;
    t.band_low = v.reference - half;
    t.band_high = v.reference + half;
    t.step_index = row.arrived_index;
    return t;
  };
  const double nan = std::nan("");
  std::string out = "<div class=\"trend\">";
  out += svg::trend_chart("samples/s",
                          series([](const TrendPoint& p) { return p.samples_median; },
                                 [](const TrendPoint& p) { return p.samples_q1; },
                                 [](const TrendPoint& p) { return p.samples_q3; }, row.metrics[0]),
                          "median and quartiles of the steps");
  out += svg::trend_chart(
      "peak memory (bytes)",
      series([](const TrendPoint& p) { return p.memory; }, [nan](const TrendPoint&) { return nan; },
             [nan](const TrendPoint&) { return nan; }, row.metrics[2]),
      "max over stages");
  out += svg::trend_chart("bubble ratio",
                          series([](const TrendPoint& p) { return p.bubble_median; },
                                 [](const TrendPoint& p) { return p.bubble_q1; },
                                 [](const TrendPoint& p) { return p.bubble_q3; }, row.metrics[1]),
                          "median and quartiles of the steps");
  return out + "</div>\n";
}

std::string status_class(RegressionStatus s) {
  switch (s) {
    case RegressionStatus::kPass:
      return "pass";
    case RegressionStatus::kRegressed:
      return "regressed";
    case RegressionStatus::kImproved:
      return "improved";
    case RegressionStatus::kUndecidable:
      return "undecidable";
    case RegressionStatus::kNew:
      return "new";
    case RegressionStatus::kMissing:
      return "missing";
    case RegressionStatus::kExcluded:
      return "excluded";
  }
  return "";
}

std::string signed_pct(double x) {
  if (std::isnan(x)) return "-";
  if (std::isinf(x)) return "none";
  return (x >= 0 ? "+" : "") + format_fixed(x * 100, 1) + "%";
}

// The rows that regressed, improved or are undecidable, each with its reasons.
void regression_changes(std::ostringstream& h, const ReportModel& m, const RegressionSummary& r) {
  for (RegressionStatus st : {RegressionStatus::kRegressed, RegressionStatus::kImproved,
                              RegressionStatus::kUndecidable}) {
    if (r.count(st) == 0) continue;
    h << "<h3>" << esc(regression_status_name(st)) << "</h3>\n";
    for (const RegressionRow& row : r.rows) {
      if (row.status != st) continue;
      h << "<p><b>" << esc(m.row_label(row.label, row.work)) << "</b> (" << esc(row.machine) << ")"
        << (row.arrived.empty() ? "" : ", arrived " + esc(row.arrived))
        << "</p><ul class=\"note\">";
      for (const std::string& s : row.reasons) h << "<li>" << esc(s) << "</li>";
      for (const std::string& s : row.notes) h << "<li>" << esc(s) << "</li>";
      h << "</ul>\n" << trend_charts(row);
    }
  }
}

// One row per combination: its outcome and figures.
void regression_table(std::ostringstream& h, const ReportModel& m, const RegressionSummary& r) {
  h << "<table><tr><th>combination</th><th>machine</th><th>outcome</th><th>samples/s "
       "change</th><th>p</th><th>smallest detectable</th><th>noise band</th><th>peak memory "
       "change</th><th>bubble change (points)</th><th>since</th><th>re-run</th></tr>\n";
  for (const RegressionRow& row : r.rows) {
    const bool decided = !row.metrics.empty();
    h << "<tr>" << td(m.row_label(row.label, row.work)) << td(row.machine) << "<td>"
      << badge(regression_status_name(row.status), status_class(row.status)) << "</td>"
      << td_num(signed_pct(row.samples_change))
      << td_num(decided ? format_number(row.metrics[0].p) : "-")
      << td_num(!decided                     ? "-"
                : std::isinf(row.detectable) ? "none (too few steps)"
                                             : format_fixed(row.detectable * 100, 1) + "%")
      << td_num(decided ? format_fixed(row.metrics[0].band * 100, 1) + "%" : "-")
      << td_num(signed_pct(row.memory_change))
      << td_num(std::isnan(row.bubble_change)
                    ? "-"
                    : (row.bubble_change >= 0 ? "+" : "") + format_fixed(row.bubble_change, 3))
      << td(row.arrived) << td(confirmation_summary(row).empty() ? "-" : confirmation_summary(row))
      << "</tr>\n";
  }
  h << "</table>\n";
}

void section_regression(std::ostringstream& h, const ReportModel& m) {
  if (!m.no_earlier_night.empty())
    h << "<h2>Regression gate</h2>\n<p class=\"note\">" << esc(m.no_earlier_night) << ".</p>\n";
  const std::string later =
      m.later_nights.empty() ? "" : "<p class=\"note\">Gate: " + esc(m.later_nights) + ".</p>\n";
  if (!m.regression) {
    h << later;
    return;
  }
  const RegressionSummary& r = *m.regression;
  h << "<h2>Regression gate</h2>\n<p class=\"note\">Tonight (" << esc(r.tonight) << ") against the "
    << r.nights.size() << " most recent earlier night(s) of " << esc(r.baseline_source)
    << ", matched by configuration and machine. A figure regresses only when its change is "
       "beyond the threshold ("
    << format_trimmed(r.threshold * 100) << "% for samples/s and peak memory, "
    << format_fixed(r.threshold, 2)
    << " bubble-ratio points), significant (two-sided Mann-Whitney U over the timed steps, p &lt; "
    << format_trimmed(r.options.alpha)
    << ") and beyond the noise band of the nights (the spread of their medians, never narrower "
       "than the sweep's noise floor below); peak memory is "
       "deterministic and compared exactly. \"Undecidable\" means the smallest change the gate "
       "could have detected exceeds the threshold, or that the timings were not judged (a busy "
       "host, a machine that itself ran at another speed). A step that arrived on an earlier night "
       "is "
       "reported once, with that night. A timing figure that moved tonight stands only when a "
       "re-run of the combination gives the same verdict; one that did not reproduce is "
       "undecidable.</p>\n"
    << later;
  h << "<p><b>" << r.regressions() << " regression(s), " << r.count(RegressionStatus::kImproved)
    << " improvement(s), " << r.count(RegressionStatus::kPass) << " no change, "
    << r.count(RegressionStatus::kUndecidable) << " undecidable</b> ("
    << r.count(RegressionStatus::kNew) << " new, " << r.count(RegressionStatus::kMissing)
    << " missing, " << r.count(RegressionStatus::kExcluded) << " excluded).";
  if (r.count(RegressionStatus::kUndecidable) > 0)
    h << " Undecidable: " << esc(r.undecidable_causes()) << ".";
  h << "</p>\n";
  if (!r.floors.empty()) {
    h << "<p class=\"note\">Noise floors (how far a launch of an unchanged build lands from its "
         "other nights, pooled over every combination of the sweep; no combination's band is "
         "narrower):</p><ul class=\"note\">";
    for (const NoiseFloor& f : r.floors)
      h << "<li>" << esc(f.machine) << ": " << esc(noise_floor_text(f)) << "</li>";
    h << "</ul>\n";
  }
  if (r.confirming || r.rows_with(Confirmation::kAwaiting) > 0) {
    h << "<p>Re-runs (--confirm): <b>" << r.rows_with(Confirmation::kConfirmed) << " confirmed, "
      << r.rows_with(Confirmation::kNotReproduced)
      << " did not reproduce</b> (undecidable: a transient, not the build), "
      << r.rows_with(Confirmation::kAwaiting) << " without a re-run.</p>\n";
  }
  regression_changes(h, m, r);
  regression_table(h, m, r);
  h << "<details><summary>Trends of the combinations without a change</summary>\n";
  for (const RegressionRow& row : r.rows) {
    if (row.status != RegressionStatus::kPass) continue;
    const std::string charts = trend_charts(row);
    if (!charts.empty())
      h << "<p><b>" << esc(m.row_label(row.label, row.work)) << "</b></p>\n" << charts;
  }
  h << "</details>\n";
}

// The GPUs' own health per machine (health_gate.hpp): the verdict read with
// the GPU sweep's, what slowed or failed a GPU tonight, and every figure.
void section_health(std::ostringstream& h, const ReportModel& m) {
  if (m.health.empty()) return;
  h << "<h2>GPU health</h2>\n<p class=\"note\">The GPU form of the speed probe: <code>pipebench "
       "health</code>'s GEMMs and copies, measured without the pipeline code before the sweep, "
       "and the clocks and power limit NVML read while the GPU sweep ran (figures "
       "<code>sweep_*</code>, one sample per combination), each judged against the same GPU's "
       "earlier nights like samples/s. A GPU whose own figures got slower with the sweep points "
       "at the GPU (clocks, throttling, a failing part); figures that held with a slower sweep "
       "point at the software.</p>\n";
  for (const HealthSummary& s : m.health) {
    const bool fail = s.probe_regressions > 0;
    h << "<div class=\"verdict" << (fail ? " fail" : "") << "\">" << esc(health_text(s));
    if (!s.trouble.empty() || !s.notes.empty()) {
      h << "<ul>";
      for (const GpuTrouble& t : s.trouble) h << "<li>" << esc(trouble_text(t)) << "</li>";
      for (const std::string& n : s.notes) h << "<li>" << esc(n) << "</li>";
      h << "</ul>";
    }
    h << "</div>\n";
    if (s.figures.empty()) continue;
    h << "<table><tr><th>GPU</th><th>figure</th><th>status</th><th>tonight against the earlier "
         "nights</th></tr>\n";
    for (const HealthVerdict& v : s.figures) {
      const RegressionStatus st = v.what.status;
      h << "<tr>" << td(v.gpu) << td(v.what.name) << "<td>"
        << badge(regression_status_name(st), status_class(st)) << "</td>"
        << td(verdict_text(v.what)) << "</tr>\n";
    }
    h << "</table>\n";
  }
}

void section_environment(std::ostringstream& h, const ReportModel& m) {
  h << "<h2>Environment</h2>\n<table><tr><th>machine (hosts | CPU | GPUs)</th><th>build (git | "
       "compiler | type)</th><th>backend</th><th>work</th><th>ranks</th>"
       "<th>MPI</th><th>CUDA</th><th>driver</th><th>GPUs</th><th>hostname</th><th>results</"
       "th><th>dates</th></tr>\n";
  for (const GroupView& g : m.groups) {
    const GroupEnvironment env = group_environment(g);
    h << "<tr>" << td(g.machine) << td(g.build) << td(g.backend) << td(g.work) << td_num(env.ranks)
      << td(env.mpi) << td(env.cuda) << td(env.driver) << td(env.gpus) << td(env.hostnames)
      << td_num(std::to_string(g.entries.size())) << td(env.dates) << "</tr>\n";
  }
  h << "</table>\n";
  if (!m.loaded.bad.empty() || !m.loaded.ignored.empty() || !m.loaded.superseded.empty()) {
    h << "<h3>Files</h3>\n<ul class=\"note\">\n";
    for (const BadFile& b : m.loaded.bad)
      h << "<li><b>unreadable (skipped with --skip-bad):</b> " << esc(b.message) << "</li>\n";
    for (const std::string& f : m.loaded.superseded)
      h << "<li>superseded by another result of the same combination: " << esc(f) << "</li>\n";
    for (const std::string& f : m.loaded.ignored)
      h << "<li>not a result file, ignored: " << esc(f) << "</li>\n";
    h << "</ul>\n";
  }
}

}  // namespace

std::string write_html(const ReportModel& m) {
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>pipebench "
       "report</title>\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>" << kCss
    << "</style></head><body>\n";
  h << "<h1>pipebench report</h1>\n<div class=\"meta\">Generated " << esc(m.generated_at)
    << " from " << m.loaded.results.size() << " result(s) in";
  for (const std::string& in : m.inputs) h << " <code>" << esc(in) << "</code>";
  h << "; " << m.groups.size()
    << " group(s) of one machine, build, backend and work (model, micro-batch size, dtype), "
       "never compared with one another.</div>\n";

  h << "<h2>Verdict</h2>\n";
  for (const GroupView& g : m.groups) {
    const bool fail = m.regressions() > 0;
    h << "<div class=\"verdict" << (fail ? " fail" : "") << "\">";
    h << "<b>" << esc(group_title(g)) << "</b>"
      << (m.groups.size() > 1 ? " (build " + esc(g.build) + ")" : std::string()) << ": ";
    h << "<ul>";
    for (const std::string& point : g.verdict_points) h << "<li>" << esc(point) << "</li>";
    h << "</ul></div>\n";
  }
  if (m.groups.empty())
    h << "<div class=\"verdict fail\">No readable result: every file was skipped (see "
         "Files).</div>\n";
  section_regression(h, m);
  section_health(h, m);
  for (const GroupView& g : m.groups) {
    h << "<h2>Measurements: " << esc(group_title(g)) << "</h2>\n<p class=\"meta\">build "
      << esc(g.build) << "</p>\n";
    section_throughput(h, g);
    section_memory(h, g);
    section_bubbles(h, g);
    section_device(h, g);
    section_fast_paths(h, g);
    section_allreduce(h, g);
    section_gantt(h, g);
  }
  for (const GroupView& g : m.groups) section_claims(h, m, g);
  section_environment(h, m);
  h << "</body></html>\n";
  return h.str();
}

}  // namespace ppb::reports
