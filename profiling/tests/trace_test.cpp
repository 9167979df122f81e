// The Chrome/Perfetto trace writer: the document parses back, carries the
// rank for Holistic Trace Analysis, has microsecond X events (whole ones in
// per-rank files), matched flows
// with ids unique across ranks, and merges per-rank files; writes are atomic.
#include "ppb/profiling/trace.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ppb/profiling/check.hpp"
#include "ppb/profiling/output_file.hpp"

namespace ppb::trace {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("ppb_trace_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Rank r sends one message to rank r+1 (flow id from r's counter).
void fill(TraceWriter& w, int rank, int ranks) {
  const int compute = w.add_thread("main");
  const int comm = w.add_thread("comm stream");
  w.complete(compute, "F s" + std::to_string(rank) + " mb0", "forward", 0.001 * rank, 0.0005,
             {{"mb", 0}});
  if (rank + 1 < ranks) {
    const uint64_t id = flow_id(rank, 0);
    w.complete(comm, "send act", "send", 0.001 * rank + 0.0005, 0.0001);
    w.flow_start(comm, id, "act", "p2p", 0.001 * rank + 0.0005);
  }
  if (rank > 0) {
    const uint64_t id = flow_id(rank - 1, 0);
    w.complete(comm, "recv act", "recv", 0.001 * rank - 0.0005, 0.0001);
    w.flow_end(comm, id, "act", "p2p", 0.001 * rank - 0.0004);
  }
  w.counter("activations bytes", 0.001 * rank, 4096);
}

TEST(Trace, FlowIdsAreUniqueAcrossRanksAndExactInDoubles) {
  EXPECT_EQ(flow_id(3, 7), 3ull * (1ull << 32) + 7ull);
  std::set<uint64_t> ids;
  for (int r = 0; r < 64; ++r) {
    for (uint64_t k = 0; k < 100; ++k) ids.insert(flow_id(r, k));
  }
  EXPECT_EQ(ids.size(), 6400u);
  const uint64_t big = flow_id((1 << 20) - 1, (1ull << 32) - 1);
  EXPECT_LT(big, 1ull << 53);
  EXPECT_EQ(static_cast<uint64_t>(static_cast<double>(big)), big);
}

TEST(Trace, PerRankDocumentParsesBack) {
  TraceWriter w(2, "rank 2 \"stage\" 2", 4);
  fill(w, 2, 4);
  w.set_origin_seconds(0.0);
  const std::string text = w.to_json();
  // Holistic Trace Analysis reads exactly this spelling.
  EXPECT_NE(text.find("\"distributedInfo\": {\"rank\": 2, \"world_size\": 4}"), std::string::npos);
  const boost::json::value doc = boost::json::parse(text);
  EXPECT_EQ(doc.at("distributedInfo").at("rank").as_int64(), 2);
  int x = 0;
  bool process_name = false;
  std::set<int64_t> named_tids;
  for (const auto& ev : doc.at("traceEvents").as_array()) {
    const auto& e = ev.as_object();
    EXPECT_EQ(e.at("pid").as_int64(), 2);
    const std::string ph(e.at("ph").as_string());
    const std::string name(e.at("name").as_string());
    if (ph == "M" && name == "process_name") {
      process_name = true;
      EXPECT_EQ(std::string(e.at("args").at("name").as_string()), "rank 2 \"stage\" 2");
    }
    if (ph == "M" && name == "thread_name") named_tids.insert(e.at("tid").as_int64());
    if (ph == "X" && name == "F s2 mb0") {
      ++x;
      EXPECT_NEAR(e.at("ts").to_number<double>(), 2000.0, 1e-6);  // 2 ms in microseconds
      EXPECT_NEAR(e.at("dur").to_number<double>(), 500.0, 1e-6);
      EXPECT_EQ(std::string(e.at("cat").as_string()), "forward");
      EXPECT_EQ(e.at("args").at("mb").as_int64(), 0);
      EXPECT_EQ(e.at("tid").as_int64(), 1);
    }
  }
  EXPECT_EQ(x, 1);
  EXPECT_TRUE(process_name);
  EXPECT_EQ(named_tids, (std::set<int64_t>{1, 2}));
}

TEST(Trace, OriginShiftsTimestamps) {
  TraceWriter w(0, "r0");
  const int t = w.add_thread("main");
  w.set_origin_seconds(100.0);
  w.complete(t, "a", "forward", 100.25, 0.5);
  const boost::json::value doc = boost::json::parse(w.to_json());
  for (const auto& ev : doc.at("traceEvents").as_array()) {
    if (ev.at("ph").as_string() == "X") {
      EXPECT_NEAR(ev.at("ts").to_number<double>(), 250000.0, 1e-6);
    }
  }
}

TEST(Trace, MergedFilesHaveMatchedFlowsAndAllRanks) {
  const int ranks = 4;
  std::vector<std::string> files;
  for (int r = 0; r < ranks; ++r) {
    TraceWriter w(r, "rank " + std::to_string(r), ranks);
    fill(w, r, ranks);
    files.push_back(temp_path("rank" + std::to_string(r) + ".json"));
    w.write(files.back());
  }
  const std::string merged = temp_path("merged.json");
  merge_trace_files(files, merged);
  const boost::json::value doc = boost::json::parse(slurp(merged));
  EXPECT_EQ(doc.as_object().if_contains("distributedInfo"), nullptr);
  EXPECT_EQ(doc.at("otherData").at("ranks").as_array().size(), 4u);
  std::map<uint64_t, std::pair<int, int>> flows;  // id -> (s count, f count)
  std::map<uint64_t, std::pair<int64_t, int64_t>> flow_pids;
  std::set<int64_t> pids;
  for (const auto& ev : doc.at("traceEvents").as_array()) {
    const std::string ph(ev.at("ph").as_string());
    pids.insert(ev.at("pid").as_int64());
    if (ph == "s") {
      const auto id = ev.at("id").to_number<uint64_t>();
      ++flows[id].first;
      flow_pids[id].first = ev.at("pid").as_int64();
    }
    if (ph == "f") {
      const auto id = ev.at("id").to_number<uint64_t>();
      ++flows[id].second;
      flow_pids[id].second = ev.at("pid").as_int64();
    }
  }
  EXPECT_EQ(pids, (std::set<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(flows.size(), 3u);
  for (const auto& [id, n] : flows) {
    EXPECT_EQ(n, std::make_pair(1, 1)) << id;
    EXPECT_EQ(flow_pids[id].second, flow_pids[id].first + 1);  // rank r -> r+1
  }
  // The same ranks twice, a file without its rank, a missing file: errors naming the file.
  EXPECT_THROW(merge_trace_files({files[0], files[0]}, temp_path("dup.json")), UsageError);
  try {
    merge_trace_files({merged}, temp_path("again.json"));
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(merged), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("distributedInfo"), std::string::npos);
  }
  EXPECT_THROW(merge_trace_files({temp_path("missing.json")}, temp_path("x.json")), UsageError);
  for (const auto& f : files) std::filesystem::remove(f);
  std::filesystem::remove(merged);
}

TEST(Trace, WriteMergedRejectsDuplicateRanks) {
  TraceWriter a(1, "a");
  TraceWriter b(1, "b");
  EXPECT_THROW(write_merged({&a, &b}, temp_path("m.json")), UsageError);
  EXPECT_FALSE(std::filesystem::exists(temp_path("m.json")));
}

TEST(Trace, AtomicWriteReplacesWholeFileAndFailsCleanly) {
  const std::string path = temp_path("atomic.json");
  write_output_file(path, "old contents that are longer");
  TraceWriter w(0, "r");
  w.write(path);
  EXPECT_EQ(slurp(path), w.to_json());
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
    EXPECT_EQ(entry.path().string().find(path + ".tmp"), std::string::npos)
        << "temporary file left";
  }
  EXPECT_THROW(w.write("/nonexistent-dir/trace.json"), UsageError);
  std::filesystem::remove(path);
}

TEST(Trace, EscapesNames) {
  TraceWriter w(0, "a\\b\n");
  const int t = w.add_thread("tab\there");
  w.complete(t, "quote\"name\x01", "c", 0, 0);
  const boost::json::value doc = boost::json::parse(w.to_json());
  bool seen = false;
  for (const auto& ev : doc.at("traceEvents").as_array()) {
    if (ev.at("ph").as_string() == "X") {
      EXPECT_EQ(std::string(ev.at("name").as_string()), "quote\"name\x01");
      seen = true;
    }
  }
  EXPECT_TRUE(seen);
}

// Per-rank files hold whole microseconds, each end rounded to the nearest,
// so Holistic Trace Analysis (which rounds fractional times inward) never
// sees a negative duration; merged files keep nanoseconds.
TEST(Trace, PerRankFilesAreOnWholeMicrosecondsMergedOnNanoseconds) {
  TraceWriter w(0, "r0", 1);
  const int host = w.add_thread("compute");
  const int stream = w.add_thread("stream 7");
  // An action from 10.2 to 14.7 us holding three kernels: 0.3 us inside one
  // microsecond (10.4 .. 10.7: inward rounding gives 11 .. 10), 0.8 us
  // across one (12.6 .. 13.4) and one ending with the action.
  w.complete(host, "F s0 mb0", "forward", 10.2e-6, 4.5e-6);
  w.complete(stream, "k0", "kernel", 10.4e-6, 0.3e-6);
  w.complete(stream, "k1", "kernel", 12.6e-6, 0.8e-6);
  w.complete(stream, "k2", "kernel", 14.1e-6, 0.6e-6);
  struct Ev {
    double ts, dur;
  };
  auto events = [](const std::string& json) {
    std::map<std::string, Ev> out;
    std::map<std::string, bool> integral;
    const boost::json::value doc = boost::json::parse(json);
    for (const auto& ev : doc.at("traceEvents").as_array()) {
      if (ev.at("ph").as_string() != "X") continue;
      const std::string name(ev.at("name").as_string());
      out[name] = {ev.at("ts").to_number<double>(), ev.at("dur").to_number<double>()};
      integral[name] = ev.at("ts").is_int64() && ev.at("dur").is_int64();
    }
    return std::make_pair(out, integral);
  };
  const auto [per_rank, integral] = events(w.to_json());
  ASSERT_EQ(per_rank.size(), 4u);
  for (const auto& [name, is_int] : integral) EXPECT_TRUE(is_int) << name;
  EXPECT_EQ(per_rank.at("F s0 mb0").ts, 10.0);
  EXPECT_EQ(per_rank.at("F s0 mb0").dur, 5.0);  // 10 .. 15
  EXPECT_EQ(per_rank.at("k0").ts, 10.0);
  EXPECT_EQ(per_rank.at("k0").dur, 1.0);  // 10.4 -> 10, 10.7 -> 11
  EXPECT_EQ(per_rank.at("k1").ts, 13.0);
  EXPECT_EQ(per_rank.at("k1").dur, 0.0);  // 12.6 -> 13, 13.4 -> 13
  EXPECT_EQ(per_rank.at("k2").ts, 14.0);
  EXPECT_EQ(per_rank.at("k2").dur, 1.0);    // ends with the action at 15
  for (const auto& [name, e] : per_rank) {  // every kernel inside the action
    if (name[0] != 'k') continue;
    EXPECT_GE(e.ts, per_rank.at("F s0 mb0").ts) << name;
    EXPECT_LE(e.ts + e.dur, per_rank.at("F s0 mb0").ts + per_rank.at("F s0 mb0").dur) << name;
  }

  const std::string path = temp_path("grid_merged.json");
  write_merged({&w}, path);
  const auto merged = events(slurp(path)).first;
  std::filesystem::remove(path);
  EXPECT_NEAR(merged.at("k0").ts, 10.4, 1e-9);
  EXPECT_NEAR(merged.at("k0").dur, 0.3, 1e-9);
  EXPECT_NEAR(merged.at("k1").dur, 0.8, 1e-9);
}

}  // namespace
}  // namespace ppb::trace
