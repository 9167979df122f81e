// The transports `--transport` can name: one line each (STYLE rule 8).
// `nccl` is added by the GPU issue.
#include <string>

#include "ppb/exec/transport.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

using Factory = std::unique_ptr<Transport> (*)(MPI_Comm);

struct Entry {
  TransportInfo info;
  Factory make;
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> kEntries = {
      {{"mpi", "MPI_Isend/MPI_Irecv of bytes between stage ranks, matched by tag"},
       [](MPI_Comm comm) -> std::unique_ptr<Transport> {
         return std::make_unique<MpiTransport>(comm);
       }},
      {{"mpi-ordered",
        "MPI with one tag per link: messages match in call order, as NCCL matches them"},
       [](MPI_Comm comm) -> std::unique_ptr<Transport> {
         return std::make_unique<MpiTransport>(comm, MpiTransport::Matching::kInOrder);
       }},
      {{"mpi-staged",
        "MPI on pinned host memory only: messages are staged through pinned buffers and "
        "copy-stream copies (as beside a device backend)"},
       [](MPI_Comm comm) -> std::unique_ptr<Transport> {
         return std::make_unique<MpiTransport>(comm, MpiTransport::Matching::kByTag,
                                               memory_space_bit(MemorySpace::kPinnedHost));
       }},
  };
  return kEntries;
}

}  // namespace

const std::vector<TransportInfo>& transport_list() {
  static const std::vector<TransportInfo> kList = [] {
    std::vector<TransportInfo> list;
    for (const Entry& e : entries()) list.push_back(e.info);
    return list;
  }();
  return kList;
}

std::unique_ptr<Transport> make_transport(std::string_view name, MPI_Comm comm) {
  std::string names;
  for (const Entry& e : entries()) {
    if (e.info.name == name) return e.make(comm);
    names += (names.empty() ? "" : ", ") + e.info.name;
  }
  throw UsageError("--transport: unknown transport '" + std::string(name) +
                   "' (transports: " + names + ")");
}

}  // namespace ppb
