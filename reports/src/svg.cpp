#include "svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "ppb/pipeline/schedule.hpp"
#include "ppb/reports/format.hpp"

namespace ppb::reports::svg {

namespace {

constexpr const char* kFont = "font-family=\"Helvetica, Arial, sans-serif\"";

std::string n(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", x);
  return buf;
}

std::string n_text(double x) { return n(x); }

// A "nice" tick step (1, 2, 2.5, 5 x 10^k) giving about `target` ticks.
double nice_step(double max, int target) {
  if (!(max > 0) || !std::isfinite(max)) return 1;
  const double raw = max / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

std::string text(double x, double y, const std::string& s, const std::string& extra = "") {
  return "<text x=\"" + n(x) + "\" y=\"" + n(y) + "\" " + extra + ">" + xml_escape(s) + "</text>";
}

std::string rect(double x, double y, double w, double h, const std::string& fill,
                 const std::string& extra = "") {
  return "<rect x=\"" + n(x) + "\" y=\"" + n(y) + "\" width=\"" + n(std::max(w, 0.0)) +
         "\" height=\"" + n(std::max(h, 0.0)) + "\" fill=\"" + fill + "\" " + extra + "/>";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& stroke,
                 double width = 1) {
  return "<line x1=\"" + n(x1) + "\" y1=\"" + n(y1) + "\" x2=\"" + n(x2) + "\" y2=\"" + n(y2) +
         "\" stroke=\"" + stroke + "\" stroke-width=\"" + n(width) + "\"/>";
}

std::string open(double w, double h, const std::string& title) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" + n(w) +
         "\" height=\"" + n(h) + "\" viewBox=\"0 0 " + n(w) + " " + n(h) + "\" role=\"img\" " +
         kFont + " font-size=\"12\"><title>" + xml_escape(title) + "</title>" +
         rect(0, 0, w, h, "#ffffff") + text(8, 18, title, "font-weight=\"bold\" font-size=\"14\"");
}

// Legend in one row (wrapping) starting at (x, y); returns the height used.
double legend(std::ostringstream& s, double x, double y, double width,
              const std::vector<LegendItem>& items) {
  double cx = x;
  double cy = y;
  for (const LegendItem& it : items) {
    const double w = 22 + 7.0 * static_cast<double>(it.label.size()) + 14;
    if (cx + w > x + width && cx > x) {
      cx = x;
      cy += 18;
    }
    if (it.colour == "marker") {
      s << line(cx, cy + 5, cx + 14, cy + 5, "#000000", 2.5);
    } else {
      s << rect(cx, cy, 14, 11, it.colour, "stroke=\"#555\" stroke-width=\"0.5\"");
    }
    s << text(cx + 19, cy + 10, it.label);
    cx += w;
  }
  return cy - y + 18;
}

double legend_height(double width, const std::vector<LegendItem>& items) {
  std::ostringstream sink;
  return legend(sink, 0, 0, width, items);
}

// Value axis ticks label for bytes: MiB/GiB chosen from the maximum.
struct ByteScale {
  double div = 1;
  const char* unit = "B";
};
ByteScale byte_scale(double max) {
  if (max >= 1024.0 * 1024 * 1024) return {1024.0 * 1024 * 1024, "GiB"};
  if (max >= 1024.0 * 1024) return {1024.0 * 1024, "MiB"};
  if (max >= 1024.0) return {1024.0, "KiB"};
  return {1, "B"};
}

}  // namespace

std::string schedule_colour(const std::string& schedule) {
  const ScheduleInfo* info = find_schedule_info(schedule);
  return info != nullptr ? info->colour : "#bab0ac";  // a schedule read from a file
}

std::string category_colour(int category) {
  static const char* kColours[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                   "#59a14f", "#edc948", "#b07aa1"};
  return kColours[static_cast<size_t>(std::clamp(category, 0, 6))];
}

std::vector<LegendItem> gantt_legend() {
  return {{"F forward", "#4e79a7"},     {"B backward", "#59a14f"},   {"I input-grad", "#8cd17d"},
          {"W weight-grad", "#b07aa1"}, {"SYNC barrier", "#333333"}, {"idle", "#e6e6e6"}};
}

std::string bar_chart(const std::string& title, const std::vector<Bar>& bars,
                      const std::string& axis_label, const std::vector<LegendItem>& legend_items) {
  const double width = 1000;
  const double label_w = 300;
  const double note_w = 110;
  const double row = 18;
  const double top = 30;
  const double plot_w = width - label_w - note_w - 10;
  const double lh = legend_height(width - 20, legend_items);
  double max = 0;
  for (const Bar& b : bars) {
    if (std::isfinite(b.value)) max = std::max(max, b.value);
  }
  const double step = nice_step(max, 6);
  const double axis_max = max > 0 ? std::ceil(max / step) * step : 1;
  const double plot_h = row * static_cast<double>(bars.size());
  const double height = top + plot_h + 40 + lh + 10;
  std::ostringstream s;
  s << open(width, height, title);
  const double x0 = label_w;
  for (double t = 0; t <= axis_max + step * 0.01; t += step) {
    const double x = x0 + t / axis_max * plot_w;
    s << line(x, top, x, top + plot_h, "#dddddd");
    s << text(x, top + plot_h + 14, format_number(t), "text-anchor=\"middle\" fill=\"#333\"");
  }
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double y = top + row * static_cast<double>(i);
    s << text(x0 - 6, y + 13, b.label, "text-anchor=\"end\"");
    const double w = std::isfinite(b.value) ? b.value / axis_max * plot_w : 0;
    s << rect(x0, y + 2, w, row - 4, b.colour);
    s << text(x0 + w + 4, y + 13, b.note, "fill=\"#333\"");
  }
  s << line(x0, top, x0, top + plot_h, "#000000")
    << line(x0, top + plot_h, x0 + plot_w, top + plot_h, "#000000");
  s << text(x0 + plot_w / 2, top + plot_h + 30, axis_label, "text-anchor=\"middle\"");
  legend(s, 10, top + plot_h + 40, width - 20, legend_items);
  s << "</svg>";
  return s.str();
}

