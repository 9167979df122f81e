// Inline SVG charts for the HTML report: every chart has axes with units, a
// legend, and a <title> for screen readers. Private to reports/.
#pragma once

#include <string>
#include <vector>

#include "ppb/pipeline/result.hpp"

namespace ppb::reports::svg {

struct LegendItem {
  std::string label;
  std::string colour;
};

/// Horizontal bar chart: one bar per row, value axis at the bottom.
struct Bar {
  std::string label;
  double value = 0;
  std::string colour;
  std::string note;  ///< printed after the bar ("812 samples/s")
};
std::string bar_chart(const std::string& title, const std::vector<Bar>& bars,
                      const std::string& axis_label, const std::vector<LegendItem>& legend);

/// Vertical stacked bars grouped: groups (e.g. schedules) of columns (stages),
/// each column a stack of segments; optional marker per column (a formula's
/// figure) drawn as a black tick; y axis in bytes.
struct Column {
  std::string label;             ///< "s0"
  std::vector<double> segments;  ///< one per legend entry, bottom first
  double marker = -1;            ///< < 0: none
};
struct ColumnGroup {
  std::string label;
  std::vector<Column> columns;
};
std::string stacked_columns(const std::string& title, const std::vector<ColumnGroup>& groups,
                            const std::vector<LegendItem>& segments,
                            const std::string& marker_label);

/// Grouped vertical bars (e.g. measured vs theory per schedule), unit-less y.
struct PairGroup {
  std::string label;
  std::vector<double> values;  ///< one per legend entry; NaN = absent
};
std::string grouped_bars(const std::string& title, const std::vector<PairGroup>& groups,
                         const std::vector<LegendItem>& series, const std::string& axis_label);

/// Gantt chart of one step: rows = stages, time left to right (ms), F/B/I/W
/// blocks coloured and labelled with the micro-batch (and chunk when chunks > 1),
/// idle grey. `t_max` (seconds) fixes the axis so two charts line up.
std::string gantt(const std::string& title, const Timeline& timeline, double t_max, int chunks);

/// The Gantt legend (F, B, I, W, SYNC, idle).
std::vector<LegendItem> gantt_legend();

/// A figure over nights: the median per night as a line with its
/// per-night spread (low..high, e.g. the quartiles of the steps) as a
/// whisker, the history's noise band as a shaded stripe, and a dashed
/// vertical line before the night a step change arrived.
struct TrendSeries {
  std::vector<std::string> nights;     ///< x axis, oldest first
  std::vector<double> median;          ///< one per night
  std::vector<double> low, high;       ///< per-night spread (NaN = none)
  double band_low = 0, band_high = 0;  ///< noise band; not drawn when equal
  int step_index = -1;                 ///< first night of a new level; -1 = none
};
std::string trend_chart(const std::string& title, const TrendSeries& series,
                        const std::string& axis_label);

/// Colours: a schedule's registry colour (ScheduleInfo::colour; grey for a
/// schedule read from a file), one per memory category.
std::string schedule_colour(const std::string& schedule);
std::string category_colour(int category);

}  // namespace ppb::reports::svg
