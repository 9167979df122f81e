// MPI plumbing of the executor: the checked-call macro of STYLE.md rule 5, the
// process-wide MPI session, and the "one rank fails, the whole job ends" rule.
//
// Example (a subcommand's callback):
//   ppb::MpiSession mpi;                 // MPI_Init_thread once, abort hook installed
//   ppb::run_or_abort([&] { run_sweep(options, mpi); });
//   // an exception on rank 3 prints
//   //   "pipebench[r3]: error on rank 3 of 8: <what>"
//   // and ends every rank with MPI_Abort (exit code 2 for UsageError, else 1).
#pragma once

#include <mpi.h>

#include <functional>

namespace ppb {

/// Prints "pipebench[r<rank>]: MPI error in <call> at <file>:<line>: <MPI_Error_string>"
/// and ends the job with MPI_Abort(MPI_COMM_WORLD, 1). Used by PPB_MPI_CHECK.
[[noreturn]] void mpi_call_failed(const char* call, int code, const char* file, int line);

/// This process's rank in MPI_COMM_WORLD, or -1 before MPI_Init / after MPI_Finalize.
int world_rank();

}  // namespace ppb

/// Checks an MPI call (MPI_COMM_WORLD's error handler is set to
/// MPI_ERRORS_RETURN by MpiSession so that the code comes back here).
/// Example: PPB_MPI_CHECK(MPI_Barrier(comm));
#define PPB_MPI_CHECK(call)                                           \
  do {                                                                \
    int ppb_mpi_rc_ = (call);                                         \
    if (ppb_mpi_rc_ != MPI_SUCCESS) [[unlikely]] {                    \
      ::ppb::mpi_call_failed(#call, ppb_mpi_rc_, __FILE__, __LINE__); \
    }                                                                 \
  } while (false)

namespace ppb {

/// Owns MPI for the life of the process. The first MpiSession calls
/// MPI_Init_thread(MPI_THREAD_FUNNELED) (MPI calls come from the executor's
/// thread; the watchdog thread only ever calls MPI_Abort, which Open MPI
/// accepts from any thread), sets MPI_ERRORS_RETURN on MPI_COMM_WORLD, sets
/// the log rank (ranks > 0 quiet) and installs the abort hook so that
/// PPB_CHECK on any rank ends the whole job with MPI_Abort. Later sessions in
/// the same process (tests) reuse the initialised MPI. MPI_Finalize runs at
/// process exit (atexit), never twice.
///
/// `timeout_seconds` > 0 (run's --timeout) bounds MPI_Init and MPI_Finalize,
/// where the ranks wait for each other and no watchdog runs: past it plus
/// 1 s the rank prints "stuck for 6.0 s in MPI_Finalize (another rank has
/// not reached the end of the job); exiting (--timeout 5)" and exits 1,
/// which ends the job.
class MpiSession {
 public:
  explicit MpiSession(double timeout_seconds = 0);
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return MPI_COMM_WORLD; }

 private:
  int rank_ = 0;
  int size_ = 1;
};

/// Calls body(). If it throws, prints one line naming the rank
/// ("pipebench[r3]: error on rank 3 of 8: <what>") and ends every rank with
/// MPI_Abort(comm, code): code 2 (kUsageExitCode) for UsageError, 1 otherwise.
/// Use it where ranks can fail alone (the executor, a backend). Input that
/// every rank checks the same way should instead throw UsageError on every
/// rank, so that rank 0 prints and all ranks exit 2 without an abort.
/// REQUIRES: MPI initialised.
void run_or_abort(const std::function<void()>& body, MPI_Comm comm = MPI_COMM_WORLD);

/// This rank's place among the ranks of `comm` that share its node (its
/// shared-memory domain, MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)): the
/// node-local rank picks the GPU. Collective over `comm`.
struct NodeLocal {
  int rank = 0;  ///< 0 <= rank < size
  int size = 1;  ///< ranks of `comm` on this node
};
NodeLocal node_local(MPI_Comm comm);

/// Ends the job from this rank: prints "pipebench[rN]: <message>" (one line)
/// and calls MPI_Abort(MPI_COMM_WORLD, code), `linger_seconds` after the
/// line (a watchdog's: other ranks that find the job stuck at about the
/// same time print theirs too, before the abort ends them). Never returns.
[[noreturn]] void abort_job(const char* message, int code, double linger_seconds = 0);

/// Whether this rank is ending the job itself (abort_job, run_or_abort, a
/// failed check or MPI call): the SIGTERM mpirun then sends back is no stop
/// from outside. Async-signal-safe.
bool ending_the_job();

/// How long a rank other than 0 waits before it names a bad flag found
/// before MPI starts: where rank 0 has the flag too, rank 0 names it and
/// mpirun ends the job first; where rank 0 parsed its line whole, it waits
/// in MPI_Init (bounded by --timeout at no less than this and a second),
/// and the rank with the bad flag names it.
inline constexpr double kFlagErrorGraceSeconds = 2.0;

/// The watchdogs' linger (abort_job): six of the other ranks' 50 ms polls.
inline constexpr double kWatchdogLingerSeconds = 0.3;

}  // namespace ppb
