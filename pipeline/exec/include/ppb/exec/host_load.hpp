// How busy the hosts were with other work while a combination's timed steps
// ran: the share of a host's CPU time that processes other than this run's
// ranks used. On a shared machine this is what makes two nights' timings
// incomparable; the regression gate reads it (metrics.foreign_cpu) and
// declines to judge timings taken on a busy host, and the tests that hold
// timings to a tolerance skip on one.
#pragma once

#include <mpi.h>

#include <cstdint>

namespace ppb {

/// Measures around a region: begin() and end() are collective over `comm`.
/// Per host (ranks sharing memory, MPI_COMM_TYPE_SHARED): (the host's busy
/// CPU time from /proc/stat - this run's ranks' CPU time on it, getrusage) /
/// (elapsed wall time x the host's online CPUs); the result is the largest
/// over hosts, in [0, 1], NaN where /proc/stat cannot be read.
class HostLoadMeter {
 public:
  explicit HostLoadMeter(MPI_Comm comm);
  ~HostLoadMeter();
  HostLoadMeter(const HostLoadMeter&) = delete;
  HostLoadMeter& operator=(const HostLoadMeter&) = delete;

  void begin();
  /// The foreign share since begin(), on every rank.
  double end();

 private:
  MPI_Comm comm_;
  MPI_Comm node_ = MPI_COMM_NULL;
  double host_busy_ = 0;  // seconds, /proc/stat at begin() (node leader)
  double own_cpu_ = 0;    // seconds, this process at begin()
  double wall_ = 0;       // seconds, steady clock at begin()
};

}  // namespace ppb
