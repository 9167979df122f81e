// The result schema: every field survives a round trip through a real file;
// every missing required field and every wrong type is named in the error;
// writes are atomic (no temporary file left, old file intact on failure).
#include "ppb/pipeline/result.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

Result full_result() {
  Result r;
  r.status = ResultStatus::kOk;
  r.config = {.schedule = "1f1b",
              .partition = "balanced",
              .stages = 2,
              .microbatches = 4,
              .micro_batch_size = 2,
              .inflight = 2,
              .chunks = 1,
              .model = "gpt-tiny",
              .backend = "cpu",
              .transport = "mpi",
              .message_path = "staged",
              .iters = 3,
              .warmup = 1,
              .time_scale = 0.5,
              .memory_budget = int64_t{1} << 30,
              .seed = 42,
              .sync_warmup = 0,
              .memory_guard = 0.85,
              .batches = 1,
              .min_time = 0,
              .plant = "",
              .device = "h100",
              .max_iters = 40,
              .profile = "cputime",
              .check = true,
              .dtype = "fp32",
              .vocab_padding = VocabPadding{.divisor = 128, .vocab = 512, .padded = 512},
              .attention = "",
              .attention_reason = "",
              .data_parallel = 1,
              .rank_order = "",
              .unit_ranges = "",
              .cuda_graphs = "on"};
  ResultMetrics& m = r.metrics.emplace();
  m.samples_per_second = 812.25;
  m.step_time_seconds = {
      .median = 0.0101, .min = 0.0099, .max = 0.0123, .samples = {0.0123, 0.0101, 0.0099}};
  m.bubble_ratio = {.measured = 0.2, .theoretical = 0.2, .per_stage = {0.19, 0.21}, .samples = {}};
  m.bubble_overhead = {
      .measured = 0.25, .theoretical = 0.25, .per_stage = {0.2345, 0.2655}, .samples = {}};
  m.peak_memory_bytes.per_stage = {1000, 900};
  m.peak_memory_bytes.activations_per_stage = {400, 200};
  m.peak_memory_bytes.device_per_stage = {};
  m.peak_memory_bytes.by_category = {{400, 100, 100, 100, 0, 300, 0},
                                     {200, 100, 100, 100, 0, 400, 0}};
  m.peak_memory_bytes.peak_rss_per_stage = {50'000'000, 49'000'000};
  TheoryFigures& t = m.theory.emplace();
  t.step_time_seconds = 0.0098;
  t.peak_inflight_per_stage = {2, 1};
  t.activation_bytes_per_microbatch = {200, 200};
  t.peak_activation_bytes_per_stage = {400, 200};
  t.action_seconds = {
      {.fwd = 0.001, .bwd = 0.002, .bwd_input = std::nan(""), .bwd_weight = std::nan("")},
      {.fwd = 0.001, .bwd = 0.002, .bwd_input = std::nan(""), .bwd_weight = std::nan("")}};
  t.timeline = {{{ActionKind::kForward, 0, 0, 0.0, 0.001}},
                {{ActionKind::kForward, 0, 0, 0.001, 0.002}}};
  t.links = {{.path = "host",
              .latency_seconds = 2e-5,
              .bandwidth_bytes_per_second = std::nan(""),
              .messages = 4,
              .sizes = {200}},
             {.path = "network",
              .latency_seconds = 1e-4,
              .bandwidth_bytes_per_second = 2.5e7,
              .messages = 6,
              .sizes = {200, 800}}};
  m.check = CheckFigures{.passed = true,
                         .max_rel_error = 3.5e-6,
                         .loss = 6.25,
                         .method = "reference",
                         .update_rel_error = 0.0,
                         .steps = 2};
  m.memory_guard = MemoryGuardFigures{.actions = 3, .min_inflight = 1};
  m.cuda_graphs = CudaGraphFigures{.captured = 2,
                                   .replayed = 18,
                                   .rebuilt = 1,
                                   .eager = 40,
                                   .eager_reason = "--cuda-graphs off"};
  m.collectors["cputime"] = {
      .step = {{"cpu_seconds", {0.0101, 0.0093}}, {"involuntary_switches", {3, 0}}},
      .action = {{"cpu_seconds", {{0.001, std::nan("")}, {0.001, 0.0009, 0.0011}}}}};
  r.timeline = {
      {{ActionKind::kForward, 0, 0, 0.0, 0.001}, {ActionKind::kBackward, 0, 0, 0.004, 0.006}},
      {{ActionKind::kForward, 0, 0, 0.0011, 0.0021},
       {ActionKind::kBackwardInput, 0, 0, 0.0021, 0.0031},
       {ActionKind::kBackwardWeight, 0, 0, 0.0031, 0.0041}}};
  r.environment = {.hosts = {"node1"},
                   .rank_hosts = {"node1", "node1"},
                   .ranks = 2,
                   .mpi = "Open MPI 4.1.4",
                   .cuda = "",
                   .gpus = {},
                   .driver = "",
                   .nccl = "",
                   .cudnn = "",
                   .git = "abc1234",
                   .date = "2026-11-29T07:00:00Z",
                   .compiler = "GCC 12.2.0",
                   .build_type = "RelWithDebInfo",
                   .hostname = "node1",
                   .cpu = "AMD EPYC",
                   .cores = 0,
                   .oversubscribed = false};
  return r;
}

// NaN != NaN, so compare through the JSON text (null both sides) and the rest
// through operator==.
void expect_same(const Result& a, const Result& b) {
  EXPECT_EQ(json::serialize(result_to_json(a)), json::serialize(result_to_json(b)));
  EXPECT_EQ(a.config, b.config);
  EXPECT_EQ(a.timeline, b.timeline);
  EXPECT_EQ(a.environment, b.environment);
  ASSERT_TRUE(b.metrics.has_value());
  EXPECT_EQ(a.metrics->step_time_seconds, b.metrics->step_time_seconds);
  EXPECT_EQ(a.metrics->peak_memory_bytes, b.metrics->peak_memory_bytes);
  EXPECT_EQ(a.metrics->check, b.metrics->check);
  EXPECT_EQ(a.metrics->memory_guard, b.metrics->memory_guard);
  EXPECT_EQ(a.metrics->collectors.size(), b.metrics->collectors.size());
}

