// The simulator's (or a measured run's) timeline as text, drawn as the
// documents draw pipelines: one row per stage, time left to right, one block
// per action labelled with its kind and micro-batch (F3, B3, I3, W3; with
// V > 1 chunks the chunk follows: F3c1), idle time as '.', a time axis below.
//
// Example (1f1b, P=2, M=3, TF=1, TB=2, width 24; the golden test in
// sim_test.cpp holds exactly this):
//   1f1b: P=2 M=3 V=1  step time 12  bubble ratio 0.2500  overhead 0.3333
//   s0 |F0F1....B0  F2B1  ..B2  |
//   s1 |..F0B0  F1B1  F2B2  ....|
//       |         |         |
//       0         5         10
#pragma once

#include <string>

#include "ppb/pipeline/action.hpp"
#include "ppb/pipeline/simulator.hpp"

namespace ppb {

/// Renders `result` (which must come from simulate(schedule, ...) with
/// record_events) as text: `width` columns of time (>= 10; a column is
/// step_time / width), a block from round(start/column) to round(end/column);
/// a block shows the longest of "F3c1", "F3", "F" that fits, then spaces
/// (a block narrower than one column still gets one); SYNC waits and
/// other idle time show as '.'. Rows are "s<stage> |...|", followed by a time
/// axis with ticks ('|') at round numbers. Throws UsageError when width < 10
/// or when the result has no events for a stage that has actions.
std::string render_timeline(const Schedule& schedule, const SimResult& result, int width = 100);

}  // namespace ppb
