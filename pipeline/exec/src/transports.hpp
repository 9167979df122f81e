// Factories of the transports that live in their own files, for
// transport_registry.cpp (one line each there).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "ppb/exec/transport.hpp"

namespace ppb::transports {

/// The `nccl` transport (nccl_transport.cpp, built with NCCL only): "" when
/// it can run here, else why not (no GPU, no driver).
std::string nccl_unavailable();
/// Collective over `comm`: binds this rank's GPU and connects every link
/// direction (nccl_links.hpp). Throws UsageError, alike on every rank, when
/// a rank has no usable GPU or two ranks of one link share a GPU.
std::unique_ptr<Transport> make_nccl(MPI_Comm comm);

}  // namespace ppb::transports
