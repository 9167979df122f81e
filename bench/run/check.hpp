// --check: the first step of a combination against the single-process
// reference (flush schedules: every gradient and the loss, relative error
// at most the backend's check tolerance, BackendInfo) or, for a schedule with weight stashing, the
// stashing invariant (every backward uses the weights its forward used).
// With D data-parallel replicas the reference runs the global batch (D x M
// micro-batches), every replica's all-reduced gradients are compared with
// it, and the replicas of each stage must have summed to the same
// gradients before every optimizer step (so their weights stay equal).
// Everything is read through CheckAccess, so any backend whose registry
// entry says real_gradients (and so offers Backend::check()) can be checked.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "ppb/exec/backend.hpp"
#include "ppb/exec/cpu_reference.hpp"
#include "ppb/exec/executor.hpp"
#include "ppb/pipeline/result.hpp"

namespace ppb::run {

/// Hooks of the --check step: copies every chunk's gradients just before its
/// first optimizer step (flush schedules), or watches the weight versions
/// each forward and backward used (weight stashing). Off until arm().
class CheckProbe final : public Instrumentation {
 public:
  /// Watches the next step of the backend behind `backend` (which must
  /// outlive the step); `stashing` chooses the invariant to check; with
  /// `replicas` every optimizer step's gradients are also hashed
  /// (gradient_hash).
  void arm(const CheckAccess& backend, bool stashing, bool replicas = false);
  void disarm() { armed_ = false; }

  void action_begin(int stage, const Action& action) override;
  void optimizer_begin(int chunk) override;

  std::map<int, std::vector<std::vector<float>>> grads;  ///< chunk -> per unit
  int64_t stash_violations = 0;  ///< backwards that did not use their forward's version
  int64_t stash_used = 0;        ///< backwards that ran with an older (stashed) version
  /// FNV-1a over the bytes of the gradients each optimizer step saw, in
  /// order (data parallelism: equal on the replicas of a stage).
  uint64_t gradient_hash = kHashSeed;
  static constexpr uint64_t kHashSeed = 14695981039346656037ULL;

 private:
  const CheckAccess* backend_ = nullptr;
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
/// backend's registry entry for the run's dtype).
CheckFigures check_figures(const CheckProbe& probe, const CheckAccess& backend, bool stashing,
                           const CheckContext& context, const ReferenceStep* reference,
                           double tolerance, MPI_Comm comm);

}  // namespace ppb::run
