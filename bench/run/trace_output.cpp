#include "run/trace_output.hpp"

#include <algorithm>

#include "ppb/pipeline/message_plan.hpp"
#include "ppb/pipeline/pipeline_trace.hpp"

namespace ppb::run {
namespace {

constexpr int64_t kTraceCorrelationBase = int64_t{1} << 32;

// The device operations of one stage's step, stream by stream in start
// order (the order a track's slices are added in).
void add_device_ops(PipelineTrace& t, int stage, const StageStep& s, double offset,
                    int64_t correlation_base) {
  std::vector<const device::DeviceOp*> ops;
  ops.reserve(s.device.size());
  for (const device::DeviceOp& op : s.device) ops.push_back(&op);
  std::stable_sort(ops.begin(), ops.end(),
                   [](const device::DeviceOp* a, const device::DeviceOp* b) {
                     return a->stream != b->stream ? a->stream < b->stream : a->start < b->start;
                   });
  for (const device::DeviceOp* op : ops) {
    device::DeviceOp shifted = *op;
    shifted.start += offset;
    shifted.end += offset;
    t.add_device_op(stage, shifted, op->action >= 0 ? correlation_base + op->action + 1 : 0);
  }
}

}  // namespace

void write_measured_traces(const std::vector<StepMeasure>& steps, const Placement& placement,
                           int64_t microbatches, const std::string& out_dir,
                           const std::string& stem) {
  const int stages = placement.stages();
  const int chunks = placement.chunks();
  PipelineTrace t(stages, chunks, "");
  const int64_t vp = int64_t{stages} * chunks;
  // Flow seq: the message plan's id, made unique over the whole trace (step
  // k's messages after step k-1's); equal on both ends.
  const auto stride = static_cast<uint64_t>((microbatches + 1) * vp * 2 + 2);
  double offset = 0;  // steps laid one after another
  // Per rank: correlation ids linking an action to the device operations it
  // launched, unique within the rank's trace (0 = launched by no action).
  // They count from 2^32: Holistic Trace Analysis stores the events' row
  // numbers in a column typed by the ids' own range (it downcasts them to
  // the smallest integer type), so ids that fit in 8 or 16 bits make it fail
  // on any trace with more rows than that ("Invalid value ... for dtype
  // 'int8'": 3 steps of a 2-stage pipeline do it).
  std::vector<int64_t> correlations(static_cast<size_t>(stages), kTraceCorrelationBase);
  for (size_t k = 0; k < steps.size(); ++k) {
    const StepMeasure& step = steps[k];
    for (int r = 0; r < stages; ++r) {
      const StageStep& s = step[static_cast<size_t>(r)];
      int64_t& base = correlations[static_cast<size_t>(r)];
      const bool linked = !s.device.empty();
      for (size_t i = 0; i < s.actions.size(); ++i) {
        const ActionTiming& a = s.actions[i];
        t.add_action(r, a.action, offset + a.start, offset + std::max(a.start, a.end),
                     linked ? base + static_cast<int64_t>(i) + 1 : -1);
      }
      // A receive is posted long before it completes; in end order, each
      // slice starts no earlier than the previous one on its track ended.
      std::vector<const CommTiming*> comms;
      for (const CommTiming& c : s.comms) {
        if (!c.local) comms.push_back(&c);
      }
      std::sort(comms.begin(), comms.end(),
                [](const CommTiming* a, const CommTiming* b) { return a->end < b->end; });
      for (const CommTiming* c : comms) {
        const TraceMessage m{c->gradient, placement.stage_of(c->from_virtual),
                             placement.stage_of(c->to_virtual), c->microbatch,
                             placement.chunk_of(c->from_virtual)};
        const uint64_t seq =
            k * stride + static_cast<uint64_t>(message_flow_id(
                             c->microbatch, c->from_virtual,
                             c->gradient ? MessageKind::kGradient : MessageKind::kActivation,
                             static_cast<int>(vp)));
        t.add_message(c->send, m, offset + c->start, offset + c->end, seq);
      }
      t.add_step(r, static_cast<int>(k), offset, offset + step_time(step));
      for (const AllReduceTiming& a : s.allreduces)
        t.add_allreduce(r, a.chunk, a.bytes, offset + a.start, offset + a.end);
      // After the host tracks: the stream tracks come last.
      add_device_ops(t, r, s, offset, base);
      if (linked) base += static_cast<int64_t>(s.actions.size());
    }
    // The next step starts after this one's device work too (the optimizer
    // runs after the last action: its kernels may end after the step time).
    double advance = step_time(step);
    for (const StageStep& s : step) {
      for (const device::DeviceOp& op : s.device) advance = std::max(advance, op.end);
    }
    offset += advance;
  }
  t.write_merged(OutputPath{out_dir, stem + ".trace.json"});
  t.write_per_rank(OutputPath{out_dir, stem + ".trace"});
}

}  // namespace ppb::run
