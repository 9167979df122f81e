#include "run/environment.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "build_info.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/exec/mpi.hpp"
#if PPB_HAVE_CUDA
#include "ppb/exec/gpu_ranks.hpp"
#endif
#if PPB_HAVE_NCCL
#include "ppb/exec/nccl_comm.hpp"
#endif

namespace ppb::run {

namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
    }
  }
  return "";
}

// Online CPUs of the host. Not the affinity mask: mpirun binds each rank to
// a core, so a rank's own mask says 1 whatever the host has.
int host_cores() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 0;
}

// The GPU of every rank (collective over comm).
void add_gpus(MPI_Comm comm, int local_rank, ResultEnvironment& env) {
  const cuda::DeviceFacts mine = cuda::device_facts(local_rank);
  constexpr size_t kName = 256;
  char name[kName] = {};
  std::snprintf(name, sizeof name, "%s", mine.name.c_str());
  std::vector<char> all(static_cast<size_t>(env.ranks) * kName, '\0');
  PPB_MPI_CHECK(MPI_Allgather(name, kName, MPI_CHAR, all.data(), kName, MPI_CHAR, comm));
  for (int r = 0; r < env.ranks; ++r) {
    const char* p = all.data() + static_cast<size_t>(r) * kName;
    env.gpus.emplace_back(p, strnlen(p, kName));
  }
  env.cuda = mine.runtime;
  env.driver = mine.driver;
  // The libraries beside the driver that the run loaded: cuDNN where the
  // attention's choice loaded it (bf16 fused), NCCL where linked.
  env.cudnn = cuda::loaded_cudnn_version();
#if PPB_HAVE_NCCL
  env.nccl = nccl_version();
#endif
#if PPB_HAVE_CUDA
  env.ranks_per_gpu = ranks_per_gpu(comm, mine.device);
#endif
}

}  // namespace

std::string mpi_library_name(std::string_view version) {
  version = version.substr(0, version.find_first_of("\r\n"));
  version = version.substr(0, version.find(','));  // "Open MPI v4.1.4, package: ..."
  std::string out;
  for (const char c : version) {
    if (c != ' ' && c != '\t' && c != '\0') {
      out += c;
    } else if (!out.empty() && out.back() != ' ') {
      out += ' ';
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

ResultEnvironment host_environment() {
  ResultEnvironment env;
  env.ranks = 1;
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0) env.hostname = name;
  env.hosts = {env.hostname};
  env.rank_hosts = {env.hostname};
  env.cores = host_cores();
  // MPI_Get_library_version is one of the calls MPI allows before MPI_Init.
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int vlen = 0;
  PPB_MPI_CHECK(MPI_Get_library_version(version, &vlen));
  env.mpi = mpi_library_name(std::string_view(version, static_cast<size_t>(std::max(vlen, 0))));
  const BuildInfo& build = build_info();
  env.git = build.git_revision;
  env.compiler = build.compiler;
  env.build_type = build.build_type;
  env.cuda = "none";
  env.driver = "none";
  env.cpu = cpu_model_name();
  return env;
}

ResultEnvironment collect_environment(MPI_Comm comm, bool device_backend, int local_rank) {
  ResultEnvironment env = host_environment();
  int size = 1;
  PPB_MPI_CHECK(MPI_Comm_size(comm, &size));
  env.ranks = size;
  env.hosts.clear();
  env.rank_hosts.clear();

  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  PPB_MPI_CHECK(MPI_Get_processor_name(name, &len));
  std::vector<char> all(static_cast<size_t>(size) * MPI_MAX_PROCESSOR_NAME, '\0');
  PPB_MPI_CHECK(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(),
                              MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm));
  std::map<std::string, int> ranks_per_host;
  for (int r = 0; r < size; ++r) {
    const char* p = all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    std::string host(p, strnlen(p, MPI_MAX_PROCESSOR_NAME));
    if (r == 0) env.hostname = host;
    env.rank_hosts.push_back(host);
    if (std::find(env.hosts.begin(), env.hosts.end(), host) == env.hosts.end())
      env.hosts.push_back(host);
    ++ranks_per_host[host];
  }
  for (const auto& [host, n] : ranks_per_host) {
    env.oversubscribed = env.oversubscribed || (env.cores > 0 && n > env.cores);
  }
  if (device_backend) add_gpus(comm, local_rank, env);
  return env;
}

}  // namespace ppb::run
