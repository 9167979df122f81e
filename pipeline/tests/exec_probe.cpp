// Failure behaviour of the executor on real ranks, run by
// ctest, which checks the message with PASS_REGULAR_EXPRESSION and the time
// with TIMEOUT:
//   exec_probe stall  : rank 1 stalls in its first action of step 1; the
//                       watchdog (--timeout 1 s) names the stuck rank and
//                       action and ends the job with MPI_Abort.
//   exec_probe throw  : rank 1 throws inside run_or_abort; the job ends with
//                       a message naming rank 1 and MPI_Abort.
//   exec_probe stop   : rank 2 stops itself (SIGSTOP) between steps 0 and 1,
//                       so that the others wait in the barrier that starts
//                       step 1; the rank that waits on it there names it.
// Either mode returning normally is a failure (exit 3, no matching line).
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "ppb/exec/backend.hpp"
#include "ppb/exec/executor.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/exec/transport.hpp"
#include "ppb/pipeline/schedule.hpp"

int main(int argc, char** argv) {
  ppb::MpiSession mpi;
  const char* mode = argc > 1 ? argv[1] : "";
  if (std::strcmp(mode, "throw") == 0) {
    ppb::run_or_abort([&] {
      if (mpi.rank() == 1) throw std::runtime_error("deliberate failure for the test");
      MPI_Barrier(MPI_COMM_WORLD);  // the other ranks wait here until the abort
    });
    return 3;
  }
  const bool stop = std::strcmp(mode, "stop") == 0;
  if (std::strcmp(mode, "stall") == 0 || stop) {
    ppb::ScheduleParams p;
    p.stages = mpi.size();
    p.microbatches = 4;
    const ppb::Schedule s = ppb::generate_schedule("1f1b", p);
    ppb::BackendConfig cfg;
    cfg.costs = ppb::uniform_costs(mpi.size(), 1, 1.0, 2.0, 0.0, 0.0);
    cfg.stage = mpi.rank();
    cfg.stages = mpi.size();
    cfg.microbatches = 4;
    const std::unique_ptr<ppb::Backend> backend = ppb::make_backend("timed", cfg);
    ppb::MpiTransport transport(mpi.comm());
    ppb::ExecutorOptions eo;
    eo.timeout_seconds = 1.0;
    if (!stop) {
      eo.debug_stall_rank = 1;
      eo.debug_stall_step = 1;
    }
    ppb::Executor exec(mpi.comm(), *backend, transport, eo);
    for (int step = 0; step < 3; ++step) {
      if (stop && step == 1 && mpi.rank() == 2) std::raise(SIGSTOP);
      (void)exec.run_step(s);
    }
    return 3;
  }
  std::fprintf(stderr, "usage: exec_probe stall|stop|throw\n");
  return 2;
}
