// One writer for every output file (see output_file.hpp for the rules).
// Atomic replace is only right for regular files: renaming over a device or
// a FIFO would replace the node itself (as root, `--csv /dev/null` would
// delete /dev/null), and renaming over a symlink would replace the link
// instead of the file the user pointed at.
#include "ppb/profiling/output_file.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ppb/profiling/check.hpp"
#include "unique_fd.hpp"

namespace ppb {
namespace {

namespace fs = std::filesystem;

constexpr mode_t kNewFileMode = 0644;  // a new file's mode

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw UsageError(path + ": cannot write: " + why);
}

// Writes all of `text` to `fd`; returns 0 or the errno of the failure.
int write_all(int fd, std::string_view text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

// Follows `path` through symbolic links (relative targets resolve against
// the link's folder) to the path that is really written: an existing
// non-link, or a new path a dangling link points at.
std::string follow_links(const std::string& path) {
  constexpr int kMaxLinks = 40;  // as the kernel's ELOOP limit
  fs::path p(path);
  for (int i = 0; i < kMaxLinks; ++i) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p.string();
    std::error_code ec;
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) fail(path, ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  fail(path, "too many levels of symbolic links");
}

void write_through(const std::string& shown, const std::string& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) fail(shown, std::strerror(errno));
  const int err = write_all(fd, text);
  const bool closed = ::close(fd) == 0;
  if (err != 0) fail(shown, std::strerror(err));
  if (!closed) fail(shown, std::strerror(errno));
}

// Names the unnamed file `fd` (opened with O_TMPFILE) as `name` (relative
// to `dirfd`): through /proc (any user), else by AT_EMPTY_PATH (needs
// CAP_DAC_READ_SEARCH). Returns 0 or the errno of the failure.
int give_name(int fd, int dirfd, const fs::path& name) {
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  if (::linkat(AT_FDCWD, proc.c_str(), dirfd, name.c_str(), AT_SYMLINK_FOLLOW) == 0) return 0;
  // The name is taken: that is the answer (the second way, which needs a
  // capability many users lack, would only hide it behind its own error).
  if (errno == EEXIST) return EEXIST;
  if (::linkat(fd, "", dirfd, name.c_str(), AT_EMPTY_PATH) == 0) return 0;
  return errno;
}

// A replacement made but not yet in place: a complete file on disk beside
// its target, which commit() names and renames over the target and
// discard() drops. Where the file system has O_TMPFILE the file stays
// unnamed (`file` open) until commit(), so a process killed before then
// leaves nothing behind; elsewhere it is a named temporary file. `dirfd`
// is AT_FDCWD (ordinary paths) or `folder`'s descriptor.
struct Staged {
  std::string shown;
  UniqueFd folder{-1};
  int dirfd = AT_FDCWD;
  UniqueFd file{-1};  // the unnamed file; -1 once named (or when named from the start)
  fs::path tmp;
  fs::path target;
};

// Writes the text to a new file in the target's folder, flushed to disk
// (fsync); a failure (a full disk) removes it and throws naming `shown`.
// `path` is relative to `dirfd` (AT_FDCWD: an ordinary path; else
// `folder`'s).
Staged stage(const std::string& shown, UniqueFd folder, int dirfd, const std::string& path,
             std::string_view text, mode_t mode) {
  static std::atomic<unsigned> counter{0};
  const fs::path target(path);
  fs::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  const fs::path tmp = dir / ("." + target.filename().string() + ".tmp." +
                              std::to_string(::getpid()) + "." + std::to_string(counter++));
  UniqueFd fd(::openat(dirfd, dir.c_str(), O_WRONLY | O_TMPFILE | O_CLOEXEC, mode));
  const bool unnamed = fd.get() >= 0;
  if (!unnamed) {
    fd.reset(
        ::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  }
  if (fd.get() < 0) fail(shown, std::strerror(errno));
  int err = write_all(fd.get(), text);
  if (err == 0 && ::fchmod(fd.get(), mode) != 0) err = errno;  // umask may have narrowed it
  if (err == 0 && ::fsync(fd.get()) != 0) err = errno;
  if (!unnamed) fd.reset(-1);  // flushed to disk: closing it loses nothing
  if (err != 0) {
    if (!unnamed) ::unlinkat(dirfd, tmp.c_str(), 0);
    fail(shown, std::strerror(err));
  }
  return Staged{shown, std::move(folder), dirfd, std::move(fd), tmp, target};
}

void discard(Staged& s) noexcept {
  if (s.file.get() >= 0) {
    s.file.reset(-1);  // an unnamed file goes with its last descriptor
  } else {
    ::unlinkat(s.dirfd, s.tmp.c_str(), 0);
  }
}

void commit(Staged& s) {
  int err = 0;
  if (s.file.get() >= 0) {
    // A new target is named at once (a link fails where the name exists,
    // one made meanwhile included): no temporary name ever appears, even
    // for a process killed here. A target that exists is replaced through
    // a temporary name and a rename.
    struct stat st {};
    err = ::fstatat(s.dirfd, s.target.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT
              ? give_name(s.file.get(), s.dirfd, s.target)
              : EEXIST;
    if (err == 0) {
      s.file.reset(-1);
      return;
    }
    if (err == EEXIST) err = give_name(s.file.get(), s.dirfd, s.tmp);
    s.file.reset(-1);
    if (err != 0) fail(s.shown, std::strerror(err));  // still unnamed: nothing left behind
  }
  if (::renameat(s.dirfd, s.tmp.c_str(), s.dirfd, s.target.c_str()) != 0) {
    err = errno;
    ::unlinkat(s.dirfd, s.tmp.c_str(), 0);
    fail(s.shown, std::strerror(err));
  }
}

// The stop signals held while outputs are put in place (hold_stop_signal).
constexpr std::array<int, 3> kStopSignals = {SIGINT, SIGTERM, SIGHUP};
std::atomic<int> g_placing{0};                // writers putting outputs in place now
std::atomic<int> g_held{0};                   // a stop signal held for them (0: none)
void (*g_between_renames)(size_t) = nullptr;  // set_rename_hook_for_tests

// While alive, outputs are being put in place: this thread blocks the stop
// signals (a program without handlers, such as report, then ends only once
// they are all in place) and a handler on another thread holds them
// (hold_stop_signal). On leaving, a held signal is raised again.
class PlacingOutputs {
 public:
  PlacingOutputs() {
    sigset_t stop;
    sigemptyset(&stop);
    for (const int sig : kStopSignals) sigaddset(&stop, sig);
    ::pthread_sigmask(SIG_BLOCK, &stop, &before_);
    g_placing.fetch_add(1);
  }
  PlacingOutputs(const PlacingOutputs&) = delete;
  PlacingOutputs& operator=(const PlacingOutputs&) = delete;
  ~PlacingOutputs() {
    // The last writer to finish raises a held signal: another one may still
    // be putting its outputs in place.
    const int held = g_placing.fetch_sub(1) == 1 ? g_held.exchange(0) : 0;
    // A signal sent to this thread while it was blocked arrives here.
    ::pthread_sigmask(SIG_SETMASK, &before_, nullptr);
    if (held != 0) ::raise(held);
  }

 private:
  sigset_t before_{};
};

[[noreturn]] void fail_link(const std::string& shown) {
  fail(shown,
       "a symbolic link inside the output folder (pipebench writes only files it creates "
       "there; remove the link)");
}

// The folder holding out.name inside out.within, opened component by
// component without following a link below `within` (`create`: missing
// folders are made). Returns the leaf name, and the folder in *folder (-1
// when a folder on the way is missing and not created). Throws naming a
// link, a non-folder, a "." or ".." part.
std::string open_parent(const OutputPath& out, bool create, UniqueFd* folder) {
  const std::string shown = out.shown();
  folder->reset(::open(out.within.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (folder->get() < 0) fail(shown, std::strerror(errno));
  const fs::path rel(out.name);
  if (rel.empty() || rel.is_absolute()) fail(shown, "not a name inside the folder");
  std::vector<std::string> parts;
  for (const fs::path& part : rel) parts.push_back(part.string());
  std::string walked = out.within;  // the folders opened so far, as shown
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string& part = parts[i];
    walked += "/" + part;
    if (part == "." || part == ".." || part.empty()) fail(shown, "not a name inside the folder");
    if (create && ::mkdirat(folder->get(), part.c_str(), 0755) != 0 && errno != EEXIST)
      fail(shown, std::strerror(errno));
    const int next =
        ::openat(folder->get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      const int err = errno;
      struct stat st {};
      if (::fstatat(folder->get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(st.st_mode))
        fail_link(walked);
      if (err == ENOENT && !create) {
        folder->reset(-1);
        return parts.back();
      }
      fail(shown, std::strerror(err));
    }
    folder->reset(next);
  }
  if (parts.back() == "." || parts.back() == "..") fail(shown, "not a name inside the folder");
  return parts.back();
}

// Whether the leaf `name` in `dirfd` may be (re)written: refuses a link and
// anything but a regular file. Returns the mode a new or replaced file gets.
mode_t owned_leaf_mode(const std::string& shown, int dirfd, const std::string& name) {
  if (dirfd < 0) return kNewFileMode;
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOENT) fail(shown, std::strerror(errno));
    return kNewFileMode;
  }
  if (S_ISLNK(st.st_mode)) fail_link(shown);
  if (S_ISDIR(st.st_mode)) fail(shown, "is a directory");
  if (!S_ISREG(st.st_mode)) fail(shown, "not a regular file (pipebench writes only those here)");
  return st.st_mode & 07777;
}

// A name inside a folder pipebench fills, staged.
Staged stage_owned(const OutputPath& out, std::string_view text) {
  UniqueFd folder(-1);
  const std::string leaf = open_parent(out, true, &folder);
  const mode_t mode = owned_leaf_mode(out.shown(), folder.get(), leaf);
  const int dirfd = folder.get();
  return stage(out.shown(), std::move(folder), dirfd, leaf, text, mode);
}

// A user's path: staged when it names a regular file or a new one (the
// result in *staged, true returned); false when it is written through
// ("-", a character device, a FIFO: *real says which file).
bool stage_users(const std::string& path, std::string_view text, std::vector<Staged>* staged,
                 std::string* real) {
  if (path == "-") return false;
  *real = follow_links(path);
  struct stat st {};
  if (::stat(real->c_str(), &st) != 0) {
    if (errno != ENOENT) fail(path, std::strerror(errno));
    staged->push_back(stage(path, UniqueFd(-1), AT_FDCWD, *real, text, kNewFileMode));
    return true;
  }
  if (S_ISREG(st.st_mode)) {
    staged->push_back(stage(path, UniqueFd(-1), AT_FDCWD, *real, text, st.st_mode & 07777));
    return true;
  }
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return false;
  if (S_ISDIR(st.st_mode)) fail(path, "is a directory");
  fail(path, "not a regular file, character device or FIFO");
}

}  // namespace

void set_rename_hook_for_tests(void (*hook)(size_t placed)) { g_between_renames = hook; }

std::vector<std::string> remove_stale_temporaries(const std::string& folder,
                                                  double min_age_seconds) {
  std::vector<std::string> removed;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    // stage()'s name: "." + target + ".tmp." + pid + "." + counter.
    const std::string name = it->path().filename().string();
    const size_t tmp = name.rfind(".tmp.");
    if (name.size() < 2 || name[0] != '.' || tmp == std::string::npos || tmp == 0) continue;
    const std::string tail = name.substr(tmp + 5);  // "PID.N"
    const size_t dot = tail.find('.');
    const auto digits = [](const std::string& d) {
      return !d.empty() && d.size() <= 10 &&
             std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (dot == std::string::npos || !digits(tail.substr(0, dot)) || !digits(tail.substr(dot + 1)))
      continue;
    std::error_code sec;
    if (!it->is_regular_file(sec) || it->is_symlink(sec)) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(tail.substr(0, dot)));
    if (::kill(pid, 0) == 0 || errno == EPERM) continue;  // its writer may still run
    const auto written = it->last_write_time(sec);
    if (sec || std::chrono::duration<double>(now - written).count() < min_age_seconds) continue;
    if (fs::remove(it->path(), sec)) removed.push_back(it->path().string());
  }
  return removed;
}

bool hold_stop_signal(int sig) noexcept {
  if (g_placing.load() == 0) return false;
  g_held.store(sig);
  // The writer may have finished meanwhile: if it did not take the signal,
  // take it back (the caller ends by it now).
  if (g_placing.load() == 0 && g_held.exchange(0) != 0) return false;
  return true;
}

void write_output_file(const OutputPath& out, std::string_view text) {
  write_output_files({{out, text}});
}

void write_output_files(const std::vector<std::pair<OutputPath, std::string_view>>& outputs) {
  for (const auto& [out, text] : outputs) {
    if (out.name.empty()) throw UsageError("output path: empty");
  }
  // Written through once every file is in place: (user's path, real path).
  std::vector<std::pair<std::string, std::string>> through;
  std::vector<std::string_view> through_text;
  std::vector<Staged> staged;
  staged.reserve(outputs.size());
  try {
    for (const auto& [out, text] : outputs) {
      if (!out.within.empty()) {
        staged.push_back(stage_owned(out, text));
        continue;
      }
      std::string real;
      if (!stage_users(out.name, text, &staged, &real)) {
        through.emplace_back(out.name, real);
        through_text.push_back(text);
      }
    }
  } catch (...) {
    for (Staged& s : staged) discard(s);
    throw;
  }
  {
    const PlacingOutputs placing;  // every target old or every one new, never a mix
    for (size_t i = 0; i < staged.size(); ++i) {
      try {
        commit(staged[i]);
        if (g_between_renames != nullptr) g_between_renames(i);
      } catch (...) {
        for (size_t j = i + 1; j < staged.size(); ++j) discard(staged[j]);
        throw;
      }
    }
  }
  for (size_t i = 0; i < through.size(); ++i) {
    const auto& [shown, real] = through[i];
    if (shown == "-") {
      const std::string_view text = through_text[i];
      const bool ok = std::fwrite(text.data(), 1, text.size(), stdout) == text.size() &&
                      std::fflush(stdout) == 0;
      if (!ok) fail("standard output", std::strerror(errno));
    } else {
      write_through(shown, real, through_text[i]);
    }
  }
}

void check_output_path(const OutputPath& out) {
  if (out.name.empty()) throw UsageError("output path: empty");
  if (!out.within.empty()) {
    UniqueFd folder(-1);
    const std::string leaf = open_parent(out, false, &folder);
    (void)owned_leaf_mode(out.shown(), folder.get(), leaf);
    return;
  }
  const std::string& path = out.name;
  if (path == "-") return;
  const std::string real = follow_links(path);
  fs::path dir = fs::path(real).parent_path();
  if (dir.empty()) dir = ".";
  // A replaced file's temporary is made in its folder: the folder must take
  // new files (a read-only file system or a folder the user may not write
  // says so here; root's permissions only the write itself meets).
  const auto writable = [&](const fs::path& p) {
    if (::faccessat(AT_FDCWD, p.c_str(), W_OK, AT_EACCESS) != 0) fail(path, std::strerror(errno));
  };
  struct stat st {};
  if (::stat(real.c_str(), &st) != 0) {
    if (errno != ENOENT) fail(path, std::strerror(errno));
    struct stat dst {};
    if (::stat(dir.c_str(), &dst) != 0) fail(path, std::strerror(errno));
    if (!S_ISDIR(dst.st_mode)) fail(path, std::strerror(ENOTDIR));
    writable(dir);
    return;
  }
  if (S_ISREG(st.st_mode)) {
    writable(dir);
    return;
  }
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
    writable(real);
    return;
  }
  if (S_ISDIR(st.st_mode)) fail(path, "is a directory");
  fail(path, "not a regular file, character device or FIFO");
}

void remove_output_file(const OutputPath& out) {
  PPB_CHECK(!out.within.empty(), "remove_output_file outside a folder pipebench fills");
  UniqueFd folder(-1);
  const std::string leaf = open_parent(out, false, &folder);
  if (folder.get() < 0) return;  // a folder on the way is missing: so is the file
  if (::unlinkat(folder.get(), leaf.c_str(), 0) != 0 && errno != ENOENT)
    fail(out.shown(), std::strerror(errno));
}

}  // namespace ppb
