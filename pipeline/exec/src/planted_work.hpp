// A slowdown planted on purpose, to test the regression gate end to end
// (`pipebench run --plant STAGE:FACTOR`, recorded as config.plant in every
// result so a planted run is never taken for a real one). The planted
// stage's actions take FACTOR times as long: the timed backend scales its
// sleeps; the cpu backend, whose work cannot be scaled, adds
// (FACTOR - 1) x the action's own duration of real floating-point work after
// each action (PlantedWork below).
#pragma once

namespace ppb {

/// RAII: on destruction, busies this thread with arithmetic for
/// (factor - 1) x the time since construction. factor == 1: does nothing.
/// REQUIRES: factor >= 1.
class PlantedWork {
 public:
  explicit PlantedWork(double factor);
  ~PlantedWork();
  PlantedWork(const PlantedWork&) = delete;
  PlantedWork& operator=(const PlantedWork&) = delete;

 private:
  double factor_;
  double start_ = 0;  // seconds on the steady clock
};

/// Dependent multiply-adds until `seconds` have passed on the steady clock
/// (real work on the core, not a sleep).
void busy_work_for(double seconds);

}  // namespace ppb