std::string stacked_columns(const std::string& title, const std::vector<ColumnGroup>& groups,
                            const std::vector<LegendItem>& segments,
                            const std::string& marker_label) {
  size_t columns = 0;
  double max = 0;
  for (const ColumnGroup& g : groups) {
    for (const Column& c : g.columns) {
      ++columns;
      double sum = 0;
      for (double v : c.segments) sum += std::isfinite(v) ? v : 0;
      max = std::max({max, sum, c.marker});
    }
  }
  const ByteScale scale = byte_scale(max);
  const double col_w =
      std::clamp(760.0 / std::max<double>(1, static_cast<double>(columns)), 6.0, 28.0);
  const double gap = 18;
  const double left = 70;
  const double top = 36;
  const double plot_h = 240;
  const double plot_w =
      col_w * static_cast<double>(columns) + gap * static_cast<double>(groups.size() + 1);
  const double width = std::max(left + plot_w + 20, 700.0);
  std::vector<LegendItem> items = segments;
  if (!marker_label.empty()) items.push_back({marker_label, "marker"});
  const double lh = legend_height(width - 20, items);
  const double height = top + plot_h + 62 + lh;
  const double step = nice_step(max / scale.div, 5);
  const double axis_max = max > 0 ? std::ceil(max / scale.div / step) * step : 1;
  std::ostringstream s;
  s << open(width, height, title);
  for (double t = 0; t <= axis_max + step * 0.01; t += step) {
    const double y = top + plot_h - t / axis_max * plot_h;
    s << line(left, y, left + plot_w, y, "#dddddd");
    s << text(left - 6, y + 4, format_number(t), "text-anchor=\"end\" fill=\"#333\"");
  }
  s << text(14, top + plot_h / 2, std::string("bytes (") + scale.unit + ")",
            "text-anchor=\"middle\" transform=\"rotate(-90 14 " + n(top + plot_h / 2) + ")\"");
  double x = left + gap;
  for (const ColumnGroup& g : groups) {
    const double gx = x;
    for (const Column& c : g.columns) {
      double y = top + plot_h;
      for (size_t k = 0; k < c.segments.size(); ++k) {
        const double v = std::isfinite(c.segments[k]) ? c.segments[k] / scale.div : 0;
        const double h = v / axis_max * plot_h;
        y -= h;
        s << rect(x + 1, y, col_w - 2, h, segments[k].colour);
      }
      if (c.marker >= 0) {
        const double my = top + plot_h - c.marker / scale.div / axis_max * plot_h;
        s << line(x - 1, my, x + col_w + 1, my, "#000000", 2.5);
      }
      if (col_w >= 14)
        s << text(x + col_w / 2, top + plot_h + 12, c.label,
                  "text-anchor=\"middle\" font-size=\"9\" fill=\"#555\"");
      x += col_w;
    }
    s << text((gx + x) / 2, top + plot_h + 28, g.label, "text-anchor=\"middle\"");
    x += gap;
  }
  s << line(left, top, left, top + plot_h, "#000000")
    << line(left, top + plot_h, left + plot_w, top + plot_h, "#000000");
  s << text(left + plot_w / 2, top + plot_h + 44,
            "stages s0..s" + std::string("P-1") + " of each schedule",
            "text-anchor=\"middle\" fill=\"#333\"");
  legend(s, 10, top + plot_h + 54, width - 20, items);
  s << "</svg>";
  return s.str();
}

