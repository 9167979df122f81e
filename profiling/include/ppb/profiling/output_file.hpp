// The one way pipebench writes an output file (results, reports, traces,
// benchmark JSON). What happens depends on what the path names:
//
//   "-"                          written to standard output
//   a new path or a regular file replaced atomically: the text goes to a
//                                temporary file in the same folder, is
//                                flushed to disk (fsync), then renamed over
//                                the target, so a reader or a killed run never
//                                sees half a file
//   a symbolic link              followed: the rules apply to its target
//                                (the link itself is never replaced)
//   a character device or FIFO   written through (opened for writing, never
//                                replaced: `--csv /dev/null` as root leaves
//                                /dev/null a device)
//   anything else (a directory,  refused
//   a socket, a block device)
//
// Every failure throws UsageError naming the path and the reason, e.g.
//   "results/x.json: cannot write: No space left on device"
//   "out/: cannot write: is a directory"
// and leaves no temporary file behind.
//
// Example:
//   ppb::write_output_file("report.csv", csv_text);
#pragma once

#include <string>
#include <string_view>

namespace ppb {

/// Writes `text` to `path` by the rules above. REQUIRES: nothing; an empty
/// path is refused with UsageError("output path: empty").
void write_output_file(const std::string& path, std::string_view text);

}  // namespace ppb
