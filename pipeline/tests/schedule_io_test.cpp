// Schedule files: JSON and text round trips for every schedule, and every
// kind of malformed file giving a one-line UsageError that names the file and
// the field or stage. Files are real files in a temporary folder.
#include "ppb/pipeline/schedule_io.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
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
    EXPECT_EQ(back.placement, s.placement) << s.name;
    EXPECT_EQ(schedule_to_json(back), text);
  }
}

TEST(ScheduleJson, CarriesTheVPlacementAndOverlappedPairs) {
  ScheduleParams p;
  p.stages = 2;
  p.microbatches = 4;
  const std::string doc = schedule_to_json(generate_schedule("dualpipe-v", p));
  EXPECT_NE(doc.find("\"placement\":[0,1,1,0]"), std::string::npos) << doc;
  EXPECT_NE(doc.find("\"overlap\":true"), std::string::npos) << doc;
  // Looping schedules leave it out.
  EXPECT_EQ(schedule_to_json(generate_schedule("1f1b", p)).find("placement"), std::string::npos);
  // A placement that does not hold every stage V times is named.
  std::string bad = doc;
  bad.replace(bad.find("[0,1,1,0]"), 9, "[0,1,1,1]");
  try {
    schedule_from_json(bad, "v.json");
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "v.json: field 'placement': stage 0 holds 1 virtual stages, expected 2 (one per "
              "chunk)");
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
    EXPECT_EQ(back.placement, s.placement) << s.name;
  }
}

TEST(ScheduleCsv, RoundTripsEveryScheduleWithoutBarriers) {
  int round_trips = 0;
  for (const Schedule& s : samples()) {
    const bool has_sync = std::any_of(s.actions.begin(), s.actions.end(), [](const auto& list) {
      return std::any_of(list.begin(), list.end(),
                         [](const Action& a) { return a.kind == ActionKind::kSync; });
    });
    if (has_sync) {
      EXPECT_THROW(schedule_to_csv(s), UsageError) << s.name;
      continue;
    }
    const Schedule back = schedule_from_csv(schedule_to_csv(s), "mem.csv");
    EXPECT_EQ(back.actions, s.actions) << s.name;
    EXPECT_EQ(back.placement, s.placement) << s.name;
    EXPECT_EQ(back.stages, s.stages);
    EXPECT_EQ(back.chunks, s.chunks);
    EXPECT_EQ(back.total_microbatches(), s.total_microbatches());
    ++round_trips;
  }
  EXPECT_GE(round_trips, 10);
}

