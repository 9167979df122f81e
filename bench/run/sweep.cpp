#include "run/sweep.hpp"

#include <cctype>

#include "ppb/pipeline/schedule.hpp"

namespace ppb::run {

std::vector<Combination> enumerate_sweep(const std::vector<std::string>& schedules,
                                         const std::vector<std::string>& partitions,
                                         const std::vector<int>& microbatches,
                                         const SweepParams& params) {
  std::vector<Combination> out;
  for (const std::string& schedule : schedules) {
    for (const std::string& partition : partitions) {
      for (int m : microbatches) {
        Combination c;
        c.index = static_cast<int>(out.size());
        c.schedule = schedule;
        c.partition = partition;
        c.stages = params.stages;
        c.data_parallel = params.data_parallel;
        c.microbatches = m;
        const ScheduleInfo& info = schedule_info(schedule);
        if (info.uses_chunks) c.chunks = params.chunks;
        if (info.fixed_chunks > 0) c.chunks = info.fixed_chunks;
        if (info.uses_inflight) c.inflight = params.inflight;
        if (info.uses_sync_warmup) c.sync_warmup = params.sync_warmup;
        if (info.no_flush) c.batches = params.batches;
        out.push_back(c);
      }
    }
  }
  return out;
}

namespace {

std::string sanitize(const std::string& text) {
  std::string out = text;
  for (char& ch : out) {
    const bool keep = std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '.' || ch == '-';
    if (!keep) ch = '_';
  }
  return out;
}

}  // namespace

std::string result_stem(const Combination& c) {
  std::string name = sanitize(c.schedule) + "__" + sanitize(c.partition) + "__P" +
                     std::to_string(c.stages) +
                     (c.data_parallel > 1 ? "_D" + std::to_string(c.data_parallel) : "") + "_M" +
                     std::to_string(c.microbatches);
  if (c.chunks > 1) name += "_V" + std::to_string(c.chunks);
  if (c.inflight > 0) name += "_N" + std::to_string(c.inflight);
  if (c.sync_warmup > 0) name += "_K" + std::to_string(c.sync_warmup);
  if (c.batches > 1) name += "_B" + std::to_string(c.batches);
  return name;
}

std::string result_file_name(const Combination& c) { return result_stem(c) + ".json"; }

std::string combination_label(const Combination& c) {
  std::string label = c.schedule + " x " + c.partition + " M=" + std::to_string(c.microbatches);
  if (c.chunks > 1) label += " V=" + std::to_string(c.chunks);
  if (c.inflight > 0) label += " N=" + std::to_string(c.inflight);
  if (c.sync_warmup > 0) label += " K=" + std::to_string(c.sync_warmup);
  if (c.batches > 1) label += " B=" + std::to_string(c.batches);
  if (c.data_parallel > 1) label += " D=" + std::to_string(c.data_parallel);
  return label;
}

}  // namespace ppb::run
