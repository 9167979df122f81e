// NCCL plumbing shared by the nccl transport and `pipebench p2p`: the
// checked-call macro of STYLE rule 5 and communicator bootstrap over MPI.
// Built with NCCL only (PPB_HAVE_NCCL).
//
// Example:
//   ncclComm_t comm = ppb::nccl_comm_over(MPI_COMM_WORLD);   // collective
//   PPB_NCCL_CHECK(ncclSend(buf, n, ncclUint8, peer, comm, stream));
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <string>

namespace ppb {

/// Prints "pipebench[r<rank>]: NCCL error in <call> at <file>:<line>:
/// <ncclGetErrorString> (<ncclGetLastError>)" and ends the job
/// (MPI_Abort). Used by PPB_NCCL_CHECK.
[[noreturn]] void nccl_call_failed(ncclResult_t code, const char* call, const char* file, int line);

/// A communicator of every rank of `comm`, NCCL rank = MPI rank:
/// ncclGetUniqueId on rank 0, MPI_Bcast, ncclCommInitRank. Collective over
/// `comm`. REQUIRES: each rank has set its device; no two ranks that will
/// talk share one (require_distinct_gpus).
ncclComm_t nccl_comm_over(MPI_Comm comm);

/// The version of the NCCL library loaded ("2.28.3", from ncclGetVersion;
/// needs no GPU).
std::string nccl_version();

}  // namespace ppb

/// Checks an NCCL call. Example: PPB_NCCL_CHECK(ncclGroupEnd());
#define PPB_NCCL_CHECK(call)                                            \
  do {                                                                  \
    const ncclResult_t ppb_nccl_rc_ = (call);                           \
    if (ppb_nccl_rc_ != ncclSuccess) [[unlikely]] {                     \
      ::ppb::nccl_call_failed(ppb_nccl_rc_, #call, __FILE__, __LINE__); \
    }                                                                   \
  } while (false)
