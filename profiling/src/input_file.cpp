// One reader for every input file (see input_file.hpp). The limit is
// checked while reading, not from the file's size, so devices and FIFOs
// (whose size is 0) are bounded too.
#include "ppb/profiling/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

}  // namespace

std::string read_input_file(const std::string& path, std::string_view what, int64_t max_bytes) {
  const std::string kind(what);
  if (path.empty()) throw UsageError(kind + ": empty path");
  // O_NONBLOCK: opening a named pipe no program writes to would otherwise
  // wait for one forever; read from it, it ends at once (an empty input).
  // Cleared before reading, so that a pipe a program does write to (a
  // shell's <(...)) is read to its end.
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) {
    throw UsageError(path + ": cannot open " + kind + ": " + std::strerror(errno));
  }
  if (const int flags = ::fcntl(fd.get(), F_GETFL);
      flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) < 0) {
    throw UsageError(path + ": cannot read " + kind + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    throw UsageError(path + ": cannot read " + kind + ": " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) throw UsageError(path + ": is a directory, expected a " + kind);
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
