#include "ppb/exec/gpu_ranks.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ppb/exec/cuda_device.hpp"
#include "ppb/exec/mpi.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

// Where a rank's GPU is.
struct GpuPlace {
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  char bus[64] = {};  // PCI bus id, e.g. "0000:3B:00.0"
  bool operator==(const GpuPlace& o) const {
    return std::strcmp(host, o.host) == 0 && std::strcmp(bus, o.bus) == 0;
  }
};

// Every rank's place (index = rank of comm). Collective.
std::vector<GpuPlace> gather_places(MPI_Comm comm, int device) {
  int size = 1;
  PPB_MPI_CHECK(MPI_Comm_size(comm, &size));
  GpuPlace me;
  int length = 0;
  PPB_MPI_CHECK(MPI_Get_processor_name(me.host, &length));
  PPB_CUDA_CHECK(cudaDeviceGetPCIBusId(me.bus, sizeof me.bus, device));
  std::vector<GpuPlace> all(static_cast<size_t>(size));
  PPB_MPI_CHECK(MPI_Allgather(&me, sizeof me, MPI_BYTE, all.data(), sizeof me, MPI_BYTE, comm));
  return all;
}

}  // namespace

void require_gpus(MPI_Comm comm, std::string_view what) {
  int rank = 0;
  PPB_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  const std::string why = cuda::unusable_reason();
  int first_bad = why.empty() ? INT_MAX : rank;
  PPB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT, MPI_MIN, comm));
  if (first_bad == INT_MAX) return;
  char text[256] = {};
  if (rank == first_bad) std::snprintf(text, sizeof text, "%s", why.c_str());
  PPB_MPI_CHECK(MPI_Bcast(text, sizeof text, MPI_CHAR, first_bad, comm));
  throw UsageError(std::string(what) + ": no usable GPU on rank " + std::to_string(first_bad) +
                   ": " + text);
}

void require_distinct_gpus(MPI_Comm comm, int device, std::span<const NcclLink> links,
                           std::string_view what) {
  const std::vector<GpuPlace> all = gather_places(comm, device);
  for (const NcclLink& l : links) {
    const GpuPlace& a = all[static_cast<size_t>(l.from)];
    const GpuPlace& b = all[static_cast<size_t>(l.to)];
    if (a == b) {
      throw UsageError(std::string(what) + ": ranks " + std::to_string(l.from) + " and " +
                       std::to_string(l.to) + " share GPU " + a.bus + " on " + a.host +
                       ", and NCCL cannot put two ranks of one communicator on one GPU "
                       "(\"Duplicate GPU detected\"); give every rank its own GPU or use an "
                       "MPI transport");
    }
  }
}

int ranks_per_gpu(MPI_Comm comm, int device) {
  const std::vector<GpuPlace> all = gather_places(comm, device);
  int most = 0;
  for (const GpuPlace& p : all) {
    most = std::max(most, static_cast<int>(std::count(all.begin(), all.end(), p)));
  }
  return most;
}

}  // namespace ppb
