// Where a run happens: hosts, ranks, MPI library, build, date
// (docs/result-schema.md, "environment"). Collective: every rank calls it.
#pragma once

#include <mpi.h>

#include "ppb/pipeline/result.hpp"

namespace ppb::run {

/// Gathers every rank's host name (MPI_Get_processor_name) to all ranks
/// (rank_hosts, one per rank; hosts, each once, in rank order) and
/// fills the rest from rank-local facts: MPI_Get_library_version (first
/// line), build_info() (git revision, compiler, build type), the CPU model
/// (/proc/cpuinfo), "none" for cuda and driver and no gpus (this build has
/// no cuda backend), cores = online CPUs of rank 0's host (sysconf; a
/// rank's affinity mask would show its binding, not the host), oversubscribed = some host runs more
/// ranks than it has cores (all hosts assumed alike). `date` is left empty: each result stamps its
/// own. REQUIRES: MPI initialised; called by every rank of `comm`.
ResultEnvironment collect_environment(MPI_Comm comm);

}  // namespace ppb::run
