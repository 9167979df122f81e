// CpuBackend: the `cpu` backend's class, private to the exec library (the
// registry makes it; tests that call its chunks directly include this).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "ppb/exec/backend.hpp"
#include "stream_backend.hpp"

namespace ppb {

class CpuChunk;

/// The `cpu` backend: one CpuChunk (cpu_model.hpp) per chunk c over
/// parts[v], v the placement's virtual stage of (s, c), with loss_scale 1/M
/// and weight stashing as configured. Offers CheckAccess (gradients, weights,
/// losses and weight versions read back from its chunks) and StepProbes.
class CpuBackend final : public StreamBackend, public CheckAccess, public StepProbes {
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
  std::vector<std::span<float>> gradient_buffers(int chunk) override;
  const CheckAccess* check() const override { return this; }
  StepProbes* probes() override { return this; }

  // CheckAccess
  std::vector<std::vector<float>> gradients(int chunk) const override;
  std::vector<std::vector<float>> weights(int chunk) const override;
  /// 0: the kernels read the fp32 parameters themselves.
  int64_t stale_compute_weights(int /*chunk*/) const override { return 0; }
  double loss(int chunk, int64_t mb) const override;
  int weight_version(int chunk) const override;
  int weight_version_of(int chunk, int64_t mb) const override;

  // StepProbes
  /// Four single-threaded 256 x 256 x 256 SGEMMs through the kernels' gemm
  /// (about 134 MFLOP) on fixed operands, on the calling thread.
  double speed_probe() override;
  std::vector<UnitTime> take_kind_seconds() override;

  /// True when this rank may use more cores than OpenBLAS computes on:
  /// min(its affinity mask, the host's online cores / the ranks on the host)
  /// > OpenBLAS's threads.
  bool core_to_spare() const override { return core_to_spare_; }

  /// The model of local chunk c (its unit range, gradients, parameters, loss).
  CpuChunk& chunk(int c) { return *chunks_[static_cast<size_t>(c)]; }
  const CpuChunk& chunk(int c) const { return *chunks_[static_cast<size_t>(c)]; }
  /// Global unit range of local chunk c.
  UnitRange range(int c) const;

 private:
  std::vector<std::unique_ptr<CpuChunk>> chunks_;  // count into memory() until destroyed
  std::vector<int64_t> activation_bytes_;
  float learning_rate_;
  double plant_factor_;                // BackendConfig::plant_factor
  std::vector<float> probe_operands_;  // speed_probe(): A, B and C, made on first use
  // The schedule's micro-batch -> the data's (BackendConfig::replica).
  int64_t data(int64_t mb) const;
  int microbatches_ = 1;
  int replica_ = 0;
  int replicas_ = 1;
  bool core_to_spare_ = true;
};

}  // namespace ppb
