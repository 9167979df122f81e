#include "ppb/reports/load.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "ppb/pipeline/schedule.hpp"
#include "ppb/profiling/check.hpp"
#include "ppb/profiling/input_file.hpp"

namespace ppb::reports {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

std::string join(const std::vector<std::string>& xs, const char* sep) {
  std::string out;
  for (const auto& x : xs) {
    if (!out.empty()) out += sep;
    out += x;
  }
  return out;
}

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

}  // namespace

fs::path resolved_path(const std::string& path) {
  std::error_code ec;
  const fs::path where = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? fs::path(path) : where;
}

std::vector<std::string> result_candidates(const std::string& path, std::vector<BadFile>* bad) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw UsageError(path + ": cannot read: " + ec.message());
  if (!fs::exists(st)) throw UsageError(path + ": no such file or directory");
  if (fs::is_regular_file(st)) return {path};
  if (!fs::is_directory(st)) throw UsageError(path + ": not a file or directory");
  std::vector<std::string> out;
  // Links to folders are followed (a night kept as a link is a night), each
  // folder once: a link back to a folder already walked, or to one that
  // holds the walk's own (`../..`), is not entered.
  const fs::path root = fs::canonical(path, ec);
  std::set<fs::path> walked{root};
  // With `bad`, what cannot be read is listed there (--skip-bad), else named.
  const auto cannot = [&](const fs::path& p, const std::string& why) {
    if (bad == nullptr) throw UsageError(p.string() + ": " + why);
    bad->push_back({p.string(), p.string() + ": " + why});
  };
  for (fs::recursive_directory_iterator
           it(path, fs::directory_options::follow_directory_symlink, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // Temporary files of an atomic write in progress start with '.'.
    if (name.empty() || name[0] == '.') {
      it.disable_recursion_pending();
      continue;
    }
    // A run's traces (<name>.trace.json, <name>.trace/rank<r>.json) are
    // no results: never read (they may be far larger than a result).
    if (name.ends_with(".trace.json")) continue;
    if (name.ends_with(".trace") && it->is_directory(ec)) {
      it.disable_recursion_pending();
      continue;
    }
    // A folder that cannot be read is named, not skipped: a folder of
    // results is never quietly smaller.
    if (std::error_code dec; it->is_directory(dec)) {
      if (::faccessat(AT_FDCWD, it->path().c_str(), R_OK | X_OK, AT_EACCESS) != 0) {
        cannot(it->path(), std::string("cannot read directory: ") + std::strerror(errno));
        it.disable_recursion_pending();
        continue;
      }
      const fs::path where = fs::canonical(it->path(), dec);
      const fs::path up = root.lexically_relative(where);  // "" or "../x": not above the root
      const bool above = !up.empty() && *up.begin() != "..";
      if (dec || above || !walked.insert(where).second) it.disable_recursion_pending();
      continue;
    }
    const bool json = it->path().extension() == ".json";
    // A link that leads nowhere is named: a loop wherever it is (it may
    // stand for a night's folder), a dangling *.json (a result the folder
    // claims to hold); a folder of results is never quietly smaller.
    std::error_code sec;
    const fs::file_status fst = it->status(sec);
    if (sec && (json || sec != std::errc::no_such_file_or_directory)) {
      cannot(it->path(), "cannot read: " + sec.message());
      continue;
    }
    if (json && fs::is_regular_file(fst)) out.push_back(it->path().string());
    if (json && fs::exists(fst) && !fs::is_regular_file(fst) && !fs::is_directory(fst))
      cannot(it->path(), "not a regular file (a result is one)");
  }
  if (ec) throw UsageError(path + ": cannot read directory: " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

enum class Kind { kResult, kOther };

Kind classify(const json::value& doc) {
  if (!doc.is_object()) return Kind::kOther;
  const json::object& o = doc.get_object();
  // A result whose schema field was mangled ("pipebench.results/1", "")
  // is still a result, for the reader to refuse by name: one that says it
  // is one, or has a result's two parts.
  const bool shaped = o.contains("config") && o.contains("metrics");
  if (const json::value* s = o.if_contains("schema")) {
    if (!s->is_string()) return Kind::kResult;  // let the reader say so
    std::string lower(s->get_string());
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return lower.starts_with("pipebench.result") || shaped ? Kind::kResult : Kind::kOther;
  }
  return (o.contains("config") || o.contains("metrics")) ? Kind::kResult : Kind::kOther;
}

}  // namespace

std::string machine_key(const ResultEnvironment& env) {
  std::vector<std::string> hosts = env.hosts;
  std::sort(hosts.begin(), hosts.end());
  // env.gpus names the device of every rank; ranks that shared one device
  // name it once each, so a model's device count is its ranks over the
  // ranks per device (rounded up: the busiest device sets ranks_per_gpu).
  std::map<std::string, int> ranks_of;
  for (const std::string& g : env.gpus) ++ranks_of[g];
  const int per_gpu = std::max(1, env.ranks_per_gpu);
  std::vector<std::string> gpus;
  for (const auto& [name, ranks] : ranks_of)
    gpus.push_back(std::to_string((ranks + per_gpu - 1) / per_gpu) + "x " + name);
  return or_dash(join(hosts, ",")) + " | " + or_dash(env.cpu) + " | " + or_dash(join(gpus, ","));
}

std::string host_key(const ResultEnvironment& env) {
  // The name before the first dot: the probe names its host by
  // gethostname(), a run by MPI_Get_processor_name(), which an MPI may
  // shorten to it.
  std::vector<std::string> hosts;
  for (const std::string& h : env.hosts) hosts.push_back(h.substr(0, h.find('.')));
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  std::set<std::string> models(env.gpus.begin(), env.gpus.end());
  return or_dash(join(hosts, ",")) + " | " + or_dash(env.cpu) + " | " +
         or_dash(join({models.begin(), models.end()}, ","));
}

std::string build_key(const ResultEnvironment& env) {
  return or_dash(env.git) + " | " + or_dash(env.compiler) + " | " + or_dash(env.build_type);
}

std::vector<WorkField> work_fields(const ResultConfig& c) {
  std::vector<WorkField> fields = {
      {"model", c.model}, {"mbs", std::to_string(c.micro_batch_size)}, {"dtype", c.dtype}};
  // A padded head computes more logits: another work. Unpadded runs (and
  // files from before padding) keep the key they always had.
  if (c.vocab_padding && c.vocab_padding->padded > c.vocab_padding->vocab)
    fields.push_back({"padded_vocab", std::to_string(c.vocab_padding->padded)});
  return fields;
}

std::string work_key(const ResultConfig& c) {
  std::string out;
  for (const WorkField& f : work_fields(c))
    out += (out.empty() ? "" : " ") + std::string(f.name) + "=" + f.value;
  return out;
}

std::string work_label(const ResultConfig& c) {
  std::string out;
  for (const WorkField& f : work_fields(c)) {
    const std::string name = f.name;
    // The model and the dtype read as themselves; other fields by name.
    out += (out.empty() ? "" : ", ") +
           (name == "model" || name == "dtype" ? f.value : name + " " + f.value);
  }
  return out;
}

std::string setup_key(const ResultConfig& c) {
  std::ostringstream s;
  s << "partition=" << c.partition << " P=" << c.stages << " D=" << c.data_parallel
    << " M=" << c.microbatches << " " << work_key(c) << " backend=" << c.backend
    << " transport=" << c.transport << " budget=" << c.memory_budget
    << " time_scale=" << c.time_scale;
  return s.str();
}

std::string config_key(const ResultConfig& c) {
  std::ostringstream s;
  s << "schedule=" << c.schedule << " N=" << c.inflight << " V=" << c.chunks
    << " K=" << c.sync_warmup << " guard=" << c.memory_guard << " batches=" << c.batches << " "
    << setup_key(c);
  return s.str();
}

std::string config_label(const ResultConfig& c) {
  std::ostringstream s;
  s << c.schedule << " x " << c.partition << " P=" << c.stages;
  if (c.data_parallel > 1) s << " D=" << c.data_parallel;
  s << " M=" << c.microbatches;
  const ScheduleInfo* info = find_schedule_info(c.schedule);
  if (info != nullptr && info->uses_inflight) s << " N=" << c.inflight;
  if (c.chunks > 1) s << " V=" << c.chunks;
  if (info != nullptr && info->uses_sync_warmup) s << " K=" << c.sync_warmup;
  if (c.batches > 1) s << " batches=" << c.batches;
  if (c.memory_budget > 0) s << " budget=" << c.memory_budget;
  return s.str();
}

ResultEntry make_entry(std::string source, Result result) {
  ResultEntry e;
  e.source = std::move(source);
  e.machine = machine_key(result.environment);
  e.build = build_key(result.environment);
  // Backends measure different things (real compute vs modelled sleeps), and
  // different work (another model, micro-batch size or dtype) is another
  // measurement: their figures are never compared with one another.
  e.work = work_label(result.config);
  e.group =
      e.machine + " @ " + e.build + " @ " + result.config.backend + " @ " + work_key(result.config);
  e.config_key = config_key(result.config);
  if (result.metrics && !result.metrics->peak_memory_bytes.device_profiler.empty())
    e.config_key += " device_profiler=" + result.metrics->peak_memory_bytes.device_profiler;
  e.setup_key = setup_key(result.config);
  // Ranks taking turns on one GPU measure the shared device, not a pipeline
  // of devices: a run is compared only with runs of the same sharing (0:
  // not recorded, a run without a GPU or from before the field).
  if (result.environment.ranks_per_gpu > 0) {
    const std::string sharing =
        " ranks_per_gpu=" + std::to_string(result.environment.ranks_per_gpu);
    e.config_key += sharing;
    e.setup_key += sharing;
  }
  e.label = config_label(result.config);
  e.result = std::move(result);
  return e;
}

namespace {

// What a folder without results holds instead, for the message: "" or
// " (a.json is a pipebench.calibration/1 file, not a result)".
std::string instead(const std::vector<std::string>& ignored) {
  if (ignored.empty()) return "";
  std::string what = "another kind of JSON";
  try {
    const json::value doc =
        json::parse(read_input_file(ignored.front(), "file", kMaxResultFileBytes));
    const json::value* s = doc.is_object() ? doc.get_object().if_contains("schema") : nullptr;
    if (s != nullptr && s->is_string()) what = "a " + std::string(s->get_string()) + " file";
  } catch (const std::exception&) {
  }
  std::string more;
  if (ignored.size() > 1) more = " and " + std::to_string(ignored.size() - 1) + " more like it";
  return " (" + ignored.front() + " is " + what + ", not a result" +
         (more.empty() ? "" : "," + more) + ")";
}

}  // namespace

LoadedResults load_results(const std::vector<std::string>& paths, bool skip_bad,
                           const std::vector<std::string>& exclude, bool keep_repeats) {
  LoadedResults out = load_results_if_any(paths, skip_bad, exclude, keep_repeats);
  if (out.results.empty() && out.bad.empty()) {
    std::string where;
    for (const std::string& p : paths) where += (where.empty() ? "" : ", ") + p;
    throw UsageError("nothing to report: no pipebench result files in " + where +
                     instead(out.ignored));
  }
  return out;
}

LoadedResults load_results_if_any(const std::vector<std::string>& paths, bool skip_bad,
                                  const std::vector<std::string>& exclude, bool keep_repeats) {
  LoadedResults out;
  std::vector<fs::path> excluded;
  for (const std::string& x : exclude) excluded.push_back(resolved_path(x));
  auto is_excluded = [&excluded](const fs::path& file) {
    return std::any_of(excluded.begin(), excluded.end(), [&file](const fs::path& dir) {
      const fs::path rel = file.lexically_relative(dir);
      return !rel.empty() && *rel.begin() != "..";
    });
  };
  std::vector<std::string> files;
  std::set<std::string> seen;
  for (const std::string& p : paths) {
    for (std::string& f : result_candidates(p, skip_bad ? &out.bad : nullptr)) {
      const fs::path canonical = resolved_path(f);
      if (is_excluded(canonical)) continue;
      if (seen.insert(canonical.string()).second) files.push_back(std::move(f));
    }
  }
  for (const std::string& f : files) {
    try {
      const std::string text = read_input_file(f, "result file", kMaxResultFileBytes);
      if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
        throw UsageError(f + ": empty file, expected a pipebench result");
      }
      json::error_code ec;
      const json::value doc = json::parse(text, ec);
      if (ec)
        throw UsageError(f + ": malformed JSON (" + ec.message() +
                         "); truncated or not a pipebench result");
      if (classify(doc) == Kind::kOther) {
        out.ignored.push_back(f);
        continue;
      }
      out.results.push_back(make_entry(f, result_from_json(doc, f)));
    } catch (const UsageError& e) {
      if (!skip_bad) throw;
      out.bad.push_back({f, e.what()});
    }
  }
  if (keep_repeats) return out;
  // The same combination twice in one group (a rerun into another folder):
  // keep the newest (ISO dates sort as text), list the other. Never average.
  std::map<std::string, size_t> newest;
  std::vector<bool> keep(out.results.size(), true);
  for (size_t i = 0; i < out.results.size(); ++i) {
    const ResultEntry& e = out.results[i];
    const std::string key = e.group + " # " + e.config_key;
    auto [it, inserted] = newest.emplace(key, i);
    if (inserted) continue;
    const ResultEntry& other = out.results[it->second];
    const bool newer = e.result.environment.date > other.result.environment.date;
    const size_t drop = newer ? it->second : i;
    const size_t kept = newer ? i : it->second;
    keep[drop] = false;
    // Of two at the same date the first read is kept: said as such.
    const bool tie = e.result.environment.date == other.result.environment.date;
    out.superseded.push_back(
        out.results[drop].source +
        (tie ? " (same date " + e.result.environment.date + "; kept, the first read: "
             : " (newer: ") +
        out.results[kept].source + ")");
    it->second = kept;
  }
  std::vector<ResultEntry> kept;
  for (size_t i = 0; i < out.results.size(); ++i) {
    (keep[i] ? kept : out.replaced).push_back(std::move(out.results[i]));
  }
  out.results = std::move(kept);
  return out;
}

}  // namespace ppb::reports
