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

std::string nccl_version() {
  int code = 0;
  PPB_NCCL_CHECK(ncclGetVersion(&code));
  // NCCL_VERSION(X, Y, Z): X * 10000 + Y * 100 + Z since 2.9 (X * 1000 +
  // Y * 100 + Z before).
  const int major = code >= 20900 ? code / 10000 : code / 1000;
  const int minor = code >= 20900 ? code / 100 % 100 : code / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

}  // namespace ppb