TEST(ScheduleCsv, FormatOfPyTorch) {
  ScheduleParams p;
  p.stages = 2;
  p.microbatches = 2;
  EXPECT_EQ(schedule_to_csv(generate_schedule("1f1b", p)), "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  p.chunks = 2;
  // Looping: rank 1 holds stages 1 and 3; cells name the stage, not the chunk.
  const std::string t = schedule_to_csv(generate_schedule("interleaved-1f1b", p));
  EXPECT_EQ(t.substr(t.find('\n') + 1, 12), "1F0,1F1,3F0,");
}

TEST_F(ScheduleFiles, CsvBadCellsAreNamedByRowAndColumn) {
  auto error_of = [&](const std::string& text) { return read_error(write("s.csv", text)); };
  const std::string bad = error_of("0F0,0B0\n1F0, 1Q0 ,1B0\n");
  EXPECT_EQ(bad.rfind(dir_.string(), 0), 0u) << bad;
  EXPECT_NE(bad.find("s.csv: row 2 (rank 1), column 2: cell '1Q0': expected <stage><op>"),
            std::string::npos)
      << bad;
  EXPECT_NE(error_of("0F0,0RESHARD,0B0\n")
                .find("row 1 (rank 0), column 2: cell '0RESHARD': "
                      "RESHARD is not supported"),
            std::string::npos);
  EXPECT_NE(error_of("0F0,0REDUCE_GRAD0\n").find("cell '0REDUCE_GRAD0': REDUCE_GRAD is not"),
            std::string::npos);
  EXPECT_NE(error_of("(0F0;0W0)OVERLAP_F_B\n").find("OVERLAP_F_B holds an F then a B or I"),
            std::string::npos);
  EXPECT_NE(error_of("(0F0;0B0)OVERLAP\n").find("a pair of actions must be (F;B)OVERLAP_F_B"),
            std::string::npos);
  EXPECT_NE(error_of("0F0,0B0\n\n1F0,1B0\n").find("row 2 is empty"), std::string::npos);
  EXPECT_NE(error_of("0F0,1F0,1B0,0B0\n0F1,0B1\n").find("stage 0 appears in row 1 and row 2"),
            std::string::npos);
  EXPECT_NE(error_of("0F0,2F0,2B0,0B0\n").find("stage 1 has no actions"), std::string::npos);
  EXPECT_NE(error_of("0F0,0F99999999999,0B0\n").find("column 2"), std::string::npos);
  // A deadlock in a CSV is the validator's, naming the file.
  EXPECT_NE(error_of("0F0,0B0\n1B0,1F0\n").find("s.csv: "), std::string::npos);
}

// What spreadsheets and editors leave in a CSV is read as the rows: a UTF-8
// byte-order mark at the start, blank lines at the end, FILE.CSV in upper
// case; the bytes a message quotes are escaped, and a forward overlapped
// with its own backward is refused.
TEST_F(ScheduleFiles, CsvAsEditorsWriteIt) {
  const Schedule want = read_schedule_file(write("plain.csv", "0F0,0F1,0B0,0B1\n"));
  EXPECT_EQ(read_schedule_file(write("bom.csv",
                                     "\xEF\xBB\xBF"
                                     "0F0,0F1,0B0,0B1\n"))
                .actions,
            want.actions);
  EXPECT_EQ(read_schedule_file(write("tail.csv", "0F0,0F1,0B0,0B1\n\n\n\r\n \n")).actions,
            want.actions);
  EXPECT_EQ(read_schedule_file(write("UPPER.CSV", "0F0,0F1,0B0,0B1\n")).actions, want.actions);
  auto error_of = [&](const std::string& name, const std::string& text) {
    return read_error(write(name, text));
  };
  EXPECT_NE(error_of("bad.Csv", "0F0,0Q1\n").find("row 1 (rank 0), column 2: cell '0Q1'"),
            std::string::npos);
  const std::string binary = error_of("nul.csv", std::string("0F0,0\0\xff\x1b[2JB0\n", 14));
  EXPECT_NE(binary.find("column 2: cell '0\\x00\\xff\\x1b[2JB0'"), std::string::npos) << binary;
  EXPECT_NE(error_of("mid.csv",
                     "0F0,\xEF\xBB\xBF"
                     "0B0\n")
                .find("cell '\\ufeff0B0'"),
            std::string::npos);
  EXPECT_NE(error_of("self.csv", "(0F0;0B0)OVERLAP_F_B\n").find("overlapped with its own backward"),
            std::string::npos);
}

TEST_F(ScheduleFiles, CsvCommunicationIsCheckedAgainstTheMessagePlan) {
  // 1f1b on 2 ranks with PyTorch's lowering: send after the producer,
  // receive before the consumer.
  const std::string good =
      "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n";
  const Schedule s = read_schedule_file(write("good.csv", good));
  EXPECT_EQ(s.actions[1], (std::vector<Action>{F(0), B(0), F(1), B(1)}));
  auto error_of = [&](const std::string& text) { return read_error(write("c.csv", text)); };
  // The receive of mb 1 placed after the F that consumes it.
  std::string late = good;
  late.replace(late.find("1RECV_F1,1F1"), 12, "1F1,1RECV_F1");
  EXPECT_NE(error_of(late).find("row 2 (rank 1), column 6: cell '1RECV_F1': a receive after the "
                                "action that consumes it (F1.0)"),
            std::string::npos)
      << error_of(late);
  // A send of a stage this rank does not hold; a message missing.
  EXPECT_NE(error_of("0F0,1SEND_F0,0B0\n1F0,1B0\n").find("stage 1 runs on rank 1"),
            std::string::npos);
  std::string missing = good;
  missing.replace(missing.find(",1SEND_B1"), 9, "");
  EXPECT_NE(error_of(missing).find("the file gives communication but not 1SEND_B1"),
            std::string::npos)
      << error_of(missing);
  // A message inside one rank (the turn of a V) is a local hand-over.
  EXPECT_NE(error_of("0F0,0SEND_F0,1F0,1B0,0B0\n").find("a local hand-over"), std::string::npos)
      << error_of("0F0,0SEND_F0,1F0,1B0,0B0\n");
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
