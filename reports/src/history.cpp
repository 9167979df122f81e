#include "ppb/reports/history.hpp"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <set>

#include "ppb/profiling/check.hpp"

namespace ppb::reports {

namespace fs = std::filesystem;

namespace {

std::string folder_name(const fs::path& p) {
  const fs::path clean = p.lexically_normal();
  const std::string name =
      clean.has_filename() ? clean.filename().string() : clean.parent_path().filename().string();
  return name.empty() ? p.string() : name;
}

Night make_night(const fs::path& path, LoadedResults results) {
  Night n;
  n.name = folder_name(path);
  n.path = path.string();
  n.date = latest_date(results);
  n.first_date = earliest_date(results);
  n.results = std::move(results);
  return n;
}

// Whether folder `a` and any of `tonight` are one, or one holds the other.
bool overlaps(const std::string& a, const std::vector<std::string>& tonight) {
  return std::any_of(tonight.begin(), tonight.end(), [&](const std::string& t) {
    return same_or_inside(a, t) || same_or_inside(t, a);
  });
}

// The nights of one --baseline path: itself, or its subfolders when two of
// them hold the same combination, less any that is tonight's. The files are
// found by the one walk over result folders (result_candidates), which
// names what it cannot read.
std::vector<Night> nights_of(const std::string& path, bool skip_bad,
                             const std::vector<std::string>& tonight) {
  const fs::path root(path);
  std::vector<fs::path> subs;
  bool direct_files = false;
  for (const std::string& f : result_candidates(path)) {
    const fs::path rel = fs::path(f).lexically_relative(root);
    if (rel.empty() || rel == ".") continue;  // `path` is a file
    const fs::path top = root / *rel.begin();
    if (std::next(rel.begin()) == rel.end()) {
      direct_files = true;
    } else if (subs.empty() || subs.back() != top) {
      subs.push_back(top);
    }
  }
  std::sort(subs.begin(), subs.end());
  subs.erase(std::unique(subs.begin(), subs.end()), subs.end());
  if (!direct_files && subs.size() >= 2) {
    std::vector<Night> parts;
    std::set<std::string> seen;
    bool repeated = false;
    for (const fs::path& sub : subs) {
      // Every unreadable file is named (or, with skip_bad, listed): only a
      // subfolder of other JSON (no result at all) is not a night.
      LoadedResults r = load_results_if_any({sub.string()}, skip_bad);
      if (r.results.empty() && r.bad.empty()) continue;
      std::set<std::string> here;
      for (const ResultEntry& e : r.results) here.insert(e.machine + " # " + e.config_key);
      for (const std::string& k : here) repeated = repeated || seen.count(k) != 0;
      seen.insert(here.begin(), here.end());
      // Tonight's own folder makes this a folder of nights like any other,
      // but is no earlier night.
      if (!overlaps(sub.string(), tonight)) parts.push_back(make_night(sub, std::move(r)));
    }
    if (repeated) return parts;
  }
  if (overlaps(path, tonight)) {
    // A folder of nights that holds only tonight's (the first night of
    // `ci/suite --baseline results`): no earlier night yet.
    const bool only_tonight = !direct_files && !subs.empty() &&
                              std::all_of(subs.begin(), subs.end(), [&](const fs::path& s) {
                                return overlaps(s.string(), tonight);
                              });
    if (only_tonight && !same_or_inside(path, tonight.front())) return {};
    throw UsageError(path + ": is, holds or lies inside tonight's results (" + tonight.front() +
                     (tonight.size() > 1 ? ", ..." : "") +
                     ") and is no folder of earlier nights beside them; give earlier nights");
  }
  return {make_night(path, load_results({path}, skip_bad))};
}

}  // namespace

std::string latest_date(const LoadedResults& results) {
  std::string latest;
  for (const ResultEntry& e : results.results) latest = std::max(latest, e.result.environment.date);
  return latest;
}

std::string earliest_date(const LoadedResults& results) {
  std::string earliest;
  for (const auto* list : {&results.results, &results.replaced}) {
    for (const ResultEntry& e : *list) {
      const std::string& d = e.result.environment.date;
      if (!d.empty() && (earliest.empty() || d < earliest)) earliest = d;
    }
  }
  return earliest;
}

std::vector<std::string> leave_out_later(std::vector<Night>& nights,
                                         const std::string& tonight_began) {
  std::vector<std::string> later;
  if (tonight_began.empty()) return later;
  // Dates are UTC times of one fixed shape (the result reader's rule), so
  // they order as strings.
  const auto after = [&](const Night& n) {
    return !n.first_date.empty() && n.first_date > tonight_began;
  };
  for (const Night& n : nights) {
    if (after(n)) later.push_back(n.name);
  }
  nights.erase(std::remove_if(nights.begin(), nights.end(), after), nights.end());
  return later;
}

bool same_or_inside(const std::string& inner, const std::string& outer) {
  const fs::path rel = resolved_path(inner).lexically_relative(resolved_path(outer));
  return !rel.empty() && *rel.begin() != "..";
}

std::vector<Night> load_nights(const std::vector<std::string>& paths, bool skip_bad,
                               const std::vector<std::string>& tonight) {
  std::vector<Night> nights;
  std::set<fs::path> seen;  // a night given twice counts once
  for (const std::string& p : paths) {
    for (Night& n : nights_of(p, skip_bad, tonight)) {
      if (!seen.insert(resolved_path(n.path)).second) continue;
      nights.push_back(std::move(n));
    }
  }
  std::stable_sort(nights.begin(), nights.end(), [](const Night& a, const Night& b) {
    return a.date != b.date ? a.date < b.date : a.name < b.name;
  });
  return nights;
}

std::vector<double> throughput_samples(const Result& result) {
  if (!result.metrics) return {};
  const ResultMetrics& m = *result.metrics;
  const double per_step = static_cast<double>(result.config.micro_batch_size) *
                          result.config.microbatches * result.config.batches;
  std::vector<double> out;
  for (double t : m.step_time_seconds.samples) {
    if (t > 0) out.push_back(per_step / t);
  }
  if (out.empty() && m.samples_per_second > 0) out.push_back(m.samples_per_second);
  return out;
}

std::vector<double> bubble_samples(const Result& result) {
  if (!result.metrics) return {};
  const BubbleFigures& b = result.metrics->bubble_ratio;
  if (!b.samples.empty()) return b.samples;
  return {b.measured};
}

double peak_memory_bytes(const Result& result) {
  if (!result.metrics || result.metrics->peak_memory_bytes.per_stage.empty()) return 0;
  const std::vector<int64_t>& v = result.metrics->peak_memory_bytes.per_stage;
  return static_cast<double>(*std::max_element(v.begin(), v.end()));
}

std::vector<double> device_bubble_samples(const Result& result) {
  if (!result.metrics || !result.metrics->device) return {};
  return result.metrics->device->bubble_ratio_samples;
}

double peak_device_memory_bytes(const Result& result) {
  if (!result.metrics || result.metrics->peak_memory_bytes.device_per_stage.empty()) return 0;
  const std::vector<int64_t>& v = result.metrics->peak_memory_bytes.device_per_stage;
  return static_cast<double>(*std::max_element(v.begin(), v.end()));
}

}  // namespace ppb::reports
