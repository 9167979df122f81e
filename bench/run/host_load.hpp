// HostLoadMeter lives with the executor (ppb/exec/host_load.hpp), where the
// timing tests of the executor use it too; this header keeps the run
// command's include of it.
#pragma once

#include "ppb/exec/host_load.hpp"
