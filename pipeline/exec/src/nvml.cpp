// NVML through dlopen. The few entry points used are declared here with
// NVML's C signatures (nvml.h: every call returns nvmlReturn_t, 0 =
// NVML_SUCCESS; a device is an opaque pointer), so no NVML header is needed.
#include "ppb/exec/nvml.hpp"

#include <dlfcn.h>

#include <utility>

namespace ppb::nvml {

namespace {

using Device = void*;  // nvmlDevice_t
constexpr int kSuccess = 0;
constexpr int kClockSm = 1;         // NVML_CLOCK_SM
constexpr int kClockMemory = 2;     // NVML_CLOCK_MEM
constexpr int kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
constexpr int kEccCorrected = 0;    // NVML_MEMORY_ERROR_TYPE_CORRECTED
constexpr int kEccUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kEccVolatile = 0;     // NVML_VOLATILE_ECC

// nvmlTemperature_v1_t, the argument of nvmlDeviceGetTemperatureV (newer
// drivers; NVML 13 deprecates nvmlDeviceGetTemperature): three 32-bit fields,
// `version` being NVML_STRUCT_VERSION(Temperature, 1), the struct's size
// with the version number in its top byte.
struct Temperature {
  unsigned version;
  int sensor;  // nvmlTemperatureSensors_t
  int celsius;
};
constexpr unsigned kTemperatureVersion = sizeof(Temperature) | (1U << 24U);

}  // namespace

struct Library::Api {
  int (*init)() = nullptr;                                      // nvmlInit_v2
  int (*shutdown)() = nullptr;                                  // nvmlShutdown
  const char* (*error_string)(int) = nullptr;                   // nvmlErrorString
  int (*driver_version)(char*, unsigned) = nullptr;             // nvmlSystemGetDriverVersion
  int (*by_bus)(const char*, Device*) = nullptr;                // ..GetHandleByPciBusId_v2
  int (*clock)(Device, int, unsigned*) = nullptr;               // nvmlDeviceGetClockInfo
  int (*power)(Device, unsigned*) = nullptr;                    // nvmlDeviceGetPowerUsage
  int (*power_limit)(Device, unsigned*) = nullptr;              // ..GetEnforcedPowerLimit
  int (*temperature_v)(Device, void*) = nullptr;                // ..GetTemperatureV(Temperature*)
  int (*temperature)(Device, int, unsigned*) = nullptr;         // nvmlDeviceGetTemperature
  int (*reasons)(Device, unsigned long long*) = nullptr;        // ..ClocksEventReasons
  int (*ecc)(Device, int, int, unsigned long long*) = nullptr;  // ..GetTotalEccErrors
};

std::string unavailable_line(const std::string& why) {
  return std::string("gpu state: NVML not found (") + kLibrary + (why.empty() ? "" : ": " + why) +
         "): clocks, power, temperature and throttling not sampled";
}

namespace {

template <class F>
bool resolve(void* handle, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(handle, name));
  return f != nullptr;
}

}  // namespace

std::shared_ptr<Library> Library::open(std::string* why) {
  void* handle = dlopen(kLibrary, RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) {
    // dlerror() names the library first: "libnvidia-ml.so.1: cannot open ...".
    const char* e = dlerror();
    std::string text = e != nullptr ? e : "dlopen failed";
    const std::string named = std::string(kLibrary) + ": ";
    if (text.rfind(named, 0) == 0) text.erase(0, named.size());
    if (why != nullptr) *why = text;
    return nullptr;
  }
  auto api = std::make_unique<Api>();
  // The throttle reasons' call was renamed in CUDA 12.2's NVML
  // (ClocksThrottleReasons -> ClocksEventReasons); older drivers have the
  // first name only.
  const bool required = resolve(handle, "nvmlInit_v2", api->init) &&
                        resolve(handle, "nvmlShutdown", api->shutdown) &&
                        resolve(handle, "nvmlErrorString", api->error_string) &&
                        resolve(handle, "nvmlDeviceGetHandleByPciBusId_v2", api->by_bus);
  if (!required) {
    if (why != nullptr) *why = "an NVML without nvmlInit_v2 or nvmlDeviceGetHandleByPciBusId_v2";
    dlclose(handle);
    return nullptr;
  }
  resolve(handle, "nvmlSystemGetDriverVersion", api->driver_version);
  resolve(handle, "nvmlDeviceGetClockInfo", api->clock);
  resolve(handle, "nvmlDeviceGetPowerUsage", api->power);
  resolve(handle, "nvmlDeviceGetEnforcedPowerLimit", api->power_limit);
  // The versioned call where the driver has it, the deprecated one where
  // it has not (or refuses the version).
  resolve(handle, "nvmlDeviceGetTemperatureV", api->temperature_v);
  resolve(handle, "nvmlDeviceGetTemperature", api->temperature);
  if (!resolve(handle, "nvmlDeviceGetCurrentClocksEventReasons", api->reasons))
    resolve(handle, "nvmlDeviceGetCurrentClocksThrottleReasons", api->reasons);
  resolve(handle, "nvmlDeviceGetTotalEccErrors", api->ecc);
  if (const int rc = api->init(); rc != kSuccess) {
    if (why != nullptr) *why = std::string("nvmlInit_v2: ") + api->error_string(rc);
    dlclose(handle);
    return nullptr;
  }
  return std::shared_ptr<Library>(new Library(handle, std::move(api)));
}

