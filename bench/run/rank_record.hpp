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

#include <vector>

#include "ppb/exec/collector.hpp"
#include "ppb/exec/executor.hpp"
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

}  // namespace ppb::run
