#include "ppb/pipeline/timeline_text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

// The longest of "F3c1", "F3", "F" that fits in `room` columns (the chunk
// goes first, then the micro-batch: a bare "F3c" would read as a typo).
std::string block_label(const Action& a, bool show_chunk, size_t room) {
  std::string label = action_kind_name(a.kind);
  const std::string mb = std::to_string(a.microbatch);
  if (label.size() + mb.size() > room) return label;
  label += mb;
  if (show_chunk) {
    const std::string chunk = std::to_string(a.chunk);
    if (label.size() + 1 + chunk.size() <= room) {
      label += 'c';
      label += chunk;
    }
  }
  return label;
}

// The smallest 1, 2 or 5 x 10^k that is >= x (x > 0).
double nice_step(double x) {
  const double p = std::pow(10.0, std::floor(std::log10(x)));
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= x * (1 - 1e-12)) return m * p;
  }
  return 10 * p;
}

std::string format_time(double t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", t);
  return buf;
}

}  // namespace

std::string render_timeline(const Schedule& schedule, const SimResult& result, int width) {
  if (width < 10) throw UsageError("timeline: width must be >= 10, got " + std::to_string(width));
  const int P = schedule.stages;
  if (static_cast<int>(result.stages.size()) != P) {
    throw UsageError("timeline: result has " + std::to_string(result.stages.size()) +
                     " stages, schedule " + std::to_string(P));
  }
  const double T = result.step_time;
  const double col = T > 0 ? T / width : 1.0;
  const bool show_chunk = schedule.chunks > 1;
  const auto w = static_cast<size_t>(width);
  const size_t name_w = 1 + std::to_string(P - 1).size();  // "s15"

  std::string out;
  char head[256];
  std::snprintf(head, sizeof head,
                "%s: P=%d M=%d V=%d  step time %g  bubble ratio %.4f  overhead %.4f\n",
                schedule.name.c_str(), P, schedule.microbatches, schedule.chunks, T,
                result.bubble_ratio, result.bubble_overhead);
  out += head;
  for (int s = 0; s < P; ++s) {
    const SimStage& st = result.stages[static_cast<size_t>(s)];
    if (st.events.empty() && !schedule.actions[static_cast<size_t>(s)].empty()) {
      throw UsageError("timeline: stage " + std::to_string(s) +
                       " has no events (simulate with record_events)");
    }
    std::string row(w, '.');
    for (const SimEvent& e : st.events) {
      if (e.action.kind == ActionKind::kSync) continue;  // a barrier wait is idle time
      auto a = static_cast<size_t>(std::llround(e.start / col));
      auto b = static_cast<size_t>(std::llround(e.end / col));
      a = std::min(a, w);
      b = std::min(b, w);
      if (b <= a) {
        if (e.end <= e.start || a >= w) continue;  // zero-length actions take no room
        b = a + 1;                                 // too short for a column: show its letter
      }
      const std::string label = block_label(e.action, show_chunk, b - a);
      for (size_t i = a; i < b; ++i) row[i] = i - a < label.size() ? label[i - a] : ' ';
    }
    std::string name = "s";
    name += std::to_string(s);
    name.resize(name_w, ' ');
    out += name + " |" + row + "|\n";
  }

  // Time axis: ticks at multiples of a round step, at least 8 columns apart.
  std::string ticks(w + 1, ' ');
  std::string labels(w + 16, ' ');
  const double step = T > 0 ? nice_step(T * 8.0 / width) : 1.0;
  size_t free_from = 0;  // first column a new label may use
  for (int k = 0;; ++k) {
    const double t = k * step;
    if (T > 0 && t > T * (1 + 1e-12)) break;
    if (T <= 0 && k > 0) break;
    const auto c = static_cast<size_t>(std::llround(t / col));
    if (c > w) break;
    ticks[c] = '|';
    const std::string text = format_time(t);
    if (c >= free_from) {
      labels.replace(c, text.size(), text);
      free_from = c + text.size() + 1;
    }
  }
  while (!labels.empty() && labels.back() == ' ') labels.pop_back();
  while (!ticks.empty() && ticks.back() == ' ') ticks.pop_back();
  const std::string pad(name_w + 2, ' ');
  out += pad + ticks + "\n" + pad + labels + "\n";
  return out;
}

}  // namespace ppb
