#include "ppb/pipeline/result.hpp"

namespace ppb {

const char* result_schema() { return kResultSchema; }

}  // namespace ppb
