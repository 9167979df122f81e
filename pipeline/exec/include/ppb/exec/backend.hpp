// Backends: what one stage computes. A Backend holds the stage's chunks
// (chunk c of stage s is virtual stage v = c * P + s, i.e. partition part
// parts[v]) and runs their forward / backward / optimizer actions on buffers
// the executor hands in; it owns the stage's MemoryTracker, in which the
// executor also counts its communication buffers.
//
// Registered backends (one file + one line in backend_registry.cpp, STYLE
// rule 8):
//   cpu    real fp32 GPT training math on OpenBLAS (CpuBackend, backend_cpu.cpp)
//   timed  no computation: each action sleeps for its modelled time, real
//          messages of the modelled sizes cross the transport (TimedBackend,
//          backend_timed.cpp)
// The `cuda` backend belongs to the GPU issue and is not registered here.
//
// Example:
//   BackendConfig cfg{.spec = spec, .units = units, .parts = parts, .costs = costs,
//                     .stage = rank, .stages = P, .chunks = V, .microbatches = M};
//   std::unique_ptr<Backend> b = ppb::make_backend("cpu", cfg);
//   b->forward(0, mb, in, out);
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ppb/pipeline/costs.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/profiling/memory.hpp"

namespace ppb {

/// Everything a backend may need; each backend reads the fields it uses.
struct BackendConfig {
  ModelSpec spec;                ///< cpu: the model
  std::vector<Unit> units;       ///< cpu: expand_units(spec)
  std::vector<UnitRange> parts;  ///< cpu: P*V ranges, indexed by virtual stage c*P+s
  /// timed: per virtual stage, seconds of F / I / W (a B sleeps I + W), the
  /// bytes F sends (send_bytes; B/I send as many back), activation and
  /// parameter bytes (model_costs() of device.hpp builds it).
  StageCosts costs;
  int stage = 0;         ///< this rank's stage s, 0 <= s < stages
  int stages = 1;        ///< P
  int chunks = 1;        ///< V
  int microbatches = 1;  ///< M: the cpu backend scales each micro-batch's loss gradient by 1/M
  /// cpu: PipeDream weight stashing (the `pipedream` schedule): a
  /// micro-batch's backward uses the weights its forward used.
  bool weight_stashing = false;
  uint64_t seed = 1234;         ///< cpu: parameters and synthetic data
  float learning_rate = 1e-3f;  ///< cpu: SGD
  /// timed: wall seconds per modelled second; 0 = default_time_scale(costs).
  double time_scale = 0;
  /// A slowdown planted to test the regression gate: this stage's actions
  /// take plant_factor times as long (timed: longer or shorter sleeps; cpu:
  /// extra real work after each action, so >= 1). 1 = none.
  double plant_factor = 1;
};

/// One stage's compute. Chunk indices are local (0..V-1); micro-batch ids are
/// global (0..M*batches-1). Buffers: `in`/`grad_in`/`out`/`grad_out` hold
/// exactly the byte counts below and are valid only during the call (a
/// backend copies what it keeps, and counts it in memory()). A null pointer
/// stands for a 0-byte tensor (first / last virtual stage).
/// Not thread-safe: the executor's thread calls it.
class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;
  virtual int chunks() const = 0;

  /// Bytes F of `chunk` receives (the previous virtual stage's output); B/I
  /// of `chunk` send as many back. 0 on virtual stage 0.
  virtual int64_t input_bytes(int chunk) const = 0;
  /// Bytes F of `chunk` sends; B/I of `chunk` receive as many. 0 on the last
  /// virtual stage.
  virtual int64_t output_bytes(int chunk) const = 0;
  /// Activation bytes one micro-batch keeps on `chunk` from its F to its last
  /// backward piece (exact: what the tracker counts; the memory guard
  /// predicts peaks with it).
  virtual int64_t activation_bytes(int chunk) const = 0;

  virtual void forward(int chunk, int64_t mb, const std::byte* in, std::byte* out) = 0;
  /// Full backward: input gradient into grad_in, weight gradients accumulated.
  virtual void backward(int chunk, int64_t mb, const std::byte* grad_out, std::byte* grad_in) = 0;
  /// Input-gradient half (zero-bubble I). REQUIRES: forward(chunk, mb) ran.
  virtual void backward_input(int chunk, int64_t mb, const std::byte* grad_out,
                              std::byte* grad_in) = 0;
  /// Weight-gradient half (zero-bubble W). REQUIRES: backward_input ran.
  virtual void backward_weight(int chunk, int64_t mb) = 0;
  /// SGD on `chunk` (params -= lr * grads; grads = 0). The executor calls it
  /// for every chunk once per batch (flush schedules) or after each
  /// backward of the chunk (pipedream).
  virtual void optimizer_step(int chunk) = 0;

  /// This stage's tracker: parameters, gradients, activations, stash, and the
  /// executor's communication buffers.
  virtual MemoryTracker& memory() = 0;
  virtual const MemoryTracker& memory() const = 0;
};

