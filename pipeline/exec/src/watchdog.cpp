#include "watchdog.hpp"

#include <algorithm>
#include <cstdio>

#include "ppb/exec/job_watchdog.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/profiling/clock.hpp"
#include "ppb/profiling/log.hpp"

namespace ppb {

std::string action_text(const Action& a, int chunks) {
  if (a.kind == ActionKind::kSync) return "SYNC";
  std::string s = std::string(action_kind_name(a.kind)) + std::to_string(a.microbatch);
  if (chunks > 1) s += " c" + std::to_string(a.chunk);
  return s;
}

std::string Watchdog::peer_name(int peer) const {
  if (peer >= 0 && static_cast<size_t>(peer) < names_.peers.size())
    return names_.peers[static_cast<size_t>(peer)];
  return "rank " + std::to_string(peer);
}

namespace {

// The MPI ranks (of MPI_COMM_WORLD) of `comm`'s ranks, in `comm`'s order.
std::vector<int> world_ranks(MPI_Comm comm) {
  int size = 0;
  PPB_MPI_CHECK(MPI_Comm_size(comm, &size));
  MPI_Group group = MPI_GROUP_NULL;
  MPI_Group world = MPI_GROUP_NULL;
  PPB_MPI_CHECK(MPI_Comm_group(comm, &group));
  PPB_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  std::vector<int> local(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) local[static_cast<size_t>(i)] = i;
  std::vector<int> out(static_cast<size_t>(size));
  PPB_MPI_CHECK(MPI_Group_translate_ranks(group, size, local.data(), world, out.data()));
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return out;
}

}  // namespace

RankNames rank_names(MPI_Comm comm, MPI_Comm job) {
  int stage = 0;
  int stages = 0;
  PPB_MPI_CHECK(MPI_Comm_rank(comm, &stage));
  PPB_MPI_CHECK(MPI_Comm_size(comm, &stages));
  const std::vector<int> pipe = world_ranks(comm);
  const int me = pipe[static_cast<size_t>(stage)];
  int all = stages;
  if (job != MPI_COMM_NULL) PPB_MPI_CHECK(MPI_Comm_size(job, &all));
  RankNames n;
  if (all == stages) {  // one pipeline: a stage is its rank in the pipeline
    n.self = "rank " + std::to_string(me) +
             (me != stage ? " (stage " + std::to_string(stage) + ")" : "");
    for (int s = 0; s < stages; ++s) {
      const int w = pipe[static_cast<size_t>(s)];
      n.peers.push_back("rank " + std::to_string(w) +
                        (w != s ? " (stage " + std::to_string(s) + ")" : ""));
    }
    n.step_peers = n.peers;
    return n;
  }
  // Replicas: a stage's ranks in ascending MPI rank are its replicas 0..D-1
  // under either rank order; every rank learns each rank's stage.
  std::vector<int> stage_of(static_cast<size_t>(all));
  PPB_MPI_CHECK(MPI_Allgather(&stage, 1, MPI_INT, stage_of.data(), 1, MPI_INT, job));
  const std::vector<int> job_world = world_ranks(job);
  std::vector<std::vector<int>> by_stage(static_cast<size_t>(stages));
  for (int i = 0; i < all; ++i) {
    by_stage[static_cast<size_t>(stage_of[static_cast<size_t>(i)])].push_back(
        job_world[static_cast<size_t>(i)]);
  }
  auto name = [&](int w, int s) {
    std::vector<int>& ranks = by_stage[static_cast<size_t>(s)];
    std::sort(ranks.begin(), ranks.end());
    const auto replica = std::find(ranks.begin(), ranks.end(), w) - ranks.begin();
    return "rank " + std::to_string(w) + " (stage " + std::to_string(s) + ", replica " +
           std::to_string(replica) + ")";
  };
  n.self = name(me, stage);
  for (int s = 0; s < stages; ++s) n.peers.push_back(name(pipe[static_cast<size_t>(s)], s));
  for (int i = 0; i < all; ++i) {
    n.step_peers.push_back(
        name(job_world[static_cast<size_t>(i)], stage_of[static_cast<size_t>(i)]));
  }
  for (const int w : by_stage[static_cast<size_t>(stage)]) {
    if (w != me) n.replicas += (n.replicas.empty() ? "" : ", ") + name(w, stage);
  }
  return n;
}

void Watchdog::loop() {
  std::unique_lock lock(mutex_);
  StopGap gap(now_seconds());
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(50));
    const double now = now_seconds();
    const double held = gap.held(now);  // the process did not run: no wait
    if (stop_ || !in_step_) continue;
    if (held > 0) {
      // Only the part of the step the hold covers (it may have begun after
      // the process was continued, before this wake).
      step_start_ += std::clamp(now - step_start_, 0.0, held);
      const int step = step_;
      lock.unlock();  // a blocked stderr must not hold the executor's calls
      log::warn(
          "%s did not run for %.1f s in step %d (stopped, or its job or machine "
          "suspended): not counted against --timeout",
          names_.self.c_str(), held, step);
      lock.lock();
      continue;
    }
    const double stuck = now - step_start_;
    // A rank that waits on another gives the rank that is stuck in its own
    // work half a second (or 10%) more, so that the culprit reports first;
    // one in the all-reduce across replicas twice that, so that a rank
    // waiting for a message from a stopped peer (and naming it) reports
    // before a replica that waits only because its partner waits.
    const bool waiting = doing_ != Doing::kCompute && doing_ != Doing::kOptimizer;
    // In the barrier that starts a step a rank waits on ranks that may
    // still be in the previous step (waiting for a message or in its
    // all-reduce, naming the culprit there), so it reports after both; and
    // a later round of the exchange waits on ranks that may themselves wait
    // in an earlier one: the rank that waits in round 0 on the one that did
    // not arrive reports first.
    const double grace =
        std::max(0.5, 0.1 * timeout_) * (doing_ == Doing::kAllReduce      ? 2
                                         : doing_ == Doing::kStartBarrier ? 3 + round_
                                                                          : 1);
    if (stuck <= timeout_ + (waiting ? grace : 0.0)) continue;
    std::string where;
    switch (doing_) {
      case Doing::kIdle:
        where = "between steps";
        break;
      case Doing::kStartBarrier:
        where = peer_ >= 0 && static_cast<size_t>(peer_) < names_.step_peers.size()
                    ? "in the barrier that starts the step (waiting for " +
                          names_.step_peers[static_cast<size_t>(peer_)] +
                          (round_ > 0
                               ? ", which may itself wait, in round " + std::to_string(round_ + 1)
                               : std::string()) +
                          ")"
                    : "in the barrier that starts the step (a rank did not arrive)";
        break;
      case Doing::kCompute:
        where = "in " + action_text(action_, chunks_) + " (computing)";
        break;
      case Doing::kWaitRecv:
        where = "in " + action_text(action_, chunks_) + " (waiting for the " +
                (kind_ == MessageKind::kActivation ? "activation" : "input gradient") + " of mb " +
                std::to_string(action_.microbatch) + " from " + peer_name(peer_) + ")";
        break;
      case Doing::kSync:
        where = "in SYNC (a barrier: another rank did not arrive)";
        break;
      case Doing::kOptimizer:
        where = "in the optimizer step";
        break;
      case Doing::kAllReduce:
        where = "waiting for the gradient all-reduce of chunk " + std::to_string(peer_) + " with " +
                names_.replicas +
                " (the stage's other replicas: one has not joined it, or is held up itself)";
        break;
      case Doing::kDrain:
        where = peer_ >= 0 ? "after its last action (waiting for its send to " + peer_name(peer_) +
                                 " to complete: that rank has not taken it)"
                           : "after its last action (waiting for its sends to complete)";
        break;
    }
    char line[512];
    std::snprintf(line, sizeof line, "%s: step %d stuck for %s s %s; aborting (--timeout %g)",
                  names_.self.c_str(), step_, seconds_text(stuck).c_str(), where.c_str(), timeout_);
    lock.unlock();
    // A stall is often seen by several ranks at about the same time, each
    // naming the rank it waits on (one of them the culprit): lingering
    // lets their lines out too.
    abort_job(line, 1, kWatchdogLingerSeconds);
  }
}

}  // namespace ppb
