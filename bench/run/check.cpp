#include "run/check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ppb/exec/mpi.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb::run {

void CheckProbe::arm(const Backend& backend, bool stashing) {
  backend_ = &backend;
  armed_ = true;
  stashing_ = stashing;
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
  if (!armed_ || stashing_ || grads.count(chunk) != 0) return;
  grads[chunk] = backend_->gradients(chunk);
}

namespace {

/// Worst relative error of this rank's gradients and (last stage) loss.
double reference_error(const CheckProbe& probe, const Backend& backend, const CheckContext& ctx,
                       const ReferenceStep& ref, double& loss) {
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
  loss = 0;
  const int last = ctx.placement.virtual_stages() - 1;  // holds the loss
  if (ctx.stage == ctx.placement.stage_of(last)) {
    const int chunk = ctx.placement.chunk_of(last);
    for (int mb = 0; mb < ctx.microbatches; ++mb) loss += backend.loss(chunk, mb);
    loss /= ctx.microbatches;
    const double denom = std::max(std::fabs(ref.loss), 1e-30);
    worst = std::max(worst, std::fabs(loss - ref.loss) / denom);
  }
  return worst;
}

}  // namespace

CheckFigures check_figures(const CheckProbe& probe, const Backend& backend, bool stashing,
                           const CheckContext& ctx, const ReferenceStep* reference,
                           double tolerance, MPI_Comm comm) {
  double worst = 0;
  double loss = std::numeric_limits<double>::quiet_NaN();
  if (stashing) {
    worst = probe.stash_violations > 0 ? 1.0 : 0.0;
  } else {
    PPB_CHECK(reference != nullptr, "--check: a flush schedule needs the reference step");
    worst = reference_error(probe, backend, ctx, *reference, loss);
    PPB_MPI_CHECK(MPI_Bcast(&loss, 1, MPI_DOUBLE,
                            ctx.placement.stage_of(ctx.placement.virtual_stages() - 1), comm));
  }
  double error = 0;
  PPB_MPI_CHECK(MPI_Allreduce(&worst, &error, 1, MPI_DOUBLE, MPI_MAX, comm));
  int64_t used = probe.stash_used;
  int64_t used_total = 0;
  PPB_MPI_CHECK(MPI_Allreduce(&used, &used_total, 1, MPI_INT64_T, MPI_SUM, comm));

  CheckFigures ck;
  // With stashing, P > 1 must have used a stashed version at least once, or
  // the invariant was never exercised.
  ck.passed = stashing ? (error == 0 && (ctx.stages == 1 || used_total > 0)) : error <= tolerance;
  ck.max_rel_error = error;
  ck.loss = loss;
  ck.method = stashing ? "weight-stash" : "reference";
  return ck;
}

}  // namespace ppb::run
