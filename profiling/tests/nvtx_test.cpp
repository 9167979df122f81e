// The ranges pipebench emits, as a real NVTX tool sees them: the recorder
// library is injected the way Nsight Systems injects itself.
#include "ppb/profiling/nvtx.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace ppb {
namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

TEST(Nvtx, RangesReachAnInjectedToolWithDomainCategoryAndPayload) {
  ASSERT_TRUE(nvtx::compiled_in());
  std::string record = ::testing::TempDir() + "nvtx_record_" + std::to_string(getpid()) + ".txt";
  // Must be set before the first NVTX call of the process (NVTX initialises lazily).
  setenv("NVTX_INJECTION64_PATH", PPB_NVTX_RECORDER, 1);
  setenv("PPB_NVTX_RECORD", record.c_str(), 1);

  nvtx::name_this_thread("rank 0 executor");
  {
    nvtx::ScopedRange measure("measure", nvtx::Category::kStep);
    { nvtx::ScopedRange f("F s2 mb3", nvtx::Category::kForward, 3); }
    uint64_t send = nvtx::start_range("send act s2->s3 mb3", nvtx::Category::kSend, 3);
    nvtx::ScopedRange b("B s2 mb3 c1", nvtx::Category::kBackward, 3);
    nvtx::end_range(send);  // a message completes while another range is open
  }

  std::vector<std::string> lines = read_lines(record);
  std::vector<std::string> ranges;
  bool saw_domain = false, saw_forward_category = false, saw_thread = false;
  for (const std::string& l : lines) {
    if (l == "domain pipebench") saw_domain = true;
    if (l == "category pipebench 1 forward") saw_forward_category = true;
    if (l.rfind("thread ", 0) == 0 && l.find("rank 0 executor") != std::string::npos)
      saw_thread = true;
    if (l.rfind("push ", 0) == 0 || l.rfind("pop ", 0) == 0 || l.rfind("start ", 0) == 0 ||
        l.rfind("end ", 0) == 0) {
      ranges.push_back(l);
    }
  }
  EXPECT_TRUE(saw_domain);
  EXPECT_TRUE(saw_forward_category);
  EXPECT_TRUE(saw_thread);
  std::vector<std::string> expected = {"push pipebench 8 -1 measure",
                                       "push pipebench 1 3 F s2 mb3",
                                       "pop pipebench",
                                       "start ID pipebench 4 3 send act s2->s3 mb3",
                                       "push pipebench 2 3 B s2 mb3 c1",
                                       "end ID",
                                       "pop pipebench",
                                       "pop pipebench"};
  // The start/end pair must carry the same id; normalise it for the comparison.
  std::string id;
  for (std::string& r : ranges) {
    if (r.rfind("start ", 0) == 0) {
      size_t sp = r.find(' ', 6);
      id = r.substr(6, sp - 6);
      r = "start ID" + r.substr(sp);
    } else if (r.rfind("end ", 0) == 0) {
      EXPECT_EQ(r.substr(4), id);
      r = "end ID";
    }
  }
  EXPECT_EQ(ranges, expected);
  std::remove(record.c_str());
}

}  // namespace
}  // namespace ppb
