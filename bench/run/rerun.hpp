// `pipebench run --rerun RESULT.json|FOLDER...`: measure again exactly the
// combinations earlier result files describe, each with its recorded
// configuration, so that the regression gate can confirm a suspected
// change before it fails (report --confirm).
//
//   mpirun -np 4 pipebench run --rerun results/night/cpu/1f1b__balanced__P4_M8.json --out rerun/
//
// A result records its combination (schedule, partition, M, V, N, K,
// batches) and the run's settings (backend, transport, model, device, seed,
// time scale, plant, iterations, warm-up, --min-time, --max-iters, --check,
// --profile, memory budget and guard). Results that share the settings
// form one job of the sweep; each combination is written under the name
// `run` gives it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ppb/pipeline/result.hpp"
#include "run/run_options.hpp"
#include "run/sweep.hpp"

namespace ppb::run {

/// Combinations run with one set of recorded settings.
struct RerunJob {
  RunOptions options;                     ///< the recorded settings, as flags
  std::vector<Combination> combinations;  ///< in the order of the files
  std::vector<std::string> sources;       ///< the result file of each combination
};

/// The flags `--rerun` may be given with: where and how to write (--out,
/// --resume, --trace), the watchdog (--timeout), and --plant, which
/// replaces the recorded plant ('' for none; a test of the gate).
bool allowed_with_rerun(const std::string& flag);

/// The recorded results under `paths` (result files, or folders of them as
/// `pipebench report` reads them), in file order. Throws UsageError naming
/// the path or file for a missing path, a bad result file, or no result.
std::vector<std::pair<std::string, Result>> load_rerun_results(
    const std::vector<std::string>& paths);

/// Groups the recorded results into jobs for a job of `world_size` ranks.
/// `given` holds the flags given with --rerun (RunOptions::given) and their
/// values in `options`. Results with status invalid (nothing measured) are
/// left out and named in *skipped. Throws UsageError (one line) for: a flag
/// other than those allowed_with_rerun; a result recorded on another number
/// of ranks ("--rerun F: recorded on 4 ranks, this job has 2 (run it with
/// mpirun -np 4)"); two results that would write the same file; no result
/// left to run.
std::vector<RerunJob> plan_reruns(const std::vector<std::pair<std::string, Result>>& recorded,
                                  const RunOptions& options, int world_size,
                                  std::vector<std::string>* skipped);

}  // namespace ppb::run
