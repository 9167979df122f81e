#include "ppb/exec/host_load.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "ppb/exec/mpi.hpp"

namespace ppb {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Busy CPU seconds of the whole host since boot (all CPUs): the first line
// of /proc/stat less idle and iowait. NaN when it cannot be read.
double host_busy_seconds() {
  std::ifstream in("/proc/stat");
  std::string line;
  if (!std::getline(in, line) || line.rfind("cpu ", 0) != 0) return kNaN;
  std::istringstream fields(line.substr(4));
  double total = 0;
  double idle = 0;
  double x = 0;
  for (int i = 0; fields >> x; ++i) {
    if (i >= 8) break;  // guest and guest_nice are already counted in user
    total += x;
    if (i == 3 || i == 4) idle += x;  // idle, iowait
  }
  const long ticks = sysconf(_SC_CLK_TCK);
  return ticks > 0 ? (total - idle) / static_cast<double>(ticks) : kNaN;
}

double own_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

HostLoadMeter::HostLoadMeter(MPI_Comm comm) : comm_(comm) {
  PPB_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_));
}

HostLoadMeter::~HostLoadMeter() {
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

void HostLoadMeter::begin() {
  PPB_MPI_CHECK(MPI_Barrier(comm_));
  host_busy_ = host_busy_seconds();
  own_cpu_ = own_cpu_seconds();
  wall_ = now_seconds();
}

double HostLoadMeter::end() {
  const double wall = now_seconds() - wall_;
  const double own = own_cpu_seconds() - own_cpu_;
  double node_own = 0;
  PPB_MPI_CHECK(MPI_Reduce(&own, &node_own, 1, MPI_DOUBLE, MPI_SUM, 0, node_));
  int node_rank = 0;
  PPB_MPI_CHECK(MPI_Comm_rank(node_, &node_rank));
  // Only a host's first rank speaks for it; -1 = nothing to say.
  double share = -1;
  if (node_rank == 0) {
    const double busy = host_busy_seconds() - host_busy_;
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    share = std::isfinite(busy) && wall > 0 && cpus > 0
                ? std::clamp((busy - node_own) / (wall * static_cast<double>(cpus)), 0.0, 1.0)
                : -1.0;  // unknown
  }
  double worst = 0;
  PPB_MPI_CHECK(MPI_Allreduce(&share, &worst, 1, MPI_DOUBLE, MPI_MAX, comm_));
  return worst < 0 ? kNaN : worst;
}

}  // namespace ppb
