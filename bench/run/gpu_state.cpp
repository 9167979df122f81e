#include "run/gpu_state.hpp"

#include <boost/json.hpp>
#include <chrono>
#include <set>

#include "ppb/exec/mpi.hpp"
#include "ppb/pipeline/result.hpp"
#include "ppb/profiling/json_fields.hpp"
#include "ppb/profiling/log.hpp"

namespace ppb::run {

namespace {

// NVML's readings are cheap (microseconds); a step is milliseconds or more.
constexpr std::chrono::milliseconds kPeriod{100};

}  // namespace

std::unique_ptr<nvml::Sampler> gpu_sampler(const std::string& bus, int rank) {
  std::string why;
  std::shared_ptr<const nvml::Library> lib = nvml::Library::open(&why);
  if (!lib) {
    if (rank == 0) log::info("%s", nvml::unavailable_line(why).c_str());
    return nullptr;
  }
  return std::make_unique<nvml::Sampler>(std::move(lib), std::vector<std::string>{bus}, kPeriod);
}

std::vector<GpuState> gather_gpu_state(MPI_Comm comm, nvml::Sampler* sampler,
                                       const std::string& gpu) {
  // Each rank's summary travels as its JSON text (the result's field list):
  // "" where nothing was sampled.
  std::string mine;
  if (sampler != nullptr) {
    const std::vector<std::vector<GpuSample>> samples = sampler->stop();
    if (!samples.empty() && !samples.front().empty()) {
      GpuState st = summarise_gpu_samples(samples.front());
      st.gpu = gpu;
      mine = boost::json::serialize(gpu_state_to_json(st));
    }
  }
  int rank = 0;
  int size = 1;
  PPB_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  PPB_MPI_CHECK(MPI_Comm_size(comm, &size));
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<size_t>(size));
  PPB_MPI_CHECK(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm));
  std::vector<int> offsets(static_cast<size_t>(size), 0);
  for (size_t r = 1; r < offsets.size(); ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
  std::string all(rank == 0 ? static_cast<size_t>(offsets.back() + lengths.back()) : 0, '\0');
  PPB_MPI_CHECK(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(),
                            offsets.data(), MPI_CHAR, 0, comm));
  std::vector<GpuState> out;
  if (rank != 0) return out;
  std::set<std::string> seen;
  for (size_t r = 0; r < lengths.size(); ++r) {
    if (lengths[r] == 0) continue;
    const boost::json::value doc = boost::json::parse(std::string_view(all).substr(
        static_cast<size_t>(offsets[r]), static_cast<size_t>(lengths[r])));
    const JsonReader reader("rank " + std::to_string(r) + "'s gpu_state");
    GpuState st = gpu_state_from_json(reader.root(doc));
    if (seen.insert(st.gpu).second) out.push_back(std::move(st));
  }
  return out;
}

}  // namespace ppb::run
