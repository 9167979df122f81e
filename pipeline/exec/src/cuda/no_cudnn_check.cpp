// fused_attention.cpp as a build without cuDNN compiles it (PPB_HAVE_CUDNN
// 0), compiled in every build with cuDNN so that the path without it keeps
// compiling; never linked.
#define PPB_HAVE_CUDNN 0
#include "cuda/fused_attention.cpp"  // NOLINT(bugprone-suspicious-include)
