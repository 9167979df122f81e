// read_input_file: whole files back, limits enforced while reading (also on
// devices, whose size says nothing), directories and missing files named.
#include "ppb/profiling/input_file.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::string& path, int64_t limit) {
  try {
    (void)read_input_file(path, "schedule file", limit);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

class InputFile : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ppb_input_file_XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  fs::path dir_;
};

TEST_F(InputFile, ReadsWholeFilesUpToTheLimit) {
  std::string big(200000, 'x');  // several read chunks
  big += "end";
  const std::string p = write("big.json", big);
  EXPECT_EQ(read_input_file(p, "schedule file", static_cast<int64_t>(big.size())), big);
  EXPECT_EQ(error_of(p, static_cast<int64_t>(big.size()) - 1),
            p + ": schedule file larger than 200002 bytes (the limit for this input)");
  EXPECT_EQ(read_input_file(write("empty.json", ""), "schedule file", 0), "");
}

TEST_F(InputFile, EndlessDevicesStopAtTheLimit) {
  EXPECT_EQ(error_of("/dev/zero", int64_t{1} << 20),
            "/dev/zero: schedule file larger than 1 MiB (the limit for this input)");
  EXPECT_EQ(read_input_file("/dev/null", "schedule file", 10), "");
}

// A named pipe no program writes to ends in an error naming it after a
// bounded wait, not a wait for a writer that never comes; one whose writer
// opens it a moment after pipebench did, or is still writing (a shell's
// <(...)), is read to its end.
TEST_F(InputFile, NamedPipesWaitABoundedTimeForAWriter) {
  const std::string fifo = (dir_ / "fifo.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    (void)read_input_file(fifo, "schedule file", 100, std::chrono::milliseconds(200));
    ADD_FAILURE() << "a pipe nobody writes to was read";
  } catch (const UsageError& e) {
    EXPECT_EQ(
        std::string(e.what()),
        fifo + ": named pipe given as schedule file, and no program wrote to it within 0.2 s");
  }

  const std::string text = "{\"schema\": \"x\"}";
  // The writer opens the pipe by name only after the read began.
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const int w = ::open(fifo.c_str(), O_WRONLY);
    ASSERT_GE(w, 0);
    (void)!::write(w, text.data(), text.size());
    ::close(w);
  });
  EXPECT_EQ(read_input_file(fifo, "schedule file", 100), text);
  late.join();

  // A writer that opens and closes without writing: an empty input.
  std::thread silent([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ::close(::open(fifo.c_str(), O_WRONLY));
  });
  EXPECT_EQ(read_input_file(fifo, "schedule file", 100), "");
  silent.join();

  // An anonymous pipe (a shell's <(...)) whose writer is still writing when
  // the read starts, and takes longer than the named pipe's wait: the read
  // waits for it (a descriptor left non-blocking would fail with EAGAIN).
  int ends[2] = {-1, -1};
  ASSERT_EQ(::pipe(ends), 0);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    (void)!::write(ends[1], text.data(), 4);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    (void)!::write(ends[1], text.data() + 4, text.size() - 4);
    ::close(ends[1]);
  });
  EXPECT_EQ(read_input_file("/dev/fd/" + std::to_string(ends[0]), "schedule file", 100,
                            std::chrono::milliseconds(200)),
            text);
  writer.join();
  ::close(ends[0]);
}

TEST_F(InputFile, DirectoriesAndMissingFilesAreNamed) {
  EXPECT_EQ(error_of(dir_.string(), 100),
            dir_.string() + ": is a directory, expected a schedule file");
  const std::string missing = (dir_ / "absent.json").string();
  EXPECT_EQ(error_of(missing, 100),
            missing + ": cannot open schedule file: No such file or directory");
  EXPECT_EQ(error_of("", 100), "schedule file: empty path");
}

}  // namespace
}  // namespace ppb
