// The engine of `pipebench run`: the sweep over every schedule x partition x
// M on the MPI ranks of this job, one result file per combination.
#pragma once

#include "run/run_options.hpp"

namespace ppb::run {

/// Initialises MPI (ppb::MpiSession), validates the options on every rank
/// alike (bad input: rank 0 throws UsageError, the other ranks throw
/// cli::ExitCode{2}, all without entering a collective), then runs the
/// sweep: per combination the schedule, partition, memory prediction,
/// optional --check step, W warm-up and K timed steps, gathered to rank 0,
/// which computes the figures, writes the result file (and trace)
/// atomically and prints one progress line. Ends with the summary table.
/// An exception on one rank during a run ends the job through
/// ppb::run_or_abort (naming the rank). Throws cli::ExitCode{1} at the end
/// when a --check failed or a combination ended with status error.
void run_command(const RunOptions& options);

}  // namespace ppb::run
