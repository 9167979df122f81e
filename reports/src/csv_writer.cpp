// CSV: one row per result, numbers in their shortest exact form so the file
// round-trips (parse_csv + strtod give back the same doubles).
#include <cmath>

#include "ppb/profiling/check.hpp"
#include "ppb/reports/format.hpp"
#include "ppb/reports/writers.hpp"

namespace ppb::reports {

namespace {

std::string quote(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string opt(const std::optional<double>& v) { return v ? format_exact(*v) : ""; }

}  // namespace

const std::vector<std::string>& csv_columns() {
  static const std::vector<std::string> kColumns = {"machine",
                                                    "build",
                                                    "source",
                                                    "schedule",
                                                    "partition",
                                                    "stages",
                                                    "microbatches",
                                                    "micro_batch_size",
                                                    "inflight",
                                                    "chunks",
                                                    "model",
                                                    "dtype",
                                                    "backend",
                                                    "transport",
                                                    "memory_budget",
                                                    "status",
                                                    "error",
                                                    "samples_per_second",
                                                    "step_time_median",
                                                    "step_time_min",
                                                    "step_time_max",
                                                    "bubble_ratio",
                                                    "bubble_ratio_theory",
                                                    "bubble_overhead",
                                                    "bubble_overhead_theory",
                                                    "peak_memory_bytes",
                                                    "peak_memory_profiler",
                                                    "activation_bytes_sum",
                                                    "check_passed",
                                                    "check_max_rel_error",
                                                    "git",
                                                    "date"};
  return kColumns;
}

std::string write_csv(const ReportModel& model) {
  std::string out;
  for (size_t i = 0; i < csv_columns().size(); ++i) out += (i ? "," : "") + csv_columns()[i];
  out += "\n";
  for (const ResultEntry& e : model.loaded.results) {
    const Result& r = e.result;
    const ResultConfig& c = r.config;
    const ResultMetrics* m = r.metrics ? &*r.metrics : nullptr;
    auto num = [&](double x) { return m != nullptr ? format_exact(x) : std::string(); };
    std::vector<std::string> row = {e.machine,
                                    e.build,
                                    e.source,
                                    c.schedule,
                                    c.partition,
                                    std::to_string(c.stages),
                                    std::to_string(c.microbatches),
                                    std::to_string(c.micro_batch_size),
                                    std::to_string(c.inflight),
                                    std::to_string(c.chunks),
                                    c.model,
                                    c.dtype,
                                    c.backend,
                                    c.transport,
                                    std::to_string(c.memory_budget),
                                    result_status_name(r.status),
                                    r.error,
                                    num(m ? m->samples_per_second : 0),
                                    num(m ? m->step_time_seconds.median : 0),
                                    num(m ? m->step_time_seconds.min : 0),
                                    num(m ? m->step_time_seconds.max : 0),
                                    num(m ? m->bubble_ratio.measured : 0),
                                    num(m ? m->bubble_ratio.theoretical : 0),
                                    num(m ? m->bubble_overhead.measured : 0),
                                    num(m ? m->bubble_overhead.theoretical : 0),
                                    opt(metric_value(e, "peak_memory")),
                                    m ? m->peak_memory_bytes.device_profiler : "",
                                    opt(metric_value(e, "activations_sum")),
                                    m && m->check ? (m->check->passed ? "true" : "false") : "",
                                    m && m->check ? format_exact(m->check->max_rel_error) : "",
                                    r.environment.git,
                                    r.environment.date};
    PPB_CHECK(row.size() == csv_columns().size(), "csv row and header differ");
    for (size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + quote(row[i]);
    out += "\n";
  }
  return out;
}

std::vector<std::vector<std::string>> parse_csv(const std::string& text,
                                                const std::string& source) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  bool field_started = false;
  int line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (quoted) {
      if (ch == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (ch == '\n') ++line;
        field += ch;
      }
      continue;
    }
    if (ch == '"') {
      if (field_started)
        throw UsageError(source + ":" + std::to_string(line) + ": stray quote inside a field");
      quoted = true;
      field_started = true;
    } else if (ch == ',') {
      row.push_back(std::move(field));
      field.clear();
      field_started = false;
    } else if (ch == '\n') {
      row.push_back(std::move(field));
      field.clear();
      field_started = false;
      rows.push_back(std::move(row));
      row.clear();
      ++line;
    } else if (ch != '\r') {
      field += ch;
      field_started = true;
    }
  }
  if (quoted) throw UsageError(source + ":" + std::to_string(line) + ": unterminated quoted field");
  if (field_started || !row.empty()) {
    row.push_back(std::move(field));
    rows.push_back(std::move(row));
  }
  for (size_t r = 1; r < rows.size(); ++r) {
    if (!rows.empty() && rows[r].size() != rows[0].size()) {
      throw UsageError(source + ": row " + std::to_string(r + 1) + " has " +
                       std::to_string(rows[r].size()) + " fields, the header " +
                       std::to_string(rows[0].size()));
    }
  }
  return rows;
}

}  // namespace ppb::reports
