#include "run/check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ppb/exec/mpi.hpp"
#include "ppb/pipeline/data_parallel.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/log.hpp"

namespace ppb::run {

void CheckProbe::arm(const CheckAccess& backend, bool stashing, bool replicas) {
  backend_ = &backend;
  armed_ = true;
  stashing_ = stashing;
  hashing_ = replicas;
  gradient_hash = kHashSeed;
  grads.clear();
  forward_version_.clear();
  stash_violations = 0;
  stash_used = 0;
}

void CheckProbe::action_begin(int /*stage*/, const Action& a) {
  if (!armed_ || !stashing_ || a.chunk < 0) return;
  const auto key = std::make_pair(static_cast<int64_t>(a.microbatch), a.chunk);
  switch (a.kind) {
    case ActionKind::kForward:
      forward_version_[key] = backend_->weight_version(a.chunk);
      break;
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput: {
      const auto it = forward_version_.find(key);
      const int used = backend_->weight_version_of(a.chunk, a.microbatch);
      if (it == forward_version_.end() || it->second != used) ++stash_violations;
      if (used != backend_->weight_version(a.chunk)) ++stash_used;
      break;
    }
    case ActionKind::kBackwardWeight:
    case ActionKind::kSync:
      break;
  }
}

void CheckProbe::optimizer_begin(int chunk) {
  if (!armed_) return;
  if (hashing_) {
    for (const std::vector<float>& g : backend_->gradients(chunk)) {
      const auto* bytes = reinterpret_cast<const unsigned char*>(g.data());
      for (size_t i = 0; i < g.size() * sizeof(float); ++i) {
        gradient_hash = (gradient_hash ^ bytes[i]) * 1099511628211ULL;
      }
    }
  }
  if (stashing_ || grads.count(chunk) != 0) return;
  grads[chunk] = backend_->gradients(chunk);
}

double run_check_tolerance(const BackendInfo& info, int bytes_per_element, int replicas) {
  const double tolerance = check_tolerance(info, bytes_per_element);
  if (replicas <= 1 || info.traits.device || bytes_per_element != 4) return tolerance;
  return std::min(tolerance, kDataParallelTolerance);
}

namespace {

/// Worst relative error of this rank's gradients against the reference.
double gradient_error(const CheckProbe& probe, const CheckContext& ctx, const ReferenceStep& ref) {
  double worst = 0;
  for (int ch = 0; ch < ctx.chunks; ++ch) {
    const UnitRange range =
        ctx.parts[static_cast<size_t>(ctx.placement.virtual_stage(ctx.stage, ch))];
    const auto it = probe.grads.find(ch);
    PPB_CHECK(it != probe.grads.end(), "--check: no gradients captured for a chunk");
    const auto& mine = it->second;
    PPB_CHECK(static_cast<int>(mine.size()) == range.size(), "gradient vectors per unit");
    for (int u = 0; u < range.size(); ++u) {
      const std::vector<float>& ref_grad = ref.grads[static_cast<size_t>(range.begin + u)];
      PPB_CHECK(ref_grad.size() == mine[static_cast<size_t>(u)].size(), "gradient sizes");
      worst = std::max(worst, max_relative_error(mine[static_cast<size_t>(u)], ref_grad));
    }
  }
  return worst;
}

/// Collective over `comm` (every rank): the mean loss of the global batch.
/// Each rank of the last virtual stage's stage sends its replica and its M
/// losses; every rank sums them in global micro-batch order
/// (data_microbatch), as reference_step() does.
double global_loss(const CheckAccess& backend, const CheckContext& ctx, MPI_Comm comm) {
  const int m = ctx.microbatches;
  const int last = ctx.placement.virtual_stages() - 1;  // holds the loss
  std::vector<double> mine(static_cast<size_t>(m) + 1, 0.0);
  mine[0] = -1;  // not a holder of the loss
  if (ctx.stage == ctx.placement.stage_of(last)) {
    mine[0] = ctx.replica;
    for (int mb = 0; mb < m; ++mb)
      mine[static_cast<size_t>(mb) + 1] = backend.loss(ctx.placement.chunk_of(last), mb);
  }
  int size = 1;
  PPB_MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<double> all(mine.size() * static_cast<size_t>(size));
  PPB_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
                              static_cast<int>(mine.size()), MPI_DOUBLE, comm));
  std::vector<double> by_data(static_cast<size_t>(m) * static_cast<size_t>(ctx.replicas), 0.0);
  for (int r = 0; r < size; ++r) {
    const double* row = all.data() + static_cast<size_t>(r) * mine.size();
    if (row[0] < 0) continue;
    const int replica = static_cast<int>(row[0]);
    for (int mb = 0; mb < m; ++mb) {
      by_data[static_cast<size_t>(data_microbatch(mb, m, replica, ctx.replicas))] = row[mb + 1];
    }
  }
  double loss = 0;
  for (double l : by_data) loss += l;
  return loss / static_cast<double>(by_data.size());
}

/// Collective over `comm`: true when the replicas of every stage hashed the
/// same gradients (CheckProbe::gradient_hash).
bool replicas_agree(const CheckProbe& probe, const CheckContext& ctx, MPI_Comm comm) {
  int differ = 0;
  if (ctx.replicas > 1) {
    uint64_t lo = probe.gradient_hash;
    uint64_t hi = probe.gradient_hash;
    PPB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, ctx.replicas_comm));
    PPB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, ctx.replicas_comm));
    differ = lo != hi ? 1 : 0;
    if (differ != 0 && ctx.replica == 0) {
      log::warn("--check: the %d replicas of stage %d summed different gradients", ctx.replicas,
                ctx.stage);
    }
  }
  PPB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &differ, 1, MPI_INT, MPI_MAX, comm));
  return differ == 0;
}

}  // namespace

CheckFigures check_figures(const CheckProbe& probe, const CheckAccess& backend, bool stashing,
                           const CheckContext& ctx, const ReferenceStep* reference,
                           double tolerance, MPI_Comm comm) {
  double worst = 0;
  double loss = std::numeric_limits<double>::quiet_NaN();
  if (stashing) {
    worst = probe.stash_violations > 0 ? 1.0 : 0.0;
  } else {
    PPB_CHECK(reference != nullptr, "--check: a flush schedule needs the reference step");
    worst = gradient_error(probe, ctx, *reference);
    loss = global_loss(backend, ctx, comm);
    const double denom = std::max(std::fabs(reference->loss), 1e-30);
    worst = std::max(worst, std::fabs(loss - reference->loss) / denom);
  }
  double error = 0;
  PPB_MPI_CHECK(MPI_Allreduce(&worst, &error, 1, MPI_DOUBLE, MPI_MAX, comm));
  int64_t used = probe.stash_used;
  int64_t used_total = 0;
  PPB_MPI_CHECK(MPI_Allreduce(&used, &used_total, 1, MPI_INT64_T, MPI_SUM, comm));
  const bool agree = replicas_agree(probe, ctx, comm);

  CheckFigures ck;
  // With stashing, P > 1 must have used a stashed version at least once, or
  // the invariant was never exercised.
  ck.passed = agree &&
              (stashing ? (error == 0 && (ctx.stages == 1 || used_total > 0)) : error <= tolerance);
  ck.max_rel_error = error;
  ck.loss = loss;
  ck.method = stashing ? "weight-stash" : "reference";
  return ck;
}

}  // namespace ppb::run
