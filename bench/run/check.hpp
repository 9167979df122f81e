// --check: the first step of a combination against the single-process
// reference (flush schedules: every gradient and the loss, relative error
// at most the backend's check tolerance, BackendInfo) or, for a schedule with weight stashing, the
// stashing invariant (every backward uses the weights its forward used).
// A flush schedule's next step (the first warm-up step, where there is
// one: the first that runs what a backend captured, such as the cuda
// backend's CUDA graphs of the actions) is compared with the reference's
// second step too, which catches what carries over between steps
// (gradients not zeroed, a graph replaying stale buffers).
// With D data-parallel replicas the reference runs the global batch (D x M
// micro-batches), every replica's all-reduced gradients are compared with
// it, and the replicas of each stage must have summed to the same
// gradients before every optimizer step (so their weights stay equal).
// Every schedule, flush and stashing alike, also checks the optimizer: each
// chunk's first optimizer step of the check step, and of the step after it
// (the first warm-up step, where there is one: the first that replays work a
// backend captured, such as the cuda backend's graph of the update), must
// leave its fp32 master weights at w - lr * g (plain SGD; g the gradients,
// all-reduced with data parallelism, it updated with), and with bf16
// storage the compute copy the kernels read must be the new master rounded
// to bf16.
// Everything is read through CheckAccess, so any backend whose registry
// entry says real_gradients (and so offers Backend::check()) can be checked.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "ppb/exec/backend.hpp"
#include "ppb/exec/cpu_reference.hpp"
#include "ppb/exec/executor.hpp"
#include "ppb/pipeline/result.hpp"
#include "ppb/profiling/hash.hpp"

namespace ppb::run {

/// How one optimizer step of a chunk updated its weights.
struct UpdateCheck {
  double rel_error = 0;  ///< sgd_update_error() of the master weights
  /// CheckAccess::stale_compute_weights() after the step (0: refreshed).
  int64_t stale_compute = 0;
};

/// The relative error of an SGD step on one unit against plain SGD, after =
/// before - lr * grads in fp32: max|(before - after) - u| / max|lr * grads|
/// over the elements, with u the update fp32 can apply, before - fl(before
/// - fl(lr * g)) or, contracted into a fused multiply-add, before -
/// fl(before - lr * g) (whichever is nearer per element; both backends
/// compute one of them, so a correct step gives exactly 0). The error is
/// measured on the update, not on the weights: a step that did nothing gives
/// 1 (where lr * g is not below the weights' fp32 resolution), a learning
/// rate k times `lr` gives |k - 1|. With every lr * g zero: 0, or 1 when the
/// weights changed. REQUIRES: the three spans have equal sizes.
double sgd_update_error(std::span<const float> before, std::span<const float> grads,
                        std::span<const float> after, float lr);
/// The worst sgd_update_error() over a chunk's units (vectors per unit, as
/// CheckAccess::weights() and gradients() give them).
double sgd_update_error(const std::vector<std::vector<float>>& before,
                        const std::vector<std::vector<float>>& grads,
                        const std::vector<std::vector<float>>& after, float lr);

/// The worse of two check errors: the larger, and NaN (not measured) over
/// any number.
inline double worse(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::quiet_NaN() : std::max(a, b);
}

/// The update check's tolerance. A correct step is reproduced bit for bit
/// (error 0: the master weights and the update are fp32 in both backends,
/// bf16 storage included), so the bound only absorbs a device flushing
/// subnormal products to zero (an error of order 1e-38 / max|lr * g|); a
/// missing update or a wrong learning rate is of order 1.
inline constexpr double kUpdateTolerance = 1e-6;

/// Hooks of the --check step: copies every chunk's gradients just before its
/// first optimizer step (flush schedules), or watches the weight versions
/// each forward and backward used (weight stashing); on every schedule,
/// checks each chunk's first optimizer step (updates). Off until arm().
class CheckProbe final : public Instrumentation {
 public:
  /// Watches the next step of the backend behind `backend` (which must
  /// outlive the step) whose optimizer steps use `learning_rate`
  /// (BackendConfig::learning_rate); `stashing` chooses the invariant to
  /// check; with `replicas` every optimizer step's gradients are also
  /// hashed (gradient_hash).
  void arm(const CheckAccess& backend, float learning_rate, bool stashing, bool replicas = false);
  /// After the armed step: watches the next one, its chunks' gradients
  /// before their first optimizer step (flush schedules) and those steps'
  /// updates (`grads` and `updates` then hold that step's).
  void next_step();
  void disarm() { armed_ = false; }

