// The one trace writer of pipeline runs, measured (`pipebench run --trace`)
// and simulated (`pipebench simulate --trace`): the same tracks, names,
// categories and flow arrows, so a measured and a simulated trace of one
// schedule read alike in Perfetto (docs/instrumentation.md).
//
//  * one process per stage (pid = stage, "distributedInfo" rank = stage in
//    per-rank files), named "stage <s>" plus the label;
//  * threads: "compute"; per neighbour stage t "send to s<t>" and
//    "recv from s<t>" (one link each, so transfers to two neighbours that
//    overlap in time never share a track), and after them, in first use,
//    the pair of any other stage a placement links it to; "steps" when
//    steps are added;
//  * actions: named action_range_name ("F s2 mb3", " c1" with chunks),
//    category action_category (forward, backward, wgrad, sync), args mb and
//    chunk (none for SYNC);
//  * messages: "send act s2->s3 mb3" / "recv act s2->s3 mb3" ("grad" for
//    gradients), categories send / recv, args mb and chunk; a flow arrow
//    named "act" / "grad", category "p2p", id trace::flow_id(from stage,
//    seq), from the middle of the send slice to the middle of the receive;
//  * steps: "ProfilerStep#<k>" slices, category "user_annotation", on the
//    "steps" track (Holistic Trace Analysis finds iterations by that name);
//  * gradient all-reduces (data parallelism): "allreduce s2 c0", category
//    "allreduce", args chunk and bytes, on an "allreduce" track;
//  * device operations (a measured run with --profile cupti): one track per
//    device stream, "stream <id>", after the host tracks; kernels, copies
//    and memsets under their profiler names ("Memcpy DtoH (Device ->
//    Pinned)"), categories kernel / gpu_memcpy / gpu_memset, args stream
//    (>= 0), device, correlation and (copies, memsets) bytes. The action
//    that launched them carries the same args.correlation and args.stream
//    -1 (a host event), which is how Holistic Trace Analysis links a kernel
//    to its launch and to the ProfilerStep it belongs to.
// Slices of one track never overlap: a slice that would start before the
// previous one on its track ended starts at that end (add a track's slices
// in order of their end).
//
// Example:
//   ppb::PipelineTrace t(4, 1, "");
//   t.add_action(2, F(3, 0), 0.010, 0.012);
//   t.add_message(true, {.gradient = false, .from_stage = 2, .to_stage = 3, .microbatch = 3},
//                 0.012, 0.013, /*seq=*/7);
//   t.write_merged("out/run.trace.json");
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ppb/pipeline/action.hpp"
#include "ppb/profiling/device_activity.hpp"
#include "ppb/profiling/trace.hpp"

namespace ppb {

/// Which message a trace slice shows.
struct TraceMessage {
  bool gradient = false;  ///< false: activation (v -> v+1); true: gradient (v -> v-1)
  int from_stage = 0;
  int to_stage = 0;
  int64_t microbatch = 0;
  int32_t chunk = 0;  ///< the producing chunk
};

class PipelineTrace {
 public:
  /// `chunks` = V (names get " c<k>" when V > 1); `label` is appended to
  /// each process name ("stage 2" + " (simulated 1f1b)").
  PipelineTrace(int stages, int chunks, const std::string& label);

  /// An action of `stage` over [start, end) seconds. `correlation` >= 0
  /// links it to the device operations it launched (add_device_op); -1: none.
  void add_action(int stage, const Action& action, double start, double end,
                  int64_t correlation = -1);
  /// A device operation of `stage` on its stream's track, linked to the
  /// action added with the same `correlation` (0: launched by no action).
  /// Add a stream's operations in order of start.
  void add_device_op(int stage, const device::DeviceOp& op, int64_t correlation);
  /// One end of a message: the send on from_stage (`send`) or the receive
  /// on to_stage. `seq` must be equal on both ends and unique among the
  /// messages from_stage sends in this trace. REQUIRES: the stages are
  /// distinct (PPB_CHECK).
  void add_message(bool send, const TraceMessage& message, double start, double end, uint64_t seq);
  /// Step `k` of `stage` over [start, end).
  void add_step(int stage, int k, double start, double end);
  /// The all-reduce of `chunk`'s gradients on `stage` over [start, end).
  void add_allreduce(int stage, int chunk, int64_t bytes, double start, double end);

  /// The per-stage writers (index = stage).
  const std::vector<std::unique_ptr<trace::TraceWriter>>& writers() const { return writers_; }
  /// Hands the writers over (the trace is empty afterwards).
  std::vector<std::unique_ptr<trace::TraceWriter>> release() { return std::move(writers_); }

  /// Every stage in one file (trace::write_merged), atomically.
  void write_merged(const OutputPath& path) const;
  /// One file per stage, `dir`/rank<s>.json (TraceWriter::write, with
  /// distributedInfo), creating `dir` (inside a folder pipebench fills, by
  /// the rules of write_output_file: a link there is refused). Throws
  /// UsageError naming a path that cannot be written.
  void write_per_rank(const OutputPath& dir) const;

 private:
  struct Stage {
    int compute = 0;
    int steps = 0;
    int allreduce = 0;
    std::vector<int> send;  // tid by neighbour stage (0 = none yet)
    std::vector<int> recv;
    std::vector<double> last_end;    // by tid
    std::map<int64_t, int> streams;  // device stream id -> tid
  };
  int track(int stage, bool send, int other);
  /// The slice's start moved to its track's last end, and that end advanced.
  double clamp(int stage, int tid, double start, double& end);

  int stages_;
  int chunks_;
  std::vector<std::unique_ptr<trace::TraceWriter>> writers_;
  std::vector<Stage> tracks_;
};

}  // namespace ppb
