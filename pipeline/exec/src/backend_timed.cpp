// The `timed` backend: sleeps instead of computing, so a 2-core machine can
// run 16 stage ranks and the executor can be held against the simulator.
//
// Its compute stream is a clock (ClockStream): an enqueued action occupies
// the stream for its modelled time and no host thread, as a kernel occupies
// a device; the executor's thread sleeps to the action's end or to its next
// poll. A worker thread per rank would add two thread wake-ups to every
// message hand-over, which on 2 cores shared by 8 ranks cost 1-2 ms each.
//
// Sleeping to an ABSOLUTE deadline with the timer slack at 1 ns keeps the
// overshoot at 0.1-0.2 ms (measured on this project's machines); spinning the last
// microseconds does not help once ranks outnumber cores.
#include "backend_timed.hpp"

#include <sys/prctl.h>
#include <time.h>

#include <cerrno>
#include <utility>

#include "host_stream.hpp"
#include "ppb/pipeline/action.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {

TimedBackend::TimedBackend(const BackendConfig& config)
    : clock_(std::make_unique<ClockStream>()),
      costs_(config.costs),
      placement_(config.chunk_placement()),
      stage_(config.stage),
      chunks_(config.chunks) {
  PPB_CHECK(costs_.stages == config.stages && costs_.chunks_per_stage == config.chunks &&
                static_cast<int>(costs_.chunks.size()) == config.stages * config.chunks,
            "timed backend: costs must have stages * chunks entries");
  PPB_CHECK(stage_ >= 0 && stage_ < config.stages, "timed backend: stage out of range");
  time_scale_ = config.time_scale > 0 ? config.time_scale : default_time_scale(costs_);
  // Every rank computes the same from the same costs, and refuses alike.
  if (std::string why = time_scale_problem(time_scale_, mean_stage_seconds(costs_)); !why.empty())
    throw UsageError(why);
  PPB_CHECK(config.plant_factor > 0, "timed backend: plant factor must be > 0");
  plant_factor_ = config.plant_factor;
  // The default slack (50 us) would be added to every sleep; the compute
  // stream's thread lowers its own, this is for direct calls.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  for (int c = 0; c < chunks_; ++c) ledgers_.emplace_back(config.weight_stashing);
  for (int c = 0; c < chunks_; ++c) counted_params_ += cost(c).param_bytes;
  // Count-only: the bytes a real stage would hold, without allocating them.
  memory().on_alloc(MemCategory::kParameters, counted_params_);
  memory().on_alloc(MemCategory::kGradients, counted_params_);
  if (config.replicas > 1) {
    for (int c = 0; c < chunks_; ++c) {
      allreduce_buffers_.emplace_back(static_cast<size_t>(cost(c).param_bytes / 4), 0.0f);
    }
  }
}

std::vector<std::span<float>> TimedBackend::gradient_buffers(int chunk) {
  if (allreduce_buffers_.empty()) return {};
  std::vector<float>& b = allreduce_buffers_[static_cast<size_t>(chunk)];
  if (b.empty()) return {};
  return {std::span<float>(b)};
}

TimedBackend::~TimedBackend() {
  stop_streams();
  ledgers_.clear();  // the in-flight activations and the stashes
  memory().on_free(MemCategory::kGradients, counted_params_);
  memory().on_free(MemCategory::kParameters, counted_params_);
}

TrackedBuffer TimedBackend::counted(MemCategory category, int64_t bytes) {
  // Adopts no memory: the tracker counts `bytes`, nothing is allocated or freed.
  return TrackedBuffer(
      memory(), category, bytes, nullptr, [](void*, std::byte*) {}, nullptr);
}

const ChunkCost& TimedBackend::cost(int chunk) const {
  return costs_.at(placement_, stage_, chunk);
}

int64_t TimedBackend::input_bytes(int chunk) const {
  const int v = placement_.virtual_stage(stage_, chunk);
  return v == 0 ? 0 : costs_.chunks[static_cast<size_t>(v - 1)].send_bytes;
}

int64_t TimedBackend::output_bytes(int chunk) const {
  const int v = placement_.virtual_stage(stage_, chunk);
  return v + 1 == static_cast<int>(costs_.chunks.size())
             ? 0
             : costs_.chunks[static_cast<size_t>(v)].send_bytes;
}

int64_t TimedBackend::activation_bytes(int chunk) const { return cost(chunk).activation_bytes; }

