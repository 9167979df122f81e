// Schedule files: JSON and text round trips for every schedule, and every
// kind of malformed file giving a one-line UsageError that names the file and
// the field or stage. Files are real files in a temporary folder.
#include "ppb/pipeline/schedule_io.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ppb/pipeline/schedule.hpp"
#include "ppb/pipeline/validator.hpp"

namespace ppb {
namespace {

namespace fs = std::filesystem;

class ScheduleFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ppb_schedule_io_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }

  // The message of the UsageError read_schedule_file throws ("" if none).
  static std::string read_error(const std::string& path) {
    try {
      read_schedule_file(path);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

std::vector<Schedule> samples() {
  std::vector<Schedule> out;
  for (const ScheduleInfo& info : schedule_list()) {
    ScheduleParams p;
    p.stages = 4;
    p.microbatches = 8;
    p.chunks = info.uses_chunks ? 2 : 1;
    p.batches = info.name == "pipedream" ? 2 : 1;
    p.inflight = 2;
    p.sync_warmup = 2;
    out.push_back(generate_schedule(info.name, p));
  }
  return out;
}

TEST(ScheduleJson, RoundTripsEverySchedule) {
  for (const Schedule& s : samples()) {
    const std::string text = schedule_to_json(s);
    const Schedule back = schedule_from_json(text, "mem.json");
    EXPECT_EQ(back.name, s.name);
    EXPECT_EQ(back.stages, s.stages);
    EXPECT_EQ(back.microbatches, s.microbatches);
    EXPECT_EQ(back.chunks, s.chunks);
    EXPECT_EQ(back.batches, s.batches);
    EXPECT_EQ(back.actions, s.actions) << s.name;
    EXPECT_EQ(schedule_to_json(back), text);
  }
}

TEST(ScheduleJson, DocumentShapeOfDesign) {
  ScheduleParams p;
  p.stages = 2;
  p.microbatches = 1;
  EXPECT_EQ(
      schedule_to_json(generate_schedule("sync-1f1b", p)),
      "{\"schema\":\"pipebench.schedule/1\",\"name\":\"sync-1f1b\",\"stages\":2,\"microbatches\":1,"
      "\"chunks\":1,\"batches\":1,\"actions\":[[{\"op\":\"F\",\"mb\":0,\"chunk\":0},{\"op\":"
      "\"SYNC\"},"
      "{\"op\":\"B\",\"mb\":0,\"chunk\":0},{\"op\":\"SYNC\"}],[{\"op\":\"F\",\"mb\":0,\"chunk\":0},"
      "{\"op\":\"SYNC\"},{\"op\":\"B\",\"mb\":0,\"chunk\":0},{\"op\":\"SYNC\"}]]}");
}

TEST(ScheduleText, RoundTripsEveryScheduleWithAndWithoutHeader) {
  for (const Schedule& s : samples()) {
    const std::string text = schedule_to_text(s);
    const Schedule back = schedule_from_text(text, "mem.txt");
    EXPECT_EQ(back.actions, s.actions) << s.name;
    EXPECT_EQ(back.name, s.name);
    EXPECT_EQ(back.batches, s.batches);
    EXPECT_EQ(schedule_to_text(back), text);
    // Without the header P, M and V are inferred from the lines.
    const std::string body = text.substr(text.find('\n') + 1);
    const Schedule inferred = schedule_from_text(body, "mem.txt");
    EXPECT_EQ(inferred.actions, s.actions) << s.name;
    EXPECT_EQ(inferred.stages, s.stages);
    EXPECT_EQ(inferred.chunks, s.chunks);
    EXPECT_EQ(inferred.total_microbatches(), s.total_microbatches());
  }
}

TEST(ScheduleText, FormatOfDesign) {
  ScheduleParams p;
  p.stages = 2;
  p.microbatches = 2;
  EXPECT_EQ(
      schedule_to_text(generate_schedule("1f1b", p)),
      "# 1f1b stages=2 microbatches=2 chunks=1 batches=1\ns0: F0 F1 B0 B1\ns1: F0 B0 F1 B1\n");
  p.chunks = 2;
  const std::string t = schedule_to_text(generate_schedule("interleaved-1f1b", p));
  EXPECT_NE(t.find("s1: F0.0 F1.0 F0.1 B0.1"), std::string::npos) << t;
  p.chunks = 1;
  p.microbatches = 1;
  EXPECT_NE(schedule_to_text(generate_schedule("sync-1f1b", p)).find("s0: F0 | B0 |\n"),
            std::string::npos);
}

TEST(ScheduleText, MalformedLinesNameSourceAndLine) {
  auto error = [](const std::string& text) {
    try {
      schedule_from_text(text, "plan.txt");
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(
      error("s0: F0 X1\n"),
      "plan.txt: line 1: action 'X1': expected F, B, I or W then a micro-batch (F3, B3.1), or |");
  EXPECT_EQ(error("s0: F0 B0\ns2: F0 B0\n"),
            "plan.txt: line 2: expected the line to start with 's1:', got 's2:'");
  EXPECT_EQ(error("# x stages=3\ns0: F0 B0\n"),
            "plan.txt: header says stages=3 but there are 1 stage lines");
  EXPECT_EQ(error(""), "plan.txt: no stage lines ('s0: F0 B0 ...')");
  EXPECT_NE(error("# x stages=1 microbatches=1\ns0: F3 B3\n").find("out of range"),
            std::string::npos);
  // Ids at the int limit are refused before any arithmetic on them.
  EXPECT_EQ(error("s0: F2147483647\n"),
            "plan.txt: line 1: action 'F2147483647': micro-batch and chunk must be < 16777216");
  EXPECT_EQ(error("s0: F0.2147483647\n"),
            "plan.txt: line 1: action 'F0.2147483647': micro-batch and chunk must be < 16777216");
}

TEST_F(ScheduleFiles, ValidFileReadsAndValidates) {
  ScheduleParams p;
  p.stages = 3;
  p.microbatches = 5;
  const Schedule s = generate_schedule("zb-h1", p);
  const Schedule back = read_schedule_file(write("zb.json", schedule_to_json(s)));
  EXPECT_EQ(back.actions, s.actions);
}

TEST_F(ScheduleFiles, MalformedFilesGiveOneLineErrorsNamingFileAndField) {
  const std::string ok_head =
      R"({"schema":"pipebench.schedule/1","name":"mine","stages":2,"microbatches":2,)";
  struct Case {
    std::string file;
    std::string text;
    std::string expected;  // the message after "<path>: "
  };
  const std::vector<Case> cases = {
      {"bad.json", "{\"schema\": ", "not valid JSON"},
      {"array.json", "[1,2]", "expected a JSON object at the top, got an array"},
      {"schema.json", R"({"schema":"pipebench.result/1"})",
       "field 'schema': expected \"pipebench.schedule/1\", got \"pipebench.result/1\""},
      {"nostages.json",
       R"({"schema":"pipebench.schedule/1","name":"x","microbatches":2,"actions":[]})",
       "field 'stages': missing"},
      {"type.json",
       R"({"schema":"pipebench.schedule/1","name":"x","stages":"2","microbatches":2,"actions":[]})",
       "field 'stages': expected an integer, got a string"},
      {"zero.json",
       R"({"schema":"pipebench.schedule/1","name":"x","stages":0,"microbatches":2,"actions":[]})",
       "field 'stages': 0 is out of range 1..16777216"},
      {"lists.json", ok_head + R"("actions":[[]]})",
       "field 'actions': expected 2 stage lists (stages = 2), got 1"},
      {"op.json", ok_head + R"("actions":[[{"op":"F","mb":0},{"op":"X","mb":0}],[]]})",
       "field 'actions[0][1].op': expected one of F,B,I,W,SYNC, got \"X\""},
      {"optype.json", ok_head + R"("actions":[[{"op":1,"mb":0}],[]]})",
       "field 'actions[0][0].op': expected one of F,B,I,W,SYNC, got a number"},
      {"nomb.json", ok_head + R"("actions":[[{"op":"F"}],[]]})",
       "field 'actions[0][0].mb': missing"},
      {"mbrange.json", ok_head + R"("actions":[[],[{"op":"F","mb":2}]]})",
       "field 'actions[1][0].mb': 2 is out of range 0..1"},
      {"chunk.json", ok_head + R"("actions":[[],[{"op":"F","mb":0,"chunk":1}]]})",
       "field 'actions[1][0].chunk': 1 is out of range 0..0"},
      {"nob.json",
       ok_head +
           R"("actions":[[{"op":"F","mb":0},{"op":"F","mb":1},{"op":"B","mb":0},{"op":"B","mb":1}],)" +
           R"([{"op":"F","mb":0},{"op":"B","mb":0},{"op":"F","mb":1}]]})",
       "stage 1: micro-batch 1 has no backward (B1, or I1 and W1)"},
      {"deadlock.json",
       ok_head +
           R"("actions":[[{"op":"F","mb":0},{"op":"B","mb":0},{"op":"F","mb":1},{"op":"B","mb":1}],)" +
           R"([{"op":"F","mb":1},{"op":"B","mb":1},{"op":"F","mb":0},{"op":"B","mb":0}]]})",
       "deadlock: stage 0 stuck at B0: waits for the input gradient of micro-batch 0 from stage 1 "
       "(B0), which is "
       "stuck at F1 before it"},
  };
  for (const Case& c : cases) {
    const std::string path = write(c.file, c.text);
    const std::string e = read_error(path);
    EXPECT_EQ(e.rfind(path + ": ", 0), 0u) << e;
    EXPECT_NE(e.find(c.expected), std::string::npos) << c.file << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_EQ(
      read_error((dir_ / "absent.json").string()),
      (dir_ / "absent.json").string() + ": cannot open schedule file: No such file or directory");
}

TEST_F(ScheduleFiles, DeadlockCarriesTheGrid) {
  const std::string path = write(
      "deadlock.json",
      R"({"schema":"pipebench.schedule/1","name":"mine","stages":2,"microbatches":2,"actions":[)"
      R"([{"op":"F","mb":0},{"op":"B","mb":0},{"op":"F","mb":1},{"op":"B","mb":1}],)"
      R"([{"op":"F","mb":1},{"op":"B","mb":1},{"op":"F","mb":0},{"op":"B","mb":0}]]})");
  try {
    read_schedule_file(path);
    FAIL() << "expected a ScheduleError";
  } catch (const ScheduleError& e) {
    EXPECT_EQ(e.grid(),
              "step       0   1   2   3\n"
              ">s0       F0 *B0  F1  B1\n"
              ">s1      *F1  B1  F0  B0\n"
              "(> stuck stage, * the action it waits at; steps 0..3 of 4)\n");
  }
}

}  // namespace
}  // namespace ppb
