#include "run/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <csignal>
#include <cstdio>

#include "cli.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/profiling/log.hpp"
#include "ppb/profiling/output_file.hpp"
#include "ppb/reports/fast_paths.hpp"

namespace ppb::run {

namespace {

std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

int64_t max_peak(const Result& r) {
  if (!r.metrics) return 0;
  const auto& v = r.metrics->peak_memory_bytes.per_stage;
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

std::string check_text(const Result& r) {
  if (!r.metrics || !r.metrics->check) return "";
  const CheckFigures& c = *r.metrics->check;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s (%.1e", c.passed ? "ok" : "FAILED", c.max_rel_error);
  std::string text = buf;
  if (c.update_rel_error) {
    std::snprintf(buf, sizeof buf, ", update %.1e", *c.update_rel_error);
    text += buf;
  }
  // The first warm-up step was checked too (its gradients: the CUDA graphs').
  if (c.steps.value_or(1) > 1) text += ", " + std::to_string(*c.steps) + " steps";
  return text + ")";
}

}  // namespace

std::string progress_line(const ProgressRow& row) {
  std::string line =
      "[" + std::to_string(row.index + 1) + "/" + std::to_string(row.total) + "] " + row.label;
  const Result& r = row.result;
  switch (r.status) {
    case ResultStatus::kOk: {
      const ResultMetrics& m = *r.metrics;
      line += "  " + fixed(m.samples_per_second, 1) + " samples/s  bubble " +
              fixed(m.bubble_ratio.measured, 2) + " (theory " +
              fixed(m.bubble_ratio.theoretical, 2) + ")  peak " + cli::format_bytes(max_peak(r));
      if (m.check) line += std::string("  check ") + (m.check->passed ? "ok" : "FAILED");
      if (const std::string paths = reports::fast_paths_line(r); !paths.empty()) {
        line += "\n    fast paths: " + paths;
      }
      break;
    }
    case ResultStatus::kOom:
      line += "  oom: " + r.error;
      break;
    case ResultStatus::kInvalid:
      line += "  invalid: " + r.error;
      break;
    case ResultStatus::kError:
      line += "  error: " + r.error;
      break;
  }
  if (row.resumed) line += "  (resumed)";
  return line;
}

std::string summary_table(const std::vector<ProgressRow>& rows) {
  const std::vector<std::string> head = {
      "schedule", "partition",     "M",        "status", "samples/s", "step ms", "bubble",
      "theory",   "(P-1)/(M+P-1)", "overhead", "theory", "peak",      "check"};
  std::vector<std::vector<std::string>> cells;
  for (const ProgressRow& row : rows) {
    const Result& r = row.result;
    std::vector<std::string> c = {r.config.schedule, r.config.partition,
                                  std::to_string(r.config.microbatches),
                                  result_status_name(r.status)};
    if (r.metrics && r.status == ResultStatus::kOk) {
      const ResultMetrics& m = *r.metrics;
      c.push_back(fixed(m.samples_per_second, 1));
      c.push_back(fixed(m.step_time_seconds.median * 1e3, 2));
      c.push_back(fixed(m.bubble_ratio.measured, 3));
      c.push_back(fixed(m.bubble_ratio.theoretical, 3));
      c.push_back(fixed(row.closed_form, 3));
      c.push_back(fixed(m.bubble_overhead.measured, 3));
      c.push_back(fixed(m.bubble_overhead.theoretical, 3));
      c.push_back(cli::format_bytes(max_peak(r)));
      c.push_back(check_text(r));
    } else {
      for (int i = 0; i < 7; ++i) c.push_back("-");
      c.push_back(r.metrics ? cli::format_bytes(max_peak(r)) : "-");
      c.push_back("");
    }
    cells.push_back(std::move(c));
  }
  std::vector<size_t> width(head.size());
  for (size_t i = 0; i < head.size(); ++i) width[i] = head[i].size();
  for (const auto& c : cells) {
    for (size_t i = 0; i < c.size(); ++i) width[i] = std::max(width[i], c[i].size());
  }
  auto format_row = [&](const std::vector<std::string>& c) {
    std::string line;
    for (size_t i = 0; i < c.size(); ++i) {
      const bool left = i < 2 || i == 3 || i + 1 == c.size();
      const std::string pad(width[i] - c[i].size(), ' ');
      line += left ? c[i] + pad : pad + c[i];
      if (i + 1 < c.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  };
  std::string out = format_row(head);
  size_t total = 0;
  for (size_t w : width) total += w + 2;
  out += std::string(total - 2, '-') + "\n";
  for (const auto& c : cells) out += format_row(c);
  return out;
}

namespace {

// The signals StopNotice speaks for, and each one's line, made before any
// arrives: a handler may only write what is ready (async-signal-safe).
constexpr std::array<int, 3> kStopSignals = {SIGINT, SIGTERM, SIGHUP};
std::array<std::array<char, 1024>, 3> g_stop_line{};
std::array<size_t, 3> g_stop_length{};
std::array<struct sigaction, 3> g_stop_before{};
std::array<volatile sig_atomic_t, 3> g_stop_said{};  // each line once

void install_stop_handler(size_t i, struct sigaction* before);

extern "C" void on_stop_signal(int sig) {
  for (size_t i = 0; i < kStopSignals.size(); ++i) {
    if (kStopSignals[i] != sig) continue;
    // This rank ending the job itself has said why; mpirun's SIGTERM back adds nothing.
    if (!ending_the_job() && g_stop_said[i] == 0) {
      g_stop_said[i] = 1;
      (void)!::write(STDERR_FILENO, g_stop_line[i].data(), g_stop_length[i]);
    }
    // Outputs are being put in place: their writer raises it again once
    // they are; a repeat meanwhile is held too (SA_RESETHAND reset us).
    if (hold_stop_signal(sig)) {
      install_stop_handler(i, nullptr);
      return;
    }
  }
  // SA_RESETHAND gave the signal back its default action: end by it.
  ::raise(sig);
}

// Async-signal-safe (sigaction): the handler re-installs itself with it.
void install_stop_handler(size_t i, struct sigaction* before) {
  struct sigaction act {};
  act.sa_handler = on_stop_signal;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESETHAND;
  ::sigaction(kStopSignals[i], &act, before);
}

}  // namespace

StopNotice::StopNotice(const std::string& out_dir) {
  for (size_t i = 0; i < kStopSignals.size(); ++i) {
    const char* how = kStopSignals[i] == SIGINT ? "stopped by SIGINT (Ctrl-C)"
                      : kStopSignals[i] == SIGHUP
                          ? "ended by SIGHUP (its terminal or session closed)"
                          : "ended by SIGTERM (mpirun ends a job so when it is interrupted or "
                            "another rank failed)";
    const int n = std::snprintf(g_stop_line[i].data(), g_stop_line[i].size(),
                                "%srun: %s; the results finished before it are in %s (the same "
                                "command with --resume runs the rest)\n",
                                log::prefix().c_str(), how, out_dir.c_str());
    g_stop_length[i] = std::min(static_cast<size_t>(std::max(n, 0)), g_stop_line[i].size() - 1);
    if (g_stop_length[i] > 0)
      g_stop_line[i][g_stop_length[i] - 1] = '\n';  // cut short: one line still
    g_stop_said[i] = 0;
    install_stop_handler(i, &g_stop_before[i]);
  }
}

StopNotice::~StopNotice() {
  for (size_t i = 0; i < kStopSignals.size(); ++i)
    ::sigaction(kStopSignals[i], &g_stop_before[i], nullptr);
}

}  // namespace ppb::run
