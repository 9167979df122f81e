// NVTX ranges for every action, message, optimizer step and step of the
// executor (DESIGN.md, "Instrumentation conventions"), plugged into the
// executor's Instrumentation hooks:
//
//   action     "F s2 mb3" / "B s2 mb3" / "I s2 mb3" / "W s2 mb3" (" c1" appended
//              when the schedule has chunks), "SYNC s2"; categories forward,
//              backward, backward (I), wgrad (W), sync; payload = micro-batch
//   message    "send act s2->s3 mb3", "recv grad s3->s2 mb3" (start/end
//              ranges: a message is in flight while other actions run)
//   optimizer  "optimizer s2 c0"
//   step       "step <k>" around each step
//
// The run command adds the outer "measure" range around the timed steps.
// Example:
//   ppb::NvtxInstrumentation nvtx(rank, schedule.chunks);
//   options.instrumentation = &nvtx;
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "ppb/exec/executor.hpp"

namespace ppb {

class NvtxInstrumentation final : public Instrumentation {
 public:
  /// `stages` and `chunks` of the schedules this rank will run (messages
  /// carry their flow ids, so only the chunks are used).
  NvtxInstrumentation(int stage, int stages, int chunks);

  void step_begin(int step) override;
  void step_end(int step) override;
  void action_begin(int stage, const Action& action) override;
  void action_end(int stage, const Action& action) override;
  void comm_begin(const CommRecord& record) override;
  void comm_end(const CommRecord& record) override;
  void optimizer_begin(int chunk) override;
  void optimizer_end(int chunk) override;

 private:
  int stage_;
  int chunks_;
  // Open message ranges by (send?, flow id).
  std::map<std::pair<bool, int64_t>, uint64_t> open_;
};

}  // namespace ppb
