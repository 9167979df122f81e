// What `pipebench run` prints for people (rank 0 only): one progress line per
// combination as it finishes and a summary table at the end. Machine output
// goes to the result files only (STYLE.md rule 14).
#pragma once

#include <string>
#include <vector>

#include "ppb/pipeline/result.hpp"

namespace ppb::run {

/// One finished combination as the terminal shows it.
struct ProgressRow {
  int index = 0;  ///< 0-based
  int total = 1;
  std::string label;  ///< combination_label()
  Result result;
  bool resumed = false;    ///< skipped by --resume (result read back from its file)
  double closed_form = 0;  ///< (P-1)/(M+P-1) where it applies, NaN otherwise
};

/// "[7/36] 1f1b x balanced M=8  812.4 samples/s  bubble 0.27 (theory 0.27)  peak 143 MiB  check ok"
/// (check part only with --check; "invalid: <why>", "oom: <why>",
/// "error: <why>" for the other statuses; "(resumed)" for a skipped one).
/// A device backend's ok result adds a second, indented line with its fast
/// paths and each fallback's reason (reports::fast_paths_line):
/// "    fast paths: attention FELL BACK: naive (fp32: ...); CUDA graphs: ...".
std::string progress_line(const ProgressRow& row);

/// A fixed-width table, one row per combination: schedule, partition, M,
/// status, samples/s, median step (ms), bubble measured / theory / closed
/// form, overhead measured / theory, peak memory (max over stages), check.
std::string summary_table(const std::vector<ProgressRow>& rows);

/// While it lives, a SIGINT (Ctrl-C), SIGTERM (what mpirun sends the
/// ranks when it is interrupted, or when another rank failed) or SIGHUP
/// prints one line before the process ends by that signal as it would
/// have (once the outputs being put in place are: hold_stop_signal):
/// "pipebench[r0]: run: stopped by SIGINT (Ctrl-C); the results finished
/// before it are in OUT (the same command with --resume runs the rest)";
/// nothing where this rank is ending the job itself (ending_the_job: it
/// said why). Rank 0's alone: the others end quietly.
class StopNotice {
 public:
  explicit StopNotice(const std::string& out_dir);
  ~StopNotice();
  StopNotice(const StopNotice&) = delete;
  StopNotice& operator=(const StopNotice&) = delete;
};

}  // namespace ppb::run