/// The `cpu` backend: one CpuChunk (cpu_model.hpp) per chunk over
/// parts[c * P + s], with loss_scale 1/M and weight stashing as configured.
/// Gradients can be read back per chunk for --check.
class CpuChunk;
class CpuBackend final : public Backend {
 public:
  /// REQUIRES: parts.size() == stages * chunks, units == expand_units(spec).
  explicit CpuBackend(const BackendConfig& config);
  ~CpuBackend() override;

  std::string_view name() const override { return "cpu"; }
  int chunks() const override { return static_cast<int>(chunks_.size()); }
  int64_t input_bytes(int chunk) const override;
  int64_t output_bytes(int chunk) const override;
  int64_t activation_bytes(int chunk) const override;
  void forward(int chunk, int64_t mb, const std::byte* in, std::byte* out) override;
  void backward(int chunk, int64_t mb, const std::byte* grad_out, std::byte* grad_in) override;
  void backward_input(int chunk, int64_t mb, const std::byte* grad_out,
                      std::byte* grad_in) override;
  void backward_weight(int chunk, int64_t mb) override;
  void optimizer_step(int chunk) override;
  MemoryTracker& memory() override { return memory_; }
  const MemoryTracker& memory() const override { return memory_; }

  /// The model of local chunk c (its unit range, gradients, parameters, loss).
  CpuChunk& chunk(int c) { return *chunks_[static_cast<size_t>(c)]; }
  const CpuChunk& chunk(int c) const { return *chunks_[static_cast<size_t>(c)]; }
  /// Global unit range of local chunk c.
  UnitRange range(int c) const;

 private:
  MemoryTracker memory_;  // declared first: the chunks count into it until destroyed
  std::vector<std::unique_ptr<CpuChunk>> chunks_;
  std::vector<int64_t> activation_bytes_;
  float learning_rate_;
  double plant_factor_;  // BackendConfig::plant_factor
};

/// The `timed` backend: no computation. Each action sleeps until an absolute
/// deadline (clock_nanosleep(TIMER_ABSTIME) with PR_SET_TIMERSLACK lowered
/// to 1 ns) of call time + modelled seconds x time_scale; F sleeps fwd, I
/// bwd_input, W bwd_weight, B both. Messages have the modelled sizes and are
/// real (the executor sends them). Memory is COUNT-ONLY: parameters,
/// gradients (param_bytes each) and each in-flight micro-batch's activation
/// bytes are entered in the tracker without allocating them, so a gpt-7b
/// stage can be modelled on a laptop; the executor's communication buffers
/// stay real allocations. With weight_stashing (pipedream) the stash is
/// counted as CpuChunk keeps it: one copy of the chunk's param_bytes per
/// older weight version an in-flight micro-batch still uses
/// (MemCategory::kWeightStash); optimizer_step(c) starts a new version.
class TimedBackend final : public Backend {
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
  MemoryTracker& memory() override { return memory_; }
  const MemoryTracker& memory() const override { return memory_; }

  /// Wall seconds slept per modelled second.
  double time_scale() const { return time_scale_; }

 private:
  const ChunkCost& cost(int chunk) const;
  void sleep_for_model_seconds(double seconds);

  MemoryTracker memory_;
  StageCosts costs_;
  int stage_ = 0;
  int chunks_ = 1;
  double time_scale_ = 1;
  double plant_factor_ = 1;  // BackendConfig::plant_factor: scales every sleep
  int64_t counted_params_ = 0;
  std::vector<int> inflight_;  // per chunk: micro-batches holding activations
  // Weight stashing (count-only, as CpuChunk does it for real): per chunk
  // the current version, the version each in-flight micro-batch's forward
  // used, how many use each version, and how many versions are stashed.
  void end_microbatch(int chunk, int64_t mb);
  void update_stash(int chunk);
  bool stashing_ = false;
  std::vector<int> version_;
  std::vector<std::map<int64_t, int>> forward_version_;
  std::vector<std::map<int, int>> version_users_;
  std::vector<int64_t> stashed_versions_;
};

/// The default --time-scale of the timed backend: 2 ms divided by the
/// shortest non-zero modelled action of any virtual stage (min over F, I, W;
/// a full B is never shorter than I). Every rank computes the same value
/// from the same costs. Returns 1 when every cost is 0.
double default_time_scale(const StageCosts& costs);

/// A registered backend, for `pipebench list` and error messages.
struct BackendInfo {
  std::string name;
  std::string help;  ///< one line
};
/// Every registered backend ("cpu", "timed").
const std::vector<BackendInfo>& backend_list();

/// Makes the backend called `name`. Throws
/// UsageError("--backend: unknown backend 'x' (backends: cpu, timed)").
std::unique_ptr<Backend> make_backend(std::string_view name, const BackendConfig& config);

}  // namespace ppb