Library::Library(void* handle, std::unique_ptr<Api> api) : handle_(handle), api_(std::move(api)) {}

Library::~Library() {
  api_->shutdown();
  dlclose(handle_);
}

std::string Library::driver_version() const {
  char text[96] = {};  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE is 80
  if (api_->driver_version == nullptr || api_->driver_version(text, sizeof text) != kSuccess)
    return {};
  return text;
}

GpuSample Library::sample(const std::string& bus) const {
  GpuSample s;
  Device d = nullptr;
  if (api_->by_bus(bus.c_str(), &d) != kSuccess) return s;
  unsigned v = 0;
  if (api_->clock != nullptr && api_->clock(d, kClockSm, &v) == kSuccess) s.sm_clock_mhz = v;
  if (api_->clock != nullptr && api_->clock(d, kClockMemory, &v) == kSuccess)
    s.memory_clock_mhz = v;
  if (api_->power != nullptr && api_->power(d, &v) == kSuccess) s.power_watts = v / 1000.0;
  if (api_->power_limit != nullptr && api_->power_limit(d, &v) == kSuccess)
    s.power_limit_watts = v / 1000.0;
  Temperature t{.version = kTemperatureVersion, .sensor = kTemperatureGpu, .celsius = 0};
  if (api_->temperature_v != nullptr && api_->temperature_v(d, &t) == kSuccess) {
    s.temperature_c = t.celsius;
  } else if (api_->temperature != nullptr &&
             api_->temperature(d, kTemperatureGpu, &v) == kSuccess) {
    s.temperature_c = v;
  }
  unsigned long long bits = 0;
  if (api_->reasons != nullptr && api_->reasons(d, &bits) == kSuccess) {
    s.throttle_reasons = bits;
    s.throttle_read = true;
  }
  unsigned long long n = 0;
  if (api_->ecc != nullptr && api_->ecc(d, kEccCorrected, kEccVolatile, &n) == kSuccess)
    s.ecc_corrected = static_cast<int64_t>(n);
  if (api_->ecc != nullptr && api_->ecc(d, kEccUncorrected, kEccVolatile, &n) == kSuccess)
    s.ecc_uncorrected = static_cast<int64_t>(n);
  return s;
}

Sampler::Sampler(std::shared_ptr<const Library> library, std::vector<std::string> buses,
                 std::chrono::milliseconds period)
    : library_(std::move(library)), buses_(std::move(buses)), period_(period) {}

Sampler::~Sampler() { (void)stop(); }

void Sampler::read_all() {
  for (size_t i = 0; i < buses_.size(); ++i) samples_[i].push_back(library_->sample(buses_[i]));
}

void Sampler::start() {
  (void)stop();
  samples_.assign(buses_.size(), {});
  if (library_ == nullptr) return;
  {
    const std::lock_guard<std::mutex> lock(mu_);
    running_ = true;
    read_all();
  }
  thread_ = std::thread([this] { loop(); });
}

void Sampler::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (running_) {
    if (!wake_.wait_for(lock, period_, [this] { return !running_; })) read_all();
  }
}

std::vector<std::vector<GpuSample>> Sampler::stop() {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    if (!running_) return std::exchange(samples_, {});
    running_ = false;
  }
  wake_.notify_all();
  thread_.join();
  read_all();
  return std::exchange(samples_, {});
}

}  // namespace ppb::nvml
