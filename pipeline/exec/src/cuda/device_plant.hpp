// A slowdown planted on purpose on the cuda backend (`pipebench run --plant
// STAGE:FACTOR`, recorded as config.plant in every result), the device form
// of planted_work.hpp: real device work on the compute stream after each
// action of the planted stage, running for (FACTOR - 1) x that action's own
// device time, with no host synchronisation. A one-thread kernel stores the
// device clock when the stream reaches the action; after the action another
// spins until the action's time has passed (FACTOR - 1) times again
// (kernels.hpp: plant_mark, plant_spin). The action's events enclose both,
// so its recorded time, its stage's compute and the step grow as a slower
// kernel would make them grow.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ppb::cuda {

class DevicePlant {
 public:
  /// factor 1: plants nothing and allocates nothing. REQUIRES: factor >= 1;
  /// the process's device is bound; `stream` outlives this object.
  DevicePlant(double factor, cudaStream_t stream);
  ~DevicePlant();
  DevicePlant(const DevicePlant&) = delete;
  DevicePlant& operator=(const DevicePlant&) = delete;

  /// Enqueued before an action's work: marks its start on the stream.
  void before_action();
  /// Enqueued after it: the planted work.
  void after_action();

 private:
  double extra_ = 0;  // factor - 1
  cudaStream_t stream_ = nullptr;
  uint64_t* start_ = nullptr;  // device memory: the action's start (ns)
};

}  // namespace ppb::cuda
