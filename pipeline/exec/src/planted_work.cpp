#include "planted_work.hpp"

#include <chrono>

#include "ppb/profiling/check.hpp"

namespace ppb {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void busy_work_for(double seconds) {
  const double end = now_seconds() + seconds;
  // volatile: the compiler must do every multiply-add. Clock reads are
  // ~20 ns; 1024 multiply-adds (~2 us) between them keep the overshoot small.
  volatile double x = 1.0;
  while (now_seconds() < end) {
    for (int i = 0; i < 1024; ++i) x = x * 0.999999 + 1e-6;
  }
}

PlantedWork::PlantedWork(double factor) : factor_(factor) {
  PPB_CHECK(factor >= 1, "a planted cpu slowdown needs a factor >= 1");
  if (factor_ > 1) start_ = now_seconds();
}

PlantedWork::~PlantedWork() {
  if (factor_ <= 1) return;
  busy_work_for((factor_ - 1) * (now_seconds() - start_));
}

}  // namespace ppb
