// `--profile nvtx`: NVTX ranges for every action, message, optimizer step and
// step of the executor, in the `pipebench` domain (docs/instrumentation.md):
//
//   action     "F s2 mb3" / "B s2 mb3" / "I s2 mb3" / "W s2 mb3" (" c1" appended
//              when the schedule has chunks), "SYNC s2"; categories forward,
//              backward, backward (I), wgrad (W), sync; payload = micro-batch
//   message    "send act s2->s3 mb3", "recv grad s3->s2 mb3" (start/end
//              ranges: a message is in flight while other actions run)
//   optimizer  "optimizer s2 c0"
//   step       "step <k>" around each step, "measure" around the timed steps
//              (`nsys profile --capture-range=nvtx -p measure@pipebench`)
//
// Available when the NVTX3 headers were found at build time; it adds no
// figures to the result (Nsight Systems reads the ranges).
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "collectors/collectors.hpp"
#include "ppb/profiling/nvtx.hpp"

namespace ppb::collectors {
namespace {

nvtx::Category category_of(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return nvtx::Category::kForward;
    case ActionKind::kBackward:
      return nvtx::Category::kBackward;
    case ActionKind::kBackwardInput:
      return nvtx::Category::kBackward;
    case ActionKind::kBackwardWeight:
      return nvtx::Category::kWgrad;
    case ActionKind::kSync:
      return nvtx::Category::kSync;
  }
  return nvtx::Category::kStep;
}

class NvtxCollector final : public Collector {
 public:
  explicit NvtxCollector(const CollectorContext& c) : context_(c) {
    nvtx::init();
    nvtx::name_this_thread("rank " + std::to_string(c.stage) + " executor");
  }

  std::string_view name() const override { return "nvtx"; }

  void step_begin(int step) override {
    nvtx::push("step " + std::to_string(step), nvtx::Category::kStep, step);
  }
  void step_end(int /*step*/) override { nvtx::pop(); }

  void action_begin(int stage, const Action& action) override {
    nvtx::push(action_range_name(action, stage, context_.chunks), category_of(action.kind),
               action.microbatch);
  }
  void action_end(int /*stage*/, const Action& /*action*/) override { nvtx::pop(); }

  void comm_begin(const CommRecord& record) override {
    if (record.local) return;  // a same-rank hand-over is not a message
    const int from = record.send ? context_.stage : record.peer;
    const int to = record.send ? record.peer : context_.stage;
    const std::string name = message_range_name(record.send, record.kind == MessageKind::kGradient,
                                                from, to, record.microbatch);
    const uint64_t id = nvtx::start_range(
        name, record.send ? nvtx::Category::kSend : nvtx::Category::kRecv, record.microbatch);
    open_[key(record)] = id;
  }
  void comm_end(const CommRecord& record) override {
    auto it = open_.find(key(record));
    if (it == open_.end()) return;
    nvtx::end_range(it->second);
    open_.erase(it);
  }

  void optimizer_begin(int chunk) override {
    nvtx::push("optimizer s" + std::to_string(context_.stage) + " c" + std::to_string(chunk),
               nvtx::Category::kOptimizer);
  }
  void optimizer_end(int /*chunk*/) override { nvtx::pop(); }

  void measure_begin() override { nvtx::push("measure", nvtx::Category::kStep); }
  void measure_end() override { nvtx::pop(); }

 private:
  std::pair<bool, int64_t> key(const CommRecord& r) const { return {r.send, r.flow_id}; }

  CollectorContext context_;
  std::map<std::pair<bool, int64_t>, uint64_t> open_;  // open message ranges
};

}  // namespace

std::string nvtx_unavailable() {
  return nvtx::compiled_in() ? "" : "this build has no NVTX (headers not found at configure time)";
}

std::unique_ptr<Collector> make_nvtx(const CollectorContext& context) {
  return std::make_unique<NvtxCollector>(context);
}

}  // namespace ppb::collectors
