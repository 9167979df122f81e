#include "ppb/exec/mpi.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include "ppb/exec/job_watchdog.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/clock.hpp"
#include "ppb/profiling/log.hpp"

namespace ppb {
namespace {

bool mpi_live() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

// Set before this rank's own MPI_Abort (ending_the_job).
volatile std::sig_atomic_t g_ending = 0;

// PPB_CHECK's hook: one failing rank must end the whole job, never leave the
// others hanging in a receive.
void abort_hook() {
  g_ending = 1;
  if (mpi_live()) MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

// --timeout over MPI's own start and end, which no JobWatchdog sees (the
// ranks wait there for each other too: a rank stopped before MPI_Init, or
// after its last result, would hold the others forever). 0 = none.
double g_bounded_seconds = 0;

// Ends this process with a line and exit code 1 unless `done` is set within
// the bound; polls as the watchdogs do. Detached: it never outlives a
// process that got through.
void bound_mpi_call(const char* call, const char* why, std::atomic<bool>& done, std::string prefix,
                    double at_least = 0) {
  const double limit = std::max(g_bounded_seconds + 1.0, at_least);  // the watchdogs' grace
  const double timeout = g_bounded_seconds;
  std::thread([call, why, limit, timeout, &done, prefix = std::move(prefix)] {
    double start = now_seconds();
    StopGap gap(start);  // time the process was held is no wait (job_watchdog.hpp)
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const double now = now_seconds();
      start += gap.held(now);
      const double stuck = now - start;
      if (stuck <= limit) continue;
      std::fprintf(stderr, "%sstuck for %s s in %s (%s); exiting (--timeout %g)\n", prefix.c_str(),
                   seconds_text(stuck).c_str(), call, why, timeout);
      std::fflush(stderr);
      std::_Exit(1);
    }
  }).detach();
}

std::atomic<bool> g_initialized{false};
std::atomic<bool> g_finalized{false};
// The log's prefix ("pipebench[r1]: ") as the session set it: at exit the
// log's own state may already be gone (it was made after the handler was
// registered, so it is destroyed before the handler runs).
char g_prefix[64] = {};

void finalize_at_exit() {
  if (!mpi_live()) return;
  if (g_bounded_seconds > 0) {
    bound_mpi_call("MPI_Finalize", "another rank has not reached the end of the job", g_finalized,
                   g_prefix);
  }
  MPI_Finalize();
  g_finalized = true;
}

}  // namespace

int world_rank() {
  if (!mpi_live()) return -1;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

void mpi_call_failed(const char* call, int code, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    std::snprintf(text, sizeof text, "code %d", code);
  std::fprintf(stderr, "pipebench[r%d]: MPI error in %s at %s:%d: %s\n", world_rank(), call, file,
               line, text);
  std::fflush(stderr);
  abort_hook();
  std::abort();
}

MpiSession::MpiSession(double timeout_seconds) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) {
    g_bounded_seconds = timeout_seconds > 0 ? timeout_seconds : 0;
    if (g_bounded_seconds > 0)
      // Long enough for a rank that ended on a bad flag of its own to say so.
      bound_mpi_call("MPI_Init", "waiting for the job's other ranks to start", g_initialized,
                     log::prefix(), kFlagErrorGraceSeconds + 1.0);
    int provided = 0;
    // FUNNELED: the executor's thread makes every MPI call; the watchdog only
    // calls MPI_Abort (see mpi.hpp).
    PPB_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
    g_initialized = true;
    std::atexit(finalize_at_exit);
  }
  PPB_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  PPB_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  PPB_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  log::set_rank(rank_, /*quiet_nonzero=*/true);
  std::snprintf(g_prefix, sizeof g_prefix, "%s", log::prefix().c_str());
  set_abort_hook(abort_hook);
}

NodeLocal node_local(MPI_Comm comm) {
  int rank = 0;
  PPB_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_Comm local = MPI_COMM_NULL;
  PPB_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local));
  NodeLocal out;
  PPB_MPI_CHECK(MPI_Comm_rank(local, &out.rank));
  PPB_MPI_CHECK(MPI_Comm_size(local, &out.size));
  PPB_MPI_CHECK(MPI_Comm_free(&local));
  return out;
}

bool ending_the_job() { return g_ending != 0; }

void abort_job(const char* message, int code, double linger_seconds) {
  g_ending = 1;
  std::fprintf(stderr, "%s%s\n", log::prefix().c_str(), message);
  std::fflush(stderr);
  if (linger_seconds > 0)
    std::this_thread::sleep_for(std::chrono::duration<double>(linger_seconds));
  if (mpi_live()) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

void run_or_abort(const std::function<void()>& body, MPI_Comm comm) {
  int code = 0;
  std::string what;
  try {
    body();
    return;
  } catch (const UsageError& e) {
    code = kUsageExitCode;
    what = e.what();
  } catch (const std::exception& e) {
    code = 1;
    what = e.what();
  } catch (...) {
    code = 1;
    what = "unknown exception";
  }
  g_ending = 1;
  int rank = -1;
  int size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::fprintf(stderr, "%serror on rank %d of %d: %s\n", log::prefix().c_str(), rank, size,
               what.c_str());
  std::fflush(stderr);
  MPI_Abort(comm, code);
  std::exit(code);
}

}  // namespace ppb
