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
//   "chunk" may be left out (0). "placement": [stage of virtual stage 0,
//   1, ...] is written when not looping (zb-v: [0,1,1,0] for P=2) and may
//   be left out (looping). The F of an overlapped pair carries
//   "overlap":true (action.hpp).
// Text:
//   # 1f1b stages=2 microbatches=2 chunks=1 batches=1
//   s0: F0 F1 B0 B1
//   s1: F0 B0 F1 B1
//   With chunks > 1 an action carries its chunk: "F3.1" = mb 3, chunk 1.
//   SYNC is "|". The F of an overlapped pair ends in '+' ("F3.0+ B1.1").
//   The header may carry "placement=0,1,1,0". The header line is optional
//   when parsing (then P = number of lines, M = largest mb + 1, V = largest
//   chunk + 1).
// CSV (PyTorch pipelining's, torch.distributed.pipelining): one row per
//   rank, cells naming the virtual stage: "0F3", "7I2", "2W0", "1B3" (full
//   backward; "BW" reads the same), "(0F7;7B3)OVERLAP_F_B"; communication
//   cells "0SEND_F3", "1RECV_F3", "1SEND_B3", "0RECV_B3" are checked against
//   the message plan. An empty cell is an idle step. Example (1f1b, P=2, M=2):
//     0F0,0F1,0B0,0B1
//     1F0,1B0,1F1,1B1
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

/// Reads `path` (JSON; PyTorch's CSV when the name ends in ".csv", in any case), parses
/// it and validates it (validate_or_throw with `options`). Throws UsageError (or ScheduleError for
/// a deadlock/incomplete schedule) whose message starts with the path.
Schedule read_schedule_file(const std::string& path, const ValidateOptions& options = {});

/// The text form: an optional "# name stages=.. microbatches=.. chunks=..
/// batches=.." header, then "s<k>: <actions>" per stage, each ending in '\n'.
std::string schedule_to_text(const Schedule& s);

/// Parses the text form (structural checks only, like schedule_from_json).
/// Throws UsageError "<source>: line 3: ...".
Schedule schedule_from_text(std::string_view text, std::string_view source);

/// One action as text: "F3", "B3.1" (chunk shown when `with_chunk`), "|".
std::string action_to_text(const Action& a, bool with_chunk);

/// What the CSV does not say itself.
struct CsvReadOptions {
  std::string name;                ///< the schedule's name ("csv" when empty)
  std::vector<int32_t> placement;  ///< when given, the rows must place stages so
};

/// Parses PyTorch's CSV (a UTF-8 byte-order mark at the start is skipped,
/// blank lines may end it): P = rows, V = (largest stage + 1) / P, M = largest
/// micro-batch + 1, the placement from which row holds which stage. With
/// communication cells the schedule is validated and each cell checked
/// against the message plan (a message of this rank, a send after its
/// producer, a receive before its consumer, every message given).
/// Throws UsageError naming the source, row, column and cell:
///   "s.csv: row 2 (rank 1), column 5: cell '1X3': expected <stage><op>..."
///   "s.csv: row 1 (rank 0), column 4: cell '0UNSHARD': UNSHARD is not supported ..."
Schedule schedule_from_csv(std::string_view text, std::string_view source,
                           const CsvReadOptions& options = {});

/// The CSV of `s`, compute actions only, one row per stage, each ending in
/// '\n'. Throws UsageError for a schedule with SYNC (the CSV has no barrier).
std::string schedule_to_csv(const Schedule& s);

}  // namespace ppb
