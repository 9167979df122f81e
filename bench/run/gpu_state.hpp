// What the GPUs of a cuda run did during each combination's timed steps
// (result metrics.gpu_state): every rank samples its own GPU through NVML
// (ppb/exec/nvml.hpp) while the steps run, and rank 0 gathers the
// summaries. Where NVML is absent one line says so and nothing is sampled.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "ppb/exec/nvml.hpp"
#include "ppb/pipeline/gpu_state.hpp"

namespace ppb::run {

/// The sampler of this rank's GPU (PCI bus id `bus`, named `gpu` in the
/// result: "node1: NVIDIA H200 (0000:3B:00.0)"), or null where NVML cannot
/// be loaded; then rank 0 prints nvml::unavailable_line once (`rank`).
std::unique_ptr<nvml::Sampler> gpu_sampler(const std::string& bus, int rank);

/// Stops `sampler` (null: nothing sampled on this rank) and gathers every
/// rank's summary to rank 0, each GPU once (ranks sharing a GPU name it
/// alike), labelled `gpu`. Empty on other ranks, and where no rank
/// sampled. Collective over `comm`.
std::vector<GpuState> gather_gpu_state(MPI_Comm comm, nvml::Sampler* sampler,
                                       const std::string& gpu);

}  // namespace ppb::run
