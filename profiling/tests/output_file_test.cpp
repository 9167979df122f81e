// write_output_file: regular files replaced atomically (mode kept, no
// temporary left), links followed, devices and FIFOs written through and
// never replaced, directories refused, failures named with the path; inside
// a folder pipebench fills (OutputPath{folder, name}) links are refused,
// never written through.
#include "ppb/profiling/output_file.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "ppb_output_file_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  fs::path operator/(const std::string& name) const { return path_ / name; }
  int entries() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(path_)) {
      (void)e;
      ++n;
    }
    return n;
  }

 private:
  fs::path path_;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string error_of(const OutputPath& path, std::string_view text) {
  try {
    write_output_file(path, text);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(OutputFile, NewAndRegularFilesAreReplacedWholeKeepingTheMode) {
  TempDir dir;
  const fs::path p = dir / "out.csv";
  write_output_file(p.string(), "a much longer first version\n");
  EXPECT_EQ(slurp(p), "a much longer first version\n");
  ::chmod(p.c_str(), 0600);
  write_output_file(p.string(), "second\n");
  EXPECT_EQ(slurp(p), "second\n");
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(dir.entries(), 1) << "a temporary file was left behind";
}

// Several outputs are written all or none: one that cannot be written (its
// folder is a file) leaves the others as they were, with no temporary file;
// when all can, all are replaced, the FIFO-like ones ("-") last.
TEST(OutputFile, SeveralOutputsAreWrittenAllOrNone) {
  TempDir dir;
  const fs::path md = dir / "report.md";
  const fs::path csv = dir / "report.csv";
  write_output_file(md.string(), "last night's\n");
  std::ofstream(dir / "plain") << "a file, not a folder";
  const std::string bad = (dir / "plain" / "x.csv").string();
  try {
    write_output_files({{md.string(), "tonight's\n"}, {csv.string(), "a,b\n"}, {bad, "c\n"}});
    ADD_FAILURE() << "a folder that is a file was written into";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), bad + ": cannot write: Not a directory");
  }
  EXPECT_EQ(slurp(md), "last night's\n");
  EXPECT_FALSE(fs::exists(csv));
  EXPECT_EQ(dir.entries(), 2) << "a temporary file was left behind";

  testing::internal::CaptureStdout();
  write_output_files({{"-", "to stdout\n"}, {md.string(), "tonight's\n"}, {csv.string(), "a,b\n"}});
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "to stdout\n");
  EXPECT_EQ(slurp(md), "tonight's\n");
  EXPECT_EQ(slurp(csv), "a,b\n");
  EXPECT_EQ(dir.entries(), 3);
}

