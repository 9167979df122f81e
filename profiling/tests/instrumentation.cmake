# NVTX ranges are checked with a real NVTX injection library (the mechanism
# Nsight Systems uses): NVTX_INJECTION64_PATH loads it, it records every range.
if(PPB_HAVE_NVTX)
  add_library(ppb_nvtx_recorder SHARED nvtx_recorder.cpp)
  target_include_directories(ppb_nvtx_recorder SYSTEM PRIVATE ${PPB_NVTX3_INCLUDE})
  target_link_libraries(ppb_nvtx_recorder PRIVATE ppb::warnings)
  ppb_add_gtest(profiling_nvtx_test SOURCES nvtx_test.cpp LIBS ppb::profiling)
  target_compile_definitions(profiling_nvtx_test PRIVATE
    PPB_NVTX_RECORDER="$<TARGET_FILE:ppb_nvtx_recorder>")
  add_dependencies(profiling_nvtx_test ppb_nvtx_recorder)
endif()
