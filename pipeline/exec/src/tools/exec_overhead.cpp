// ppb_exec_overhead: the executor's overhead on the timed backend, and the
// measurement behind kDefaultWaitStrategy.
//
//   mpirun -np 8 --oversubscribe ppb_exec_overhead [--schedule 1f1b] [--microbatches 32]
//          [--steps 5] [--wait block|yield|sleep|all] [--fwd-ms 2] [--bwd-ms 4] [--bytes 65536]
//
// For each wait strategy: runs the schedule `steps` times (after one warm-up),
// takes the median step (step = max over ranks of the end of the last
// action), simulates the same schedule with the MEASURED mean F and B
// durations of every stage, and prints
//   overhead per action = (measured step - simulated step) / actions per stage
// (2M for the non-interleaved schedules: the length of each stage's list, an
// upper bound of the critical path's action count) and the bubble ratios.
//
// Measured on the project's 2-core machine while other builds ran (load
// average 4-10), 1f1b, P = 8, M = 32, F 2 ms, B 4 ms, 64 KiB, wait sleep:
//   measured / simulated step 1.023-1.051 (5.4-12 ms over ~240 ms);
//   = 84-190 us per action of a stage's list (64 actions), or 11-24 us per
//     action of the whole schedule (512 actions);
//   the gap is the hand-over latency (66-137 us per message on the critical
//   path: 20 us polls plus the scheduler on 2 cores shared by 8 ranks and
//   other jobs); the executor's own bookkeeping, measured with one rank
//   (P = 1, no messages), is 1.2-1.9 us per action.
// With actions on the backend's compute stream (the timed backend's clock
// stream, the step loop), interleaved with the synchronous executor in one
// sitting at load average 2.6: 1.043-1.045 against 1.038-1.041 (measured
// step 247-251 ms against 247-249 ms). Once the loop enqueued an action whose
// input had arrived before testing the other messages, 6 interleaved rounds
// in a quiet sitting (load 1.2-2.0): 1.0170-1.0212 (median 1.0172, hand-over
// 44-58 us) against the synchronous executor's 1.0147-1.0192 (1.016, 41-50 us).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ppb/exec/backend.hpp"
#include "ppb/exec/executor.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/exec/transport.hpp"
#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/simulator.hpp"

namespace {

struct Args {
  std::string schedule = "1f1b";
  int microbatches = 32;
  int steps = 5;
  std::string wait = "all";
  double fwd_ms = 2;
  double bwd_ms = 4;
  int64_t bytes = 64 << 10;
  bool dump = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--schedule")
      a.schedule = v;
    else if (k == "--microbatches")
      a.microbatches = std::atoi(v);
    else if (k == "--steps")
      a.steps = std::atoi(v);
    else if (k == "--wait")
      a.wait = v;
    else if (k == "--fwd-ms")
      a.fwd_ms = std::atof(v);
    else if (k == "--bwd-ms")
      a.bwd_ms = std::atof(v);
    else if (k == "--bytes")
      a.bytes = std::atoll(v);
    else if (k == "--dump")
      a.dump = std::atoi(v) != 0;
    else
      throw ppb::UsageError("ppb_exec_overhead: unknown flag " + k);
  }
  return a;
}

struct Figures {
  double measured = 0, simulated = 0, bubble = 0, sim_bubble = 0, wait = 0, handover = 0;
};

