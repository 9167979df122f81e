// The measured traces of one combination (--trace): the timed steps laid one
// after another on one time axis, through the one pipeline trace writer
// (ppb/pipeline/pipeline_trace.hpp) that also draws simulated runs.
//
//   <out>/<combination>.trace.json          every rank merged (Perfetto)
//   <out>/<combination>.trace/rank<r>.json  one per rank (Holistic Trace Analysis)
//
// With a device profiler's operations (StageStep::device) each rank also
// gets one track per device stream, the operations linked to the actions
// that launched them by args.correlation (PipelineTrace::add_device_op); a
// step's successor then starts after the later of its step time and its
// last device operation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "run/metrics.hpp"

namespace ppb::run {

/// Writes both forms atomically. `stem` is the combination's file name
/// without ".json"; `microbatches` = M x batches (flow ids stay unique);
/// `placement` the schedule's (placement_of).
/// Throws UsageError naming a path that cannot be written.
void write_measured_traces(const std::vector<StepMeasure>& steps, const Placement& placement,
                           int64_t microbatches, const std::string& out_dir,
                           const std::string& stem);

}  // namespace ppb::run