// A stop signal in the middle of the renames waits for the last of them:
// every target old or every one new, never a mix, and no temporary name
// left. Sent to the writing thread, it is blocked there and lands once all
// are in place; handled on another thread (as mpirun's SIGTERM may be in a
// rank), the handler holds it (hold_stop_signal) and the writer raises it
// again when done.
namespace stop {
std::atomic<int> held{0};
std::atomic<int> ended{0};  // the handler ran without holding it
std::atomic<bool> all_new{false};
std::atomic<bool> to_other_thread{false};
pthread_t other{};
std::vector<fs::path> files;

extern "C" void on_term(int sig) {
  if (hold_stop_signal(sig)) {
    held.fetch_add(1);
    return;
  }
  // Runs on the writing thread at a known point (the test's own check).
  bool fresh = true;
  for (const fs::path& f : files) fresh = fresh && slurp(f) == "new\n";
  all_new.store(fresh);
  ended.fetch_add(1);
}

void after_first(size_t placed) {
  if (placed != 0) return;
  if (!to_other_thread.load()) {
    ::raise(SIGTERM);  // this thread: blocked until the renames are done
    EXPECT_EQ(ended.load(), 0) << "the signal landed before the renames were done";
    return;
  }
  // The handler holds it there (the thread is not ended): what the test checks.
  ::pthread_kill(other, SIGTERM);  // NOLINT(bugprone-bad-signal-to-kill-thread)
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (held.load() == 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  EXPECT_EQ(held.load(), 1) << "the other thread's handler did not hold the signal";
  EXPECT_EQ(ended.load(), 0);
}
}  // namespace stop

TEST(OutputFile, AStopSignalDuringTheRenamesWaitsForTheLastOne) {
  struct sigaction act {
  }, before{};
  act.sa_handler = stop::on_term;
  sigemptyset(&act.sa_mask);
  ASSERT_EQ(::sigaction(SIGTERM, &act, &before), 0);
  EXPECT_FALSE(hold_stop_signal(SIGTERM)) << "nothing is being put in place";
  std::atomic<bool> done{false};
  std::thread other([&] {  // SIGTERM unblocked here: created before any write
    while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  stop::other = other.native_handle();
  for (const bool to_other : {false, true}) {
    SCOPED_TRACE(to_other ? "handled on another thread" : "sent to the writing thread");
    TempDir dir;
    stop::files = {dir / "report.md", dir / "report.csv", dir / "report.junit.xml"};
    // Replaced files (temporary names for the rename) beside a new one.
    write_output_files({{stop::files[0].string(), "old\n"}, {stop::files[1].string(), "old\n"}});
    stop::held = 0;
    stop::ended = 0;
    stop::all_new = false;
    stop::to_other_thread = to_other;
    std::vector<std::pair<OutputPath, std::string_view>> outputs;
    for (const fs::path& f : stop::files) outputs.emplace_back(f.string(), "new\n");
    set_rename_hook_for_tests(stop::after_first);
    write_output_files(outputs);
    set_rename_hook_for_tests(nullptr);
    EXPECT_EQ(stop::held.load(), to_other ? 1 : 0);
    EXPECT_EQ(stop::ended.load(), 1) << "the signal was lost";
    EXPECT_TRUE(stop::all_new.load()) << "it landed while an old target was still in place";
    EXPECT_EQ(dir.entries(), 3) << "a temporary file was left behind";
  }
  done = true;
  other.join();
  ASSERT_EQ(::sigaction(SIGTERM, &before, nullptr), 0);
}

// --resume's sweep of what ended writes left: a temporary file whose
// writer is gone and which is older than the limit is removed, in
// subfolders too (traces); one whose writer runs, a fresh one, a link and
// anything not named as the writer names them stay.
TEST(OutputFile, StaleTemporaryFilesOfEndedWritersAreRemoved) {
  TempDir dir;
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_GT(gone, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(gone, &status, 0), gone);  // reaped: no process has it now
  const std::string dead = std::to_string(gone);
  const std::string alive = std::to_string(::getpid());
  fs::create_directories(dir / "a.trace");
  const auto old = fs::file_time_type::clock::now() - std::chrono::minutes(5);
  auto file = [&](const std::string& name, bool aged) {
    std::ofstream(dir / name) << "part of a result";
    if (aged) fs::last_write_time(dir / name, old);
  };
  file(".a.json.tmp." + dead + ".0", true);              // stale
  file("a.trace/.rank0.json.tmp." + dead + ".1", true);  // stale, in a trace folder
  file(".b.json.tmp." + alive + ".2", true);             // its writer runs
  file(".c.json.tmp." + dead + ".3", false);             // fresh
  file(".d.json.tmp.x.4", true);                         // not the writer's name
  file("e.json", true);                                  // a result
  fs::create_symlink(dir / "e.json", dir / (".f.json.tmp." + dead + ".5"));
  std::vector<std::string> removed = remove_stale_temporaries((dir / "").string(), 60);
  std::sort(removed.begin(), removed.end());
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(fs::path(removed[0]).filename(), ".a.json.tmp." + dead + ".0");
  EXPECT_EQ(fs::path(removed[1]).filename(), ".rank0.json.tmp." + dead + ".1");
  EXPECT_FALSE(fs::exists(dir / (".a.json.tmp." + dead + ".0")));
  EXPECT_FALSE(fs::exists(dir / ("a.trace/.rank0.json.tmp." + dead + ".1")));
  for (const std::string& kept : {".b.json.tmp." + alive + ".2", ".c.json.tmp." + dead + ".3",
                                  std::string(".d.json.tmp.x.4"), std::string("e.json")})
    EXPECT_TRUE(fs::exists(dir / kept)) << kept;
  EXPECT_TRUE(fs::is_symlink(dir / (".f.json.tmp." + dead + ".5")));
}

TEST(OutputFile, SymlinksAreFollowedNotReplaced) {
  TempDir dir;
  const fs::path target = dir / "target.json";
  write_output_file(target.string(), "old");
  fs::create_symlink("target.json", dir / "link.json");  // relative target
  write_output_file((dir / "link.json").string(), "new");
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  EXPECT_EQ(slurp(target), "new");

  // A dangling link creates the file it points at.
  fs::create_symlink("made.json", dir / "dangling.json");
  write_output_file((dir / "dangling.json").string(), "made");
  EXPECT_TRUE(fs::is_symlink(dir / "dangling.json"));
  EXPECT_EQ(slurp(dir / "made.json"), "made");

  // A loop is refused by name.
  fs::create_symlink("loop_b", dir / "loop_a");
  fs::create_symlink("loop_a", dir / "loop_b");
  const std::string loop = (dir / "loop_a").string();
  EXPECT_EQ(error_of(loop, "x"), loop + ": cannot write: too many levels of symbolic links");
}

TEST(OutputFile, CharacterDevicesAreWrittenThroughAndStayDevices) {
  write_output_file("/dev/null", "discarded");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  // /dev/full accepts the open and fails the write: the path and errno name it.
  if (fs::exists("/dev/full")) {
    EXPECT_EQ(error_of("/dev/full", "x"), "/dev/full: cannot write: No space left on device");
    EXPECT_TRUE(fs::is_character_file("/dev/full"));
  }
}

TEST(OutputFile, FifosAreWrittenThroughAndStayFifos) {
  TempDir dir;
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = slurp(fifo); });
  write_output_file(fifo.string(), "through the pipe");
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST(OutputFile, DashIsStandardOutput) {
  testing::internal::CaptureStdout();
  write_output_file("-", "to stdout\n");
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "to stdout\n");
}

TEST(OutputFile, DirectoriesMissingFoldersAndEmptyPathsAreRefusedByName) {
  TempDir dir;
  fs::create_directories(dir / "adir" / "inside");
  const std::string d = (dir / "adir").string();
  EXPECT_EQ(error_of(d, "x"), d + ": cannot write: is a directory");
  EXPECT_TRUE(fs::is_directory(dir / "adir" / "inside"));
  const std::string missing = (dir / "no_such_dir" / "r.json").string();
  EXPECT_EQ(error_of(missing, "x"), missing + ": cannot write: No such file or directory");
  EXPECT_EQ(error_of("", "x"), "output path: empty");
  EXPECT_EQ(dir.entries(), 1) << "a temporary file was left behind";
}

TEST(OutputFile, InsideAFolderPipebenchFillsLinksAreRefusedNotFollowed) {
  TempDir dir;
  TempDir elsewhere;
  const std::string out = (dir / "out").string();
  fs::create_directories(out);
  std::ofstream(elsewhere / "target.json") << "keep";
  fs::create_symlink(elsewhere / "target.json", dir / "out" / "r.json");
  const std::string why =
      ": cannot write: a symbolic link inside the output folder (pipebench writes only files it "
      "creates there; remove the link)";
  EXPECT_EQ(error_of(OutputPath{out, "r.json"}, "x"), out + "/r.json" + why);
  // A folder on the way that is a link is named itself, and nothing is
  // written below it.
  fs::create_directories(elsewhere / "t");
  fs::create_symlink(elsewhere / "t", dir / "out" / "run.trace");
  EXPECT_EQ(error_of(OutputPath{out, "run.trace/rank0.json"}, "x"), out + "/run.trace" + why);
  fs::create_symlink("loop", dir / "out" / "loop");
  EXPECT_EQ(error_of(OutputPath{out, "loop"}, "x"), out + "/loop" + why);
  EXPECT_THROW(check_output_path(OutputPath{out, "r.json"}), UsageError);
  EXPECT_EQ(slurp(elsewhere / "target.json"), "keep");
  EXPECT_TRUE(fs::is_empty(elsewhere / "t"));
  // A FIFO where a result goes would block the writer: refused too.
  ASSERT_EQ(::mkfifo((dir / "out" / "f.json").c_str(), 0644), 0);
  EXPECT_EQ(error_of(OutputPath{out, "f.json"}, "x"),
            out + "/f.json: cannot write: not a regular file (pipebench writes only those here)");
  EXPECT_EQ(error_of(OutputPath{out, "../escape.json"}, "x"),
            out + "/../escape.json: cannot write: not a name inside the folder");
  // The folder itself is the user's: a link to it is followed; new folders
  // on the way are made; a regular file is replaced.
  fs::create_symlink(dir / "out", dir / "out_link");
  write_output_file(OutputPath{(dir / "out_link").string(), "new.trace/rank1.json"}, "one");
  write_output_file(OutputPath{out, "new.trace/rank1.json"}, "two");
  EXPECT_EQ(slurp(dir / "out" / "new.trace" / "rank1.json"), "two");
  EXPECT_NO_THROW(check_output_path(OutputPath{out, "new.trace/rank1.json"}));
  EXPECT_NO_THROW(check_output_path(OutputPath{out, "missing.trace/rank0.json"}));
}

// remove_output_file: a file it wrote goes; a missing one or a missing
// folder on the way is nothing to do; a link leaf goes itself, never what
// it leads to; a link on the way and a folder at the name are named.
TEST(OutputFile, RemovingAFileInsideAFolderPipebenchFillsNeverFollowsALink) {
  TempDir dir;
  TempDir elsewhere;
  const std::string out = (dir / "out").string();
  fs::create_directories(out);
  write_output_file(OutputPath{out, "r.json"}, "old");
  remove_output_file(OutputPath{out, "r.json"});
  EXPECT_FALSE(fs::exists(dir / "out" / "r.json"));
  EXPECT_NO_THROW(remove_output_file(OutputPath{out, "r.json"}));
  EXPECT_NO_THROW(remove_output_file(OutputPath{out, "missing.trace/rank0.json"}));
  std::ofstream(elsewhere / "target.json") << "keep";
  fs::create_symlink(elsewhere / "target.json", dir / "out" / "l.json");
  remove_output_file(OutputPath{out, "l.json"});
  EXPECT_FALSE(fs::is_symlink(dir / "out" / "l.json"));
  EXPECT_EQ(slurp(elsewhere / "target.json"), "keep");
  fs::create_directories(elsewhere / "t");
  std::ofstream(elsewhere / "t" / "rank0.json") << "keep";
  fs::create_symlink(elsewhere / "t", dir / "out" / "run.trace");
  EXPECT_THROW(remove_output_file(OutputPath{out, "run.trace/rank0.json"}), UsageError);
  EXPECT_EQ(slurp(elsewhere / "t" / "rank0.json"), "keep");
  fs::create_directories(dir / "out" / "d.json");
  EXPECT_THROW(remove_output_file(OutputPath{out, "d.json"}), UsageError);
  EXPECT_TRUE(fs::is_directory(dir / "out" / "d.json"));
}

}  // namespace
}  // namespace ppb