Figures measure(const Args& a, ppb::WaitStrategy wait, int rank, int P) {
  ppb::ScheduleParams p;
  p.stages = P;
  p.microbatches = a.microbatches;
  const ppb::Schedule schedule = ppb::generate_schedule(a.schedule, p);
  ppb::BackendConfig cfg;
  cfg.costs = ppb::uniform_costs(P, 1, a.fwd_ms * 1e-3, a.bwd_ms * 1e-3, 0.0, 0.0);
  for (ppb::ChunkCost& c : cfg.costs.chunks) c.send_bytes = a.bytes;
  cfg.stage = rank;
  cfg.stages = P;
  cfg.microbatches = a.microbatches;
  cfg.time_scale = 1.0;
  const std::unique_ptr<ppb::Backend> backend = ppb::make_backend("timed", cfg);
  ppb::MpiTransport transport(MPI_COMM_WORLD);
  ppb::ExecutorOptions eo;
  eo.wait = wait;
  ppb::Executor exec(MPI_COMM_WORLD, *backend, transport, eo);
  (void)exec.run_step(schedule);
  std::vector<std::pair<double, Figures>> steps;
  for (int i = 0; i < a.steps; ++i) {
    const ppb::StepRecord rec = exec.run_step(schedule);
    double step = rec.actions_end;
    MPI_Allreduce(MPI_IN_PLACE, &step, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double f = 0, b = 0;
    int nf = 0, nb = 0;
    for (const ppb::ActionRecord& r : rec.actions) {
      if (r.action.kind == ppb::ActionKind::kForward) f += r.end - r.start, ++nf;
      if (r.action.kind == ppb::ActionKind::kBackward) b += r.end - r.start, ++nb;
    }
    double mine[2] = {nf ? f / nf : 0, nb ? b / nb : 0};
    std::vector<double> all(static_cast<size_t>(2 * P));
    MPI_Allgather(mine, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, MPI_COMM_WORLD);
    ppb::StageCosts costs = cfg.costs;
    for (int s = 0; s < P; ++s) {
      costs.chunks[static_cast<size_t>(s)].fwd = all[static_cast<size_t>(2 * s)];
      costs.chunks[static_cast<size_t>(s)].bwd_input = all[static_cast<size_t>(2 * s + 1)];
      costs.chunks[static_cast<size_t>(s)].bwd_weight = 0;
    }
    const ppb::SimResult sim = ppb::simulate(schedule, costs);
    if (a.dump && i + 1 == a.steps) {
      for (int r = 0; r < P; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (r != rank) continue;
        std::printf("rank %d measured:", rank);
        for (const ppb::ActionRecord& x : rec.actions) {
          std::printf(" %s%d[%.1f-%.1f w%.1f]", ppb::action_kind_name(x.action.kind),
                      x.action.microbatch, x.start * 1e3, x.end * 1e3, x.wait * 1e3);
        }
        std::printf("\nrank %d messages:", rank);
        for (const ppb::CommRecord& c : rec.comms) {
          std::printf(" %s%s%lld[%.1f-%.1f]", c.send ? "send-" : "recv-",
                      c.kind == ppb::MessageKind::kActivation ? "act" : "grad",
                      static_cast<long long>(c.microbatch), c.start * 1e3, c.end * 1e3);
        }
        std::printf("\nrank %d simulated:", rank);
        for (const ppb::SimEvent& x : sim.stages[static_cast<size_t>(rank)].events) {
          std::printf(" %s%d[%.1f-%.1f]", ppb::action_kind_name(x.action.kind), x.action.microbatch,
                      x.start * 1e3, x.end * 1e3);
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
    double bubble = (step - rec.busy) / step;
    MPI_Allreduce(MPI_IN_PLACE, &bubble, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double waited = rec.wait;
    MPI_Allreduce(MPI_IN_PLACE, &waited, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    // Hand-over latency: how long after its input was produced (the
    // producer's action end, on the shared host clock) an action started,
    // when this rank was otherwise free.
    std::vector<double> ends;  // per rank: (mb, kind) -> absolute end, flattened
    const int M = a.microbatches;
    std::vector<double> mine_end(static_cast<size_t>(2 * M), 0);
    for (const ppb::ActionRecord& r : rec.actions) {
      const size_t slot = static_cast<size_t>(2 * r.action.microbatch +
                                              (r.action.kind == ppb::ActionKind::kForward ? 0 : 1));
      mine_end[slot] = rec.origin + r.end;
    }
    ends.resize(static_cast<size_t>(2 * M * P));
    MPI_Allgather(mine_end.data(), 2 * M, MPI_DOUBLE, ends.data(), 2 * M, MPI_DOUBLE,
                  MPI_COMM_WORLD);
    double lat = 0;
    int nlat = 0;
    double prev_end = 0;
    for (const ppb::ActionRecord& r : rec.actions) {
      const bool fwd = r.action.kind == ppb::ActionKind::kForward;
      const int src = fwd ? rank - 1 : rank + 1;
      if (src >= 0 && src < P) {
        const double produced =
            ends[static_cast<size_t>(src * 2 * M + 2 * r.action.microbatch + (fwd ? 0 : 1))];
        const double ready = std::max(produced, rec.origin + prev_end);
        if (produced > rec.origin + prev_end) lat += rec.origin + r.start - ready, ++nlat;
      }
      prev_end = r.end;
    }
    MPI_Allreduce(MPI_IN_PLACE, &lat, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &nlat, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    steps.push_back(
        {step,
         {step, sim.step_time, bubble / P, sim.bubble_ratio, waited / P, nlat ? lat / nlat : 0}});
  }
  std::sort(steps.begin(), steps.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  return steps[steps.size() / 2].second;
}

}  // namespace

int main(int argc, char** argv) {
  ppb::MpiSession mpi;
  ppb::run_or_abort([&] {
    const Args a = parse(argc, argv);
    std::vector<ppb::WaitStrategy> waits;
    if (a.wait == "all") {
      waits = {ppb::WaitStrategy::kBlock, ppb::WaitStrategy::kYield, ppb::WaitStrategy::kSleep};
    } else {
      waits = {ppb::parse_wait_strategy(a.wait, "--wait")};
    }
    const int per_stage = 2 * a.microbatches;
    if (mpi.rank() == 0) {
      std::printf("# %s P=%d M=%d F=%.1f ms B=%.1f ms, %lld B messages, median of %d steps\n",
                  a.schedule.c_str(), mpi.size(), a.microbatches, a.fwd_ms, a.bwd_ms,
                  static_cast<long long>(a.bytes), a.steps);
      std::printf("%-6s %12s %12s %10s %14s %9s %9s %10s %12s\n", "wait", "measured_ms",
                  "simulated_ms", "ratio", "us_per_action", "bubble", "sim_bubble", "wait_ms",
                  "handover_us");
    }
    for (ppb::WaitStrategy w : waits) {
      const Figures f = measure(a, w, mpi.rank(), mpi.size());
      if (mpi.rank() == 0) {
        std::printf("%-6s %12.3f %12.3f %10.4f %14.1f %9.4f %9.4f %10.3f %12.1f\n",
                    ppb::wait_strategy_name(w), f.measured * 1e3, f.simulated * 1e3,
                    f.measured / f.simulated, (f.measured - f.simulated) / per_stage * 1e6,
                    f.bubble, f.sim_bubble, f.wait * 1e3, f.handover * 1e6);
      }
    }
  });
  return 0;
}