  void action_begin(int stage, const Action& action) override;
  /// Reads the chunk's gradients (hashed with replicas) and, before its
  /// first optimizer step, its weights.
  void optimizer_begin(int chunk) override;
  /// After a chunk's first optimizer step: its update's UpdateCheck.
  void optimizer_end(int chunk) override;

  std::map<int, std::vector<std::vector<float>>> grads;  ///< chunk -> per unit
  std::map<int, UpdateCheck> updates;  ///< chunk -> its first optimizer step of the step
  int64_t stash_violations = 0;        ///< backwards that did not use their forward's version
  int64_t stash_used = 0;              ///< backwards that ran with an older (stashed) version
  /// FNV-1a over the bytes of the gradients each optimizer step saw, in
  /// order (data parallelism: equal on the replicas of a stage).
  uint64_t gradient_hash = kFnv1aSeed;

 private:
  const CheckAccess* backend_ = nullptr;
  float learning_rate_ = 0;
  // The optimizer step being checked: its chunk (-1: none), the weights and
  // gradients before it.
  int updating_ = -1;
  std::vector<std::vector<float>> weights_before_;
  std::vector<std::vector<float>> grads_before_;
  std::set<int> updated_;   // chunks whose update this step was checked
  bool first_step_ = true;  // false: next_step() (no stash watch, no hash)
  bool armed_ = false;
  bool stashing_ = false;
  bool hashing_ = false;
  std::map<std::pair<int64_t, int>, int> forward_version_;
};

/// What a check needs to know about the combination on this rank.
struct CheckContext {
  int stage = 0;
  int stages = 1;
  int chunks = 1;
  int microbatches = 1;
  std::vector<UnitRange> parts;            ///< P*V ranges, indexed by virtual stage (model order)
  Placement placement;                     ///< the schedule's (placement_of)
  int replica = 0;                         ///< data parallelism: this rank's replica
  int replicas = 1;                        ///< D
  MPI_Comm replicas_comm = MPI_COMM_NULL;  ///< this stage's D ranks (D > 1)
};

/// Relative error data parallelism may add: summing the global batch's
/// gradients as D partial sums and an all-reduce instead of one sum in
/// micro-batch order only reorders fp32 additions (docs/metrics.md).
inline constexpr double kDataParallelTolerance = 1e-6;

/// The tolerance of a run's check: the backend's (check_tolerance), and
/// with replicas > 1 on a host backend in fp32 at most
/// kDataParallelTolerance (a device backend keeps its own: its kernels
/// already reorder sums).
double run_check_tolerance(const BackendInfo& info, int bytes_per_element, int replicas);

/// Collective over `comm` (every rank of the job): the check's figures from
/// the probe of the step that just ran (every rank returns the same). The
/// loss is the mean over the global batch's D x M micro-batches, summed in
/// the reference's order (bit for bit equal when the pipeline is). `reference` is used for
/// flush schedules and ignored with weight stashing; they pass when the
/// worst relative error is at most `tolerance` (check_tolerance() of the
/// backend's registry entry for the run's dtype). Every schedule also
/// needs each chunk's update (CheckProbe::updates) within kUpdateTolerance
/// and its compute copy refreshed (update_rel_error: the worst update, 1
/// for a stale copy); a rank whose update fails logs one warning naming the
/// stage and chunk.
CheckFigures check_figures(const CheckProbe& probe, const CheckAccess& backend, bool stashing,
                           const CheckContext& context, const ReferenceStep* reference,
                           double tolerance, MPI_Comm comm);

/// Collective over `comm`: the worst relative error of the step the probe
/// watched last against `reference` (every rank's gradients, CheckProbe::grads,
/// and the loss of the global batch; infinity for a NaN), as check_figures()
/// computes it; `loss` (when given) receives that loss. REQUIRES: a flush
/// schedule.
double reference_figure(const CheckProbe& probe, const CheckAccess& backend,
                        const CheckContext& context, const ReferenceStep& reference, MPI_Comm comm,
                        double* loss = nullptr);

/// Collective over `comm`: the worst update of every rank's chunks in the
/// step the probe watched last (CheckProbe::updates; 1 for a stale compute
/// copy), as check_figures() takes it. A rank whose update fails logs one
/// warning naming the stage, the chunk and `step` (which step it was).
double update_figure(const CheckProbe& probe, const CheckContext& context, const char* step,
                     MPI_Comm comm);

}  // namespace ppb::run
