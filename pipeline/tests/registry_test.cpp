// The registries hold every trait the report and the planner read, for
// every entry: a schedule or a backend registered without one fails here
// instead of falling back to a default where the report or the plan reads it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

#include "ppb/exec/backend.hpp"
#include "ppb/pipeline/backend_traits.hpp"
#include "ppb/pipeline/memory_model.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/pipeline/schedule.hpp"

namespace ppb {
namespace {

bool is_hex_colour(const std::string& c) {
  return c.size() == 7 && c[0] == '#' && std::all_of(c.begin() + 1, c.end(), [](char ch) {
           return std::isxdigit(static_cast<unsigned char>(ch)) != 0;
         });
}

TEST(ScheduleRegistry, EveryScheduleHasWhatTheReportReads) {
  std::set<std::string> colours;
  std::set<int> orders;
  for (const ScheduleInfo& s : schedule_list()) {
    EXPECT_FALSE(s.help.empty()) << s.name;
    EXPECT_TRUE(is_hex_colour(s.colour)) << s.name << ": colour '" << s.colour << "'";
    EXPECT_TRUE(colours.insert(s.colour).second) << s.name << " shares colour " << s.colour;
    EXPECT_GE(s.report_order, 0) << s.name << " has no report_order";
    EXPECT_TRUE(orders.insert(s.report_order).second)
        << s.name << " shares report_order " << s.report_order;
    EXPECT_FALSE(s.inflight_formula.empty()) << s.name << " has no inflight_formula";
  }
  // The report's order is a ranking of the registered schedules: 0 .. n-1.
  ASSERT_FALSE(orders.empty());
  EXPECT_EQ(*orders.begin(), 0);
  EXPECT_EQ(*orders.rbegin(), static_cast<int>(schedule_list().size()) - 1);
}

TEST(BackendRegistry, EveryBackendExtendsItsTraitsRow) {
  std::set<std::string> registered;
  for (const BackendInfo& b : backend_list()) {
    registered.insert(b.name);
    EXPECT_FALSE(b.help.empty()) << b.name;
    const BackendTraits* row = find_backend_traits(b.name);
    ASSERT_NE(row, nullptr) << b.name << " has no row in backend_traits_list()";
    EXPECT_EQ(b.traits.name, b.name);
    // A backend that computes runs kernels of its own; one that sleeps
    // modelled times scratches as the device it models does.
    EXPECT_EQ(b.traits.kernels.has_value(), !b.modelled_time) << b.name;
    EXPECT_GE(b.traits.resident_bytes, 0) << b.name;
    if (b.real_gradients) {
      EXPECT_GT(b.check_tolerance_fp32, 0) << b.name;
    }
    if (b.bf16) {
      EXPECT_GT(b.check_tolerance_bf16, 0) << b.name;
    }
  }
  for (const BackendTraits& t : backend_traits_list())
    EXPECT_EQ(registered.count(t.name), 1U) << t.name << " has traits but no registered backend";
  // The planner's GPUs run exactly one backend.
  const auto devices = std::count_if(backend_list().begin(), backend_list().end(),
                                     [](const BackendInfo& b) { return b.traits.device; });
  EXPECT_EQ(devices, 1);
  EXPECT_TRUE(device_backend_traits().device);
}

// The memory model and the planner read the rows, not the names.
TEST(BackendRegistry, KernelsAndResidentBytesComeFromTheRow) {
  for (const BackendInfo& b : backend_list()) {
    EXPECT_EQ(backend_resident_bytes(b.name), b.traits.resident_bytes) << b.name;
    for (const char* device : {"cpu", "h100"}) {
      const Kernels of_device = std::string(device) == "cpu" ? Kernels::kCpu : Kernels::kCuda;
      EXPECT_EQ(kernels_for(b.name, device), b.traits.kernels.value_or(of_device))
          << b.name << " on " << device;
    }
  }
  EXPECT_EQ(backend_resident_bytes("no-such-backend"), 0);
  EXPECT_EQ(device_backend_traits().resident_bytes, kCudaBlasWorkspaceBytes);
}

}  // namespace
}  // namespace ppb
