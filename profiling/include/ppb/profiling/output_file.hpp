// The one way pipebench writes an output file (results, reports, traces,
// benchmark JSON). What happens depends on what the path names:
//
//   "-"                          written to standard output
//   a new path or a regular file replaced atomically: the text goes to an
//                                unnamed temporary file in the same folder
//                                (O_TMPFILE; a named one where the file
//                                system lacks it), is flushed to disk
//                                (fsync), then named and renamed over the
//                                target, so a reader never sees half a file
//                                and a run killed while writing leaves none
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

/// Checks, without writing, that write_output_file(path, ...) can be tried:
/// "-", an existing regular file, character device or FIFO (through
/// symbolic links), or a new name in an existing folder. Throws the
/// UsageError write_output_file would ("x: cannot write: is a directory",
/// "nodir/x.json: cannot write: No such file or directory"), so that a
/// command with several outputs can refuse a bad one before it writes any.
/// A full disk or a permission only the write itself meets still fails there.
void check_output_path(const std::string& path);

}  // namespace ppb
