// `--profile perf`: CPU hardware counters of the rank's process per step,
// through Linux perf_event_open (user space only, so perf_event_paranoid <= 2
// allows it without privileges):
//
//   step["cycles"]        core cycles spent by the process during the step
//   step["instructions"]  instructions retired during the step
//   step["ipc"]           instructions / cycles
//
// The counters are opened when the collector is made, with `inherit`, so the
// threads the backend starts afterwards (OpenBLAS, a compute stream) are
// counted too. Unavailable where the kernel offers no hardware counters
// (most virtual machines and containers: ENOENT) or forbids them (EACCES):
// the collector is then off with one warning.
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include "collectors/collectors.hpp"

namespace ppb::collectors {
namespace {

/// Opens a user-space hardware counter of this process (and of the threads
/// it starts later). Returns the fd, or -1 with errno set.
int open_counter(uint64_t config) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_HARDWARE;
  attr.config = config;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.inherit = 1;
  return static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

uint64_t read_counter(int fd) {
  uint64_t value = 0;
  if (read(fd, &value, sizeof value) != static_cast<ssize_t>(sizeof value)) return 0;
  return value;
}

class PerfCollector final : public Collector {
 public:
  PerfCollector() {
    for (size_t i = 0; i < kConfigs.size(); ++i) {
      fds_[i] = open_counter(kConfigs[i]);
      if (fds_[i] < 0) {
        const std::string why = std::strerror(errno);
        close_all();
        throw CollectorUnavailable("perf_event_open: " + why);
      }
    }
  }
  ~PerfCollector() override { close_all(); }
  PerfCollector(const PerfCollector&) = delete;
  PerfCollector& operator=(const PerfCollector&) = delete;

  std::string_view name() const override { return "perf"; }

  void step_begin(int /*step*/) override {
    for (size_t i = 0; i < fds_.size(); ++i) begin_[i] = read_counter(fds_[i]);
  }
  void step_end(int /*step*/) override {
    for (size_t i = 0; i < fds_.size(); ++i) delta_[i] = read_counter(fds_[i]) - begin_[i];
  }
  void finish_step(const StepRecord& /*record*/, CollectedFigures& out) override {
    const auto cycles = static_cast<double>(delta_[0]);
    const auto instructions = static_cast<double>(delta_[1]);
    out.step["cycles"] = cycles;
    out.step["instructions"] = instructions;
    out.step["ipc"] = cycles > 0 ? instructions / cycles : 0.0;
  }

 private:
  static constexpr std::array<uint64_t, 2> kConfigs = {PERF_COUNT_HW_CPU_CYCLES,
                                                       PERF_COUNT_HW_INSTRUCTIONS};
  void close_all() {
    for (int& fd : fds_) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
  }

  std::array<int, 2> fds_ = {-1, -1};
  std::array<uint64_t, 2> begin_{};
  std::array<uint64_t, 2> delta_{};
};

}  // namespace

std::string perf_unavailable() {
  const int fd = open_counter(PERF_COUNT_HW_CPU_CYCLES);
  if (fd >= 0) {
    close(fd);
    return "";
  }
  const std::string why = std::strerror(errno);
  std::ifstream paranoid("/proc/sys/kernel/perf_event_paranoid");
  std::string level;
  paranoid >> level;
  return "no hardware counters (perf_event_open: " + why +
         (level.empty() ? "" : "; perf_event_paranoid " + level) + ")";
}

std::unique_ptr<Collector> make_perf(const CollectorContext& /*context*/) {
  return std::make_unique<PerfCollector>();
}

}  // namespace ppb::collectors
