// Checks over the GPUs of a job's ranks, for whatever needs one GPU per rank
// or per link (the nccl transport, `pipebench p2p --memory device`). Each
// turns a failure deep inside CUDA or NCCL into one clear line, thrown alike
// on every rank so that rank 0 prints it and every rank exits 2. Built with
// CUDA only.
//
// Example:
//   require_gpus(comm, "--transport nccl");     // "... no usable GPU on rank 1: no CUDA driver
//   ..." require_distinct_gpus(comm, device, nccl_links(P), "--transport nccl");
#pragma once

#include <mpi.h>

#include <span>
#include <string_view>

#include "ppb/exec/nccl_links.hpp"

namespace ppb {

/// Collective over `comm`. Throws UsageError("<what>: no usable GPU on rank
/// r: <cuda::unusable_reason() of rank r>") on every rank when any rank has
/// none (r: the lowest such rank).
void require_gpus(MPI_Comm comm, std::string_view what);

/// Collective over `comm`. Throws UsageError on every rank when the two ranks
/// of a link run on one GPU (same host name and PCI bus id): NCCL refuses two
/// ranks of one communicator on one GPU ("Duplicate GPU detected").
/// `device`: this rank's CUDA device (cuda::bind_device).
void require_distinct_gpus(MPI_Comm comm, int device, std::span<const NcclLink> links,
                           std::string_view what);

/// Collective over `comm`: the most ranks that compute on one GPU (same host
/// name and PCI bus id), 1 when every rank has its own. `device`: this
/// rank's CUDA device. Exact where CUDA_VISIBLE_DEVICES differs per rank,
/// which a count of ranks against visible devices is not.
int ranks_per_gpu(MPI_Comm comm, int device);

}  // namespace ppb