std::string grouped_bars(const std::string& title, const std::vector<PairGroup>& groups,
                         const std::vector<LegendItem>& series, const std::string& axis_label) {
  double max = 0;
  for (const PairGroup& g : groups) {
    for (double v : g.values) {
      if (std::isfinite(v)) max = std::max(max, v);
    }
  }
  const double bar_w = 16;
  const double group_w = bar_w * static_cast<double>(series.size()) + 26;
  const double left = 100;  // room for the first rotated label
  const double top = 36;
  const double plot_h = 200;
  const double plot_w = group_w * static_cast<double>(groups.size()) + 10;
  const double width = std::max(left + plot_w + 20, 600.0);
  const double lh = legend_height(width - 20, series);
  const double height = top + plot_h + 84 + lh;
  const double step = nice_step(max, 5);
  const double axis_max = max > 0 ? std::ceil(max / step) * step : 1;
  std::ostringstream s;
  s << open(width, height, title);
  for (double t = 0; t <= axis_max + step * 0.01; t += step) {
    const double y = top + plot_h - t / axis_max * plot_h;
    s << line(left, y, left + plot_w, y, "#dddddd");
    s << text(left - 6, y + 4, format_number(t), "text-anchor=\"end\" fill=\"#333\"");
  }
  s << text(left - 44, top + plot_h / 2, axis_label,
            "text-anchor=\"middle\" transform=\"rotate(-90 " + n(left - 44) + " " +
                n(top + plot_h / 2) + ")\"");
  double x = left + 14;
  for (const PairGroup& g : groups) {
    for (size_t k = 0; k < g.values.size() && k < series.size(); ++k) {
      const double v = g.values[k];
      if (!std::isfinite(v)) continue;
      const double h = v / axis_max * plot_h;
      s << rect(x + bar_w * static_cast<double>(k), top + plot_h - h, bar_w - 2, h,
                series[k].colour);
    }
    const double cx = x + bar_w * static_cast<double>(series.size()) / 2;
    s << text(cx, top + plot_h + 14, g.label,
              "text-anchor=\"end\" font-size=\"10\" transform=\"rotate(-30 " + n(cx) + " " +
                  n(top + plot_h + 14) + ")\"");
    x += group_w;
  }
  s << line(left, top, left, top + plot_h, "#000000")
    << line(left, top + plot_h, left + plot_w, top + plot_h, "#000000");
  legend(s, 10, top + plot_h + 76, width - 20, series);
  s << "</svg>";
  return s.str();
}

std::string gantt(const std::string& title, const Timeline& timeline, double t_max, int chunks) {
  const double left = 44;
  const double top = 30;
  const double row = 22;
  const double plot_w = 530;
  const double width = left + plot_w + 16;
  const double rows = static_cast<double>(timeline.size());
  const double height = top + row * rows + 34;
  if (!(t_max > 0)) t_max = 1e-3;
  const double scale_ms = 1e3;
  const double step = nice_step(t_max * scale_ms, 6);
  std::ostringstream s;
  s << open(width, height, title);
  // Idle is the background of every row; blocks cover their busy time.
  for (size_t st = 0; st < timeline.size(); ++st) {
    const double y = top + row * static_cast<double>(st);
    s << rect(left, y + 2, plot_w, row - 4, "#e6e6e6");
    s << text(left - 6, y + 15, "s" + std::to_string(st), "text-anchor=\"end\"");
    for (const TimelineEvent& e : timeline[st]) {
      const char* colour = "#4e79a7";
      const char* op = "F";
      switch (e.op) {
        case ActionKind::kForward:
          colour = "#4e79a7";
          op = "F";
          break;
        case ActionKind::kBackward:
          colour = "#59a14f";
          op = "B";
          break;
        case ActionKind::kBackwardInput:
          colour = "#8cd17d";
          op = "I";
          break;
        case ActionKind::kBackwardWeight:
          colour = "#b07aa1";
          op = "W";
          break;
        case ActionKind::kSync:
          colour = "#333333";
          op = "";
          break;
      }
      // A barrier is drawn where it releases; the wait before it is idle.
      const double x = left + (e.op == ActionKind::kSync ? e.end : e.start) / t_max * plot_w;
      const double w =
          e.op == ActionKind::kSync ? 1.5 : std::max((e.end - e.start) / t_max * plot_w, 0.8);
      s << rect(x, y + 2, w, row - 4, colour, "stroke=\"#ffffff\" stroke-width=\"0.6\"");
      std::string label = std::string(op) + (e.op == ActionKind::kSync ? "" : std::to_string(e.mb));
      if (chunks > 1 && e.op != ActionKind::kSync) label += "." + std::to_string(e.chunk);
      if (!label.empty() && w >= 5.8 * static_cast<double>(label.size()) + 1) {
        s << text(x + w / 2, y + 15, label,
                  std::string("text-anchor=\"middle\" font-size=\"10\" fill=\"") +
                      (e.op == ActionKind::kBackwardInput ? "#000000" : "#ffffff") + "\"");
      }
    }
  }
  const double axis_y = top + row * rows;
  for (double t = 0; t <= t_max * scale_ms + step * 0.01; t += step) {
    const double x = left + t / (t_max * scale_ms) * plot_w;
    if (x > left + plot_w + 0.5) break;
    s << line(x, axis_y, x, axis_y + 4, "#000000");
    s << text(x, axis_y + 15, format_number(t),
              "text-anchor=\"middle\" font-size=\"10\" fill=\"#333\"");
  }
  s << line(left, axis_y, left + plot_w, axis_y, "#000000");
  s << text(left + plot_w, axis_y + 28, "time since step start (ms)",
            "text-anchor=\"end\" font-size=\"10\"");
  s << "</svg>";
  return s.str();
}