class TempDir {
 public:
  TempDir() {
    path_ =
        fs::temp_directory_path() /
        ("ppb_result_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string error_of(const json::value& doc) {
  try {
    (void)result_from_json(doc, "r.json");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

// Navigates "a.b[2].c" to the parent object/array and the last key.
json::value* find_path(json::value& root, const std::string& path) {
  json::value* cur = &root;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '.') ++i;
    if (path[i] == '[') {
      const size_t close = path.find(']', i);
      cur = &cur->as_array().at(std::stoul(path.substr(i + 1, close - i - 1)));
      i = close + 1;
      continue;
    }
    const size_t end = path.find_first_of(".[", i);
    const std::string key = path.substr(i, end == std::string::npos ? std::string::npos : end - i);
    cur = &cur->as_object().at(key);
    i = end == std::string::npos ? path.size() : end;
  }
  return cur;
}

void erase_path(json::value& root, const std::string& path) {
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos) {
    root.as_object().erase(path);
    return;
  }
  find_path(root, path.substr(0, dot))->as_object().erase(path.substr(dot + 1));
}

const char* kRequired[] = {
    "schema",
    "status",
    "config",
    "config.schedule",
    "config.partition",
    "config.stages",
    "config.microbatches",
    "config.micro_batch_size",
    "config.inflight",
    "config.chunks",
    "config.model",
    "config.backend",
    "config.transport",
    "config.iters",
    "config.warmup",
    "metrics",
    "metrics.samples_per_second",
    "metrics.step_time_seconds",
    "metrics.step_time_seconds.median",
    "metrics.step_time_seconds.min",
    "metrics.step_time_seconds.max",
    "metrics.step_time_seconds.samples",
    "metrics.bubble_ratio",
    "metrics.bubble_ratio.measured",
    "metrics.bubble_ratio.theoretical",
    "metrics.bubble_ratio.per_stage",
    "metrics.bubble_overhead",
    "metrics.bubble_overhead.measured",
    "metrics.bubble_overhead.theoretical",
    "metrics.bubble_overhead.per_stage",
    "metrics.peak_memory_bytes",
    "metrics.peak_memory_bytes.per_stage",
    "metrics.peak_memory_bytes.activations_per_stage",
    "metrics.theory.step_time_seconds",
    "metrics.check.passed",
    "metrics.check.max_rel_error",
    "metrics.memory_guard.actions",
    "metrics.memory_guard.min_inflight",
    "timeline",
    "timeline[0][1].op",
    "timeline[0][1].mb",
    "timeline[0][1].chunk",
    "timeline[0][1].start",
    "timeline[0][1].end",
    "metrics.theory.timeline[1][0].end",
    "environment",
    "environment.hosts",
    "environment.ranks",
    "environment.mpi",
    "environment.cuda",
    "environment.gpus",
    "environment.driver",
    "environment.git",
    "environment.date",
};

TEST(ResultSchema, RoundTripThroughFile) {
  TempDir dir;
  const Result r = full_result();
  const std::string path = (dir.path() / "a.json").string();
  write_result_file(path, r);
  const Result back = read_result_file(path);
  expect_same(r, back);
  EXPECT_TRUE(std::isnan(back.metrics->theory->action_seconds[0].bwd_input));
  EXPECT_DOUBLE_EQ(back.metrics->samples_per_second, 812.25);
  EXPECT_EQ(back.metrics->peak_memory_bytes
                .by_category[1][static_cast<size_t>(MemCategory::kCommBuffers)],
            400);
}

// What the writer made of a file keeps every key the file holds, with its
// value and in the file's order (keys the file lacks are optional ones the
// writer adds with their defaults).
void expect_keeps(const json::value& file, const json::value& written, const std::string& path) {
  if (file.is_number() && written.is_number()) {
    EXPECT_EQ(file.to_number<double>(), written.to_number<double>()) << path;
    return;
  }
  ASSERT_EQ(file.kind(), written.kind()) << path;
  if (file.is_array()) {
    ASSERT_EQ(file.as_array().size(), written.as_array().size()) << path;
    for (size_t i = 0; i < file.as_array().size(); ++i) {
      expect_keeps(file.as_array()[i], written.as_array()[i], path + "[" + std::to_string(i) + "]");
    }
    return;
  }
  if (!file.is_object()) {
    EXPECT_EQ(file, written) << path;
    return;
  }
  const json::object& w = written.as_object();
  auto at = w.begin();
  for (const auto& kv : file.as_object()) {
    const std::string key = path + "." + std::string(kv.key());
    const auto found =
        std::find_if(at, w.end(), [&kv](const auto& x) { return x.key() == kv.key(); });
    ASSERT_NE(found, w.end()) << key
                              << ": missing, or written before the key the file has before it";
    expect_keeps(kv.value(), found->value(), key);
    at = std::next(found);
  }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ResultSchema, RealFilesRoundTripInTheirOrder) {
  // A file of a cpu run, and two of the cuda backend on an H200.
  int files = 0;
  for (const char* file : {"bench/tests/data/result_ok.json",
                           "reports/tests/data/h200/sweep-P2_1f1b__layer__P2_M4.json",
                           "reports/tests/data/h200/bubble-P2_gpipe__layer__P2_M4.json"}) {
    const std::string path = std::string(PPB_SOURCE_DIR) + "/" + file;
    SCOPED_TRACE(path);
    ++files;
    const json::value doc = json::parse(read_text(path));
    const Result r = result_from_json(doc, path);
    const json::value written = result_to_json(r);
    expect_keeps(doc, written, "");
    // What the writer wrote reads back to the same document, and writes
    // again byte for byte.
    TempDir dir;
    const std::string again = (dir.path() / "again.json").string();
    write_result_file(again, r);
    EXPECT_EQ(result_to_json(read_result_file(again)), written);
    const std::string text = read_text(again);
    write_result_file(again, read_result_file(again));
    EXPECT_EQ(read_text(again), text);
  }
  EXPECT_EQ(files, 3);
}

TEST(ResultSchema, WrittenFilesReadAndWriteBackByteForByte) {
  // Two H200 results as the writer writes them (tests/data/README.md): a
  // data-parallel run (all-reduce figures, timelines) and one with CUPTI
  // (collectors, device figures). Reading and writing each gives the file
  // back byte for byte: every key, its order, every number's text.
  int files = 0;
  for (const char* file :
       {"h200_dp-1f1b__layer__P2_D2_M4.json", "h200_bubble-1f1b__layer__P2_M4.json"}) {
    const std::string path = std::string(PPB_SOURCE_DIR) + "/pipeline/tests/data/" + file;
    SCOPED_TRACE(path);
    ++files;
    const std::string text = read_text(path);
    ASSERT_FALSE(text.empty());
    TempDir dir;
    const std::string again = (dir.path() / "again.json").string();
    write_result_file(again, read_result_file(path));
    EXPECT_EQ(read_text(again), text);
  }
  EXPECT_EQ(files, 2);
}

TEST(ResultSchema, DocumentShapeFollowsDesign) {
  const json::value doc = result_to_json(full_result());
  EXPECT_EQ(doc.at("schema").as_string(), "pipebench.result/1");
  EXPECT_EQ(doc.at("status").as_string(), "ok");
  EXPECT_EQ(doc.at("timeline").at(1).at(2).at("op").as_string(), "W");
  EXPECT_EQ(doc.at("metrics")
                .at("peak_memory_bytes")
                .at("by_category")
                .at(0)
                .at("optimizer_state")
                .as_int64(),
            100);
  EXPECT_TRUE(doc.at("metrics").at("theory").at("action_seconds").at(0).at("I").is_null());
}

TEST(ResultSchema, NonOkResultNeedsErrorButNotMetrics) {
  Result r = full_result();
  r.status = ResultStatus::kInvalid;
  r.error = "interleaved-1f1b: M=3 is not a multiple of P=2";
  r.metrics.reset();
  r.timeline.clear();
  json::value doc = result_to_json(r);
  const Result back = result_from_json(doc, "x");
  EXPECT_EQ(back.status, ResultStatus::kInvalid);
  EXPECT_EQ(back.error, r.error);
  EXPECT_FALSE(back.metrics.has_value());
  doc.as_object().erase("error");
  EXPECT_EQ(error_of(doc), "r.json: field 'error': missing");
}

TEST(ResultSchema, EveryMissingRequiredFieldIsNamed) {
  for (const char* path : kRequired) {
    json::value doc = result_to_json(full_result());
    erase_path(doc, path);
    EXPECT_EQ(error_of(doc), std::string("r.json: field '") + path + "': missing") << path;
  }
}

TEST(ResultSchema, EveryWrongTypeIsNamed) {
  for (const char* path : kRequired) {
    json::value doc = result_to_json(full_result());
    json::value* v = find_path(doc, path);
    const bool was_string = v->is_string();
    *v = was_string ? json::value(17) : json::value("seventeen");
    const std::string err = error_of(doc);
    EXPECT_EQ(err.rfind(std::string("r.json: field '") + path + "': expected ", 0), 0u)
        << path << " -> " << err;
  }
  json::value doc = result_to_json(full_result());
  find_path(doc, "metrics.step_time_seconds")->as_object()["median"] = "fast";
  EXPECT_EQ(error_of(doc),
            "r.json: field 'metrics.step_time_seconds.median': expected a number, got a string");
  doc = result_to_json(full_result());
  find_path(doc, "metrics.bubble_ratio.per_stage")->as_array()[1] = true;
  EXPECT_EQ(error_of(doc),
            "r.json: field 'metrics.bubble_ratio.per_stage[1]': expected a number, got a boolean");
  doc = result_to_json(full_result());
  find_path(doc, "config")->as_object()["stages"] = 2.5;
  EXPECT_EQ(error_of(doc), "r.json: field 'config.stages': expected an integer, got 2.500000");
}

TEST(ResultSchema, BadValuesAreNamed) {
  json::value doc = result_to_json(full_result());
  doc.as_object()["schema"] = "pipebench.result/2";
  EXPECT_EQ(error_of(doc),
            "r.json: field 'schema': expected \"pipebench.result/1\", got \"pipebench.result/2\"");
  doc = result_to_json(full_result());
  doc.as_object()["status"] = "fine";
  EXPECT_EQ(error_of(doc),
            "r.json: field 'status': expected one of ok, oom, invalid, error, got \"fine\"");
  doc = result_to_json(full_result());
  find_path(doc, "timeline[0][0]")->as_object()["op"] = "X";
  EXPECT_EQ(error_of(doc),
            "r.json: field 'timeline[0][0].op': expected one of F, B, I, W, SYNC, got \"X\"");
  doc = result_to_json(full_result());
  find_path(doc, "metrics.bubble_ratio.per_stage")->as_array().pop_back();
  EXPECT_EQ(error_of(doc),
            "r.json: field 'metrics.bubble_ratio.per_stage': expected 2 entries (one per stage, "
            "config.stages), got 1");
  doc = result_to_json(full_result());
  find_path(doc, "config")->as_object()["microbatches"] = 0;
  EXPECT_EQ(error_of(doc), "r.json: field 'config.microbatches': expected >= 1, got 0");
  for (const char* list :
       {"metrics.theory.peak_inflight_per_stage", "metrics.theory.activation_bytes_per_microbatch",
        "metrics.theory.action_seconds"}) {
    doc = result_to_json(full_result());
    json::array& a = find_path(doc, list)->as_array();
    a.push_back(a.back());
    EXPECT_EQ(error_of(doc), std::string("r.json: field '") + list +
                                 "': expected 2 entries (one per stage, config.stages), got 3");
  }
  doc = result_to_json(full_result());
  find_path(doc, "config")->as_object()["data_parallel"] = 0;
  EXPECT_EQ(error_of(doc), "r.json: field 'config.data_parallel': expected >= 1, got 0");
  doc = result_to_json(full_result());
  find_path(doc, "metrics.theory.links[0]")->as_object()["path"] = "bus";
  EXPECT_EQ(error_of(doc),
            "r.json: field 'metrics.theory.links[0].path': expected \"host\" or \"network\", got "
            "\"bus\"");
  EXPECT_EQ(error_of(json::value(json::array{})),
            "r.json: expected a JSON object (a pipebench result), got an array");

  // Figures a run cannot measure: each refused by name, never read as one.
  const auto set = [](const char* path, const char* key, const json::value& v) {
    json::value d = result_to_json(full_result());
    find_path(d, path)->as_object()[key] = v;
    return d;
  };
  EXPECT_EQ(error_of(set("metrics.bubble_ratio", "measured", 5)),
            "r.json: field 'metrics.bubble_ratio.measured': expected a share in [0, 1], got 5");
  EXPECT_EQ(error_of(set("metrics.bubble_ratio", "per_stage", json::array{0.1, -0.2})),
            "r.json: field 'metrics.bubble_ratio.per_stage[1]': expected a share in [0, 1], got "
            "-0.2");
  EXPECT_EQ(error_of(set("metrics.bubble_ratio", "samples", json::array{0.2, 1.5})),
            "r.json: field 'metrics.bubble_ratio.samples[1]': expected a share in [0, 1], got 1.5");
  EXPECT_EQ(error_of(set("metrics.bubble_overhead", "theoretical", -1)),
            "r.json: field 'metrics.bubble_overhead.theoretical': expected a figure >= 0, got -1");
  // A stage busy all step long, written before idle time was held at >= 0,
  // may be a rounding below 0: read as it is.
  EXPECT_EQ(result_from_json(set("metrics.bubble_overhead", "measured", -4e-14), "r.json")
                .metrics->bubble_overhead.measured,
            -4e-14);
  EXPECT_EQ(result_from_json(set("metrics.bubble_ratio", "measured", -4e-14), "r.json")
                .metrics->bubble_ratio.measured,
            -4e-14);
  // An overhead is idle over busy time: above 1 where a stage idles most.
  EXPECT_EQ(result_from_json(set("metrics.bubble_overhead", "measured", 3), "r.json")
                .metrics->bubble_overhead.measured,
            3);
  EXPECT_EQ(error_of(set("metrics.step_time_seconds", "median", -1)),
            "r.json: field 'metrics.step_time_seconds.median': expected a time in seconds in [0, "
            "86400], got -1");
  EXPECT_EQ(error_of(set("metrics.step_time_seconds", "median", 0.02)),
            "r.json: field 'metrics.step_time_seconds.median': expected min <= median <= max, got "
            "0.0099 <= 0.02 <= 0.0123");
  EXPECT_EQ(error_of(set("metrics.step_time_seconds", "samples", json::array{0.01, -0.01})),
            "r.json: field 'metrics.step_time_seconds.samples[1]': expected a time in seconds in "
            "[0, 86400], got -0.01");
  for (const char* date : {"2026-13-45T07:00:00Z", "2026-02-29T07:00:00Z", "2026-04-31T07:00:00Z",
                           "2026-11-29T24:00:00Z", "2026-11-29T07:60:00Z"}) {
    EXPECT_EQ(error_of(set("environment", "date", date)),
              std::string("r.json: field 'environment.date': expected a UTC time such as "
                          "\"2026-12-06T19:47:54Z\", got \"") +
                  date + "\"");
  }
  for (const char* date : {"2028-02-29T23:59:60Z", "2000-02-29T00:00:00Z"}) {
    EXPECT_EQ(result_from_json(set("environment", "date", date), "r.json").environment.date, date);
  }
  EXPECT_EQ(error_of(set("timeline[1][0]", "mb", 4)),
            "r.json: field 'timeline[1][0].mb': expected a micro-batch in [0, 4), got 4");
  EXPECT_EQ(error_of(set("timeline[0][1]", "chunk", 1)),
            "r.json: field 'timeline[0][1].chunk': expected a chunk in [0, 1), got 1");
  EXPECT_EQ(error_of(set("metrics.theory.timeline[0][0]", "mb", -1)),
            "r.json: field 'metrics.theory.timeline[0][0].mb': expected a micro-batch in [0, 4), "
            "got -1");
  EXPECT_EQ(error_of(set("timeline[0][0]", "op", "SYNC")),
            "r.json: field 'timeline[0][0]': expected mb and chunk -1 on a SYNC");

  // 1e400 parses as infinity: refused by name, never read as a figure.
  std::string text = json::serialize(result_to_json(full_result()));
  const std::string key = "\"samples_per_second\":";
  const size_t at = text.find(key) + key.size();
  text.replace(at, text.find(',', at) - at, "1e400");
  try {
    (void)result_from_text(text, "r.json");
    ADD_FAILURE() << "1e400 accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "r.json: field 'metrics.samples_per_second': expected a finite number");
  }
}

// Text no run writes: a control character in a name (printed raw, it would
// break a report's lines or drive the terminal), an ended combination with
// no reason. A huge value is quoted by its start, the error one short line.
TEST(ResultSchema, TextNoRunWritesIsRefusedAndAHugeValueQuotedShort) {
  json::value doc = result_to_json(full_result());
  find_path(doc, "config")->as_object()["schedule"] = "1f1b\n\x1b[31mred";
  EXPECT_EQ(error_of(doc),
            "r.json: field 'config.schedule': expected text without control characters, got "
            "\"1f1b\\x0a\\x1b[31mred\"");
  // A tab is no control a report prints badly: MPICH names itself with one.
  doc = result_to_json(full_result());
  find_path(doc, "environment")->as_object()["mpi"] = "MPICH Version:\t4.1.2";
  EXPECT_EQ(result_from_json(doc, "r.json").environment.mpi, "MPICH Version:\t4.1.2");
  doc = result_to_json(full_result());
  doc.as_object()["schema"] = std::string(100000, 'A');
  const std::string e = error_of(doc);
  EXPECT_EQ(e.substr(0, 72),
            "r.json: field 'schema': expected \"pipebench.result/1\", got \"AAAAAAAAAAAA");
  EXPECT_LT(e.size(), 500U) << e.size();
  EXPECT_NE(e.find("AAA... (400 of 100037 bytes shown)"), std::string::npos) << e;

  Result failed = full_result();
  failed.status = ResultStatus::kError;
  failed.error = "rank 1: out of memory";
  doc = result_to_json(failed);
  doc.as_object()["error"] = "";
  EXPECT_EQ(error_of(doc),
            "r.json: field 'error': expected the reason the combination ended, got \"\"");
  // An error written raw by an older build (two lines): read as one line.
  doc.as_object()["error"] = "rank 1: failed\nat step 3";
  EXPECT_EQ(result_from_json(doc, "r.json").error, "rank 1: failed\\x0aat step 3");
}

TEST(ResultSchema, CollectorFiguresRoundTripAndFollowStagesAndTimeline) {
  const Result r = result_from_json(result_to_json(full_result()), "r.json");
  const CollectorResult& c = r.metrics->collectors.at("cputime");
  EXPECT_EQ(c.step.at("cpu_seconds"), (std::vector<double>{0.0101, 0.0093}));
  EXPECT_EQ(c.action.at("cpu_seconds")[1], (std::vector<double>{0.001, 0.0009, 0.0011}));
  EXPECT_TRUE(std::isnan(c.action.at("cpu_seconds")[0][1]));  // null where it does not apply

  json::value doc = result_to_json(full_result());
  find_path(doc, "metrics.collectors.cputime.step.cpu_seconds")->as_array().pop_back();
  EXPECT_EQ(error_of(doc),
            "r.json: field 'metrics.collectors.cputime.step.cpu_seconds': expected 2 entries (one "
            "per stage, config.stages), got 1");
  doc = result_to_json(full_result());
  find_path(doc, "metrics.collectors.cputime.action.cpu_seconds[1]")->as_array().pop_back();
  EXPECT_EQ(error_of(doc),
            "r.json: field 'metrics.collectors.cputime.action.cpu_seconds[1]': expected 3 entries "
            "(one per action of timeline[1]), got 2");
  doc = result_to_json(full_result());
  find_path(doc, "metrics.collectors.cputime.step")->as_object()["cpu_seconds"] = "fast";
  EXPECT_EQ(error_of(doc),
            "r.json: field 'metrics.collectors.cputime.step.cpu_seconds': expected an array, got a "
            "string");
}

TEST(ResultSchema, DeviceFiguresRoundTripFollowStagesAndOlderFilesLoad) {
  Result r = full_result();
  r.metrics->peak_memory_bytes.device_profiler = "cupti";
  r.metrics->device = DeviceFigures{.profiler = "cupti",
                                    .bubble_ratio = 0.3,
                                    .bubble_ratio_per_stage = {0.25, 0.35},
                                    .compute_seconds_per_stage = {0.006, 0.005},
                                    .communication_seconds_per_stage = {0.001, std::nan("")},
                                    .overlap_seconds_per_stage = {0.0005, 0.0},
                                    .busy_seconds_per_stage = {0.0065, 0.0052},
                                    .bubble_ratio_samples = {0.31, 0.3, 0.29}};
  const json::value doc = result_to_json(r);
  const Result back = result_from_json(doc, "r.json");
  ASSERT_TRUE(back.metrics->device.has_value());
  const DeviceFigures& d = *back.metrics->device;
  EXPECT_EQ(d.profiler, "cupti");
  EXPECT_EQ(d.bubble_ratio, 0.3);
  EXPECT_EQ(d.bubble_ratio_per_stage, (std::vector<double>{0.25, 0.35}));
  EXPECT_EQ(d.bubble_ratio_samples, (std::vector<double>{0.31, 0.3, 0.29}));
  EXPECT_EQ(d.compute_seconds_per_stage, (std::vector<double>{0.006, 0.005}));
  EXPECT_EQ(d.communication_seconds_per_stage[0], 0.001);
  EXPECT_TRUE(std::isnan(d.communication_seconds_per_stage[1]));  // null: no records there
  EXPECT_EQ(d.busy_seconds_per_stage, (std::vector<double>{0.0065, 0.0052}));
  EXPECT_EQ(back.metrics->peak_memory_bytes.device_profiler, "cupti");

  json::value bad = doc;
  find_path(bad, "metrics.device.compute_seconds_per_stage")->as_array().pop_back();
  EXPECT_EQ(error_of(bad),
            "r.json: field 'metrics.device.compute_seconds_per_stage': expected 2 entries (one "
            "per stage, config.stages), got 1");
  bad = doc;
  erase_path(bad, "metrics.device.profiler");
  EXPECT_EQ(error_of(bad), "r.json: field 'metrics.device.profiler': missing");
  // Figures no run can measure: a step's bubble above the whole step, a
  // negative time.
  bad = doc;
  find_path(bad, "metrics.device")->as_object()["bubble_ratio_samples"] = json::array{0.3, 2.0};
  EXPECT_EQ(error_of(bad),
            "r.json: field 'metrics.device.bubble_ratio_samples[1]': expected a bubble ratio <= "
            "1, got 2");
  bad = doc;
  find_path(bad, "metrics.device")->as_object()["busy_seconds_per_stage"] = json::array{0.1, -1};
  EXPECT_EQ(error_of(bad),
            "r.json: field 'metrics.device.busy_seconds_per_stage[1]': expected a time in seconds "
            "in [0, 86400], got -1");

  json::value old = doc;  // written before device figures existed
  erase_path(old, "metrics.device");
  erase_path(old, "metrics.peak_memory_bytes.device_profiler");
  const Result o = result_from_json(old, "r.json");
  EXPECT_FALSE(o.metrics->device.has_value());
  EXPECT_EQ(o.metrics->peak_memory_bytes.device_profiler, "");
}

TEST(ResultSchema, GpuStateRoundTripsIsAbsentWhenNotSampledAndIsChecked) {
  Result r = full_result();
  EXPECT_FALSE(result_to_json(r).at("metrics").as_object().contains("gpu_state"));
  GpuState g;
  g.gpu = "node1: NVIDIA H200 (0000:3B:00.0)";
  g.samples = 12;
  g.sm_clock_mhz_min = 1410;
  g.sm_clock_mhz_median = 1980;
  g.memory_clock_mhz_median = 3201;
  g.power_watts_mean = 512.5;
  g.power_limit_watts = 700;
  g.throttle_reasons = {"sw_power_cap"};
  g.ecc_corrected = 0;  // temperature and uncorrected ECC unknown: null and -1
  r.metrics->gpu_state = {g};
  json::value doc = result_to_json(r);
  EXPECT_TRUE(find_path(doc, "metrics.gpu_state")->as_array()[0].at("temperature_c_max").is_null());
  const Result back = result_from_json(doc, "r.json");
  ASSERT_EQ(back.metrics->gpu_state.size(), 1U);
  const GpuState& b = back.metrics->gpu_state[0];
  EXPECT_EQ(b.gpu, g.gpu);
  EXPECT_EQ(b.samples, 12);
  EXPECT_EQ(b.sm_clock_mhz_min, 1410);
  EXPECT_EQ(b.power_watts_mean, 512.5);
  EXPECT_TRUE(std::isnan(b.temperature_c_max));
  EXPECT_EQ(b.throttle_reasons, std::vector<std::string>{"sw_power_cap"});
  EXPECT_EQ(b.ecc_corrected, 0);
  EXPECT_EQ(b.ecc_uncorrected, -1);

  json::value bad = doc;
  find_path(bad, "metrics.gpu_state")->as_array()[0].as_object()["samples"] = -1;
  EXPECT_EQ(error_of(bad), "r.json: field 'metrics.gpu_state[0].samples': expected >= 0, got -1");
}

// A device backend's fused GEMMs (metrics.gemm_epilogues): written, read
// back, a negative count named; a file written before the field has none
// and writes back byte for byte without it.
TEST(ResultSchema, GemmEpiloguesRoundTripAreCheckedAndOlderFilesLoad) {
  Result r = full_result();
  EXPECT_FALSE(result_to_json(r).at("metrics").as_object().contains("gemm_epilogues"));
  r.metrics->gemm_epilogues = GemmEpilogueFigures{
      .fused = 96,
      .refused = 8,
      .first_refusal = "rank 1: bias + GeLU GEMM 2 x 12 x 3 fp32: cuBLASLt has no algorithm"};
  json::value doc = result_to_json(r);
  const json::object& g = find_path(doc, "metrics.gemm_epilogues")->as_object();
  EXPECT_EQ(g.at("epilogue_gemms").as_int64(), 96);
  EXPECT_EQ(g.at("refusals").as_int64(), 8);
  EXPECT_EQ(g.at("first_refusal").as_string(), r.metrics->gemm_epilogues->first_refusal);
  EXPECT_EQ(result_from_json(doc, "r.json").metrics->gemm_epilogues, r.metrics->gemm_epilogues);
  expect_same(r, result_from_json(doc, "r.json"));

  json::value bad = doc;
  find_path(bad, "metrics.gemm_epilogues")->as_object()["refusals"] = -1;
  EXPECT_EQ(error_of(bad),
            "r.json: field 'metrics.gemm_epilogues.refusals': expected >= 0, got -1");

  json::value old = doc;
  erase_path(old, "metrics.gemm_epilogues");
  const Result back = result_from_json(old, "old.json");
  EXPECT_FALSE(back.metrics->gemm_epilogues.has_value());
  EXPECT_EQ(json::serialize(result_to_json(back)), json::serialize(old));
}

TEST(ResultSchema, UnknownFieldsAndOptionalOnesAreAccepted) {
  json::value doc = result_to_json(full_result());
  doc.as_object()["future_field"] = json::object{{"x", 1}};
  find_path(doc, "metrics")->as_object()["energy_joules"] = 12.5;
  erase_path(doc, "metrics.theory.timeline");
  erase_path(doc, "metrics.peak_memory_bytes.by_category");
  erase_path(doc, "config.seed");
  erase_path(doc, "environment.cpu");
  erase_path(doc, "environment.ranks_per_gpu");
  erase_path(doc, "metrics.collectors");  // files written before collectors existed
  find_path(doc, "metrics")->as_object()["check"] = nullptr;
  const Result r = result_from_json(doc, "r.json");
  EXPECT_TRUE(r.metrics->theory->timeline.empty());
  EXPECT_TRUE(r.metrics->peak_memory_bytes.by_category.empty());
  EXPECT_EQ(r.config.seed, 0u);
  EXPECT_FALSE(r.metrics->check.has_value());
  EXPECT_EQ(r.environment.cpu, "");
  EXPECT_EQ(r.environment.ranks_per_gpu, 0);
  EXPECT_TRUE(r.metrics->collectors.empty());
}

// A GPU run's environment: the device of every rank, the CUDA runtime and
// driver, the libraries beside it, and how many ranks shared one GPU.
TEST(ResultSchema, GpuEnvironmentRoundTrips) {
  Result r = full_result();
  r.environment.cuda = "13.0";
  r.environment.driver = "580.95.05";
  r.environment.nccl = "2.28.3";
  r.environment.gpus = {"NVIDIA H200", "NVIDIA H200"};
  r.environment.ranks_per_gpu = 2;
  const json::value doc = result_to_json(r);
  EXPECT_EQ(doc.at("environment").at("ranks_per_gpu").as_int64(), 2);
  EXPECT_EQ(doc.at("environment").at("nccl").as_string(), "2.28.3");
  expect_same(r, result_from_json(doc, "r.json"));
  json::value bad = doc;
  find_path(bad, "environment")->as_object()["ranks_per_gpu"] = -1;
  try {
    (void)result_from_json(bad, "r.json");
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("environment.ranks_per_gpu"), std::string::npos)
        << e.what();
  }
}

