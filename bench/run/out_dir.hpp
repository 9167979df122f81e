// The output folder of `pipebench run`: made, proved writable and checked
// for every file the sweep will write there, before anything runs.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "ppb/exec/job_watchdog.hpp"
#include "run/run_options.hpp"
#include "run/sweep.hpp"

namespace ppb::run {

/// The output folder (--out, or a dated one), made and checked for
/// `combos` (their result files and, with --trace, their traces) by rank 0;
/// every rank learns whether it worked. Collective over `comm`. Returns the
/// folder; when it cannot be used (not made, not writable, a link or FIFO
/// where a file goes) rank 0 throws UsageError naming --out and the other
/// ranks cli::ExitCode{2}.
std::string agree_out_dir(const RunOptions& options, const std::vector<Combination>& combos,
                          JobWatchdog& watch, int rank, MPI_Comm comm);

}  // namespace ppb::run
