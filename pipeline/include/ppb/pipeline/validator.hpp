// The validator: proves a schedule complete and deadlock-free under the
// communication rule of action.hpp and, when the receive buffers per link are
// limited, under in-order matching (message_plan.hpp).
//
// Complete: on every stage, every (micro-batch, chunk) it hosts has exactly
// one F and either exactly one B or exactly one I and one W; nothing else.
// Deadlock-free: a dry run executes the lists with these dependencies:
//  * F(mb, c) on virtual stage v > 0 needs F(mb) done on v - 1;
//  * B/I(mb, c) on v needs its own F(mb, c) and, unless v is the last virtual
//    stage, B/I(mb) done on v + 1;
//  * W(mb, c) needs its own I(mb, c);
//  * the k-th SYNC of a stage completes when every stage has reached its k-th SYNC;
//  * with ValidateOptions::link_buffers = K > 0 (in-order matching, as NCCL
//    and the `mpi-ordered` transport match): an action whose input is message
//    j of its link can run only if the link's receives up to j fit in K
//    buffers (message_plan.hpp); where they do not, the stage is stuck there
//    for good, and the error names the link and the buffers it needs.
// The dry run is O(actions): interleaved-1f1b with P=64, M=1024, V=4 (524,288
// actions) validates in about 15 ms of CPU time on the 2-core build machine.
#pragma once

#include <string>
#include <utility>

#include "ppb/pipeline/action.hpp"
#include "ppb/pipeline/message_plan.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {

/// ok, or the first problem as one line and, for a deadlock, a stage x step
/// grid (several lines) marking where each stage is stuck.
struct ValidationResult {
  bool ok = true;
  std::string error;  ///< one line: "deadlock: stage 2 stuck at B3: waits for ..."
  std::string grid;   ///< empty unless the dry run got stuck
};

struct ValidateOptions {
  /// Receive buffers per link under in-order matching; 0 = matching by tag
  /// (no limit: a receive can be posted for any message at any time).
  int link_buffers = 0;
};

/// Checks shape (P lists, mb/chunk in range), completeness, local order (F
/// before its backward, I before its W) and runs the dry run.
/// Example of an in-order failure (link_buffers = 1):
///   "deadlock: stage 1 stuck at F1: under in-order matching link s0->s1
///    needs 2 receive buffers, 1 allowed (F1 consumes message 1 of the link
///    while 1 earlier message waits for a later action)"
ValidationResult validate_schedule(const Schedule& s, const ValidateOptions& options = {});

/// A schedule that does not validate: bad input (exit code 2). what() is the
/// one-line reason; grid() the stuck-state picture (may be empty).
class ScheduleError : public UsageError {
 public:
  ScheduleError(const std::string& message, std::string grid)
      : UsageError(message), grid_(std::move(grid)) {}
  const std::string& grid() const { return grid_; }

 private:
  std::string grid_;
};

/// Throws ScheduleError when validate_schedule(s) is not ok; `source` (a file
/// name, or empty) prefixes the message: "plan.json: deadlock: stage 2 stuck at
/// B3: ...". Without a source the prefix is "schedule '<name>'".
void validate_or_throw(const Schedule& s, const std::string& source = "",
                       const ValidateOptions& options = {});

}  // namespace ppb