TEST(ResultSchema, DataParallelFieldsRoundTripAndOlderFilesLoad) {
  Result r = full_result();
  r.config.data_parallel = 4;
  r.config.rank_order = "dp-pp";
  AllReduceFigures& a = r.metrics->allreduce.emplace();
  a.seconds = 0.003;
  a.seconds_per_stage = {0.0035, 0.0025};
  a.overlap_seconds_per_stage = {0.001, 0.0};
  a.bytes_per_stage = {4'000'000, 3'000'000};
  a.exposed_seconds = 0.0012;
  a.latency = 2e-5;
  a.bandwidth = 1.5e9;
  a.theoretical_seconds_per_stage = {0.0033, 0.0026};
  a.bubble_ratio_pipeline = {
      .measured = 0.15, .theoretical = 0.14, .per_stage = {0.1, 0.2}, .samples = {}};
  const json::value doc = result_to_json(r);
  EXPECT_EQ(doc.at("config").at("data_parallel").as_int64(), 4);
  EXPECT_EQ(doc.at("metrics").at("allreduce_seconds").as_double(), 0.003);
  EXPECT_EQ(doc.at("metrics").at("allreduce").at("bytes_per_stage").as_array().size(), 2U);
  expect_same(r, result_from_json(doc, "dp.json"));

  // Written before data parallelism: one replica, no all-reduce figures.
  json::value old = doc;
  erase_path(old, "config.data_parallel");
  erase_path(old, "config.rank_order");
  erase_path(old, "metrics.allreduce");
  erase_path(old, "metrics.allreduce_seconds");
  const Result back = result_from_json(old, "old.json");
  EXPECT_EQ(back.config.data_parallel, 1);
  EXPECT_EQ(back.config.rank_order, "");
  EXPECT_FALSE(back.metrics->allreduce.has_value());

  json::value bad = doc;
  find_path(bad, "config")->as_object()["data_parallel"] = 0;
  try {
    (void)result_from_json(bad, "bad.json");
    ADD_FAILURE() << "data_parallel 0 accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("data_parallel"), std::string::npos) << e.what();
  }
  json::value short_list = doc;
  find_path(short_list, "metrics.allreduce")->as_object()["seconds_per_stage"] = json::array{0.001};
  EXPECT_THROW((void)result_from_json(short_list, "short.json"), UsageError);
  bad = doc;
  find_path(bad, "metrics.allreduce.bubble_ratio_pipeline")->as_object()["measured"] = 1.5;
  EXPECT_EQ(error_of(bad),
            "r.json: field 'metrics.allreduce.bubble_ratio_pipeline.measured': expected a share in "
            "[0, 1], got 1.5");
  bad = doc;
  find_path(bad, "metrics.allreduce")->as_object()["seconds_per_stage"] = json::array{0.001, -1};
  EXPECT_EQ(error_of(bad),
            "r.json: field 'metrics.allreduce.seconds_per_stage[1]': expected a time in seconds in "
            "[0, 86400], got -1");
}

