// TimedBackend: the `timed` backend's class, private to the exec library
// (the registry makes it; tests that call its actions directly include
// this).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "ppb/exec/backend.hpp"
#include "ppb/exec/microbatch_ledger.hpp"
#include "stream_backend.hpp"

namespace ppb {

/// The `timed` backend: no computation. Its compute stream is a clock: an
/// enqueued action occupies it for its modelled time x time_scale, from its
/// enqueue or the previous action's end, whichever is later, and the
/// executor's thread waits by sleeping to that end. Called directly, each
/// action sleeps until an absolute deadline (clock_nanosleep(TIMER_ABSTIME) with
/// PR_SET_TIMERSLACK lowered to 1 ns) of call time + modelled seconds x time_scale; F sleeps fwd, I
/// bwd_input, W bwd_weight, B both. Messages have the modelled sizes and are
/// real (the executor sends them). Memory is COUNT-ONLY: parameters,
/// gradients (param_bytes each) and each in-flight micro-batch's activation
/// bytes are entered in the tracker without allocating them, so a gpt-7b
/// stage can be modelled on a laptop; the executor's communication buffers
/// stay real allocations. With weight_stashing (pipedream) the stash is
/// counted as CpuChunk keeps it (the same MicrobatchLedger): one copy of the
/// chunk's param_bytes per older weight version an in-flight micro-batch
/// still uses (MemCategory::kWeightStash); optimizer_step(c) starts a new
/// version. Offers ModelledTime; no CheckAccess (no real gradients).
class TimedBackend final : public StreamBackend, public ModelledTime {
 public:
  /// REQUIRES: config.costs has stages * chunks entries with costs >= 0.
  explicit TimedBackend(const BackendConfig& config);
  ~TimedBackend() override;

  std::string_view name() const override { return "timed"; }
  int chunks() const override { return chunks_; }
  int64_t input_bytes(int chunk) const override;
  int64_t output_bytes(int chunk) const override;
  int64_t activation_bytes(int chunk) const override;
  void forward(int chunk, int64_t mb, const std::byte* in, std::byte* out) override;
  void backward(int chunk, int64_t mb, const std::byte* grad_out, std::byte* grad_in) override;
  void backward_input(int chunk, int64_t mb, const std::byte* grad_out,
                      std::byte* grad_in) override;
  void backward_weight(int chunk, int64_t mb) override;
  void optimizer_step(int chunk) override;
  StreamTicket enqueue(const ActionCall& call) override;
  bool query(StreamTicket ticket, StreamTimes* times) override;
  bool wait(StreamTicket ticket, double seconds, StreamTimes* times) override;

  /// With replicas > 1: one real buffer of the chunk's param_bytes, the
  /// stand-in for its count-only gradients that the all-reduce moves (not
  /// counted again: the gradients are counted as kGradients).
  std::vector<std::span<float>> gradient_buffers(int chunk) override;
  const ModelledTime* modelled_time() const override { return this; }

  // ModelledTime
  /// Wall seconds slept per modelled second.
  double time_scale() const override { return time_scale_; }

 private:
  const ChunkCost& cost(int chunk) const;
  // Counts what the action holds and releases; returns its modelled seconds.
  double account(const ActionCall& call);
  std::unique_ptr<ClockStream> clock_;
  void sleep_for_model_seconds(double seconds);

  StageCosts costs_;
  Placement placement_;
  int stage_ = 0;
  int chunks_ = 1;
  double time_scale_ = 1;
  double plant_factor_ = 1;  // BackendConfig::plant_factor: scales every sleep
  int64_t counted_params_ = 0;
  // Count-only bytes in memory() (no allocation), released on destruction.
  TrackedBuffer counted(MemCategory category, int64_t bytes);
  // Per chunk: the in-flight micro-batches (each holding its counted
  // activation bytes), their pass order and their weight versions, kept as
  // CpuChunk keeps them for real (stashes: one counted param_bytes each).
  std::vector<MicrobatchLedger<TrackedBuffer>> ledgers_;
  std::vector<std::vector<float>> allreduce_buffers_;  // per chunk, replicas > 1 only
};

}  // namespace ppb
