// The output folder of `pipebench run` (and `health`): made, proved
// writable and checked for every file the sweep will write there, before
// anything runs.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "ppb/exec/job_watchdog.hpp"
#include "run/run_options.hpp"
#include "run/sweep.hpp"

namespace ppb::run {

/// `dir` made (with its parents) and proved writable by creating and
/// removing a file in it, so that a folder that cannot take the output is
/// one usage error before anything is measured. Returns why not
/// ("--out DIR: cannot create the folder (Not a directory)", "--out DIR:
/// cannot create files in the folder (...)"), or "".
std::string make_writable_folder(const std::string& dir);

/// Collective over `comm`: every rank throws when rank 0's `why` is not
/// empty (the others' is not looked at), rank 0 a UsageError with `why`,
/// the others cli::ExitCode{2} (they stay quiet). For what only rank 0
/// does, such as writing an output file that may be writable on its host
/// alone.
void agree_with_rank_zero(const std::string& why, int rank, MPI_Comm comm);

/// How old a temporary file left in --out must be before --resume removes
/// it (remove_stale_temporaries; its writer must have ended too).
inline constexpr double kStaleTemporarySeconds = 60;

/// The output folder (--out, or a dated one), made and checked for
/// `combos` (their result files and, with --trace, their traces) by rank 0;
/// every rank learns whether it worked; with --resume rank 0 removes the
/// temporary files ended writes left there. Collective over `comm`. Returns the
/// folder; when it cannot be used (not made, not writable, a link or FIFO
/// where a file goes) rank 0 throws UsageError naming --out and the other
/// ranks cli::ExitCode{2}.
std::string agree_out_dir(const RunOptions& options, const std::vector<Combination>& combos,
                          JobWatchdog& watch, int rank, MPI_Comm comm);

}  // namespace ppb::run