std::string trend_chart(const std::string& title, const TrendSeries& t,
                        const std::string& axis_label) {
  const double w = 360, h = 170, left = 58, right = 12, top = 30, bottom = 34;
  const double pw = w - left - right, ph = h - top - bottom;
  double lo = std::numeric_limits<double>::infinity();
  double hi = -lo;
  auto take = [&](double v) {
    if (std::isfinite(v)) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  };
  for (size_t i = 0; i < t.median.size(); ++i) {
    take(t.median[i]);
    if (i < t.low.size()) take(t.low[i]);
    if (i < t.high.size()) take(t.high[i]);
  }
  if (t.band_high > t.band_low) {
    take(t.band_low);
    take(t.band_high);
  }
  std::ostringstream s;
  s << open(w, h, title);
  if (!std::isfinite(lo)) return s.str() + "</svg>";
  const double pad = hi > lo ? (hi - lo) * 0.1 : std::max(std::fabs(hi) * 0.05, 1e-9);
  lo -= pad;
  hi += pad;
  const size_t n = t.median.size();
  auto x_of = [&](size_t i) {
    return left + (n > 1 ? pw * static_cast<double>(i) / static_cast<double>(n - 1) : pw / 2);
  };
  auto y_of = [&](double v) { return top + ph * (1 - (v - lo) / (hi - lo)); };
  s << line(left, top, left, top + ph, "#333") << line(left, top + ph, left + pw, top + ph, "#333");
  for (double v : {lo + pad, hi - pad}) {
    s << text(4, y_of(v) + 4, format_number(v), "font-size=\"10\"")
      << line(left - 3, y_of(v), left, y_of(v), "#333");
  }
  s << text(left, h - 4, axis_label + " over nights (oldest left)", "font-size=\"10\"");
  if (t.band_high > t.band_low) {
    s << rect(left, y_of(t.band_high), pw, y_of(t.band_low) - y_of(t.band_high), "#4e79a7",
              "fill-opacity=\"0.15\"");
  }
  if (t.step_index > 0 && static_cast<size_t>(t.step_index) < n) {
    const double x =
        (x_of(static_cast<size_t>(t.step_index) - 1) + x_of(static_cast<size_t>(t.step_index))) / 2;
    s << "<line x1=\"" << n_text(x) << "\" y1=\"" << n_text(top) << "\" x2=\"" << n_text(x)
      << "\" y2=\"" << n_text(top + ph) << "\" stroke=\"#e15759\" stroke-dasharray=\"4 3\"/>"
      << text(x + 3, top + 10, "step: " + t.nights[static_cast<size_t>(t.step_index)],
              "font-size=\"10\" fill=\"#e15759\"");
  }
  std::string path;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(t.median[i])) continue;
    path += (path.empty() ? "M" : " L") + n_text(x_of(i)) + " " + n_text(y_of(t.median[i]));
    if (i < t.low.size() && i < t.high.size() && std::isfinite(t.low[i]) &&
        std::isfinite(t.high[i])) {
      s << line(x_of(i), y_of(t.low[i]), x_of(i), y_of(t.high[i]), "#4e79a7", 1.5);
    }
    s << "<circle cx=\"" << n_text(x_of(i)) << "\" cy=\"" << n_text(y_of(t.median[i]))
      << "\" r=\"2.5\" fill=\"#4e79a7\"><title>" << xml_escape(t.nights[i]) << ": "
      << format_number(t.median[i]) << "</title></circle>";
  }
  s << "<path d=\"" << path << "\" fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"1.5\"/>";
  s << "</svg>";
  return s.str();
}

}  // namespace ppb::reports::svg
