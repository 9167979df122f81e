// Where a run happens: hosts, ranks, MPI library, build, date
// (docs/result-schema.md, "environment"). Collective: every rank calls it.
#pragma once

#include <mpi.h>

#include <string>
#include <string_view>

#include "ppb/pipeline/result.hpp"

namespace ppb::run {

/// Gathers every rank's host name (MPI_Get_processor_name) to all ranks
/// (rank_hosts, one per rank; hosts, each once, in rank order) and
/// fills the rest from rank-local facts: MPI_Get_library_version (first
/// line), build_info() (git revision, compiler, build type), the CPU model
/// (/proc/cpuinfo), cores = online CPUs of rank 0's host (sysconf; a
/// rank's affinity mask would show its binding, not the host), oversubscribed = some host runs more
/// ranks than it has cores (all hosts assumed alike). With `device_backend`
/// (a backend that computes on a GPU) the GPU of every rank: gpus (the name
/// of the device bind_device(local_rank, ...) binds, per rank), cuda
/// (runtime version) and driver (cuda::device_facts), ranks_per_gpu (by
/// host and PCI bus id); otherwise "none" for cuda and driver, no gpus.
/// `date` is left empty: each result stamps its own. REQUIRES: MPI
/// initialised; called by every rank of `comm`; with `device_backend` a
/// usable device on every rank; local_rank = this rank among its host's.
ResultEnvironment collect_environment(MPI_Comm comm, bool device_backend, int local_rank);

/// The facts of this process's host alone, without MPI initialised (a
/// command of one process): one rank, its host name (gethostname) as
/// hostname, hosts and rank_hosts, MPI_Get_library_version (allowed before
/// MPI_Init), the build, the CPU model and cores; "none" for cuda and
/// driver, no gpus. collect_environment starts from it.
ResultEnvironment host_environment();

/// The MPI library's name and version as `environment.mpi` records it: the
/// first line of MPI_Get_library_version's text up to its first comma, each
/// run of blanks, tabs and NULs one space, none at either end.
/// Examples: "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4";
/// "MPICH Version:\t4.1.2\nMPICH Release date: ..." -> "MPICH Version: 4.1.2".
std::string mpi_library_name(std::string_view version);

}  // namespace ppb::run
