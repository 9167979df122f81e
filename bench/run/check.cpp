#include "run/check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ppb/exec/mpi.hpp"
#include "ppb/pipeline/data_parallel.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/log.hpp"

namespace ppb::run {

double sgd_update_error(std::span<const float> before, std::span<const float> grads,
                        std::span<const float> after, float lr) {
  PPB_CHECK(before.size() == grads.size() && after.size() == grads.size(),
            "sgd_update_error of spans of different sizes");
  double diff = 0;
  double scale = 0;
  bool finite = true;
  for (size_t i = 0; i < grads.size(); ++i) {
    // fl(lr * g): the product of two floats is exact in double, so the
    // conversion rounds once, as an fp32 multiply does.
    const double exact = static_cast<double>(lr) * grads[i];
    const float separate = before[i] - static_cast<float>(exact);
    const float fused = std::fma(-lr, grads[i], before[i]);
    const double d = std::min(std::abs(static_cast<double>(after[i]) - separate),
                              std::abs(static_cast<double>(after[i]) - fused));
    finite = finite && std::isfinite(d);
    diff = std::max(diff, d);
    scale = std::max(scale, std::abs(exact));
  }
  if (!finite) return 1.0;  // NaN or infinite weights: as far off as no update
  if (scale == 0) return diff > 0 ? 1.0 : 0.0;
  return diff / scale;
}

double sgd_update_error(const std::vector<std::vector<float>>& before,
                        const std::vector<std::vector<float>>& grads,
                        const std::vector<std::vector<float>>& after, float lr) {
  PPB_CHECK(before.size() == grads.size() && after.size() == grads.size(),
            "sgd_update_error: unit counts differ");
  double worst = 0;
  for (size_t u = 0; u < grads.size(); ++u) {
    worst = std::max(worst, sgd_update_error(before[u], grads[u], after[u], lr));
  }
  return worst;
}

void CheckProbe::arm(const CheckAccess& backend, float learning_rate, bool stashing,
                     bool replicas) {
  backend_ = &backend;
  learning_rate_ = learning_rate;
  armed_ = true;
  stashing_ = stashing;
  hashing_ = replicas;
  gradient_hash = kFnv1aSeed;
  grads.clear();
  updates.clear();
  updated_.clear();
  first_step_ = true;
  updating_ = -1;
  forward_version_.clear();
  stash_violations = 0;
  stash_used = 0;
}

void CheckProbe::next_step() {
  armed_ = true;
  first_step_ = false;
  grads.clear();
  updates.clear();
  updated_.clear();
  updating_ = -1;
}

void CheckProbe::action_begin(int /*stage*/, const Action& a) {
  if (!armed_ || !first_step_ || !stashing_ || a.chunk < 0) return;
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
  if (hashing_ && first_step_) {
    for (const std::vector<float>& g : backend_->gradients(chunk))
      gradient_hash = fnv1a(g.data(), g.size() * sizeof(float), gradient_hash);
  }
  if (!updated_.insert(chunk).second) return;  // not the chunk's first optimizer step
  // With stashing too these are the live weights: the ones the step updates.
  weights_before_ = backend_->weights(chunk);
  grads_before_ = backend_->gradients(chunk);
  updating_ = chunk;
  if (!stashing_) grads[chunk] = grads_before_;
}

void CheckProbe::optimizer_end(int chunk) {
  if (!armed_ || chunk != updating_) return;
  UpdateCheck& u = updates[chunk];
  u.rel_error =
      sgd_update_error(weights_before_, grads_before_, backend_->weights(chunk), learning_rate_);
  u.stale_compute = backend_->stale_compute_weights(chunk);
  updating_ = -1;
  weights_before_.clear();
  grads_before_.clear();
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

/// The worst update of this rank's chunks (CheckProbe::updates; 1 for a
/// compute copy left stale); logs each chunk whose update fails.
double update_error(const CheckProbe& probe, const CheckContext& ctx, const char* step) {
  double worst = 0;
  for (int ch = 0; ch < ctx.chunks; ++ch) {
    const auto it = probe.updates.find(ch);
    PPB_CHECK(it != probe.updates.end(), "--check: no optimizer step seen for a chunk");
    const UpdateCheck& u = it->second;
    const int v = ctx.placement.virtual_stage(ctx.stage, ch);
    if (!(u.rel_error <= kUpdateTolerance)) {
      log::warn(
          "--check: stage %d chunk %d (virtual stage %d): the weights after the optimizer step of "
          "%s do not equal w - lr*g (relative error of the update %.2e, tolerance %.0e)",
          ctx.stage, ch, v, step, u.rel_error, kUpdateTolerance);
    }
    if (u.stale_compute > 0) {
      log::warn(
          "--check: stage %d chunk %d (virtual stage %d): the weights after the optimizer step of "
          "%s do not equal w - lr*g in the compute copy the kernels read (%lld elements not "
          "refreshed from the master)",
          ctx.stage, ch, v, step, static_cast<long long>(u.stale_compute));
    }
    worst = std::max({worst, u.rel_error, u.stale_compute > 0 ? 1.0 : 0.0});
  }
  return worst;
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

double update_figure(const CheckProbe& probe, const CheckContext& ctx, const char* step,
                     MPI_Comm comm) {
  const double mine = update_error(probe, ctx, step);
  double update = 0;
  PPB_MPI_CHECK(MPI_Allreduce(&mine, &update, 1, MPI_DOUBLE, MPI_MAX, comm));
  return update;
}

double reference_figure(const CheckProbe& probe, const CheckAccess& backend,
                        const CheckContext& ctx, const ReferenceStep& reference, MPI_Comm comm,
                        double* loss) {
  double worst = gradient_error(probe, ctx, reference);
  const double mean = global_loss(backend, ctx, comm);
  const double loss_error =
      std::fabs(mean - reference.loss) / std::max(std::fabs(reference.loss), 1e-30);
  // A NaN loss is as far off as can be (max() would drop it), as
  // max_relative_error() has it for a gradient.
  worst = std::isfinite(loss_error) ? std::max(worst, loss_error)
                                    : std::numeric_limits<double>::infinity();
  double error = 0;
  PPB_MPI_CHECK(MPI_Allreduce(&worst, &error, 1, MPI_DOUBLE, MPI_MAX, comm));
  if (loss != nullptr) *loss = mean;
  return error;
}

CheckFigures check_figures(const CheckProbe& probe, const CheckAccess& backend, bool stashing,
                           const CheckContext& ctx, const ReferenceStep* reference,
                           double tolerance, MPI_Comm comm) {
  double error = 0;
  double loss = std::numeric_limits<double>::quiet_NaN();
  if (stashing) {
    const double worst = probe.stash_violations > 0 ? 1.0 : 0.0;
    PPB_MPI_CHECK(MPI_Allreduce(&worst, &error, 1, MPI_DOUBLE, MPI_MAX, comm));
  } else {
    PPB_CHECK(reference != nullptr, "--check: a flush schedule needs the reference step");
    error = reference_figure(probe, backend, ctx, *reference, comm, &loss);
  }
  int64_t used = probe.stash_used;
  int64_t used_total = 0;
  PPB_MPI_CHECK(MPI_Allreduce(&used, &used_total, 1, MPI_INT64_T, MPI_SUM, comm));
  const bool agree = replicas_agree(probe, ctx, comm);
  const double update = update_figure(probe, ctx, "the check step", comm);

  CheckFigures ck;
  // With stashing, P > 1 must have used a stashed version at least once, or
  // the invariant was never exercised.
  ck.passed = agree && update <= kUpdateTolerance &&
              (stashing ? (error == 0 && (ctx.stages == 1 || used_total > 0)) : error <= tolerance);
  ck.max_rel_error = error;
  ck.update_rel_error = update;
  ck.loss = loss;
  ck.method = stashing ? "weight-stash" : "reference";
  ck.steps = 1;
  return ck;
}

}  // namespace ppb::run
