// The CUPTI activity record layouts of the CUPTI this build compiles
// against (older versions live in cupti_activity_deprecated.h): what the
// cupti collector reads and what the CUDA emulator's CUPTI writes.
#pragma once

#include <cupti.h>

namespace ppb::cupti {

#if CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
#else
using KernelRecord = CUpti_ActivityKernel9;
using MemcpyRecord = CUpti_ActivityMemcpy5;
#endif
using MemsetRecord = CUpti_ActivityMemset4;

}  // namespace ppb::cupti
