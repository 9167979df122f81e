// What one rank measured in one combination, and its one way to rank 0.
//
// Every rank fills a RankRecord (its timed steps, the collectors' figures of
// each step, its memory); gather_records() brings all of them to rank 0 as
// the same named structs. The wire form is written and read by ONE field
// list per struct (`fields` below, used by the packer and the unpacker
// alike), so the two directions cannot disagree; a field added to a struct is
// one more name in its list.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "ppb/exec/collector.hpp"
#include "ppb/exec/executor.hpp"
#include "ppb/pipeline/cuda_graphs.hpp"
#include "ppb/pipeline/gemm_epilogues.hpp"
#include "run/metrics.hpp"

namespace ppb::run {

/// One timed step on one rank.
struct RankStep {
  StageStep step;          ///< times in seconds from this rank's step start
  double origin = 0;       ///< now_seconds() at that start (StepRecord::origin)
  int64_t peak_bytes = 0;  ///< StepRecord::peak_bytes
  int64_t peak_activation_bytes = 0;
  /// Device backends: the pool's high-water mark in the step plus the
  /// device memory outside the pool (DeviceAccess::device_memory); -1 without.
  int64_t device_peak_bytes = -1;
  CollectorStepFigures collectors;  ///< collector name -> figures of this step
  /// StepProbes::speed_probe() right after the step (NaN: the backend has none).
  double probe_seconds = std::numeric_limits<double>::quiet_NaN();
  /// StepProbes::take_kind_seconds() of the step: per UnitKind, the seconds its
  /// units ran by pass (empty: the backend does not time its units).
  std::vector<UnitTime> kind_seconds;
};

/// Everything one rank sends to rank 0 after a combination.
struct RankRecord {
  std::vector<RankStep> steps;  ///< the timed steps, in run order
  StageMemory memory;
};

/// The executor's record of one step as the metrics read it (the one
/// conversion from the executor's types to the measure's). A collector's
/// device operations (CollectedFigures::device) move into step.device, with
/// their busy figures over [0, record.end] in step.device_busy.
RankStep rank_step(const StepRecord& record, CollectorStepFigures collectors);

/// The byte form of a record, and back. unpack(pack(r)) == r field by field.
/// unpack throws UsageError on a truncated or overlong buffer.
std::vector<char> pack(const RankRecord& record);
RankRecord unpack(const std::vector<char>& bytes);

/// Collective over `comm`: every rank's record, index = rank, on rank 0;
/// empty on the other ranks.
std::vector<RankRecord> gather_records(const RankRecord& mine, MPI_Comm comm);

/// The lowest rank of a communicator whose string is not empty, and that
/// string (a failure, a refusal, a reason).
struct RankFailure {
  int rank = -1;  ///< -1: every rank's string was empty
  std::string what;
};

/// Collective over `comm`: every rank learns the lowest rank whose `mine` is
/// not empty and its whole text; rank -1 when none.
/// REQUIRES: `rank` is this rank in `comm`.
RankFailure first_failure(const std::string& mine, int rank, MPI_Comm comm);

/// Collective over `comm`: the ranks' fused GEMMs and refusals summed (on
/// rank 0), with the first refusal of the lowest rank that had one,
/// "rank R: <its text>" ("" when no rank had one).
GemmEpilogueFigures sum_gemm_epilogues(const GemmEpilogueFigures& mine, int rank, MPI_Comm comm);

/// Collective over `comm`: the ranks' CUDA-graph counts summed (on rank 0),
/// with the eager reason of the lowest rank that had one, as that rank
/// wrote it ("" when no rank ran anything eagerly). Example: rank 0 all
/// replayed, rank 1 eager for "--cuda-graphs off" -> eager > 0 and that
/// reason.
CudaGraphFigures sum_cuda_graphs(const CudaGraphFigures& mine, int rank, MPI_Comm comm);

}  // namespace ppb::run
