// What build produced this binary: results carry it so that figures of
// different builds are never averaged together.
#pragma once

namespace ppb {

struct BuildInfo {
  const char* git_revision;  ///< `git describe --always --dirty`, "unknown" outside a checkout
  const char* compiler;      ///< e.g. "GNU 12.2.0"
  const char* build_type;    ///< CMAKE_BUILD_TYPE
  bool with_cuda;            ///< built with the cuda backend
};

/// The build's identity; regenerated at every build.
const BuildInfo& build_info();

}  // namespace ppb
