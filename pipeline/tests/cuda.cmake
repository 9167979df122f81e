# The cuda backend. Host-side logic (label unit, every build, no GPU needed):
# registry entry, refusal without a device, out-of-memory exception, byte
# layouts. Its math on a GPU (label gpu, CUDA builds): CudaChunk against the
# cpu model, and the reduction kernels against their promised order and
# double sums, a planted slowdown against its factor; each case skips, saying why, where no device is usable.
ppb_add_gtest(ppb_cuda_test SOURCES cuda_test.cpp LIBS ppb::exec ppb::core LABELS unit)
target_include_directories(ppb_cuda_test PRIVATE ${PROJECT_SOURCE_DIR}/pipeline/exec/src)
# The CUDA-graph cache's decisions (capture, replay, rebuild, eager) on a fake GraphOps;
# the device pool's placements; what keeps cuDNN's graphs per shape.
ppb_add_gtest(ppb_graph_cache_test SOURCES graph_cache_test.cpp first_fit_test.cpp built_once_test.cpp LIBS ppb::exec LABELS unit)
target_include_directories(ppb_graph_cache_test PRIVATE ${PROJECT_SOURCE_DIR}/pipeline/exec/src)
if(PPB_HAVE_CUDA)
  add_executable(ppb_cuda_gpu_test cuda_gpu_test.cpp cuda_kernels_gpu_test.cpp cuda_plant_gpu_test.cpp)
  target_include_directories(ppb_cuda_gpu_test PRIVATE ${PROJECT_SOURCE_DIR}/pipeline/exec/src)
  target_link_libraries(ppb_cuda_gpu_test PRIVATE ppb::exec ppb::core CUDA::cublas GTest::gtest
                                                  GTest::gtest_main ppb::warnings)
  gtest_discover_tests(ppb_cuda_gpu_test PROPERTIES LABELS gpu DISCOVERY_TIMEOUT 60
                       SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  # The cuda backend through make_backend on a GPU: the tests the emulator
  # runs (label emulated), among them its CUDA graphs' replayed actions
  # against eager ones, bit for bit.
  gtest_discover_tests(ppb_backend_test TEST_PREFIX "gpu." TEST_FILTER "*cuda*:*Cuda*"
                       PROPERTIES LABELS gpu DISCOVERY_TIMEOUT 60
                       SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endif()
