// The calibration of the roofline from a device profiler's figures: per
// kernel family from its kernel seconds, a launch cost per action from its
// action windows (plan.hpp, fit_calibration).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ppb/pipeline/device.hpp"
#include "ppb/reports/plan.hpp"

namespace ppb::reports {

/// Sums over the results it is given, then fits (fit_calibration's
/// contract for results with CUPTI's figures).
class CuptiFit {
 public:
  CuptiFit() : kind_time_(static_cast<size_t>(kUnitKinds)), kind_gemm_(kind_time_) {}

  /// One result re-priced; REQUIRES: has_cupti_figures(result).
  void add(const Repriced& r, const Result& result);

  /// Sets cal.kinds (every kind the results' models hold), cal.launch and
  /// cal.method; cal.results is the number of results added.
  void fit(PassCalibration& cal) const;

 private:
  struct Sums {
    double cross = 0;          // measured x model
    double model_squared = 0;  // model^2
  };
  struct Stage {
    std::map<std::string, double> model;  // family -> roofline seconds of the step
    double measured = 0;                  // every family's kernel seconds
  };
  std::map<std::string, double> family_factors() const;

  std::map<std::string, Sums> families_;
  std::vector<Stage> stages_;
  std::vector<UnitTime> kind_time_;  // per kind and pass: roofline seconds
  std::vector<UnitTime> kind_gemm_;  // ... of which its GEMMs'
  std::vector<double> gaps_;         // per action: window - device seconds
};

}  // namespace ppb::reports
