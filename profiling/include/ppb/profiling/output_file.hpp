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
// Inside a folder pipebench fills itself (run's --out: the result files,
// <name>.trace.json, <name>.trace/rank<r>.json), the names are pipebench's
// own and the rules are stricter: OutputPath{folder, name} follows the
// folder as the user named it, but nothing below it. A name there that is
// a symbolic link (the file or a folder on the way to it) is refused,
// never written through, and so is anything but a regular file or folder
// (a FIFO would block the writer):
//   "out/x.json: cannot write: a symbolic link inside the output folder
//    (pipebench writes only files it creates there; remove the link)"
// The write goes through a descriptor of the folder opened without
// following links (O_NOFOLLOW) and ends in a rename, so a link planted
// while the file is written is replaced, never followed. Missing folders
// on the way are created.
//
// Every failure throws UsageError naming the path and the reason, e.g.
//   "results/x.json: cannot write: No space left on device"
//   "out/: cannot write: is a directory"
// and leaves no temporary file behind.
//
// Example:
//   ppb::write_output_file("report.csv", csv_text);                 // the user's path
//   ppb::write_output_file({"out", "x.trace/rank0.json"}, text);    // pipebench's name
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ppb {

/// Where an output goes: a path the user named (`within` empty; implicit
/// from a string), or a name pipebench chose inside the folder `within`
/// (`name` relative to it, without "." or ".." parts).
struct OutputPath {
  OutputPath(std::string path) : name(std::move(path)) {}
  OutputPath(const char* path) : name(path) {}
  OutputPath(std::string folder, std::string relative)
      : within(std::move(folder)), name(std::move(relative)) {}
  /// The path as messages show it ("out/x.json").
  std::string shown() const { return within.empty() ? name : within + "/" + name; }

  std::string within;  ///< "" = `name` is the user's own path
  std::string name;
};

/// Writes `text` to `path` by the rules above. REQUIRES: nothing; an empty
/// path is refused with UsageError("output path: empty").
void write_output_file(const OutputPath& path, std::string_view text);

/// Writes several outputs by the same rules, all or none where it can: each
/// file that is replaced is first written in full to a temporary file beside
/// it, and only when every one of them is complete (and on disk) are they
/// renamed into place; a failure before that (a read-only folder, a full
/// disk, a permission) removes the temporaries and leaves every target as
/// it was. Outputs written through ("-", a device, a FIFO) go last.
void write_output_files(const std::vector<std::pair<OutputPath, std::string_view>>& outputs);

/// While write_output_files puts its outputs in place (the renames at its
/// end, and the naming of a new file), a stop signal (SIGINT, SIGTERM,
/// SIGHUP) is held until every one is in place, then raised again: an
/// interrupted write leaves every target as it was or every one new, and no
/// temporary name (a new file is named directly; only a replaced one gets
/// a temporary name for its rename). The writing thread blocks them; a
/// program that handles them (run's stop line) calls this from its handler,
/// on whichever thread it runs: true means the signal is held and the
/// writer raises it again when done (the handler returns); false means no
/// output is being put in place (the handler ends by it as usual).
/// Async-signal-safe.
bool hold_stop_signal(int sig) noexcept;

/// Removes the temporary files writers that died left under `folder` (its
/// subfolders included, links not followed): ".NAME.tmp.PID.N", which only
/// a writer killed (SIGKILL) between naming a replacement and renaming it,
/// or one on a file system without O_TMPFILE (NFS), can leave. One is
/// stale when its writer (PID) is no process of this host and it is older
/// than `min_age_seconds` (no write in progress is). Returns the paths
/// removed; what cannot be read or removed is left alone.
/// Example: after a run killed mid-write, remove_stale_temporaries("out",
/// 60) == {"out/.1f1b__layer__P4_M8.json.tmp.4110.2"}.
std::vector<std::string> remove_stale_temporaries(const std::string& folder,
                                                  double min_age_seconds);

/// Tests only: `hook(i)` runs after the i-th output of write_output_files
/// is in place, before the next (nullptr: none), so a test can send a
/// signal in the middle of the renames.
void set_rename_hook_for_tests(void (*hook)(size_t placed));

/// Checks, without writing, that write_output_file(path, ...) can be tried:
/// "-", an existing regular file, character device or FIFO (through
/// symbolic links), or a new name in an existing folder. Throws the
/// UsageError write_output_file would ("x: cannot write: is a directory",
/// "nodir/x.json: cannot write: No such file or directory"), so that a
/// command with several outputs can refuse a bad one before it writes any.
/// A full disk or a permission only the write itself meets still fails there.
/// For a name inside a folder (OutputPath{folder, name}): a new name, or an
/// existing regular file (folder on the way), none of them a link.
void check_output_path(const OutputPath& path);

/// Removes a file pipebench wrote inside a folder it fills
/// (OutputPath{folder, name}), where there is one: the folder on the way
/// opened as write_output_file opens it (a link is refused), the leaf
/// unlinked (a link itself, never what it leads to). Throws UsageError
/// naming the file when it cannot.
void remove_output_file(const OutputPath& path);

}  // namespace ppb
