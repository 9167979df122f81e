#include "run/out_dir.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "cli.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/log.hpp"
#include "ppb/profiling/output_file.hpp"

namespace ppb::run {

std::string make_writable_folder(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "--out " + dir + ": cannot create the folder (" + ec.message() + ")";
  std::string probe = dir + "/.pipebench-probe-XXXXXX";
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    return "--out " + dir + ": cannot create files in the folder (" + std::strerror(errno) + ")";
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

void agree_with_rank_zero(const std::string& why, int rank, MPI_Comm comm) {
  int flag = why.empty() ? 1 : 0;
  PPB_MPI_CHECK(MPI_Bcast(&flag, 1, MPI_INT, 0, comm));
  if (flag != 0) return;
  if (rank == 0) throw UsageError(why);
  throw cli::ExitCode{kUsageExitCode};
}

namespace {

/// The files pipebench names itself inside --out for `c`: its result and,
/// with --trace, the merged trace and one file per stage in <stem>.trace/.
std::vector<OutputPath> owned_outputs(const std::string& dir, const Combination& c, bool trace) {
  std::vector<OutputPath> out{{dir, result_file_name(c)}};
  if (!trace) return out;
  const std::string stem = result_stem(c);
  out.emplace_back(dir, stem + ".trace.json");
  for (int s = 0; s < c.stages; ++s)
    out.emplace_back(dir, stem + ".trace/rank" + std::to_string(s) + ".json");
  return out;
}

/// Rank 0's output folder: made, and proved writable by creating and
/// removing a file in it, so that a read-only folder is one usage error now
/// rather than an abort after the first combination; and every name the
/// sweep will write there checked (write_output_file's rule for a folder
/// pipebench fills: a symbolic link, or a FIFO, where a result or trace
/// goes is refused before anything runs). Returns why not, or "".
std::string make_out_dir(const std::string& dir, const std::vector<Combination>& combos,
                         bool trace) {
  if (std::string why = make_writable_folder(dir); !why.empty()) return why;
  try {
    for (const Combination& c : combos) {
      for (const OutputPath& o : owned_outputs(dir, c, trace)) check_output_path(o);
    }
  } catch (const UsageError& e) {
    return std::string("--out: ") + e.what();
  }
  return "";
}

}  // namespace

std::string agree_out_dir(const RunOptions& options, const std::vector<Combination>& combos,
                          JobWatchdog& watch, int rank, MPI_Comm comm) {
  std::string dir =
      options.out.empty() ? default_out_dir(static_cast<int64_t>(std::time(nullptr))) : options.out;
  watch.begin(rank == 0 ? "creating the output folder " + dir
                        : "waiting for rank 0 to create the output folder");
  const std::string why = rank == 0 ? make_out_dir(dir, combos, options.trace) : "";
  agree_with_rank_zero(why, rank, comm);
  // --resume continues a folder whose run was ended: a write killed between
  // naming a replacement and renaming it (SIGKILL) left a temporary file.
  if (rank == 0 && options.resume) {
    for (const std::string& f : remove_stale_temporaries(dir, kStaleTemporarySeconds))
      log::info("--resume: removed %s, a temporary file an ended write left", f.c_str());
  }
  watch.end();
  return dir;
}

}  // namespace ppb::run