void TimedBackend::sleep_for_model_seconds(double seconds) {
  timespec deadline{};
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  const double wall = seconds * time_scale_ * plant_factor_;
  const auto whole = static_cast<time_t>(wall);
  long nanos = deadline.tv_nsec + static_cast<long>((wall - static_cast<double>(whole)) * 1e9);
  deadline.tv_sec += whole + nanos / 1'000'000'000L;
  deadline.tv_nsec = nanos % 1'000'000'000L;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nullptr) == EINTR) {
  }
}

double TimedBackend::account(const ActionCall& call) {
  const ChunkCost& c = cost(call.chunk);
  auto& ledger = ledgers_[static_cast<size_t>(call.chunk)];
  const int64_t mb = call.microbatch;
  switch (call.kind) {
    case ActionKind::kForward: {
      auto state = ledger.start_forward(mb, 1);
      state.kept[0] = counted(MemCategory::kActivations, c.activation_bytes);
      ledger.admit(std::move(state));
      // The workspace on top of the activations, for the instant the
      // action peaks (ChunkCost::*_workspace_bytes).
      {
        const TrackedBuffer workspace = counted(MemCategory::kWorkspace, c.forward_workspace_bytes);
      }
      return c.fwd;
    }
    case ActionKind::kBackward: {
      ledger.for_input_gradient(mb, "backward");
      {
        const TrackedBuffer workspace =
            counted(MemCategory::kWorkspace, c.backward_workspace_bytes);
      }
      ledger.finish(mb);
      return c.bwd_input + c.bwd_weight;
    }
    case ActionKind::kBackwardInput: {
      // As a computing backend does it: I peaks while it keeps output
      // gradients and frees activations unit by unit, then keeps what W reads.
      auto& state = ledger.for_input_gradient(mb, "backward_input");
      state.input_done = true;
      {
        const TrackedBuffer rise =
            counted(MemCategory::kActivations, c.peak_during_input() - c.activation_bytes);
        const TrackedBuffer workspace = counted(MemCategory::kWorkspace, c.input_workspace_bytes);
      }
      state.kept[0] = TrackedBuffer();
      state.kept[0] = counted(MemCategory::kActivations, c.kept_after_input());
      return c.bwd_input;
    }
    case ActionKind::kBackwardWeight:
      ledger.for_weight_gradient(mb);
      {
        const TrackedBuffer workspace = counted(MemCategory::kWorkspace, c.weight_workspace_bytes);
      }
      ledger.finish(mb);
      return c.bwd_weight;
    case ActionKind::kSync:
      break;
  }
  PPB_CHECK(false, "timed backend: SYNC is not a compute action");
  return 0;
}

StreamTicket TimedBackend::enqueue(const ActionCall& call) {
  return clock_->enqueue(account(call) * time_scale_ * plant_factor_);
}

bool TimedBackend::query(StreamTicket ticket, StreamTimes* times) {
  return clock_->done(ticket, times);
}

bool TimedBackend::wait(StreamTicket ticket, double seconds, StreamTimes* times) {
  return clock_->wait_for(ticket, seconds, times);
}

void TimedBackend::forward(int chunk, int64_t mb, const std::byte* /*in*/, std::byte* /*out*/) {
  sleep_for_model_seconds(account({ActionKind::kForward, chunk, mb, nullptr, nullptr}));
}

void TimedBackend::backward(int chunk, int64_t mb, const std::byte* /*grad_out*/,
                            std::byte* /*grad_in*/) {
  sleep_for_model_seconds(account({ActionKind::kBackward, chunk, mb, nullptr, nullptr}));
}

void TimedBackend::backward_input(int chunk, int64_t mb, const std::byte* /*grad_out*/,
                                  std::byte* /*grad_in*/) {
  sleep_for_model_seconds(account({ActionKind::kBackwardInput, chunk, mb, nullptr, nullptr}));
}

void TimedBackend::backward_weight(int chunk, int64_t mb) {
  sleep_for_model_seconds(account({ActionKind::kBackwardWeight, chunk, mb, nullptr, nullptr}));
}

void TimedBackend::optimizer_step(int chunk) {
  auto& ledger = ledgers_[static_cast<size_t>(chunk)];
  ledger.stash_current_if_in_use([&] {
    MicrobatchLedger<TrackedBuffer>::Stash stash;
    stash.push_back(counted(MemCategory::kWeightStash, cost(chunk).param_bytes));
    return stash;
  });
  ledger.next_version();
}

}  // namespace ppb
