// One reader for every input file (see input_file.hpp). The limit is
// checked while reading, not from the file's size, so devices and FIFOs
// (whose size is 0) are bounded too.
#include "ppb/profiling/input_file.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "ppb/profiling/check.hpp"
#include "unique_fd.hpp"

namespace ppb {
namespace {

std::string limit_text(int64_t bytes) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  return std::to_string(bytes) + " bytes";
}

// Waits until a named pipe has something to read or its writer has gone.
// Linux reports no hang-up on a pipe opened for reading before any writer
// opened it, so a writer that comes after pipebench opened the pipe is
// waited for, up to `wait`.
void wait_for_fifo_writer(int fd, const std::string& path, std::string_view kind,
                          std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (n > 0) return;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw UsageError(path + ": cannot read " + std::string(kind) + ": " + std::strerror(errno));
    }
    throw UsageError(path + ": named pipe given as " + std::string(kind) +
                     ", and no program wrote to it within " +
                     number_text(static_cast<double>(wait.count()) / 1000.0) + " s");
  }
}

}  // namespace

std::string read_input_file(const std::string& path, std::string_view what, int64_t max_bytes,
                            std::chrono::milliseconds fifo_wait) {
  const std::string kind(what);
  if (path.empty()) throw UsageError(kind + ": empty path");
  // O_NONBLOCK: opening a named pipe blocks until a program opens it for
  // writing, which may be never. Opened at once instead, a pipe is then
  // waited on for a bounded time (a writer may open it a moment later),
  // and the flag cleared before reading, so that a pipe a program writes
  // to (a shell's <(...)) is read to its end.
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) {
    throw UsageError(path + ": cannot open " + kind + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    throw UsageError(path + ": cannot read " + kind + ": " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) throw UsageError(path + ": is a directory, expected a " + kind);
  // A named pipe on a file system, not a shell's <(...) (an anonymous pipe,
  // which had its writer from the start and is read to its end, however
  // slowly it writes).
  struct statfs fs {};
  const bool anonymous = ::fstatfs(fd.get(), &fs) == 0 && fs.f_type == PIPEFS_MAGIC;
  if (S_ISFIFO(st.st_mode) && !anonymous) wait_for_fifo_writer(fd.get(), path, kind, fifo_wait);
  if (const int flags = ::fcntl(fd.get(), F_GETFL);
      flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) < 0) {
    throw UsageError(path + ": cannot read " + kind + ": " + std::strerror(errno));
  }
  auto too_large = [&]() {
    return UsageError(path + ": " + kind + " larger than " + limit_text(max_bytes) +
                      " (the limit for this input)");
  };
  if (S_ISREG(st.st_mode) && st.st_size > max_bytes) throw too_large();

  std::string text;
  if (S_ISREG(st.st_mode)) text.reserve(static_cast<size_t>(st.st_size));
  constexpr size_t kChunk = size_t{1} << 16;
  for (;;) {
    const size_t old = text.size();
    text.resize(old + kChunk);
    const ssize_t n = ::read(fd.get(), text.data() + old, kChunk);
    if (n < 0) {
      if (errno == EINTR) {
        text.resize(old);
        continue;
      }
      throw UsageError(path + ": cannot read " + kind + ": " + std::strerror(errno));
    }
    text.resize(old + static_cast<size_t>(n));
    if (n == 0) break;
    if (static_cast<int64_t>(text.size()) > max_bytes) throw too_large();
  }
  return text;
}

}  // namespace ppb
