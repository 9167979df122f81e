// NVML (libnvidia-ml.so.1, which comes with the NVIDIA driver), loaded at
// run time: the build needs no NVML and a machine without it still runs,
// with one line saying what is not sampled. What the GPUs themselves did
// (clocks, power, temperature, throttling, ECC errors) is read here and
// summarised by ppb/pipeline/gpu_state.hpp.
//
// Example (the health probe, the cuda backend's runs):
//   std::string why;
//   std::shared_ptr<ppb::nvml::Library> lib = ppb::nvml::Library::open(&why);
//   if (!lib) std::fprintf(stderr, "%s\n", ppb::nvml::unavailable_line(why).c_str());
//   ppb::nvml::Sampler sampler(lib, {"0000:3B:00.0"}, std::chrono::milliseconds(100));
//   ... the measured work ...
//   std::vector<std::vector<ppb::GpuSample>> per_gpu = sampler.stop();
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ppb/pipeline/gpu_state.hpp"

namespace ppb::nvml {

/// The library's soname, the one name dlopen is given.
inline constexpr const char* kLibrary = "libnvidia-ml.so.1";

/// The one line a run prints where NVML cannot be used, `why` being what
/// Library::open said: "gpu state: NVML not found (libnvidia-ml.so.1: <why>):
/// clocks, power, temperature and throttling not sampled". Example:
/// unavailable_line("cannot open shared object file") ==
/// "gpu state: NVML not found (libnvidia-ml.so.1: cannot open shared object
/// file): clocks, power, temperature and throttling not sampled".
std::string unavailable_line(const std::string& why);

/// NVML, loaded and initialised; shut down and unloaded on destruction.
/// Thread-safe as NVML is (its calls may come from a sampler thread).
class Library {
 public:
  /// The library, or null with `*why` set to one phrase (dlopen's error,
  /// a missing symbol, nvmlInit's error string).
  static std::shared_ptr<Library> open(std::string* why);
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  /// The driver's version ("580.95.05"), "" when NVML cannot say.
  std::string driver_version() const;

  /// One reading of the GPU at PCI bus id `bus` ("0000:3B:00.0", as
  /// cudaDeviceGetPCIBusId writes it); what NVML cannot give stays unknown
  /// (NaN, -1). A bus id NVML does not know gives an all-unknown sample.
  GpuSample sample(const std::string& bus) const;

  struct Api;  ///< the resolved entry points (nvml.cpp)

 private:
  Library(void* handle, std::unique_ptr<Api> api);
  void* handle_;
  std::unique_ptr<Api> api_;
};

/// A thread that reads every GPU in `buses` every `period` until stop().
/// With a null library it samples nothing (stop() gives empty lists).
class Sampler {
 public:
  Sampler(std::shared_ptr<const Library> library, std::vector<std::string> buses,
          std::chrono::milliseconds period);
  ~Sampler();  ///< stops the thread
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  /// Starts (or restarts, after stop) sampling; one reading of each GPU at
  /// once, then one per period.
  void start();
  /// Stops and returns the readings since start(), per GPU (index as in
  /// `buses`), oldest first; one more reading of each is taken at the stop,
  /// so every GPU has at least two.
  std::vector<std::vector<GpuSample>> stop();

 private:
  void read_all();
  void loop();

  std::shared_ptr<const Library> library_;
  std::vector<std::string> buses_;
  std::chrono::milliseconds period_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool running_ = false;
  std::vector<std::vector<GpuSample>> samples_;
  std::thread thread_;
};

}  // namespace ppb::nvml