TEST(ResultSchema, VocabPaddingRoundTripsIsCheckedAndOlderFilesReadUnpadded) {
  Result r = full_result();
  r.config.model = "gpt-small";
  r.config.vocab_padding = VocabPadding{.divisor = 128, .vocab = 50257, .padded = 50304};
  const json::value doc = result_to_json(r);
  const json::value& padding = doc.at("config").at("vocab_padding");
  EXPECT_EQ(padding.at("make_vocab_size_divisible_by").as_int64(), 128);
  EXPECT_EQ(padding.at("vocab").as_int64(), 50257);
  EXPECT_EQ(padding.at("padded_vocab").as_int64(), 50304);
  const Result back = result_from_json(doc, "padded.json");
  expect_same(r, back);
  // The model it ran: the spec with its padding, micro-batch size and dtype.
  const ModelSpec spec = model_spec(back.config);
  EXPECT_EQ(spec.vocab, 50257);
  EXPECT_EQ(spec.padded_vocab(), 50304);
  EXPECT_EQ(spec.micro_batch_size, 2);
  EXPECT_EQ(spec.bytes_per_element, 4);

  // Written before padding: unpadded, and written back without the field.
  json::value old = doc;
  erase_path(old, "config.vocab_padding");
  const Result unpadded = result_from_json(old, "old.json");
  EXPECT_FALSE(unpadded.config.vocab_padding.has_value());
  EXPECT_EQ(model_spec(unpadded.config).padded_vocab(), 50257);
  EXPECT_FALSE(result_to_json(unpadded).at("config").as_object().contains("vocab_padding"));

  const auto expect_refused = [&doc](const char* key, int value, const std::string& needle) {
    json::value bad = doc;
    find_path(bad, "config.vocab_padding")->as_object()[key] = value;
    try {
      (void)result_from_json(bad, "bad.json");
      ADD_FAILURE() << key << " " << value << " accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_refused("make_vocab_size_divisible_by", 0,
                 "config.vocab_padding.make_vocab_size_divisible_by");
  expect_refused("make_vocab_size_divisible_by", kMaxVocabDivisor + 1,
                 "config.vocab_padding.make_vocab_size_divisible_by");
  expect_refused("vocab", 0, "config.vocab_padding.vocab");
  expect_refused("vocab", std::numeric_limits<int>::max(), "config.vocab_padding.vocab");
  expect_refused("padded_vocab", 50257, "expected 50304");
}

// The attention that ran and why it was naive: written, read back; a file
// written before the fields ran naive (attention_ran), with no reason, and
// writes back without them.
TEST(ResultSchema, AttentionFieldsRoundTripAndOlderFilesReadAsNaive) {
  Result r = full_result();
  r.config.attention = "naive";
  r.config.attention_reason = "the CUDA emulator has no cuDNN";
  const json::value doc = result_to_json(r);
  EXPECT_EQ(doc.at("config").at("attention").as_string(), "naive");
  EXPECT_EQ(doc.at("config").at("attention_reason").as_string(), "the CUDA emulator has no cuDNN");
  expect_same(r, result_from_json(doc, "naive.json"));

  r.config.attention = "fused";
  r.config.attention_reason = "";
  const json::value fused = result_to_json(r);
  EXPECT_EQ(fused.at("config").at("attention").as_string(), "fused");
  EXPECT_FALSE(fused.at("config").as_object().contains("attention_reason"));
  expect_same(r, result_from_json(fused, "fused.json"));

  json::value old = doc;
  erase_path(old, "config.attention");
  erase_path(old, "config.attention_reason");
  const Result back = result_from_json(old, "old.json");
  EXPECT_EQ(back.config.attention, "");
  EXPECT_EQ(attention_ran(back.config), "naive");
  EXPECT_EQ(back.config.attention_reason, "");
  EXPECT_EQ(result_to_json(back).at("config").as_object().contains("attention"), false);
}

// The optimizer update's error: written (0 included), read back; a file
// written before the field reads without it and writes back without it
// (WrittenFilesReadAndWriteBackByteForByte holds such a file byte for byte).
TEST(ResultSchema, CheckUpdateErrorAndStepsRoundTripAndOlderFilesLoadWithout) {
  Result r = full_result();
  const json::value doc = result_to_json(r);
  EXPECT_EQ(doc.at("metrics").at("check").at("update_rel_error").as_double(), 0.0);
  EXPECT_EQ(doc.at("metrics").at("check").at("steps").as_int64(), 2);
  expect_same(r, result_from_json(doc, "r.json"));
  r.metrics->check->update_rel_error = 1.0;
  r.metrics->check->passed = false;
  expect_same(r, result_from_json(result_to_json(r), "failed.json"));

  json::value old = doc;
  erase_path(old, "metrics.check.update_rel_error");
  erase_path(old, "metrics.check.steps");
  const Result back = result_from_json(old, "old.json");
  ASSERT_TRUE(back.metrics->check.has_value());
  EXPECT_FALSE(back.metrics->check->update_rel_error.has_value());
  EXPECT_FALSE(back.metrics->check->steps.has_value());
  EXPECT_EQ(json::serialize(result_to_json(back)), json::serialize(old));
}

TEST(ResultSchema, GateFieldsRoundTripAndOlderFilesLoad) {
  Result r = full_result();
  r.config.min_time = 2.5;
  r.config.plant = "stage 1 x1.1";
  r.config.dtype = "bf16";
  r.environment.cores = 2;
  r.environment.oversubscribed = true;
  r.metrics->bubble_ratio.samples = {0.21, 0.19, 0.2};
  r.metrics->busy_seconds_per_stage = {{0.008, 0.0081, 0.0079}, {0.0077, 0.0078, 0.0076}};
  r.metrics->speed_probe_seconds_per_stage = {{0.0041, 0.004, 0.0042}, {0.0039, 0.004, 0.0041}};
  r.metrics->foreign_cpu = 0.125;
  r.metrics->spread =
      SpreadFigures{.step_time_seconds = {3, 0.0101, 0.0002, 0.01, 0.0112, 0.0099, 0.0123},
                    .samples_per_second = {3, 792.1, 16.2, 711.4, 800.1, 650.4, 808.1},
                    .bubble_ratio = {3, 0.2, 0.01, 0.195, 0.205, 0.19, 0.21}};
  const json::value doc = result_to_json(r);
  EXPECT_EQ(doc.at("config").at("plant").as_string(), "stage 1 x1.1");
  EXPECT_EQ(doc.at("config").at("device").as_string(), "h100");
  EXPECT_EQ(doc.at("config").at("max_iters").as_int64(), 40);
  EXPECT_EQ(doc.at("config").at("dtype").as_string(), "bf16");
  EXPECT_EQ(doc.at("config").at("cuda_graphs").as_string(), "on");
  EXPECT_EQ(doc.at("metrics").at("cuda_graphs").at("replayed").as_int64(), 18);
  EXPECT_EQ(doc.at("metrics").at("cuda_graphs").at("eager_reason").as_string(),
            "--cuda-graphs off");
  EXPECT_EQ(doc.at("metrics").at("spread").at("samples_per_second").at("n").as_int64(), 3);
  expect_same(r, result_from_json(doc, "r.json"));

  // A file written before these fields: every one keeps its default.
  json::value old = doc;
  erase_path(old, "config.min_time");
  erase_path(old, "config.plant");
  erase_path(old, "config.device");
  erase_path(old, "config.max_iters");
  erase_path(old, "config.profile");
  erase_path(old, "config.check");
  erase_path(old, "config.dtype");
  erase_path(old, "config.message_path");
  erase_path(old, "config.cuda_graphs");
  erase_path(old, "metrics.cuda_graphs");
  erase_path(old, "environment.cores");
  erase_path(old, "environment.oversubscribed");
  erase_path(old, "metrics.bubble_ratio.samples");
  erase_path(old, "metrics.spread");
  erase_path(old, "metrics.busy_seconds_per_stage");
  erase_path(old, "metrics.speed_probe_seconds_per_stage");
  erase_path(old, "metrics.foreign_cpu");
  const Result back = result_from_json(old, "old.json");
  EXPECT_EQ(back.config.plant, "");
  EXPECT_EQ(back.config.dtype, "fp32");
  EXPECT_EQ(back.config.message_path, "");
  EXPECT_EQ(back.config.cuda_graphs, "");
  EXPECT_FALSE(back.metrics->cuda_graphs.has_value());
  EXPECT_EQ(back.config.min_time, 0);
  EXPECT_EQ(back.config.device, "");
  EXPECT_EQ(back.config.max_iters, 0);
  EXPECT_EQ(back.config.profile, "");
  EXPECT_TRUE(back.config.check);  // it has check figures
  EXPECT_EQ(back.environment.cores, 0);
  EXPECT_FALSE(back.environment.oversubscribed);
  EXPECT_TRUE(back.metrics->bubble_ratio.samples.empty());
  EXPECT_FALSE(back.metrics->spread.has_value());
  EXPECT_TRUE(back.metrics->busy_seconds_per_stage.empty());
  EXPECT_TRUE(back.metrics->speed_probe_seconds_per_stage.empty());
  EXPECT_FALSE(back.metrics->foreign_cpu.has_value());

  json::value bad = doc;
  find_path(bad, "metrics.spread.bubble_ratio")->as_object()["n"] = "three";
  EXPECT_EQ(error_of(bad),
            "r.json: field 'metrics.spread.bubble_ratio.n': expected an integer, got a string");
  bad = doc;
  find_path(bad, "metrics.busy_seconds_per_stage")->as_array().pop_back();
  EXPECT_EQ(error_of(bad),
            "r.json: field 'metrics.busy_seconds_per_stage': expected 2 entries (one per stage, "
            "config.stages), got 1");
  bad = doc;
  find_path(bad, "metrics.busy_seconds_per_stage[1]")->as_array()[2] = -1;
  EXPECT_EQ(error_of(bad),
            "r.json: field 'metrics.busy_seconds_per_stage[1][2]': expected a time in seconds in "
            "[0, 86400], got -1");
  bad = doc;
  find_path(bad, "metrics.theory")->as_object()["step_time_seconds"] = -1;
  EXPECT_EQ(error_of(bad),
            "r.json: field 'metrics.theory.step_time_seconds': expected a time in seconds in [0, "
            "86400], got -1");
  bad = doc;
  find_path(bad, "metrics.speed_probe_seconds_per_stage")->as_array().emplace_back(json::array{});
  EXPECT_EQ(error_of(bad),
            "r.json: field 'metrics.speed_probe_seconds_per_stage': expected 2 entries (one per "
            "stage, config.stages), got 3");
}

// What calibrating from a result needs: the parts it ran and the measured
// links. Files written before them load with neither; files that wrote the
// single `link` load it as the link within a host.
TEST(ResultSchema, CalibrationFieldsRoundTripAndOlderFilesLoad) {
  Result r = full_result();
  ASSERT_TRUE(r.metrics->theory.has_value());
  r.config.unit_ranges = "0-29,30-58";
  r.metrics->theory->links = {MeasuredLinkFigures{"host", 2.5e-5, 3.5e9, 12, {4096, 8192}}};
  r.metrics->theory->kind_seconds = {{{"qkv", {1e-3, 2e-3, 1.5e-3}}, {"ln1", {1e-4, 2e-4, 5e-5}}},
                                     {{"head", {3e-3, 3e-3, 2e-3}}}};
  const json::value doc = result_to_json(r);
  EXPECT_EQ(doc.at("metrics").at("theory").at("kind_seconds").at(0).at("qkv").at("I").as_double(),
            2e-3);
  EXPECT_EQ(doc.at("config").at("unit_ranges").as_string(), "0-29,30-58");
  EXPECT_EQ(
      doc.at("metrics").at("theory").at("links").at(0).at("bandwidth_bytes_per_second").as_double(),
      3.5e9);
  expect_same(r, result_from_json(doc, "r.json"));

  json::value old = doc;
  erase_path(old, "config.unit_ranges");
  erase_path(old, "metrics.theory.links");
  erase_path(old, "metrics.theory.kind_seconds");
  const Result back = result_from_json(old, "old.json");
  EXPECT_EQ(back.config.unit_ranges, "");
  EXPECT_TRUE(back.metrics->theory->links.empty());
  EXPECT_TRUE(back.metrics->theory->kind_seconds.empty());

  // A kind that is not a unit kind, and one stage too many, are named.
  json::value kinds = doc;
  find_path(kinds, "metrics.theory.kind_seconds")->as_array()[1].as_object()["lm_head"] =
      json::object{{"F", 1.0}, {"I", 1.0}, {"W", 1.0}};
  EXPECT_NE(
      error_of(kinds).find("field 'metrics.theory.kind_seconds[1].lm_head': unknown unit kind"),
      std::string::npos)
      << error_of(kinds);
  json::value extra = doc;
  find_path(extra, "metrics.theory.kind_seconds")->as_array().push_back(json::object{});
  EXPECT_NE(error_of(extra).find("kind_seconds"), std::string::npos) << error_of(extra);

  // The single link of earlier files: the host link, 0 = no bandwidth fitted.
  json::value single = old;
  find_path(single, "metrics.theory")->as_object()["link"] =
      json::object{{"latency_seconds", 2.5e-5}, {"bandwidth", 0.0}};
  const Result one = result_from_json(single, "single.json");
  ASSERT_EQ(one.metrics->theory->links.size(), 1u);
  EXPECT_EQ(one.metrics->theory->links[0].path, "host");
  EXPECT_EQ(one.metrics->theory->links[0].latency_seconds, 2.5e-5);
  EXPECT_TRUE(std::isnan(one.metrics->theory->links[0].bandwidth_bytes_per_second));

  json::value bad = single;
  find_path(bad, "metrics.theory.link")->as_object()["latency_seconds"] = "fast";
  EXPECT_EQ(error_of(bad),
            "r.json: field 'metrics.theory.link.latency_seconds': expected a number, got a string");
}

TEST(ResultFile, MalformedFilesNameTheFile) {
  TempDir dir;
  const std::string good = (dir.path() / "good.json").string();
  write_result_file(good, full_result());
  const std::string text = read_text(good);

  const std::string truncated = (dir.path() / "truncated.json").string();
  std::ofstream(truncated) << text.substr(0, text.size() / 2);
  try {
    (void)read_result_file(truncated);
    FAIL() << "truncated file accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(truncated + ": malformed JSON (", 0), 0u) << e.what();
  }
  const std::string empty = (dir.path() / "empty.json").string();
  std::ofstream(empty) << "";
  EXPECT_THROW(
      {
        try {
          (void)read_result_file(empty);
        } catch (const UsageError& e) {
          EXPECT_EQ(std::string(e.what()), empty + ": empty file, expected a pipebench result");
          throw;
        }
      },
      UsageError);
  const std::string missing = (dir.path() / "missing.json").string();
  try {
    (void)read_result_file(missing);
    FAIL() << "missing file accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              missing + ": cannot open result file: No such file or directory");
  }
}

TEST(ResultFile, AtomicWriteLeavesNoTemporary) {
  TempDir dir;
  const std::string path = (dir.path() / "r.json").string();
  Result r = full_result();
  write_result_file(path, r);
  r.metrics->samples_per_second = 900;
  write_result_file(path, r);  // replaces
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "r.json");
  }
  EXPECT_EQ(files, 1);
  EXPECT_DOUBLE_EQ(read_result_file(path).metrics->samples_per_second, 900);

  // A write that cannot happen (directory missing) names the path, leaves nothing.
  const std::string bad = (dir.path() / "no_such_dir" / "r.json").string();
  try {
    write_result_file(bad, r);
    FAIL() << "write into a missing directory succeeded";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(bad + ": cannot write: ", 0), 0u) << e.what();
  }
  // Renaming onto a directory fails: the temporary is removed, the directory kept.
  const fs::path blocker = dir.path() / "blocker.json";
  fs::create_directories(blocker / "inside");
  EXPECT_THROW(write_result_file(blocker.string(), r), UsageError);
  files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 2);  // r.json and blocker.json/
}

}  // namespace
}  // namespace ppb
