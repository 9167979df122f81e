// A stand-in libnvidia-ml.so.1 for the tests of the NVML reader
// (ppb/exec/nvml.hpp) where there is no driver: built under that soname in
// a folder of its own, it is what dlopen finds when a test puts that folder
// on LD_LIBRARY_PATH. It knows the CUDA emulator's GPUs (bus ids
// 0000:01:00.0 and 0000:02:00.0, as its cudaDeviceGetPCIBusId writes them)
// and answers each with fixed readings that tell the calls apart:
//   SM clock 1980 MHz (GPU 0) or 1410 MHz (GPU 1), memory clock 3201 MHz,
//   power 512345 mW of an enforced 700000 mW limit, temperature 42 C from
//   nvmlDeviceGetTemperatureV and 41 C from the deprecated
//   nvmlDeviceGetTemperature, ECC corrected errors 3 more at each reading,
//   uncorrected 0.
// The environment changes what it says, read at each call:
//   PPB_FAKE_NVML_REASONS=0x48      clocks-event reason bits (default none)
//   PPB_FAKE_NVML_TEMPERATURE_V=mismatch
//                                   nvmlDeviceGetTemperatureV answers
//                                   NVML_ERROR_ARGUMENT_VERSION_MISMATCH
//   PPB_FAKE_NVML_INIT=fail         nvmlInit_v2 answers NVML_ERROR_DRIVER_NOT_LOADED
//   PPB_FAKE_NVML_NOT_SUPPORTED=power,ecc
//                                   the named readings (clock, power,
//                                   power_limit, temperature, reasons, ecc)
//                                   answer NVML_ERROR_NOT_SUPPORTED, as a
//                                   driver does for what a GPU or its
//                                   partition does not expose (a vGPU's
//                                   power, a consumer GPU's ECC)
// Built with PPB_FAKE_NVML_BEFORE_12_2, it is a driver from before CUDA
// 12.2's NVML: the clocks-event reasons under their older name only,
// nvmlDeviceGetCurrentClocksThrottleReasons.
// Every call checks its arguments as NVML does (a null pointer is
// NVML_ERROR_INVALID_ARGUMENT; a temperature struct of another version is a
// version mismatch), so a reader that passes a wrong one fails here too.
#include <strings.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kSuccess = 0;
constexpr int kUninitialized = 1;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kNotFound = 6;
constexpr int kDriverNotLoaded = 9;
constexpr int kVersionMismatch = 25;

struct FakeGpu {
  const char* bus;
  unsigned sm_mhz;
  std::atomic<unsigned long long> corrected;  // grows by 3 at each reading
};

FakeGpu gpus[] = {{"0000:01:00.0", 1980, 0}, {"0000:02:00.0", 1410, 0}};
// nvmlInit_v2 calls not yet shut down: NVML counts them, so that one
// user's shutdown leaves another's NVML working.
std::atomic<int> initialised{0};

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

// Whether PPB_FAKE_NVML_NOT_SUPPORTED names `reading` (a comma-separated list).
bool unsupported(const char* reading) {
  const char* v = std::getenv("PPB_FAKE_NVML_NOT_SUPPORTED");
  if (v == nullptr) return false;
  const size_t n = std::strlen(reading);
  for (const char* p = v; *p != '\0';) {
    const char* end = std::strchr(p, ',');
    const size_t len = end != nullptr ? static_cast<size_t>(end - p) : std::strlen(p);
    if (len == n && std::strncmp(p, reading, n) == 0) return true;
    if (end == nullptr) break;
    p = end + 1;
  }
  return false;
}

FakeGpu* gpu(void* device) {
  for (FakeGpu& g : gpus)
    if (device == &g) return &g;
  return nullptr;
}

struct Temperature {  // nvmlTemperature_v1_t
  unsigned version;
  int sensor;
  int celsius;
};

}  // namespace

