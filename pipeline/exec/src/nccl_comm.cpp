#include "ppb/exec/nccl_comm.hpp"

#include <cstdio>

#include "ppb/exec/mpi.hpp"

namespace ppb {

void nccl_call_failed(ncclResult_t code, const char* call, const char* file, int line) {
  char text[1024];
  std::snprintf(text, sizeof text, "NCCL error in %s at %s:%d: %s (%s)", call, file, line,
                ncclGetErrorString(code), ncclGetLastError(nullptr));
  abort_job(text, 1);
}

ncclComm_t nccl_comm_over(MPI_Comm comm) {
  int rank = 0;
  int size = 1;
  PPB_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  PPB_MPI_CHECK(MPI_Comm_size(comm, &size));
  ncclUniqueId id{};
  if (rank == 0) PPB_NCCL_CHECK(ncclGetUniqueId(&id));
  PPB_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm));
  ncclComm_t nccl = nullptr;
  PPB_NCCL_CHECK(ncclCommInitRank(&nccl, size, id, rank));
  return nccl;
}

}  // namespace ppb
