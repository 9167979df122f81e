#include "ppb/profiling/trace.hpp"

#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <set>

#include "ppb/profiling/check.hpp"
#include "ppb/profiling/input_file.hpp"
#include "ppb/profiling/json_fields.hpp"
#include "ppb/profiling/output_file.hpp"

namespace ppb::trace {
namespace {

// JSON string escaping for names (RFC 8259: quote, backslash, control chars).
void append_escaped(std::string& out, std::string_view s) {
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

// Microseconds with 3 decimals (nanosecond resolution), no exponent.
void append_us(std::string& out, double us) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f", us);
  out += buf;
}

void append_int(std::string& out, int64_t v) { out += std::to_string(v); }

// An event's start and, for a slice (dur_us >= 0), its duration on the
// file's grid: nanoseconds, or both ends at the nearest whole microsecond
// (nesting kept, never negative).
void append_times(std::string& out, double ts_us, double dur_us, bool slice, TimeGrid grid) {
  out += ",\"ts\":";
  if (grid == TimeGrid::kNanoseconds) {
    append_us(out, ts_us);
    if (slice) {
      out += ",\"dur\":";
      append_us(out, dur_us);
    }
    return;
  }
  const int64_t start = std::llround(ts_us);
  append_int(out, start);
  if (slice) {
    out += ",\"dur\":";
    append_int(out, std::llround(ts_us + dur_us) - start);
  }
}

void open_event(std::string& out, bool& first) {
  if (!first) out += ",\n";
  first = false;
}

void append_header(std::string& out, int rank, int world_size) {
  out += "{\"schemaVersion\": 1,\n";
  if (rank >= 0) {
    // Written with the spaces exactly so: Holistic Trace Analysis looks for it.
    out += "\"distributedInfo\": {\"rank\": " + std::to_string(rank);
    if (world_size > 0) out += ", \"world_size\": " + std::to_string(world_size);
    out += "},\n";
  }
  out += "\"displayTimeUnit\": \"ms\",\n\"traceEvents\": [\n";
}

}  // namespace

uint64_t flow_id(int src_rank, uint64_t seq) {
  PPB_CHECK(src_rank >= 0 && src_rank < (1 << 20), "flow_id: rank out of range [0, 2^20)");
  PPB_CHECK(seq < (uint64_t{1} << 32), "flow_id: sequence number out of range [0, 2^32)");
  return (static_cast<uint64_t>(src_rank) << 32) | seq;
}

TraceWriter::TraceWriter(int rank, std::string process_name, int world_size)
    : rank_(rank), world_size_(world_size), process_name_(std::move(process_name)) {
  PPB_CHECK(rank >= 0, "TraceWriter: rank must be >= 0");
}

void TraceWriter::set_origin_seconds(double origin) {
  std::lock_guard lock(mutex_);
  origin_ = origin;
}

int TraceWriter::add_thread(std::string name) {
  std::lock_guard lock(mutex_);
  threads_.push_back(std::move(name));
  return static_cast<int>(threads_.size());
}

void TraceWriter::complete(int tid, std::string_view name, std::string_view category,
                           double start_seconds, double duration_seconds,
                           std::vector<TraceArg> args) {
  std::lock_guard lock(mutex_);
  PPB_CHECK(tid >= 1 && tid <= static_cast<int>(threads_.size()), "TraceWriter: unknown tid");
  PPB_CHECK(duration_seconds >= 0, "TraceWriter: negative duration");
  events_.push_back({'X', tid, to_us(start_seconds), duration_seconds * 1e6, 0, 0,
                     std::string(name), std::string(category), std::move(args)});
}

void TraceWriter::flow_start(int tid, uint64_t id, std::string_view name, std::string_view category,
                             double ts_seconds) {
  std::lock_guard lock(mutex_);
  PPB_CHECK(tid >= 1 && tid <= static_cast<int>(threads_.size()), "TraceWriter: unknown tid");
  events_.push_back(
      {'s', tid, to_us(ts_seconds), 0, id, 0, std::string(name), std::string(category), {}});
}

void TraceWriter::flow_end(int tid, uint64_t id, std::string_view name, std::string_view category,
                           double ts_seconds) {
  std::lock_guard lock(mutex_);
  PPB_CHECK(tid >= 1 && tid <= static_cast<int>(threads_.size()), "TraceWriter: unknown tid");
  events_.push_back(
      {'f', tid, to_us(ts_seconds), 0, id, 0, std::string(name), std::string(category), {}});
}

void TraceWriter::counter(std::string_view name, double ts_seconds, double value) {
  std::lock_guard lock(mutex_);
  events_.push_back({'C', 0, to_us(ts_seconds), 0, 0, value, std::string(name), std::string(), {}});
}

size_t TraceWriter::event_count() const {
  std::lock_guard lock(mutex_);
  return events_.size();
}

void TraceWriter::append_events(std::string& out, bool& first, TimeGrid grid) const {
  std::lock_guard lock(mutex_);
  const std::string pid = std::to_string(rank_);
  out.reserve(out.size() + 120 * (events_.size() + threads_.size() + 2));
  open_event(out, first);
  out +=
      "{\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":";
  append_escaped(out, process_name_);
  out += "}}";
  open_event(out, first);
  out += "{\"ph\":\"M\",\"pid\":" + pid +
         ",\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":" + pid + "}}";
  for (size_t t = 0; t < threads_.size(); ++t) {
    const std::string tid = std::to_string(t + 1);
    open_event(out, first);
    out += "{\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":" + tid +
           ",\"name\":\"thread_name\",\"args\":{\"name\":";
    append_escaped(out, threads_[t]);
    out += "}}";
    open_event(out, first);
    out += "{\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":" + tid +
           ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":" + tid + "}}";
  }
  for (const Event& e : events_) {
    open_event(out, first);
    out += "{\"ph\":\"";
    out += e.phase;
    out += "\",\"pid\":";
    out += pid;
    out += ",\"tid\":";
    append_int(out, e.tid);
    append_times(out, e.ts_us, e.dur_us, e.phase == 'X', grid);
    switch (e.phase) {
      case 'X':
        break;
      case 's':
      case 'f':
        out += ",\"id\":";
        out += std::to_string(e.id);
        out += ",\"bp\":\"e\"";
        break;
      case 'C':
        break;
      default:
        PPB_CHECK(false, "TraceWriter: unknown phase");
    }
    out += ",\"name\":";
    append_escaped(out, e.name);
    if (e.phase != 'C') {
      out += ",\"cat\":";
      append_escaped(out, e.category);
    }
    if (e.phase == 'C') {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%.17g", e.value);
      out += ",\"args\":{\"value\":";
      out += buf;
      out += '}';
    } else if (!e.args.empty()) {
      out += ",\"args\":{";
      for (size_t a = 0; a < e.args.size(); ++a) {
        if (a) out += ',';
        append_escaped(out, e.args[a].key);
        out += ':';
        append_int(out, e.args[a].value);
      }
      out += '}';
    }
    out += '}';
  }
}

