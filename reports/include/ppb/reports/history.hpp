// Earlier runs ("nights") for the regression gate, and the figures the gate
// reads out of one result.
//
// `--baseline PATH` may be given several times. Each PATH is one night,
// unless it is a folder of nights: a folder in which two immediate
// subfolders hold the same combination (same machine and configuration),
// as `ci/suite`'s results/suite-<date>/ folders side by side do. Then each
// immediate subfolder that holds results is one night. Nights are ordered
// by the latest environment.date of their results (then by name), oldest
// first; a night is named by its folder. Tonight's own folder is no earlier
// night: in a folder of nights that holds it (`--baseline results` beside
// results/suite-<now>/), the night that is or holds tonight's results is
// left out; a baseline that is tonight's folder, lies inside it, or holds
// it without being a folder of nights is refused. A night given twice
// (two spellings, a link) counts once. Nights that began after tonight
// did (a re-gate of an old night against the folder of every night) are
// no earlier nights either: report leaves them out and
// says so (leave_out_later).
//
// Example:
//   std::vector<Night> h = load_nights({"results"}, false);  // results/suite-*/
//   h.back().name == "suite-20261130T020000Z"
#pragma once

#include <string>
#include <vector>

#include "ppb/reports/load.hpp"

namespace ppb::reports {

/// One earlier run.
struct Night {
  std::string name;  ///< the folder's own name
  std::string path;  ///< the folder (or file) as given or found
  std::string date;  ///< latest environment.date of its results ("" when none)
  /// Earliest environment.date of its results ("" when none): when it
  /// began (its re-runs, measured later, leave this alone).
  std::string first_date;
  LoadedResults results;
};

/// Loads the nights under `paths` (see above), oldest first, leaving out
/// those that are tonight's results (`tonight`: report's inputs).
/// Throws UsageError for a path that does not exist or holds no results, or
/// a bad result file (without skip_bad), naming it, and for a path that
/// overlaps tonight's other than as a folder of nights holding it.
std::vector<Night> load_nights(const std::vector<std::string>& paths, bool skip_bad,
                               const std::vector<std::string>& tonight = {});

/// Whether `inner` is `outer` or lies inside it, as folders on disk
/// (resolved_path).
bool same_or_inside(const std::string& inner, const std::string& outer);

/// Latest environment.date of the results ("" for none).
std::string latest_date(const LoadedResults& results);

/// Earliest environment.date of the results, the measurements re-runs
/// replaced included ("" for none): when the run began.
std::string earliest_date(const LoadedResults& results);

/// Removes from `nights` those that began after tonight did
/// (`tonight_began`: the earliest environment.date of tonight's results;
/// re-runs of tonight measured days later, by an earlier re-gate, leave it
/// alone) and returns their names, oldest first. Nothing is removed when
/// `tonight_began` is "" or a night has no date.
/// Example: nights n1 (first 2026-12-01T02:00:00Z), n3 (2026-12-03T02:00:00Z);
///   leave_out_later(nights, "2026-12-02T02:00:00Z") == {"n3"}, nights == {n1}.
std::vector<std::string> leave_out_later(std::vector<Night>& nights,
                                         const std::string& tonight_began);

/// samples/s of each timed step: samples per step (micro_batch_size x M x
/// batches) / that step's time; the result's samples_per_second alone when
/// it has no step samples. Empty for a result without metrics.
std::vector<double> throughput_samples(const Result& result);

/// Bubble ratio of each timed step (metrics.bubble_ratio.samples), or the
/// measured ratio alone for files written before those samples.
std::vector<double> bubble_samples(const Result& result);

/// Peak tracked memory over stages, bytes (0 without metrics).
double peak_memory_bytes(const Result& result);

/// The device bubble ratio of each timed step
/// (metrics.device.bubble_ratio_samples); empty without a device profiler
/// or in files written before those samples (the median step's figure
/// alone is not a sample of the run's spread).
std::vector<double> device_bubble_samples(const Result& result);

/// Peak device memory over stages (the GPU pool's high-water mark,
/// metrics.peak_memory_bytes.device_per_stage), bytes; 0 without.
double peak_device_memory_bytes(const Result& result);

}  // namespace ppb::reports
