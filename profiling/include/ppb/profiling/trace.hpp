// Chrome/Perfetto trace writer (docs/instrumentation.md).
// One TraceWriter per rank (process) collects events; write() stores them as
// a Trace Event Format JSON file that Perfetto (ui.perfetto.dev),
// chrome://tracing and Holistic Trace Analysis read:
//
//   {"schemaVersion": 1,
//    "distributedInfo": {"rank": 3, "world_size": 4},
//    "displayTimeUnit": "ms",
//    "traceEvents": [
//     {"ph":"M","pid":3,"tid":0,"name":"process_name","args":{"name":"stage 3"}},
//     {"ph":"M","pid":3,"tid":1,"name":"thread_name","args":{"name":"compute"}},
//     {"ph":"X","pid":3,"tid":1,"ts":12.000,"dur":3.500,"name":"F s3
//     mb0","cat":"forward","args":{"mb":0}},
//     {"ph":"s","pid":3,"tid":2,"ts":15.500,"id":12884901888,"name":"act","cat":"send","bp":"e"},
//     ...]}
//
//  * pid = rank; "process_name" and "process_sort_index" metadata name it;
//  * one tid per host thread and per stream (add_thread), named by
//    "thread_name" metadata, sorted in registration order;
//  * "X" complete events, timestamps and durations in MICROseconds (the
//    writer takes seconds and converts). Merged files keep 3 decimals
//    (nanoseconds). Per-rank files, the ones Holistic Trace Analysis reads,
//    hold whole microseconds, each start and end rounded to the nearest: HTA
//    rounds fractional times inward (start up, end down), which turns every
//    event shorter than a microsecond that crosses no whole microsecond into
//    a negative duration and fails its temporal breakdown on real GPU
//    traces (kernels and copies of a few hundred nanoseconds). Rounding both
//    ends to the nearest keeps every nesting and, over many events, the
//    total duration;
//  * flow events "s" (on the sender, inside its send slice) and "f" (on the
//    receiver, inside its receive slice, "bp":"e" = bind to the enclosing
//    slice) with the same name, category and id draw the send->receive
//    arrow. Ids come from flow_id() and are unique across ranks;
//  * "distributedInfo": {"rank": N} (with the space, as Holistic Trace
//    Analysis expects) on per-rank files.
//
// Example:
//   ppb::trace::TraceWriter tw(/*rank=*/2, "stage 2", /*world_size=*/4);
//   const int compute = tw.add_thread("compute");
//   tw.complete(compute, "F s2 mb3", "forward", t0, t1 - t0, {{"mb", 3}});
//   tw.write("out/trace.rank2.json");   // atomically (write_output_file)
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/profiling/output_file.hpp"

namespace ppb::trace {

/// Flow id unique across ranks: src_rank * 2^32 + seq, where seq is any
/// number the sending rank never reuses within one trace (e.g. its count of
/// messages sent so far; the receiver learns it from the message tag or a
/// per-link counter kept identically on both sides). The result stays below
/// 2^53, so JSON readers that hold numbers as doubles keep it exact.
/// REQUIRES (PPB_CHECK): 0 <= src_rank < 2^20, seq < 2^32.
/// Example: flow_id(3, 7) == 12884901895.
uint64_t flow_id(int src_rank, uint64_t seq);

/// How a file writes times: microseconds with 3 decimals (merged files), or
/// whole microseconds, each end rounded to the nearest (per-rank files).
enum class TimeGrid { kNanoseconds, kWholeMicroseconds };

/// One integer argument of an event ("mb": 3). Shown in Perfetto's details.
struct TraceArg {
  std::string key;
  int64_t value = 0;
};

/// The events of one process (rank). Thread-safe: every method may be called
/// from any thread. Not copyable.
class TraceWriter {
 public:
  /// REQUIRES: rank >= 0. world_size <= 0 leaves it out of distributedInfo.
  TraceWriter(int rank, std::string process_name, int world_size = 0);
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  /// Seconds subtracted from every timestamp (default 0). A measured run sets
  /// it to the (barrier-aligned) start of the run so that traces of
  /// different ranks share a time axis.
  void set_origin_seconds(double origin);

  /// Registers a named thread or stream; returns its tid (1, 2, ...).
  int add_thread(std::string name);

  /// A complete ("X") event: [start, start + duration) in seconds.
  /// REQUIRES: tid from add_thread; duration >= 0 (PPB_CHECK).
  void complete(int tid, std::string_view name, std::string_view category, double start_seconds,
                double duration_seconds, std::vector<TraceArg> args = {});

  /// Start ("s") and end ("f") of a flow arrow with id `id` (flow_id()).
  /// Place each inside the slice it belongs to (the send slice on the sender,
  /// the receive slice on the receiver); both bind to the enclosing slice.
  /// name and category must be equal on both ends.
  void flow_start(int tid, uint64_t id, std::string_view name, std::string_view category,
                  double ts_seconds);
  void flow_end(int tid, uint64_t id, std::string_view name, std::string_view category,
                double ts_seconds);

  /// A counter ("C") sample, e.g. tracked memory in bytes over time.
  void counter(std::string_view name, double ts_seconds, double value);

  int rank() const { return rank_; }
  size_t event_count() const;

  /// The whole document (per-rank form, with distributedInfo; whole
  /// microseconds).
  std::string to_json() const;
  /// Writes to_json() to `path` with write_output_file (a regular file is
  /// replaced atomically: a temporary file next to it, then
  /// rename). Throws UsageError naming the path when it cannot be written.
  void write(const OutputPath& path) const;

  /// Appends this rank's events (metadata first), one JSON object per
  /// element, each preceded by ",\n" except the very first of `out` when
  /// `first` is true, with times on `grid`. Used by write_merged.
  void append_events(std::string& out, bool& first, TimeGrid grid) const;

 private:
  struct Event {
    char phase;
    int tid;
    double ts_us;
    double dur_us;
    uint64_t id;
    double value;
    std::string name;
    std::string category;
    std::vector<TraceArg> args;
  };
  double to_us(double seconds) const { return (seconds - origin_) * 1e6; }

  mutable std::mutex mutex_;
  int rank_;
  int world_size_;
  std::string process_name_;
  double origin_ = 0;
  std::vector<std::string> threads_;
  std::vector<Event> events_;
};

/// Writes the events of several ranks (distinct ranks) into one file that
/// opens as one timeline in Perfetto, atomically. A merged file has no
/// "distributedInfo" (it is not one rank's trace; Holistic Trace Analysis
/// reads the per-rank files); it lists its ranks in
/// "otherData": {"ranks": [0, 1, ...]}.
/// Throws UsageError when two writers have the same rank or `path` cannot
/// be written.
void write_merged(const std::vector<const TraceWriter*>& ranks, const OutputPath& path);

/// Merges per-rank trace files (written by TraceWriter::write) into one file
/// like write_merged, atomically. Throws UsageError naming the file when one
/// cannot be read, is not valid JSON, lacks "traceEvents" or
/// "distributedInfo": {"rank": N} (the JSON field reader's message, e.g.
/// "FILE: field 'distributedInfo': missing"), or repeats a rank.
void merge_trace_files(const std::vector<std::string>& inputs, const std::string& output);

}  // namespace ppb::trace