std::string TraceWriter::to_json() const {
  std::string out;
  append_header(out, rank_, world_size_);
  bool first = true;
  append_events(out, first, TimeGrid::kWholeMicroseconds);
  out += "\n]}\n";
  return out;
}

void TraceWriter::write(const OutputPath& path) const { write_output_file(path, to_json()); }

namespace {

void append_merged_footer(std::string& out, const std::vector<int>& ranks) {
  out += "\n],\n\"otherData\": {\"ranks\": [";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(ranks[i]);
  }
  out += "]}}\n";
}

}  // namespace

void write_merged(const std::vector<const TraceWriter*>& ranks, const OutputPath& path) {
  std::string out;
  append_header(out, -1, 0);
  bool first = true;
  std::set<int> seen;
  std::vector<int> list;
  for (const TraceWriter* w : ranks) {
    PPB_CHECK(w != nullptr, "write_merged: null writer");
    if (!seen.insert(w->rank()).second) {
      throw UsageError("trace merge: rank " + std::to_string(w->rank()) + " appears twice");
    }
    list.push_back(w->rank());
    w->append_events(out, first, TimeGrid::kNanoseconds);
  }
  append_merged_footer(out, list);
  write_output_file(path, out);
}

void merge_trace_files(const std::vector<std::string>& inputs, const std::string& output) {
  std::string out;
  append_header(out, -1, 0);
  bool first = true;
  std::set<int64_t> seen;
  std::vector<int> list;
  for (const std::string& in : inputs) {
    boost::system::error_code ec;
    const boost::json::value doc =
        boost::json::parse(read_input_file(in, "trace file", kMaxTraceFileBytes), ec);
    if (ec) throw UsageError("trace merge: " + in + " is not valid JSON: " + ec.message());
    const JsonReader reader(in);
    const JsonObject root = reader.root(doc);
    const boost::json::array& events = reader.array(root.at("traceEvents"), "traceEvents");
    const int rank = root.object("distributedInfo").get<int>("rank");
    if (!seen.insert(rank).second) {
      throw UsageError("trace merge: " + in + ": rank " + std::to_string(rank) + " appears twice");
    }
    list.push_back(rank);
    for (const boost::json::value& e : events) {
      open_event(out, first);
      out += boost::json::serialize(e);
    }
  }
  append_merged_footer(out, list);
  write_output_file(output, out);
}

}  // namespace ppb::trace
