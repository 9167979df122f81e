// The result file of one schedule x partition x M combination (DESIGN.md,
// "Result file"), schema "pipebench.result/1".
#pragma once

namespace ppb {

/// The schema string every result file carries.
inline constexpr const char* kResultSchema = "pipebench.result/1";
/// "pipebench.result/1" as a function, for code that links ppb::result only.
const char* result_schema();

}  // namespace ppb