extern "C" {

// The tests ask for this symbol to know that the NVML they loaded is this one.
int ppb_fake_nvml = 1;

int nvmlInit_v2() {
  if (env_is("PPB_FAKE_NVML_INIT", "fail")) return kDriverNotLoaded;
  ++initialised;
  return kSuccess;
}

int nvmlShutdown() {
  if (initialised.load() <= 0) return kUninitialized;
  --initialised;
  return kSuccess;
}

const char* nvmlErrorString(int result) {
  switch (result) {
    case kSuccess:
      return "Success";
    case kDriverNotLoaded:
      return "Driver Not Loaded";
    case kNotFound:
      return "Not Found";
    case kNotSupported:
      return "Not Supported";
    default:
      return "Unknown Error";
  }
}

int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  if (version == nullptr || length < 10) return kInvalidArgument;
  std::strncpy(version, "999.12.34", length);
  return kSuccess;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char* bus, void** device) {
  if (initialised.load() <= 0) return kUninitialized;
  if (bus == nullptr || device == nullptr) return kInvalidArgument;
  for (FakeGpu& g : gpus) {
    if (strcasecmp(bus, g.bus) == 0) {
      *device = &g;
      return kSuccess;
    }
  }
  return kNotFound;
}

int nvmlDeviceGetClockInfo(void* device, int type, unsigned* mhz) {
  FakeGpu* g = gpu(device);
  if (g == nullptr || mhz == nullptr) return kInvalidArgument;
  if (unsupported("clock")) return kNotSupported;
  if (type == 1) {  // NVML_CLOCK_SM
    *mhz = g->sm_mhz;
  } else if (type == 2) {  // NVML_CLOCK_MEM
    *mhz = 3201;
  } else {
    return kInvalidArgument;
  }
  return kSuccess;
}

int nvmlDeviceGetPowerUsage(void* device, unsigned* milliwatts) {
  if (gpu(device) == nullptr || milliwatts == nullptr) return kInvalidArgument;
  if (unsupported("power")) return kNotSupported;
  *milliwatts = 512345;
  return kSuccess;
}

int nvmlDeviceGetEnforcedPowerLimit(void* device, unsigned* milliwatts) {
  if (gpu(device) == nullptr || milliwatts == nullptr) return kInvalidArgument;
  if (unsupported("power_limit")) return kNotSupported;
  *milliwatts = 700000;
  return kSuccess;
}

// The struct as an opaque pointer, as the reader declares the call (the
// sanitizer's function-type check compares the two declarations).
int nvmlDeviceGetTemperatureV(void* device, void* argument) {
  auto* t = static_cast<Temperature*>(argument);
  if (gpu(device) == nullptr || t == nullptr) return kInvalidArgument;
  if (unsupported("temperature")) return kNotSupported;
  // NVML_STRUCT_VERSION(Temperature, 1) as nvml.h computes it: the
  // struct's 12 bytes, version 1 in the top byte.
  if (env_is("PPB_FAKE_NVML_TEMPERATURE_V", "mismatch") || t->version != 0x0100000CU)
    return kVersionMismatch;
  if (t->sensor != 0) return kInvalidArgument;  // NVML_TEMPERATURE_GPU only
  t->celsius = 42;
  return kSuccess;
}

int nvmlDeviceGetTemperature(void* device, int sensor, unsigned* celsius) {
  if (gpu(device) == nullptr || celsius == nullptr || sensor != 0) return kInvalidArgument;
  if (unsupported("temperature")) return kNotSupported;
  *celsius = 41;
  return kSuccess;
}

#ifdef PPB_FAKE_NVML_BEFORE_12_2
int nvmlDeviceGetCurrentClocksThrottleReasons(void* device, unsigned long long* reasons) {
#else
int nvmlDeviceGetCurrentClocksEventReasons(void* device, unsigned long long* reasons) {
#endif
  if (gpu(device) == nullptr || reasons == nullptr) return kInvalidArgument;
  if (unsupported("reasons")) return kNotSupported;
  const char* v = std::getenv("PPB_FAKE_NVML_REASONS");
  *reasons = v != nullptr ? std::strtoull(v, nullptr, 0) : 0;
  return kSuccess;
}

int nvmlDeviceGetTotalEccErrors(void* device, int type, int counter, unsigned long long* count) {
  FakeGpu* g = gpu(device);
  if (g == nullptr || count == nullptr || counter != 0) return kInvalidArgument;
  if (unsupported("ecc")) return kNotSupported;
  if (type == 0) {  // NVML_MEMORY_ERROR_TYPE_CORRECTED
    *count = g->corrected += 3;
  } else if (type == 1) {
    *count = 0;
  } else {
    return kInvalidArgument;
  }
  return kSuccess;
}

}  // extern "C"
