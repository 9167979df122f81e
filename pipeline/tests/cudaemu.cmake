# The CUDA emulator (pipeline/exec/cudaemu), in CUDA builds that have it:
# its internals (label unit), its runtime and cuBLAS as a CUDA program sees
# them, and the cuda backend's GPU and capability tests run on it (label
# emulated: this build's own binaries with the emulator first on
# LD_LIBRARY_PATH).
# PPB_REQUIRE_EMULATOR=1 (emulated_label.hpp): under this label a test that
# finds no device fails, saying what is missing, instead of skipping. (Set
# through ENVIRONMENT_MODIFICATION: gtest_discover_tests splits a list
# value of ENVIRONMENT into separate arguments and keeps only the first.)
if(PPB_HAVE_CUDAEMU)
  ppb_add_gtest(cudaemu_grid_test SOURCES cudaemu_grid_test.cpp LIBS ppb_cudaemu_cudart LABELS unit)
  target_include_directories(cudaemu_grid_test PRIVATE ${PROJECT_SOURCE_DIR}/pipeline/exec/cudaemu)
  target_include_directories(cudaemu_grid_test SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})

  add_executable(cudaemu_api_test cudaemu_api_test.cpp)
  target_include_directories(cudaemu_api_test PRIVATE ${PROJECT_SOURCE_DIR}/pipeline/exec/src)
  target_link_libraries(cudaemu_api_test PRIVATE ppb::exec CUDA::cudart CUDA::cublas GTest::gtest
                                                 GTest::gtest_main ppb::warnings)
  add_dependencies(cudaemu_api_test ppb_cudaemu)
  gtest_discover_tests(cudaemu_api_test DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS emulated ENVIRONMENT "${PPB_CUDAEMU_ENV}"
               ENVIRONMENT_MODIFICATION "PPB_REQUIRE_EMULATOR=set:1")

  # Its CUPTI as a profiler sees it (NVIDIA's CUPTI at link time).
  if(PPB_HAVE_CUPTI)
    add_executable(cudaemu_cupti_test cudaemu_cupti_test.cpp)
    target_include_directories(cudaemu_cupti_test PRIVATE ${PROJECT_SOURCE_DIR}/pipeline/exec/src)
    target_link_libraries(cudaemu_cupti_test PRIVATE ppb::exec CUDA::cupti CUDA::cudart CUDA::cublas
                                                     GTest::gtest GTest::gtest_main ppb::warnings)
    add_dependencies(cudaemu_cupti_test ppb_cudaemu)
    gtest_discover_tests(cudaemu_cupti_test DISCOVERY_TIMEOUT 60
      PROPERTIES LABELS emulated ENVIRONMENT "${PPB_CUDAEMU_ENV}"
                 ENVIRONMENT_MODIFICATION "PPB_REQUIRE_EMULATOR=set:1")
  endif()

  # The cuda backend's capabilities through make_backend, on the emulator.
  gtest_discover_tests(ppb_backend_test TEST_PREFIX "emulated." TEST_FILTER "*cuda*:*Cuda*"
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS emulated ENVIRONMENT "${PPB_CUDAEMU_ENV}"
               ENVIRONMENT_MODIFICATION "PPB_REQUIRE_EMULATOR=set:1")
  add_dependencies(ppb_backend_test ppb_cudaemu)

  # The cuda backend's math against the cpu model, on the emulator.
  add_dependencies(ppb_cuda_gpu_test ppb_cudaemu)
  gtest_discover_tests(ppb_cuda_gpu_test TEST_PREFIX "emulated." DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS emulated ENVIRONMENT "${PPB_CUDAEMU_ENV}"
               ENVIRONMENT_MODIFICATION "PPB_REQUIRE_EMULATOR=set:1")
endif()
