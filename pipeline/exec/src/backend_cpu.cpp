// The `cpu` backend: real fp32 training math (cpu_model.hpp), one CpuChunk
// per model chunk of this stage.
#include "backend_cpu.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "cpu/kernels.hpp"
#include "planted_work.hpp"
#include "ppb/exec/cpu_model.hpp"
#include "ppb/pipeline/action.hpp"
#include "ppb/pipeline/data_parallel.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

// The cores this rank may compute on: its affinity mask (mpirun binds each
// rank to one core when there are at most two), and no more than its share
// of the host when it is not bound.
int rank_cores(int local_ranks) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  int cores = online > 0 ? static_cast<int>(online) : 1;
  const int share = std::max(1, cores / std::max(1, local_ranks));
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) cores = CPU_COUNT(&mask);
  return std::max(1, std::min(cores, share));
}

// Host copies of per-unit views (the read-back of CheckAccess).
std::vector<std::vector<float>> copies(const std::vector<std::span<const float>>& views) {
  std::vector<std::vector<float>> out;
  for (std::span<const float> v : views) out.emplace_back(v.begin(), v.end());
  return out;
}

}  // namespace

CpuBackend::CpuBackend(const BackendConfig& config)
    : learning_rate_(config.learning_rate),
      plant_factor_(config.plant_factor),
      microbatches_(config.microbatches),
      replica_(config.replica),
      replicas_(config.replicas) {
  const int virtual_stages = config.stages * config.chunks;
  PPB_CHECK(static_cast<int>(config.parts.size()) == virtual_stages,
            "cpu backend: parts must have stages * chunks ranges");
  PPB_CHECK(config.stage >= 0 && config.stage < config.stages, "cpu backend: stage out of range");
  PPB_CHECK(config.microbatches >= 1, "cpu backend: microbatches must be >= 1");
  CpuModelOptions options;
  options.seed = config.seed;
  PPB_CHECK(config.replicas >= 1 && config.replica >= 0 && config.replica < config.replicas,
            "cpu backend: replica out of range");
  // The mean over the global batch: the all-reduce sums the replicas' parts.
  options.loss_scale = 1.0f / static_cast<float>(config.microbatches * config.replicas);
  options.weight_stashing = config.weight_stashing;
  for (int c = 0; c < config.chunks; ++c) {
    const UnitRange range = config.chunk_units(c);
    chunks_.push_back(
        std::make_unique<CpuChunk>(config.spec, config.units, range, memory(), options));
    int64_t bytes = 0;
    for (int u = range.begin; u < range.end; ++u)
      bytes += config.units[static_cast<size_t>(u)].activation_bytes;
    activation_bytes_.push_back(bytes);
  }
  core_to_spare_ = rank_cores(config.local_ranks) > cpu::blas_threads();
}

CpuBackend::~CpuBackend() { stop_streams(); }

UnitRange CpuBackend::range(int c) const { return chunk(c).range(); }
int64_t CpuBackend::input_bytes(int c) const { return chunk(c).input_bytes(); }
int64_t CpuBackend::output_bytes(int c) const { return chunk(c).output_bytes(); }
int64_t CpuBackend::activation_bytes(int c) const {
  return activation_bytes_[static_cast<size_t>(c)];
}

void CpuBackend::forward(int c, int64_t mb, const std::byte* in, std::byte* out) {
  const PlantedWork planted(plant_factor_);
  chunk(c).forward(data(mb), in, out);
}

void CpuBackend::backward(int c, int64_t mb, const std::byte* grad_out, std::byte* grad_in) {
  const PlantedWork planted(plant_factor_);
  chunk(c).backward(data(mb), grad_out, grad_in);
}

void CpuBackend::backward_input(int c, int64_t mb, const std::byte* grad_out, std::byte* grad_in) {
  const PlantedWork planted(plant_factor_);
  chunk(c).backward_input(data(mb), grad_out, grad_in);
}

void CpuBackend::backward_weight(int c, int64_t mb) {
  const PlantedWork planted(plant_factor_);
  chunk(c).backward_weight(data(mb));
}

void CpuBackend::optimizer_step(int c) { chunk(c).sgd_step(learning_rate_); }

std::vector<std::vector<float>> CpuBackend::gradients(int c) const {
  return copies(chunk(c).grad_views());
}
std::vector<std::vector<float>> CpuBackend::weights(int c) const {
  return copies(chunk(c).param_views());
}
double CpuBackend::loss(int c, int64_t mb) const { return chunk(c).loss(data(mb)); }
int CpuBackend::weight_version(int c) const { return chunk(c).weight_version(); }
int CpuBackend::weight_version_of(int c, int64_t mb) const {
  return chunk(c).weight_version_of(data(mb));
}

std::vector<std::span<float>> CpuBackend::gradient_buffers(int c) {
  std::vector<std::span<float>> out;
  for (std::span<float> g : chunk(c).mutable_grad_views()) {
    if (!g.empty()) out.push_back(g);
  }
  return out;
}

int64_t CpuBackend::data(int64_t mb) const {
  return data_microbatch(mb, microbatches_, replica_, replicas_);
}

std::vector<UnitTime> CpuBackend::take_kind_seconds() {
  std::vector<UnitTime> out(kUnitKinds);
  for (const std::unique_ptr<CpuChunk>& c : chunks_) {
    const std::vector<UnitTime> spent = c->take_kind_seconds();
    for (size_t k = 0; k < out.size(); ++k) {
      out[k].fwd += spent[k].fwd;
      out[k].bwd_input += spent[k].bwd_input;
      out[k].bwd_weight += spent[k].bwd_weight;
    }
  }
  return out;
}

double CpuBackend::speed_probe() {
  constexpr int kN = 256;
  constexpr int kRepeats = 4;
  constexpr size_t kElems = static_cast<size_t>(kN) * kN;
  if (probe_operands_.empty()) {
    probe_operands_.resize(3 * kElems);
    for (size_t i = 0; i < 2 * kElems; ++i)
      probe_operands_[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 8.0f;
  }
  const float* a = probe_operands_.data();
  const float* b = a + kElems;
  float* c = probe_operands_.data() + 2 * kElems;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < kRepeats; ++r)
    cpu::gemm(false, false, kN, kN, kN, 1.0f, a, kN, b, kN, 0.0f, c, kN);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace ppb
