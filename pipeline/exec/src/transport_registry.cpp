// The transports `--transport` can name: one line each (STYLE rule 8).
#include <string>

#include "ppb/exec/transport.hpp"
#include "ppb/profiling/check.hpp"
#include "transports.hpp"

namespace ppb {
namespace {

using Factory = std::unique_ptr<Transport> (*)(MPI_Comm);

struct Entry {
  const char* name;
  const char* help;              // one line
  RawBaseline baseline;          // what p2p measures it against
  std::string (*unavailable)();  // "" when it can run here
  Factory make;                  // null: not in this build
};

std::string always_available() { return ""; }

// mpi and mpi-ordered move device memory directly when MPI is CUDA-aware
// (mpi_cuda_aware(), asked at run time); otherwise the executor stages.
uint8_t mpi_spaces() {
  return mpi_cuda_aware() ? MpiTransport::kHostSpaces | memory_space_bit(MemorySpace::kDevice)
                          : MpiTransport::kHostSpaces;
}

// clang-format off
const std::vector<Entry>& entries() {
  static const std::vector<Entry> kEntries = {
    {.name = "mpi", .help = "MPI_Isend/MPI_Irecv of bytes between stage ranks, matched by tag (device buffers directly when MPI is CUDA-aware, else staged)", .baseline = RawBaseline::kMpi, .unavailable = &always_available,
     .make = [](MPI_Comm comm) -> std::unique_ptr<Transport> { return std::make_unique<MpiTransport>(comm, MpiTransport::Matching::kByTag, mpi_spaces()); }},
    {.name = "mpi-ordered", .help = "MPI with one tag per link: messages match in call order, as NCCL matches them", .baseline = RawBaseline::kMpi, .unavailable = &always_available,
     .make = [](MPI_Comm comm) -> std::unique_ptr<Transport> { return std::make_unique<MpiTransport>(comm, MpiTransport::Matching::kInOrder, mpi_spaces()); }},
    {.name = "mpi-staged", .help = "MPI on pinned host memory only: messages are staged through pinned buffers and copy-stream copies (as beside a device backend)", .baseline = RawBaseline::kMpi, .unavailable = &always_available,
     .make = [](MPI_Comm comm) -> std::unique_ptr<Transport> { return std::make_unique<MpiTransport>(comm, MpiTransport::Matching::kByTag, memory_space_bit(MemorySpace::kPinnedHost)); }},
#if PPB_HAVE_NCCL
    {.name = "nccl", .help = "ncclSend/ncclRecv between GPUs in link order, one communicator and stream per link direction (one GPU per stage)", .baseline = RawBaseline::kNccl, .unavailable = &transports::nccl_unavailable, .make = &transports::make_nccl},
#else
    {.name = "nccl", .help = "ncclSend/ncclRecv between GPUs in link order, one communicator and stream per link direction (one GPU per stage)", .baseline = RawBaseline::kNccl, .unavailable = [] { return std::string("built without NCCL (configure with NCCL installed)"); }, .make = nullptr},
#endif
  };
  return kEntries;
}
// clang-format on

}  // namespace

const std::vector<TransportInfo>& transport_list() {
  static const std::vector<TransportInfo> kList = [] {
    std::vector<TransportInfo> list;
    for (const Entry& e : entries()) {
      std::string why = e.unavailable();
      list.push_back({e.name, e.help, why.empty(), std::move(why), e.baseline});
    }
    return list;
  }();
  return kList;
}

std::unique_ptr<Transport> make_transport(std::string_view name, MPI_Comm comm) {
  std::string names;
  for (const Entry& e : entries()) {
    if (e.name == name) {
      if (e.make == nullptr) {
        throw UsageError("--transport " + std::string(name) + ": not available in this build (" +
                         e.unavailable() + ")");
      }
      return e.make(comm);
    }
    names += (names.empty() ? "" : ", ") + std::string(e.name);
  }
  throw UsageError("--transport: unknown transport '" + std::string(name) +
                   "' (transports: " + names + ")");
}

}  // namespace ppb
