// Loading result folders for `pipebench report`.
//
// Every *.json file under the given folders (recursively, in sorted order) is
// looked at. A file is a result when its "schema" starts with
// "pipebench.result/" or, lacking a schema, when it has a "config" or
// "metrics" key; other JSON (traces, sweep summaries, schedules) is ignored and
// listed. A bad result (malformed or truncated JSON, another schema version, a
// missing field, a wrong type) throws UsageError naming the file and field,
// unless skip_bad is set: then it is kept in `bad` and the report lists it.
//
// Results of different machines or builds are never mixed: each entry carries
// its machine key and build key, and the report groups by both.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ppb/pipeline/result.hpp"

namespace ppb::reports {

/// One loaded result and the keys the report sorts it by.
struct ResultEntry {
  std::string source;  ///< the file path
  Result result;
  std::string machine;  ///< machine_key: hosts, CPU, GPUs ("node1 | AMD EPYC 7B13 | -")
  std::string build;    ///< git revision, compiler, build type
  std::string group;    ///< machine @ build @ backend @ work: results of one group are comparable
  std::string work;     ///< work_label: what one step computes ("gpt-tiny, mbs 2, fp32")
  /// Every config field that makes a combination distinct, the device
  /// profiler attached to its memory figures (a run with CUPTI and one
  /// without are two measurements, both kept) and how many ranks shared a
  /// GPU (environment.ranks_per_gpu, when recorded).
  std::string config_key;
  std::string setup_key;  ///< config_key without the schedule's own fields (schedule, inflight,
                          ///< chunks, sync_warmup, memory_guard, batches) nor device_profiler
  std::string label;      ///< "1f1b x balanced P=4 M=8" (+ N, V, K, budget when set)
  /// What tells it apart from another measurement of the same label in its
  /// group, set by the report ("transport mpi-ordered"; "" when none
  /// shares its label); the label then ends in " [<variant>]".
  std::string variant;
};

/// A result file that could not be read, with its one-line reason.
struct BadFile {
  std::string path;
  std::string message;
};

struct LoadedResults {
  std::vector<ResultEntry> results;  ///< in file order, duplicates removed
  std::vector<BadFile> bad;          ///< only with skip_bad
  std::vector<std::string> ignored;  ///< JSON files that are not results
  std::vector<std::string>
      superseded;  ///< same group and combination as a newer result ("old (newer: new)")
  /// The superseded measurements themselves, in file order: in a night's
  /// folder, the sweep's first measurements of the combinations its
  /// confirmation ran again (run_gate judges that night again with them).
  std::vector<ResultEntry> replaced;
};

/// Loads every result under `paths` (folders, or single files), leaving out
/// the files under the folders `exclude` (re-runs kept inside a night's
/// folder, report --confirm).
/// The same combination measured twice in one group (a re-run into another
/// folder) is kept once, the newest, and the other listed as superseded;
/// with keep_repeats every measurement is kept (plan --validate takes the
/// median of a combination's repeats).
/// Throws UsageError: a path that does not exist; a bad result without
/// skip_bad; "nothing to report: no pipebench result files in A, B" when
/// neither a result nor (with skip_bad) a bad result file was found.
LoadedResults load_results(const std::vector<std::string>& paths, bool skip_bad,
                           const std::vector<std::string>& exclude = {}, bool keep_repeats = false);

/// One field of a configuration that changes the work of a step.
struct WorkField {
  const char* name;   ///< "model", "mbs", "dtype"
  std::string value;  ///< "gpt-tiny", "2", "fp32"
};

/// The fields of `config` that change what one step computes: the model
/// (its spec carries the attention kind, vocabulary and the rest), the
/// micro-batch size, the dtype and, where the head was padded beyond the
/// true vocabulary, the padded vocabulary ("padded_vocab", "50304"). Results that differ in any of
/// them are never compared (their samples/s measure different work); the report groups by them, the
/// gate and the claims match on them. A new field that changes the work is one line here.
std::vector<WorkField> work_fields(const ResultConfig& config);

/// The work fields as text: "model=gpt-tiny mbs=2 dtype=fp32".
std::string work_key(const ResultConfig& config);

/// The work fields for people: "gpt-tiny, mbs 2, fp32".
std::string work_label(const ResultConfig& config);

/// load_results without the last refusal: a path holding no result file
/// gives an empty LoadedResults (a folder of other JSON beside the nights
/// of a --baseline folder).
LoadedResults load_results_if_any(const std::vector<std::string>& paths, bool skip_bad,
                                  const std::vector<std::string>& exclude = {},
                                  bool keep_repeats = false);

/// Where `path` is on disk: absolute, its links resolved as far as it
/// exists ("x" and "./x/" are one path even where neither exists); `path`
/// itself where that fails. The one rule every comparison of paths uses.
std::filesystem::path resolved_path(const std::string& path);

/// The one walk over result folders: `path` itself when it is a file, else
/// every *.json below it (recursively; links to folders followed, each
/// folder once and never one holding `path`; names starting with '.' left
/// out: temporary files; a run's traces, *.trace.json and *.trace/, left
/// out), sorted. Throws UsageError naming a path that does not exist or a
/// *.json that cannot be reached (a link loop: "a/x.json: cannot read: Too
/// many levels of symbolic links"); a folder that cannot be read and a
/// *.json that is no regular file (a FIFO) likewise, or, given `bad`
/// (--skip-bad), are listed there.
std::vector<std::string> result_candidates(const std::string& path,
                                           std::vector<BadFile>* bad = nullptr);

/// The machine a result ran on: its hosts, CPU model and GPUs by model and
/// count ("node1 | Intel(R) Xeon(R) | 2x NVIDIA H200"; "-" for none). The
/// count is of the devices the run used: its ranks of that model over
/// environment.ranks_per_gpu, so 2 ranks on one shared H200 and 2 ranks on
/// two H200s are two machines. Software versions (driver, CUDA, cuDNN,
/// NCCL) are not part of it: the gate compares across them and says so
/// (software_changes in regression.hpp).
std::string machine_key(const ResultEnvironment& env);

/// machine_key without the GPU count: the hosts (each by its name before
/// the first dot), the CPU and the GPU models ("node1 | AMD EPYC | NVIDIA
/// H200"), the same for every run on a machine whatever share of its GPUs
/// it used, and for the GPU health probe, which measures them all and names
/// its host by gethostname() where a run has MPI's processor name.
std::string host_key(const ResultEnvironment& env);

/// Keys of one result (used by load_results; exposed for tests and baselines).
std::string build_key(const ResultEnvironment& env);
std::string config_key(const ResultConfig& config);
std::string setup_key(const ResultConfig& config);
std::string config_label(const ResultConfig& config);

/// Builds a ResultEntry (keys filled) from a result and its source.
ResultEntry make_entry(std::string source, Result result);

}  // namespace ppb::reports
