// Schedule files: the JSON document of docs/cli.md (what `pipebench schedule
// --format json` prints and `--schedule-file` reads) and a text form, one
// line per stage, that round-trips too.
//
// JSON:
//   {"schema":"pipebench.schedule/1","name":"1f1b","stages":2,"microbatches":2,
//    "chunks":1,"batches":1,
//    "actions":[[{"op":"F","mb":0,"chunk":0},{"op":"F","mb":1,"chunk":0},...],
//               [...]]}
//   SYNC is {"op":"SYNC"}. "chunks" and "batches" may be left out (1);
//   "chunk" may be left out (0).
// Text:
//   # 1f1b stages=2 microbatches=2 chunks=1 batches=1
//   s0: F0 F1 B0 B1
//   s1: F0 B0 F1 B1
//   With chunks > 1 an action carries its chunk: "F3.1" = mb 3, chunk 1.
//   SYNC is "|". The header line is optional when parsing (then P = number of
//   lines, M = largest mb + 1, V = largest chunk + 1).
#pragma once

#include <string>
#include <string_view>

#include "ppb/pipeline/action.hpp"
#include "ppb/pipeline/validator.hpp"
#include "ppb/profiling/check.hpp"  // UsageError

namespace ppb {

/// The JSON document, one line, no trailing newline.
std::string schedule_to_json(const Schedule& s);

/// Parses the JSON document. Structural checks only (types, fields, ranges,
/// one list per stage); it does not run the validator.
/// Throws UsageError naming `source` and the field:
///   "plan.json: field 'actions[2][5].op': expected one of F,B,I,W,SYNC, got \"X\""
Schedule schedule_from_json(std::string_view text, std::string_view source);

/// Reads `path` (JSON), parses it and validates it (validate_or_throw with
/// `options`). Throws UsageError (or ScheduleError for a deadlock/incomplete
/// schedule) whose message starts with the path.
Schedule read_schedule_file(const std::string& path, const ValidateOptions& options = {});

/// The text form: an optional "# name stages=.. microbatches=.. chunks=..
/// batches=.." header, then "s<k>: <actions>" per stage, each ending in '\n'.
std::string schedule_to_text(const Schedule& s);

/// Parses the text form (structural checks only, like schedule_from_json).
/// Throws UsageError "<source>: line 3: ...".
Schedule schedule_from_text(std::string_view text, std::string_view source);

/// One action as text: "F3", "B3.1" (chunk shown when `with_chunk`), "|".
std::string action_to_text(const Action& a, bool with_chunk);

}  // namespace ppb
